"""The engines under contract: found through the ``alkstore.testing`` entry points, each opening
fresh, isolated stores.

An engine is reached only the way a user reaches it, ``alkstore.open(url, clock=…)``, by the
engine's own ``ScratchEngine`` (``alkstore.testing``): every store the suite opens is private
to one test (or one Hypothesis example), a new in-memory store or a Postgres store in a schema
of its own that is dropped when the store closes. Nothing here names an engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata

from alkstore import Clock, Codec, Store
from alkstore.testing import Opener, ScratchEngine, scratch_engines
from tests.support import T0, under_ci

__all__ = [
    "ENGINES",
    "ENGINE_GROUP",
    "T0",
    "EngineTarget",
    "entry_point_problem",
    "under_ci",
]

ENGINE_GROUP = "alkstore.engines"
#: Every engine registered for tests, by name.
ENGINES: dict[str, ScratchEngine] = {engine.name: engine for engine in scratch_engines()}


@dataclass(frozen=True)
class EngineTarget:
    """One engine the suite runs against: ``store(clock)`` opens a fresh, private store on it."""

    name: str
    scheme: str
    opener: Opener

    @contextmanager
    def store(self, clock: Clock, codec: Codec | None = None) -> Iterator[Store]:
        """A fresh store on this engine driven by ``clock``; closed (and its storage dropped) after."""
        store, cleanup = self.opener(clock, codec)
        try:
            yield store
        finally:
            cleanup()

    def __repr__(self) -> str:
        return f"<contract engine {self.name}>"


def entry_point_problem(scheme: str) -> str | None:
    """None if the ``alkstore.engines`` entry point for ``scheme`` loads, else why it does not."""
    found = metadata.entry_points(group=ENGINE_GROUP, name=scheme)
    if not found:
        return f"no {ENGINE_GROUP!r} entry point named {scheme!r} is installed"
    try:
        next(iter(found)).load()
    except (ImportError, AttributeError) as exc:
        return f"the {scheme!r} engine does not load: {type(exc).__name__}: {exc}"
    return None
