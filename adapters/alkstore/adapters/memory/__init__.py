"""The in-memory engine: ``alkstore.open("memory://")``.

A faithful, thread-safe engine in one process: the same semantics and errors as the
Postgres engine (the contract suite holds both to them), no durability. Use it for tests,
demos, and as the embedded default.
"""

from __future__ import annotations

from ._engine import MemoryEngine, MemoryTransaction, open_engine

__all__ = ["MemoryEngine", "MemoryTransaction", "open_engine"]
