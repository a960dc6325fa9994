"""The PostgreSQL engine: ``alkstore.open("postgresql://…")`` (psycopg 3 + psycopg_pool).

Everything lives in one schema (default ``alkstore``) created by versioned migrations:
``alkstore migrate --url … --schema …``, ``store.migrate()``, or ``open(url, migrate=True)``.
Opening a store never migrates silently; an unmigrated or older schema raises
``SchemaOutOfDate``. Time comes from the store's ``Clock``: by default the database server's,
shared by every host (``DatabaseClock``, ADR 015).
"""

from __future__ import annotations

from ._engine import PostgresEngine, open_engine

__all__ = ["PostgresEngine", "open_engine"]
