"""The Postgres engine for test suites (see ``alkstore.testing``): a fresh schema per scratch store.

The server is found once, in this order: ``ALKSTORE_TEST_DSN``; a local server at
``postgresql://postgres@127.0.0.1:5432/test``; a throwaway container through testcontainers
(needs Docker and the ``testcontainers`` package). Each scratch store lives in a schema of its
own, migrated on open and dropped when the store is disposed of.
"""

from __future__ import annotations

import atexit
import os
import threading
import uuid
from typing import Any

import psycopg
from psycopg import sql

from alkstore.testing import Scratch, ScratchEngine, ScratchStore

__all__ = ["LOCAL_DSN", "SCRATCH", "drop_schema", "find_server", "unique_schema"]

LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/test"
#: The pool bound of scratch stores: several suites share one server (max_connections = 100).
MAX_SIZE = 4

_lock = threading.Lock()
_found: list[tuple[str | None, str]] = []


def _reachable(dsn: str) -> str | None:
    """None if a connection to ``dsn`` works, else the reason it does not."""
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None


def find_server() -> tuple[str | None, str]:
    """A DSN of a reachable server, or ``None`` and why there is none (found once per process)."""
    with _lock:
        if not _found:
            _found.append(_search())
        return _found[0]


def _search() -> tuple[str | None, str]:
    explicit = os.environ.get("ALKSTORE_TEST_DSN")
    reason = _reachable(explicit or LOCAL_DSN)
    if reason is None:
        return explicit or LOCAL_DSN, ""
    reasons = [f"{explicit or LOCAL_DSN}: {reason}"]
    if not explicit:
        try:
            from testcontainers.postgres import PostgresContainer

            container: Any = PostgresContainer("postgres:16-alpine", driver=None)
            container.start()
            atexit.register(container.stop)
            return str(container.get_connection_url()), ""
        except Exception as exc:
            reasons.append(f"testcontainers: {type(exc).__name__}: {exc}")
    return None, "no PostgreSQL server for the Postgres tests: " + "; ".join(reasons)


def unique_schema(prefix: str = "t") -> str:
    """A fresh schema name, unique per call."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _provision() -> Scratch | str:
    dsn, reason = find_server()
    if dsn is None:
        return reason

    def scratch() -> ScratchStore:
        schema = unique_schema("ct")
        return ScratchStore(
            dsn, {"schema": schema, "migrate": True, "max_size": MAX_SIZE}, lambda: drop_schema(dsn, schema)
        )

    return scratch


SCRATCH = ScratchEngine("postgres", "postgresql", _provision, marks=("postgres",))
