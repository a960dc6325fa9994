"""Completeness: every adapter implements the whole port, and the suite exercises the whole public surface."""

from __future__ import annotations

import inspect
import sys
import typing
from importlib import metadata
from pathlib import Path

import pytest

from alkstore import ManualClock
from alkstore.engine import AsyncEngine, AsyncRuntimePort, Engine

from ._engines import ENGINE_GROUP, T0, EngineTarget, entry_point_problem, under_ci
from ._facades import DESELECTED, EXERCISED, FACADES, public_members
from ._runtimes import target_of

_SCHEMES = sorted({entry.name for entry in metadata.entry_points(group=ENGINE_GROUP)})
#: Each runtime's entry point group and the port its engines implement.
_PORTS: dict[str, tuple[str, type]] = {"sync": (ENGINE_GROUP, Engine), "async": ("alkstore.async_engines", AsyncEngine)}


def adapter_classes(scheme: str, runtime: str = "sync") -> set[type]:
    """The engine classes behind an entry point of ``runtime``: its factory's return type and its module's engines."""
    group, port = _PORTS[runtime]
    factory = next(iter(metadata.entry_points(group=group, name=scheme))).load()
    found: set[type] = set()
    returned = typing.get_type_hints(factory).get("return")
    if isinstance(returned, type) and issubclass(returned, port):
        found.add(returned)
    module = sys.modules[factory.__module__]
    found.update(
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, port) and value is not port
    )
    return found


def test_the_memory_and_postgres_engines_are_registered_under_their_url_schemes() -> None:
    assert {"memory", "postgres", "postgresql"} <= set(_SCHEMES)


@pytest.mark.parametrize("runtime", sorted(_PORTS))
@pytest.mark.parametrize("scheme", _SCHEMES)
def test_every_adapter_implements_every_method_of_the_engine_port(scheme: str, runtime: str) -> None:
    problem = entry_point_problem(scheme)
    if problem is not None:
        if under_ci():
            pytest.fail(problem)
        pytest.skip(problem)
    port = _PORTS[runtime][1]
    classes = adapter_classes(scheme, runtime)
    assert classes, f"the {scheme!r} entry point leads to no {port.__name__} subclass"
    for cls in classes:
        assert not inspect.isabstract(cls), f"{cls.__qualname__} is left abstract"
        abstract: frozenset[str] = getattr(port, "__abstractmethods__")  # noqa: B009 - an ABC's own set
        for name in sorted(abstract):
            implementation = getattr(cls, name)
            which = "runtime" if name in AsyncRuntimePort.__abstractmethods__ else "operations"
            method = f"{cls.__qualname__}.{name} ({which} port)"
            assert implementation is not getattr(port, name), f"{method} is the port's own"
            assert not getattr(implementation, "__isabstractmethod__", False), method
            wanted = inspect.signature(getattr(port, name))
            mine = inspect.signature(implementation)
            assert len(mine.parameters) == len(wanted.parameters), f"{cls.__qualname__}.{name}{mine} vs {wanted}"
            assert inspect.iscoroutinefunction(implementation) == inspect.iscoroutinefunction(getattr(port, name))


def test_a_store_runs_on_the_engine_its_entry_point_names(engine: EngineTarget) -> None:
    with engine.store(ManualClock(T0)) as store:
        assert type(target_of(store.engine)) in adapter_classes(engine.scheme, engine.runtime)


def test_every_public_facade_member_is_exercised_by_the_suite(request: pytest.FixtureRequest) -> None:
    here = Path(__file__).parent
    modules = {path.name for path in here.glob("test_*.py")}
    ran = {item.path.name for item in request.session.items if item.path.parent == here}
    if DESELECTED or ran != modules:
        pytest.skip("this check needs the whole contract suite in one run")
    required = {f"{cls.__name__}.{member}" for cls in FACADES for member in public_members(cls)}
    missing = sorted(required - EXERCISED)
    assert not missing, f"public facade members no contract test exercised: {missing}"
