"""Scratch stores for test suites: a fresh, private store on every installed engine.

Each engine registers a ``ScratchEngine`` under the ``alkstore.testing`` entry points (ADR 012).
``scratch_engines()`` lists them, so a suite written against the public API — alkstore's own
contract suite, or an application's — runs once per engine installed, with no list of engines
of its own: a third engine joins by registering one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from ._codec import Codec
from ._store import Store
from ._time import Clock

__all__ = ["TESTING_ENTRY_POINTS", "Opener", "ScratchEngine", "scratch_engines"]

TESTING_ENTRY_POINTS = "alkstore.testing"

#: Opens a fresh, private store driven by the clock (and codec) given, and returns it with what
#: disposes of it afterwards (closing it, and dropping what it stored).
Opener = Callable[[Clock, Codec | None], tuple[Store, Callable[[], None]]]


@dataclass(frozen=True)
class ScratchEngine:
    """How tests reach one engine.

    ``scheme`` is its URL scheme; ``marks`` the pytest markers its tests carry (``postgres``:
    needs a server). ``provision()`` finds what the engine needs (a server, say) and returns an
    ``Opener``, or the reason the engine cannot be tested here.
    """

    name: str
    scheme: str
    provision: Callable[[], Opener | str]
    marks: tuple[str, ...] = ()


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
