"""The SQLite engine: ``alkstore.open("sqlite:///path/to/jobs.db")`` and ``alkstore.open_async(…)``.

Durable queues, locks, schedules and the outbox in one SQLite file (stdlib ``sqlite3``, WAL), shared
by any number of processes on one host: every write is a ``BEGIN IMMEDIATE`` transaction, so claims,
fires and lock renewals are serialized by the file's write lock (ADR 063).
"""

from __future__ import annotations

from ._async_engine import AsyncSqliteEngine
from ._async_engine import open_engine as open_async_engine
from ._engine import SqliteEngine, open_engine
from ._tables import SqliteTransaction

__all__ = ["AsyncSqliteEngine", "SqliteEngine", "SqliteTransaction", "open_async_engine", "open_engine"]
