"""The memory engine for test suites: every scratch store is a new, empty memory (see ``alkstore.testing``)."""

from __future__ import annotations

from collections.abc import Callable

import alkstore
from alkstore import Clock, Codec, Store
from alkstore.testing import Opener, ScratchEngine

__all__ = ["SCRATCH"]


def _open(clock: Clock, codec: Codec | None) -> tuple[Store, Callable[[], None]]:
    store = alkstore.open("memory://", clock=clock, codec=codec)
    return store, store.close


def _provision() -> Opener | str:
    return _open


SCRATCH = ScratchEngine("memory", "memory", _provision)
