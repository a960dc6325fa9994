"""Scratch stores for test suites: a fresh, private store on every installed engine, in either runtime.

Each engine registers a ``ScratchEngine`` under the ``alkstore.testing`` entry points (ADR 012).
``scratch_engines()`` lists them, so a suite written against the public API — alkstore's own
contract suite, or an application's — runs once per engine installed, with no list of engines
of its own: a third engine joins by registering one. An engine's scratch gives the address of a
new private store (``ScratchStore``): ``open_scratch`` opens it as a ``Store``,
``open_scratch_async`` as an ``AsyncStore``, and each returns what disposes of it afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from .port._time import Clock
from .rules._codec import Codec
from .store._store import Store, open  # noqa: A004
from .store._store_async import AsyncStore, open_async

__all__ = [
    "TESTING_ENTRY_POINTS",
    "Scratch",
    "ScratchEngine",
    "ScratchStore",
    "open_scratch",
    "open_scratch_async",
    "scratch_engines",
]

TESTING_ENTRY_POINTS = "alkstore.testing"


@dataclass(frozen=True)
class ScratchStore:
    """Where one private store lives: open it with ``url`` and ``options``; ``dispose()`` once it is closed
    drops what it stored."""

    url: str
    options: Mapping[str, Any] = field(default_factory=dict)
    dispose: Callable[[], None] = lambda: None


#: Makes the address of a new, empty, private store each time it is called.
Scratch = Callable[[], ScratchStore]


@dataclass(frozen=True)
class ScratchEngine:
    """How tests reach one engine.

    ``scheme`` is its URL scheme; ``marks`` the pytest markers its tests carry (``postgres``:
    needs a server). ``provision()`` finds what the engine needs (a server, say) and returns a
    ``Scratch``, or the reason the engine cannot be tested here.
    """

    name: str
    scheme: str
    provision: Callable[[], Scratch | str]
    marks: tuple[str, ...] = ()


def open_scratch(scratch: Scratch, clock: Clock | None, codec: Codec | None = None) -> tuple[Store, Callable[[], None]]:
    """A fresh sync store from ``scratch``, driven by ``clock`` (``None``: the engine's), and what closes and
    disposes of it."""
    where = scratch()
    try:
        store = open(where.url, clock=clock, codec=codec, **where.options)
    except BaseException:
        where.dispose()
        raise

    def cleanup() -> None:
        try:
            store.close()
        finally:
            where.dispose()

    return store, cleanup


async def open_scratch_async(
    scratch: Scratch, clock: Clock | None, codec: Codec | None = None
) -> tuple[AsyncStore, Callable[[], Awaitable[None]]]:
    """A fresh async store from ``scratch``, driven by ``clock`` (``None``: the engine's), and what closes and
    disposes of it."""
    where = scratch()
    try:
        store = await open_async(where.url, clock=clock, codec=codec, **where.options)
    except BaseException:
        where.dispose()
        raise

    async def cleanup() -> None:
        try:
            await store.close()
        finally:
            where.dispose()

    return store, cleanup


def scratch_engines() -> list[ScratchEngine]:
    """Every engine registered for tests, ordered by name (loading one imports its adapter)."""
    found: dict[str, Any] = {}
    for entry in metadata.entry_points(group=TESTING_ENTRY_POINTS):
        found.setdefault(entry.name, entry)
    engines = []
    for name in sorted(found):
        engine = found[name].load()
        if not isinstance(engine, ScratchEngine):
            raise TypeError(f"the {TESTING_ENTRY_POINTS} entry point {name!r} is not a ScratchEngine")
        engines.append(engine)
    return engines
