"""SQL mutants of the Postgres adapter's statements, run by hand (``.ci/mutation sql``; ADR 025).

mutmut mutates code inside functions, and the statements are SQL: named sections of
``adapters/alkstore/adapters/postgres/statements/*.sql``, expanded with their fragments into
``_sql._TEMPLATES`` when ``_sql`` is imported (ADR 030). This script mutates those expanded
templates: one operator site of one statement at a time (a comparison, an ordering, a boolean, a
job state, a limit), so a fragment two statements include (the claim's ``claimed``, an order
composed from ``alkstore.engine.ORDERS``) is mutated in each of them on its own.

First the tests chosen after ``--`` run once, unmutated, with this file as a plugin
(``-p sql_mutants``) recording which tests execute which statement: every ``execute`` of a
psycopg cursor is matched to its statement by its text (the schema's name set aside). Then each
mutant runs in a pytest process of its own (``-x``, the tests that execute its statement, the
fastest first, with a timeout of its own), where the plugin applies the mutant named by
``ALKSTORE_SQL_MUTANT`` before any store composes its statements. A mutant is killed when the
tests fail; one whose statement no test executes is reported ("no tests"), never skipped.
``--sample N`` runs N mutants drawn with a fixed seed (``--all``: every one; ``--mutant ID``, glob
allowed, chosen ones; ``--reuse-record`` takes the last run's record when the tests have not
changed). The killing tests are run again together, unmutated, at the end: a test
that fails then would have killed nothing, and the run says so.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

#: Operator sites and what each becomes: the mutations a reviewer would not spot in a diff.
OPERATORS: list[tuple[str, str, str]] = [
    ("<=", r"<=", "<"),
    (">=", r">=", ">"),
    ("<", r"(?<![<>=!])<(?![=>])", "<="),
    (">", r"(?<![<>=!-])>(?!=)", ">="),
    ("=", r" = ", " <> "),
    ("DESC", r"\bDESC\b", "ASC"),
    ("ASC", r"\bASC\b", "DESC"),
    ("AND", r"\bAND\b", "OR"),
    ("OR", r"\bOR\b", "AND"),
    ("NOT", r"\bNOT ", ""),
    ("'pending'", r"'pending'", "'delayed'"),
    ("'running'", r"'running'", "'pending'"),
    ("'delayed'", r"'delayed'", "'pending'"),
    ("true", r"\btrue\b", "false"),
    ("false", r"\bfalse\b", "true"),
    ("LIMIT", r"\bLIMIT ", "LIMIT 1 + "),
]
ENV = "ALKSTORE_SQL_MUTANT"
#: Where the recording run writes which tests execute which statement.
RECORD = "ALKSTORE_SQL_RECORD"
ROOT = Path(__file__).resolve().parent.parent
#: The run's files: the record of the statements' tests, and every mutant's verdict.
STAGE = ROOT / ".mutation" / "sql"
#: A quoted identifier: where an executed statement names its schema.
_QUOTED = re.compile(r'"(?:[^"]|"")*"')


def _templates() -> dict[str, str]:
    from alkstore.adapters.postgres import _sql

    templates: dict[str, str] = _sql._TEMPLATES
    return templates


def mutants() -> Iterator[tuple[str, str, int, str]]:
    """Every mutant: ``(id, template name, offset, mutated template)``, in a stable order."""
    for name, template in sorted(_templates().items()):
        for label, pattern, replacement in OPERATORS:
            for match in re.finditer(pattern, template):
                mutated = template[: match.start()] + replacement + template[match.end() :]
                yield f"{name}@{match.start()}:{label}", name, match.start(), mutated


# -- the plugin ------------------------------------------------------------------------------


def _unschemed(text: str) -> str:
    """A statement's text with every quoted identifier (its schema among them) made the same."""
    return _QUOTED.sub('""', text)


