"""The engines under contract: found through the ``alkstore.testing`` entry points, each opening
fresh, isolated stores, in each runtime.

An engine is reached only the way a user reaches it, ``alkstore.open(url, clock=…)`` or
``alkstore.open_async(…)``, by the engine's own ``ScratchEngine`` (``alkstore.testing``): every
store the suite opens is private to one test (or one Hypothesis example), a new in-memory store or
a Postgres store in a schema of its own that is dropped when the store closes. Nothing here names
an engine; an async store is seen through ``_runtimes.Blocking``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from alkstore import Clock, Codec
from alkstore.testing import Scratch, ScratchEngine, open_scratch, open_scratch_async, scratch_engines
from tests.support import T0, under_ci

from ._runtimes import RUNTIMES, Blocking, portal

__all__ = [
    "ENGINES",
    "ENGINE_GROUP",
    "RUNTIMES",
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
    """One engine in one runtime: ``store(clock)`` opens a fresh, private store on it."""

    name: str
    scheme: str
    scratch: Scratch
    runtime: str = "sync"

    @property
    def id(self) -> str:
        """How test ids name it: ``memory-sync``, ``postgres-async``, …"""
        return f"{self.name}-{self.runtime}"

    @contextmanager
    def store(self, clock: Clock, codec: Codec | None = None) -> Iterator[Any]:
        """A fresh store on this engine driven by ``clock``; closed (and its storage dropped) after."""
        if self.runtime == "sync":
            store, cleanup = open_scratch(self.scratch, clock, codec)
            try:
                yield store
            finally:
                cleanup()
            return
        opened, dispose = portal().run(open_scratch_async(self.scratch, clock, codec))
        try:
            yield Blocking(opened)
        finally:
            portal().run(dispose())

    def __repr__(self) -> str:
        return f"<contract engine {self.id}>"


def entry_point_problem(scheme: str) -> str | None:
    """None if the engine entry points for ``scheme`` load (both runtimes'), else why they do not."""
    for group in (ENGINE_GROUP, "alkstore.async_engines"):
        found = metadata.entry_points(group=group, name=scheme)
        if not found:
            return f"no {group!r} entry point named {scheme!r} is installed"
        try:
            next(iter(found)).load()
        except (ImportError, AttributeError) as exc:
            return f"the {scheme!r} engine does not load: {type(exc).__name__}: {exc}"
    return None
