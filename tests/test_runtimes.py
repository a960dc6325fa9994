"""Two runtimes from one source (ADR 026): the twins, their parity, and the import graph of core.

The sync runtime is generated from the async source; these checks hold the mechanism to its
promises: every twin is made by ``tools/async_to_sync.py`` and committed under its header (ADR
059); what runs (the installed package) is what the sources make; each sync class has exactly its async twin's public
surface, method by method and parameter by parameter; and core's modules import each other
without a cycle.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import alkstore
from alkstore import engine
from alkstore.adapters import memory, postgres
from hatch_build import load_generator

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "alkstore"

#: Every public sync class with its async twin.
TWINS: list[tuple[type, type]] = [
    (alkstore.Store, alkstore.AsyncStore),
    (alkstore.Queue, alkstore.AsyncQueue),
    (alkstore.Job, alkstore.AsyncJob),
    (alkstore.Lock, alkstore.AsyncLock),
    (alkstore.Outbox, alkstore.AsyncOutbox),
    (alkstore.Worker, alkstore.AsyncWorker),
    (engine.Engine, engine.AsyncEngine),
    (engine.Waiter, engine.AsyncWaiter),
    (memory.MemoryEngine, memory.AsyncMemoryEngine),
    (postgres.PostgresEngine, postgres.AsyncPostgresEngine),
    (postgres.DatabaseClock, postgres.AsyncDatabaseClock),
]
#: Protocol methods a class and its twin name differently.
_SYNC_NAMES = {"__aenter__": "__enter__", "__aexit__": "__exit__"}


def generator() -> ModuleType:
    return load_generator(ROOT)


def _surface(cls: type) -> dict[str, inspect.Signature | None]:
    """The public members of ``cls`` (and its context-manager methods), each with its signature if callable."""
    names = {name for name in dir(cls) if not name.startswith("_")}
    names |= {name for name in ("__enter__", "__exit__", "__aenter__", "__aexit__") if hasattr(cls, name)}
    surface: dict[str, inspect.Signature | None] = {}
    for name in names:
        member = inspect.getattr_static(cls, name)
        if isinstance(member, staticmethod | classmethod):
            member = member.__func__
        surface[_SYNC_NAMES.get(name, name)] = inspect.signature(member) if inspect.isfunction(member) else None
    return surface


@pytest.mark.parametrize(("sync", "async_"), TWINS, ids=lambda cls: cls.__name__)
def test_each_sync_class_has_exactly_its_async_twins_surface(sync: type, async_: type) -> None:
    mine, theirs = _surface(sync), _surface(async_)
    assert sorted(mine) == sorted(theirs), f"{sync.__name__} and {async_.__name__} differ in what they offer"
    for name, signature in theirs.items():
        if signature is None:
            assert mine[name] is None, f"{sync.__name__}.{name} is a method, {async_.__name__}.{name} is not"
            continue
        other = mine[name]
        assert other is not None, f"{sync.__name__}.{name} is not a method"
        assert list(other.parameters) == list(signature.parameters), f"{sync.__name__}.{name}{other} vs {signature}"
        for parameter in signature.parameters.values():
            assert other.parameters[parameter.name].kind == parameter.kind, f"{sync.__name__}.{name}: {parameter}"
            assert other.parameters[parameter.name].default == parameter.default, f"{sync.__name__}.{name}"


@pytest.mark.parametrize(("sync", "async_"), TWINS, ids=lambda cls: cls.__name__)
def test_a_twin_awaits_what_does_io_and_nothing_else(sync: type, async_: type) -> None:
    for name in _surface(async_):
        if name.endswith("_async"):
            continue  # a port both runtimes share (a clock's sleep_async) offers both ways
        member = getattr(async_, {"__enter__": "__aenter__", "__exit__": "__aexit__"}.get(name, name), None)
        twin = getattr(sync, name, None)
        if callable(member) and callable(twin):
            assert not inspect.iscoroutinefunction(twin), f"the sync {sync.__name__}.{name} is a coroutine"


def test_the_public_api_offers_each_async_call_under_the_sync_name() -> None:
    for name in ("open", "Store", "Queue", "Job", "Lock", "Outbox", "Worker", "Delivery", "Handler"):
        twin = "open_async" if name == "open" else f"Async{name}"
        assert hasattr(alkstore, name), name
        assert hasattr(alkstore, twin), twin
    assert inspect.iscoroutinefunction(alkstore.open_async)
    assert not inspect.iscoroutinefunction(alkstore.open)
    assert list(inspect.signature(alkstore.open).parameters) == list(inspect.signature(alkstore.open_async).parameters)


def test_every_async_source_has_its_twin_committed_under_the_generated_header() -> None:
    gen = generator()
    pairs = gen.pairs(ROOT)
    assert len(pairs) >= 15, "the runtime's async sources"
    twins = [target.relative_to(ROOT).as_posix() for _, target in pairs]
    if (ROOT / ".git").exists():  # a source tree, not an unpacked sdist
        tracked = subprocess.run(["git", "ls-files", *twins], cwd=ROOT, capture_output=True, text=True, check=True)
        assert sorted(tracked.stdout.split()) == sorted(twins), "every twin is committed"
    for source, target in pairs:
        first = target.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(gen.HEADER_PREFIX + source.relative_to(ROOT).as_posix()), target


def test_the_check_names_a_stale_twin_and_a_missing_one(tmp_path: Path) -> None:
    gen = generator()
    for base in gen.SOURCE_ROOTS:
        (tmp_path / base).mkdir(parents=True)
    source = tmp_path / "core" / "alkstore" / "_thing_async.py"
    source.write_text("async def run() -> None:\n    pass\n", encoding="utf-8")
    assert gen.stale(tmp_path) == [source.with_name("_thing.py")], "a missing twin is stale"
    gen.write(tmp_path)
    assert gen.stale(tmp_path) == []
    source.write_text("async def run() -> int:\n    return 1\n", encoding="utf-8")
    assert gen.stale(tmp_path) == [source.with_name("_thing.py")], "an edited source leaves its twin stale"


def test_ruff_skips_exactly_the_generated_twins() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    twins = [target.relative_to(ROOT).as_posix() for _, target in generator().pairs(ROOT)]
    assert sorted(config["extend-exclude"]) == sorted(twins)


def test_a_module_level_alias_is_renamed_in_all_too(tmp_path: Path) -> None:
    source = tmp_path / "_thing_async.py"
    source.write_text('__all__ = ["AsyncHandler"]\n\nAsyncHandler: type = int\n', encoding="utf-8")
    names = generator().defined_names([source])
    assert "AsyncHandler" in names
    out = generator().generate(source.read_text(encoding="utf-8"), "core/alkstore/_thing_async.py", names)
    assert '__all__ = ["Handler"]' in out
    assert "\nHandler: type = int\n" in out


def test_a_sync_side_that_is_one_name_or_call_is_not_wrapped_in_parentheses() -> None:
    source = 'from ._acompat import ASYNC\n\nNAME = "a" if ASYNC else "b"\nSUM = 1 if ASYNC else 2 + 3\n'
    out = generator().generate(source, "core/alkstore/_thing_async.py")
    assert 'NAME = "b"\n' in out
    assert "SUM = (2 + 3)\n" in out


def test_what_runs_is_what_the_async_sources_make() -> None:
    """The imported twins (an installed wheel's, or an editable tree's) are the generator's output today."""
    gen = generator()
    for source, target in gen.pairs(ROOT):
        relative = target.relative_to(ROOT)
        dotted = ".".join(relative.with_suffix("").parts[1:])  # core/alkstore/store/_store.py -> alkstore.store._store
        spec = importlib.util.find_spec(dotted)
        assert spec is not None, dotted
        assert spec.origin is not None, dotted
        running = Path(spec.origin).read_text(encoding="utf-8")
        label = source.relative_to(ROOT).as_posix()
        names = gen.defined_names(s for s, _ in gen.pairs(ROOT))
        assert running == gen.generate(source.read_text(encoding="utf-8"), label, names), f"{dotted} is stale"