class _Recorder:
    """Which test executes which statement, and how long each test takes."""

    def __init__(self, path: Path) -> None:
        from alkstore.adapters.postgres import _sql

        self.path = path
        self.names: dict[str, list[str]] = {}
        schema = _sql._identifier("s")
        for name, template in _templates().items():
            self.names.setdefault(_unschemed(_sql._compose(template, schema)), []).append(name)
        self.test: str | None = None
        self.tests: dict[str, set[str]] = {name: set() for name in _templates()}
        self.durations: dict[str, float] = {}
        #: The fixtures setting up now, innermost last, and the statements each one's setup executed.
        self.fixtures: list[str] = []
        self.by_fixture: dict[str, set[str]] = {}

    def executed(self, query: object) -> None:
        if self.test is not None and isinstance(query, str):
            for name in self.names.get(_unschemed(query), ()):
                self.tests[name].add(self.test)
                for fixture in self.fixtures:
                    self.by_fixture.setdefault(fixture, set()).add(name)

    def finished(self, test: str, fixtures: list[str]) -> None:
        """A test executes too what the fixtures it uses executed as they were set up, once for a
        module or a session: a later test of the module gets them set up anew when run without the first."""
        for fixture in fixtures:
            for name in self.by_fixture.get(fixture, ()):
                self.tests[name].add(test)

    def write(self) -> None:
        record = {"tests": {name: sorted(tests) for name, tests in self.tests.items()}, "durations": self.durations}
        self.path.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")


_recorder: _Recorder | None = None


