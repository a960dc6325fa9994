"""The Postgres engine for test suites (see ``alkstore.testing``): a fresh schema per scratch store.

The server is found once, in this order: ``ALKSTORE_TEST_DSN``; a local server at
``postgresql://postgres@127.0.0.1:5432/test``; a throwaway container through testcontainers
(needs Docker and the ``testcontainers`` package). Each scratch store lives in a schema of its
own. A disposed-of schema is emptied (every row deleted, every sequence restarted) and handed
to the next scratch store, so a suite migrates a few schemas rather than one per store (ADR 072);
one that holds anything the migrations did not make, or cannot be emptied, is dropped instead, and
the idle ones are dropped at exit.
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

__all__ = [
    "LOCAL_DSN",
    "SCRATCH",
    "TRUNCATE_ABOVE",
    "VERSION_TABLE",
    "drop_schema",
    "empty_schema",
    "find_server",
    "schema_objects",
    "unique_schema",
]

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


#: What a schema holds, by kind and name: relations (tables, indexes, sequences) and functions.
_OBJECTS = """
SELECT c.relkind::text, c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s
UNION ALL
SELECT 'f', p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %(schema)s
ORDER BY 1, 2
"""
#: The table that records a schema's version: kept when the schema is emptied.
VERSION_TABLE = "schema_version"


def schema_objects(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str]]:
    """What ``schema`` holds: (kind, name) of each relation (``pg_class.relkind``) and function (``f``)."""
    return [(str(kind), str(name)) for kind, name in conn.execute(_OBJECTS, {"schema": schema}).fetchall()]


#: Each table's size on disk with its indexes, dead rows included.
_SIZES = """
SELECT c.relname::text, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p') AND c.relname <> %(version_table)s
"""
#: A table (with its indexes) larger than this is truncated rather than its rows deleted, so the dead rows
#: a given-back schema keeps stay a few pages, whatever the tests before did.
TRUNCATE_ABOVE = 256 * 1024


def empty_schema(dsn: str, schema: str, holds: list[tuple[str, str]]) -> bool:
    """Empty ``schema`` as a fresh migration leaves it (every row but the version table's gone, every sequence
    restarted) if it holds exactly ``holds``; False, touching nothing, if it holds anything else or cannot be
    emptied within a few seconds."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            found = schema_objects(conn, schema)
            if found != holds:
                return False
            sizes = conn.execute(_SIZES, {"schema": schema, "version_table": VERSION_TABLE}).fetchall()
            large = [sql.Identifier(schema, name) for name, size in sizes if size > TRUNCATE_ABOVE]
            small = [sql.Identifier(schema, name) for name, size in sizes if size <= TRUNCATE_ABOVE]
            statements: list[sql.Composable] = [sql.SQL("SET LOCAL lock_timeout = '5s'")]
            if large:
                statements.append(sql.SQL("TRUNCATE {}").format(sql.SQL(", ").join(large)))
            statements += [sql.SQL("DELETE FROM {}").format(table) for table in small]
            statements += [
                sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(schema, name))
                for kind, name in found
                if kind == "S"
            ]
            with conn.transaction():
                conn.execute(sql.SQL("; ").join(statements))
    except psycopg.Error:
        return False
    return True


class _Schemas:
    """The scratch schemas of one server: handed out empty, emptied and kept when given back, dropped at exit."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.lock = threading.Lock()
        self.idle: list[str] = []
        self.holds: list[tuple[str, str]] | None = None  # what a freshly migrated schema holds, once seen
        atexit.register(self.drop_idle)

    def take(self) -> ScratchStore:
        with self.lock:
            schema = self.idle.pop() if self.idle else unique_schema("ct")
        return ScratchStore(
            self.dsn, {"schema": schema, "migrate": True, "max_size": MAX_SIZE}, lambda: self.give_back(schema)
        )

    def give_back(self, schema: str) -> None:
        """Keep ``schema`` for the next store if it empties to what a migration made; else drop it."""
        if self.holds is None:
            self.holds = self._freshly_migrated()
        if empty_schema(self.dsn, schema, self.holds):
            with self.lock:
                self.idle.append(schema)
        else:
            drop_schema(self.dsn, schema)

    def _freshly_migrated(self) -> list[tuple[str, str]]:
        """What a schema holds right after ``migrate``: seen on one migrated here for the purpose, then dropped."""
        import alkstore

        schema = unique_schema("ct")
        try:
            alkstore.open(self.dsn, schema=schema, migrate=True, min_size=0, max_size=1).close()
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                return schema_objects(conn, schema)
        finally:
            drop_schema(self.dsn, schema)

    def drop_idle(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for schema in idle:
            drop_schema(self.dsn, schema)


#: The scratch schemas of each server, one set per process however often the engine is provisioned.
_SCHEMAS: dict[str, _Schemas] = {}


def _provision() -> Scratch | str:
    dsn, reason = find_server()
    if dsn is None:
        return reason
    with _lock:
        if dsn not in _SCHEMAS:
            _SCHEMAS[dsn] = _Schemas(dsn)
        schemas = _SCHEMAS[dsn]
    return schemas.take


SCRATCH = ScratchEngine("postgres", "postgresql", _provision, marks=("postgres",))
