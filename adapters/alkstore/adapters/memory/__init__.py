"""The in-memory engine: ``alkstore.open("memory://")`` and ``alkstore.open_async("memory://")``.

A faithful, thread-safe engine in one process: the same semantics and errors as the
Postgres engine (the contract suite holds both to them), no durability. Use it for tests,
demos, and as the embedded default.
"""

from __future__ import annotations

from ._engine import MemoryEngine, open_engine
from ._engine_async import AsyncMemoryEngine
from ._engine_async import open_engine as open_async_engine
from ._tables import MemoryTransaction

__all__ = ["AsyncMemoryEngine", "MemoryEngine", "MemoryTransaction", "open_async_engine", "open_engine"]
