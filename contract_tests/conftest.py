"""The contract suite's fixtures: one ``engine`` parameter over every engine, fresh stores, manual clocks.

``engine`` is an ``EngineTarget`` for ``memory`` or ``postgres``; ``store`` is a fresh store on
it driven by ``clock`` (a ``ManualClock`` at ``T0``). The Postgres half follows the root
conftest's policy: it needs a reachable server (``pg_dsn``), skips loudly without one, and
fails instead under ``CI=true``; so does a Postgres engine that is not installed yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from alkstore import ManualClock, Store

from ._engines import T0, EngineTarget, entry_point_problem, memory_target, postgres_target, under_ci
from ._facades import DESELECTED, recording
from ._profiles import MACHINE_EXAMPLES

_HERE = Path(__file__).parent
#: The completeness check that must run after every other contract test.
FACADE_CHECK = "test_every_public_facade_member_is_exercised_by_the_suite"

_ENGINE_PARAMS = ["memory", pytest.param("postgres", marks=pytest.mark.postgres)]


def _root_conftest(config: pytest.Config) -> ModuleType:
    module = config.pluginmanager.get_plugin(str(config.rootpath / "conftest.py"))
    if module is None:
        raise RuntimeError("the repository's root conftest.py (pg_dsn, unique_schema, drop_schema) is not loaded")
    return module  # type: ignore[no-any-return]


def _unavailable(message: str) -> None:
    if under_ci():
        pytest.fail(message + " (CI=true: every engine must run)", pytrace=False)
    pytest.skip(message)


def open_target(request: pytest.FixtureRequest, name: str) -> EngineTarget:
    """The ``EngineTarget`` for ``name``, or a skip (a failure under CI) saying why it is unavailable."""
    if name == "memory":
        return memory_target()
    problem = entry_point_problem("postgresql")
    if problem is not None:
        _unavailable(problem)
    dsn = request.getfixturevalue("pg_dsn")
    root = _root_conftest(request.config)
    return postgres_target(dsn, root.unique_schema, root.drop_schema)


@pytest.fixture(scope="session", params=_ENGINE_PARAMS)
def engine(request: pytest.FixtureRequest) -> EngineTarget:
    """Each engine in turn; a test using it (or ``store``) runs once per engine."""
    return open_target(request, request.param)


@pytest.fixture(scope="session")
def all_engines(request: pytest.FixtureRequest) -> tuple[list[EngineTarget], list[str]]:
    """Every engine available in this run, and the reasons the others are not."""
    targets, missing = [], []
    for name in ("memory", "postgres"):
        try:
            targets.append(open_target(request, name))
        except pytest.skip.Exception as exc:
            missing.append(f"{name}: {exc}")
    return targets, missing


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at ``T0``; only the test moves it."""
    return ManualClock(T0)


@pytest.fixture
def store(engine: EngineTarget, clock: ManualClock) -> Iterator[Store]:
    """A fresh, private store on ``engine`` driven by ``clock``."""
    with engine.store(clock) as opened:
        yield opened


@pytest.fixture(scope="package", autouse=True)
def _record_facade_use() -> Iterator[None]:
    """Record which public facade members the suite touches (see ``_facades``)."""
    with recording():
        yield


def pytest_deselected(items: list[pytest.Item]) -> None:
    DESELECTED.extend(item.nodeid for item in items if _HERE in item.path.parents)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the facade completeness check after every other test."""
    last = [item for item in items if item.name == FACADE_CHECK]
    for item in last:
        items.remove(item)
        items.append(item)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if MACHINE_EXAMPLES and config.getoption("hypothesis_show_statistics", default=False):
        terminalreporter.write_sep("=", "contract state machines: examples run")
        for nodeid, count in sorted(MACHINE_EXAMPLES.items()):
            terminalreporter.write_line(f"{nodeid}: {count} state-machine examples")
