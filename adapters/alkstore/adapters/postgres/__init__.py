"""The PostgreSQL engine: ``alkstore.open("postgresql://…")`` and ``alkstore.open_async(…)`` (psycopg 3 +
psycopg_pool).

Everything lives in one schema (default ``alkstore``) created by versioned migrations:
``alkstore migrate --url … --schema …``, ``store.migrate()``, or ``open(url, migrate=True)``.
Opening a store never migrates silently; an unmigrated or older schema raises
``SchemaOutOfDate``. Time comes from the store's ``Clock``: by default the database server's,
shared by every host (``DatabaseClock``, ADR 015). The async engine is the one source; the sync
one is generated from it (ADR 026).
"""

from __future__ import annotations

from ._clock import DatabaseClock
from ._clock_async import AsyncDatabaseClock
from ._engine import PostgresEngine, open_engine
from ._engine_async import AsyncPostgresEngine
from ._engine_async import open_engine as open_async_engine

__all__ = [
    "AsyncDatabaseClock",
    "AsyncPostgresEngine",
    "DatabaseClock",
    "PostgresEngine",
    "open_async_engine",
    "open_engine",
]