# -- the generator ------------------------------------------------------------------------------


def test_the_generator_turns_the_async_source_into_its_sync_twin() -> None:
    source = '''"""A module of ``AsyncThing``s."""
from contextlib import asynccontextmanager
from ._acompat import ASYNC, asleep

if ASYNC:
    import asyncio


class AsyncThing:
    """An ``AsyncThing``: see ``open_async``."""

    async def __aenter__(self) -> AsyncThing:
        return self

    async def run(self, calls: list[Awaitable[int]]) -> int:
        # An AsyncThing waits here.
        await asleep(0)
        async with self.lock() as held:
            total = sum([await call async for call in held])
        if ASYNC:
            asyncio.current_task()
        else:
            total += 1
        if not ASYNC:
            total += 2
        return total if ASYNC else total * 2


async def open_async() -> AsyncThing:
    return AsyncThing()
'''
    out = generator().generate(source, "core/alkstore/_thing_async.py", {"AsyncThing", "open_async"})
    expected = '''"""A module of ``Thing``s."""
from contextlib import contextmanager
from ._acompat import sleep



class Thing:
    """An ``Thing``: see ``open``."""

    def __enter__(self) -> Thing:
        return self

    def run(self, calls: list[int]) -> int:
        # An Thing waits here.
        sleep(0)
        with self.lock() as held:
            total = sum([call for call in held])
        total += 1
        total += 2
        return (total * 2)


def open() -> Thing:
    return Thing()
'''
    assert out.splitlines()[0].startswith(generator().HEADER_PREFIX + "core/alkstore/_thing_async.py")
    assert out.split("\n", 3)[3] == expected