def _watching(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (a cursor's ``execute`` or ``executemany``, sync or async) telling the recorder its statement."""

    def execute(self: Any, query: object, *args: Any, **kwargs: Any) -> Any:
        if _recorder is not None:
            _recorder.executed(query)
        return method(self, query, *args, **kwargs)

    return execute


def _apply(name: str, mutated: str) -> None:
    """Put ``mutated`` in place of the statement ``name``: in the templates made at import, and in
    any expanded afresh (as tests/postgres/test_statements.py reads them)."""
    from alkstore.adapters.postgres import _sql

    _templates()[name] = mutated
    expand = _sql._templates

    def expand_mutated() -> tuple[dict[str, str], dict[str, str]]:
        statements, per_call = expand()
        statements[name] = mutated
        return statements, per_call

    _sql._templates = expand_mutated


def pytest_configure(config: Any) -> None:
    """As a pytest plugin: put the mutant named by ``ALKSTORE_SQL_MUTANT`` in place, or record the statements' tests."""
    global _recorder
    record = os.environ.get(RECORD)
    if record:
        import psycopg

        _recorder = _Recorder(Path(record))
        for cls in (psycopg.Cursor, psycopg.AsyncCursor):
            for method in ("execute", "executemany"):
                setattr(cls, method, _watching(getattr(cls, method)))
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    for ident, name, _, mutated in mutants():
        if ident == wanted:
            _apply(name, mutated)
            return
    raise RuntimeError(f"no SQL mutant {wanted!r}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Generator[None, None, None]:
    """While recording, every statement executed during a test (its fixtures too) belongs to that test."""
    if _recorder is None:
        yield
        return
    _recorder.test = item.nodeid
    started = time.monotonic()
    yield
    _recorder.durations[item.nodeid] = time.monotonic() - started
    _recorder.finished(item.nodeid, list(getattr(item, "fixturenames", ())))
    _recorder.test = None


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Generator[None, None, None]:
    """While recording, what a fixture's setup executes belongs to every test that uses the fixture."""
    if _recorder is None:
        yield
        return
    _recorder.fixtures.append(fixturedef.argname)
    try:
        yield
    finally:
        _recorder.fixtures.pop()


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if _recorder is not None:
        _recorder.write()


# -- the run ---------------------------------------------------------------------------------

_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


class _Outcome:
    """A pytest run's exit code (``None``: stopped at its timeout) and what it printed."""

    def __init__(self, code: int | None, output: str) -> None:
        self.code = code
        self.output = output


def _pytest(arguments: list[str], env: dict[str, str], timeout: float) -> _Outcome:
    """pytest on ``arguments`` in a child forked from this process, which has imported the tests
    already (so a mutant pays for its tests, not for starting Python and collecting them), with
    ``env`` in place of the environment; its process group is stopped at ``timeout``."""
    output = STAGE / "pytest.out"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: its own process group, so a timeout stops what its tests started too
        os.setpgid(0, 0)
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ.clear()
        os.environ.update(env)
        exit_code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "sql_mutants", *arguments])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(exit_code))
    deadline = time.monotonic() + timeout
    code: int | None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            code = None
            break
        time.sleep(0.02)
    return _Outcome(code, output.read_text(encoding="utf-8", errors="replace"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--mutant", action="append", default=[], help="a mutant's id (glob allowed); repeatable")
    parser.add_argument("--timeout", type=float, default=900.0, help="the most seconds one mutant's tests may take")
    parser.add_argument(
        "--reuse-record",
        action="store_true",
        help="take the last run's record of the statements' tests (tests unchanged)",
    )
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    every = list(mutants())
    if args.mutant:
        chosen = [m for m in every if any(fnmatch.fnmatchcase(m[0], pattern) for pattern in args.mutant)]
    elif args.all:
        chosen = every
    else:
        chosen = sorted(random.Random(args.seed).sample(every, min(args.sample, len(every))))
    print(f"{len(every)} SQL mutants in {len(_templates())} statements; running {len(chosen)}", flush=True)
    sys.path.insert(0, str(Path(__file__).parent))  # for -p sql_mutants
    os.chdir(ROOT)
    env = {**os.environ, "CI": "true"}
    env.pop(ENV, None)
    env.pop(RECORD, None)
    STAGE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    # Import the tests once, here: every child forked below has them already.
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            collected = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args.pytest_args])
        finally:
            sys.stdout = stdout
    if collected != 0:
        print(f"collecting the tests failed ({collected})")
        return 1
    record_path = STAGE / "record.json"
    reuse = args.reuse_record and record_path.exists()
    clean = None if reuse else _pytest(["-x", *args.pytest_args], {**env, RECORD: str(record_path)}, timeout=4 * 3600)
    if clean is not None and clean.code != 0:
        print(clean.output[-3000:])
        print("the tests fail without a mutant: nothing to measure")
        return 1
    record = json.loads(record_path.read_text(encoding="utf-8"))
    durations: dict[str, float] = record["durations"]
    print(f"recorded which of {len(durations)} tests execute each statement in {time.monotonic() - started:.0f} s")

    verdicts: dict[str, dict[str, Any]] = {}
    templates = _templates()
    for ident, name, offset, _ in chosen:
        tests = sorted(record["tests"][name], key=lambda test: (durations[test], test))
        killer = None
        if not tests:
            verdict = "no tests"  # a statement no test of the selection executes: a finding
        else:
            budget = min(args.timeout, 60 + 4 * sum(durations[test] for test in tests))
            result = _pytest(["-x", *tests], {**env, ENV: ident}, timeout=budget)
            if result.code is None:
                verdict = "timeout"  # a statement that never finishes: noticed, but not by an assertion
            else:
                verdict = "killed" if result.code == 1 else "survived" if result.code == 0 else "error"
                found = _FAILED.search(result.output)
                killer = found.group(1) if found else None
        verdicts[ident] = {"verdict": verdict, "statement": name, "tests": len(tests), "killed_by": killer}
        print(f"  {verdict:<8} {ident} ({len(tests)} tests)", flush=True)
        if verdict != "killed":
            print(f"           …{templates[name][max(0, offset - 60) : offset + 40]}…", flush=True)

    # The killing tests, unmutated and together: each must pass, or its kill proves nothing.
    killers = sorted({v["killed_by"] for v in verdicts.values() if v["killed_by"]})
    if killers:
        check = _pytest(killers, env, timeout=3600)
        doubtful = set(_FAILED.findall(check.output))
        for ident, v in verdicts.items():
            if v["killed_by"] in doubtful:
                v["verdict"] = "doubtful"
                print(f"  doubtful {ident}: {v['killed_by']} fails without a mutant", flush=True)
    (STAGE / "verdicts.json").write_text(json.dumps(verdicts, indent=1, sort_keys=True), encoding="utf-8")

    counts: dict[str, int] = {}
    for v in verdicts.values():
        counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    score = 100 * killed / max(1, len(chosen))
    print(f"verdicts: {dict(sorted(counts.items()))}")
    print(
        f"killed {killed}/{len(chosen)} ({score:.1f} %, a timeout counted killed) in {time.monotonic() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
