"""The contract suite's fixtures: one ``engine`` parameter over every engine and runtime, fresh stores,
manual clocks.

``engine`` is an ``EngineTarget`` for each engine registered under the ``alkstore.testing``
entry points (memory and postgres today; a third joins by registering) in each runtime (sync,
and async seen through ``_runtimes.Blocking``); ``store`` is a fresh store on it driven by
``clock`` (a ``ManualClock`` at ``T0``). An engine that cannot be tested here (no server) is
skipped loudly, and fails the run instead under ``CI=true``; so does one whose engine entry
points do not load.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from alkstore import ManualClock

from ._engines import ENGINES, RUNTIMES, T0, EngineTarget, entry_point_problem, under_ci
from ._facades import DESELECTED, recording
from ._profiles import MACHINE_EXAMPLES

_HERE = Path(__file__).parent
#: The completeness check that must run after every other contract test.
FACADE_CHECK = "test_every_public_facade_member_is_exercised_by_the_suite"

_ENGINE_PARAMS = [
    pytest.param((name, runtime), marks=[getattr(pytest.mark, mark) for mark in engine.marks], id=f"{name}-{runtime}")
    for name, engine in ENGINES.items()
    for runtime in RUNTIMES
]


def _unavailable(message: str) -> None:
    if under_ci():
        pytest.fail(message + " (CI=true: every engine must run)", pytrace=False)
    report = getattr(_root_conftest(), "report_unavailable", None)
    if report is not None:
        report(message)
    pytest.skip(message)


def _root_conftest() -> ModuleType | None:
    return sys.modules.get("conftest")


_TARGETS: dict[tuple[str, str], EngineTarget | str] = {}


def open_target(name: str, runtime: str = "sync") -> EngineTarget:
    """The ``EngineTarget`` for ``name`` in ``runtime``, or a skip (a failure under CI) saying why it is unavailable."""
    if (name, runtime) not in _TARGETS:
        engine = ENGINES[name]
        problem = entry_point_problem(engine.scheme)
        provisioned = problem if problem is not None else engine.provision()
        _TARGETS[(name, runtime)] = (
            provisioned if isinstance(provisioned, str) else EngineTarget(name, engine.scheme, provisioned, runtime)
        )
    target = _TARGETS[(name, runtime)]
    if isinstance(target, str):
        _unavailable(target)
        raise AssertionError("unreachable")  # pragma: no cover - _unavailable skips or fails
    return target


@pytest.fixture(scope="session", params=_ENGINE_PARAMS)
def engine(request: pytest.FixtureRequest) -> EngineTarget:
    """Each engine in each runtime in turn; a test using it (or ``store``) runs once per pair."""
    name, runtime = request.param
    return open_target(name, runtime)


@pytest.fixture(scope="session")
def all_engines() -> tuple[list[EngineTarget], list[str]]:
    """Every engine and runtime available in this run, and the reasons the others are not."""
    targets, missing = [], []
    for name in ENGINES:
        for runtime in RUNTIMES:
            try:
                targets.append(open_target(name, runtime))
            except pytest.skip.Exception as exc:
                missing.append(f"{name}-{runtime}: {exc}")
    return targets, missing


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at ``T0``; only the test moves it."""
    return ManualClock(T0)


@pytest.fixture
def store(engine: EngineTarget, clock: ManualClock) -> Iterator[Any]:
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


#: The modules that hold engines to the operations port (``alkstore.engine.AsyncOperationsPort``:
#: listings, actions on dead jobs, kept results, workers, throughput, upkeep); every other module
#: holds them to the runtime port (``AsyncRuntimePort``), the least an engine implements.
OPERATIONS_PORT_MODULES = frozenset(
    {
        "test_action_log.py",
        "test_lock_listing.py",
        "test_maintenance.py",
        "test_operations.py",
        "test_payload_filter.py",
        "test_results.py",
        "test_reversed_listings.py",
        "test_task_filter.py",
        "test_throughput.py",
    }
)


def port_of(item: pytest.Item) -> str:
    """Which port of the engine a contract test holds engines to: ``operations`` or ``runtime``."""
    return "operations" if item.path.name in OPERATIONS_PORT_MODULES else "runtime"


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark each contract test with its port: ``-m operations_port`` (or ``runtime_port``) selects those."""
    if _HERE in item.path.parents:
        item.add_marker(f"{port_of(item)}_port")


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


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A failing contract test's report names the port it holds the engine to."""
    if _HERE in item.path.parents:
        item.add_report_section("setup", "port", f"this test holds the engine to its {port_of(item)} port")