def test_the_generator_renames_an_f_strings_text_on_every_python() -> None:
    # Python 3.12 tokenizes an f-string's text apart from its fields (FSTRING_MIDDLE); both
    # parts are renamed, and a doubled brace is kept as written.
    source = 'def f(x: object) -> str:\n    return f"an AsyncThing {{not}} {type(x).__name__} AsyncThing"\n'
    out = generator().generate(source, "core/alkstore/_thing_async.py", {"AsyncThing"})
    assert (
        out.split("\n", 3)[3] == 'def f(x: object) -> str:\n    return f"an Thing {{not}} {type(x).__name__} Thing"\n'
    )


def test_the_generator_refuses_what_it_cannot_turn_faithfully() -> None:
    gen = generator()
    with pytest.raises(SyntaxError, match="ASYNC used outside"):
        gen.generate("from x import ASYNC\nflag = ASYNC\n", "bad_async.py")
    with pytest.raises(SyntaxError, match="elif"):
        gen.generate("from x import ASYNC\nif ASYNC:\n    a = 1\nelif b:\n    a = 2\n", "bad_async.py")


# -- core's import graph ------------------------------------------------------------------------


def _module_imports(path: Path) -> set[str]:
    """The core modules ``path`` imports when it is imported (not under ``TYPE_CHECKING``, not in a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        nodes: list[Any] = [node, *ast.walk(node)] if isinstance(node, ast.If) else [node]
        for each in nodes:
            if isinstance(each, ast.ImportFrom) and each.level == 1:
                found.update(f"{each.module}" if each.module else alias.name for alias in each.names)
    return {name.split(".")[0] for name in found}


def test_core_modules_import_one_another_without_a_cycle() -> None:
    graph = {path.stem: _module_imports(path) & {p.stem for p in CORE.glob("*.py")} for path in CORE.glob("*.py")}
    graph.pop("__init__")
    seen: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path[path.index(nxt) :], nxt]))
            if nxt not in seen:
                visit(nxt)
        path.pop()
        seen[node] = 2

    for node in sorted(graph):
        if node not in seen:
            visit(node)


def test_importing_the_package_imports_no_driver() -> None:
    probe = (
        "import sys, alkstore; print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"
