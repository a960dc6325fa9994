"""SQL mutants of the Postgres adapter's statements, run by hand (``.ci/mutation sql``; ADR 025).

mutmut mutates code inside functions, and the statements are SQL: named sections of
``adapters/alkstore/adapters/postgres/statements/*.sql``, expanded with their fragments into
``_sql._TEMPLATES`` when ``_sql`` is imported (ADR 030). This script mutates those expanded
templates: one operator site of one statement at a time (a comparison, an ordering, a boolean, a
job state, a limit), so a fragment two statements include (the claim's ``claimed``, an order
composed from ``alkstore.engine.ORDERS``) is mutated in each of them on its own. Each mutant runs in a
pytest process of its own with this file as a plugin (``-p sql_mutants``), which applies the
mutant named by ``ALKSTORE_SQL_MUTANT`` before any store composes its statements. A mutant is
killed when the tests fail. ``--sample N`` runs N mutants drawn with a fixed seed (``--all``: every
one); the pytest arguments after ``--`` choose the tests.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def pytest_configure(config: Any) -> None:
    """As a pytest plugin: put the mutant named by ``ALKSTORE_SQL_MUTANT`` in place."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    for ident, name, _, mutated in mutants():
        if ident == wanted:
            _templates()[name] = mutated
            return
    raise RuntimeError(f"no SQL mutant {wanted!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one mutant's tests may take")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    every = list(mutants())
    chosen = every if args.all else sorted(random.Random(args.seed).sample(every, min(args.sample, len(every))))
    print(f"{len(every)} SQL mutants in {len(_templates())} statements; running {len(chosen)}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    env["CI"] = "true"
    survivors: list[str] = []
    started = time.monotonic()
    templates = _templates()
    for ident, name, offset, _ in chosen:
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "sql_mutants"]
        try:
            result = subprocess.run(
                [*command, *args.pytest_args],
                env={**env, ENV: ident},
                capture_output=True,
                text=True,
                check=False,
                timeout=args.timeout,
            )
        except subprocess.TimeoutExpired:
            verdict = "timeout"  # a statement that never finishes: noticed, but not by an assertion
        else:
            verdict = "killed" if result.returncode == 1 else "survived" if result.returncode == 0 else "error"
        print(f"  {verdict:<8} {ident}", flush=True)
        if verdict != "killed":
            survivors.append(ident)
            print(f"           …{templates[name][max(0, offset - 60) : offset + 40]}…", flush=True)
    killed = len(chosen) - len(survivors)
    score = 100 * killed / max(1, len(chosen))
    print(f"killed {killed}/{len(chosen)} ({score:.1f} %) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
