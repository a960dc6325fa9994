"""The memory engine for test suites: every scratch store is a new, empty memory (see ``alkstore.testing``)."""

from __future__ import annotations

from alkstore.testing import Scratch, ScratchEngine, ScratchStore

__all__ = ["SCRATCH"]


def _provision() -> Scratch | str:
    return lambda: ScratchStore("memory://")


SCRATCH = ScratchEngine("memory", "memory", _provision)
