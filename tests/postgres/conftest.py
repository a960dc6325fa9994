"""Fixtures for the Postgres engine's own tests: stores on a fresh schema, always closed and checked.

Every store a test opens through ``open_store`` is closed after the test, and first checked
for leaks: neither of its pools may still have a connection checked out. Pools stay small
(several suites share the server).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import ManualClock, Store
from alkstore.adapters.postgres import PostgresEngine
from tests.support import PATIENCE, T0, wait_until

__all__ = ["PATIENCE", "T0", "OpenStore", "count", "engine_of", "table", "wait_until"]

#: Pool bound for test stores.
MAX_SIZE = 3

OpenStore = Callable[..., Store]


def engine_of(store: Store) -> PostgresEngine:
    engine = store.engine
    assert isinstance(engine, PostgresEngine)
    return engine


def checked_out(engine: PostgresEngine) -> int:
    """Connections of either pool currently lent out (or being opened on someone's behalf)."""
    total = 0
    for pool in (engine.pool, engine.waiter_pool):
        stats = pool.get_stats()
        total += stats["pool_size"] - stats["pool_available"]
    return total


def assert_nothing_checked_out(engine: PostgresEngine) -> None:
    """Fail unless both pools settle with every connection back home."""
    end = time.monotonic() + 5.0
    while checked_out(engine) and time.monotonic() < end:
        time.sleep(0.01)  # a connection being opened in the background settles quickly
    assert checked_out(engine) == 0, f"connections still checked out: {engine.pool.get_stats()}"


@pytest.fixture
def clock() -> ManualClock:
    """A clock only the test moves."""
    return ManualClock(T0)


@pytest.fixture
def open_store(pg_dsn: str, pg_module_schema: str) -> Iterator[OpenStore]:
    """Open stores (default: ``pg_dsn``, the module's schema, migrated, small pool); checked and closed after."""
    opened: list[Store] = []

    def _open(schema: str | None = None, *, url: str | None = None, **options: Any) -> Store:
        options.setdefault("max_size", MAX_SIZE)
        options.setdefault("migrate", True)
        store = alkstore.open(url or pg_dsn, schema=schema or pg_module_schema, **options)
        opened.append(store)
        return store

    yield _open
    try:
        for store in opened:
            if not engine_of(store).closed:
                assert_nothing_checked_out(engine_of(store))
    finally:
        for store in opened:
            store.close()


@pytest.fixture
def store(open_store: OpenStore, clock: ManualClock) -> Store:
    """A store on the module's schema, driven by ``clock``."""
    return open_store(clock=clock)


@pytest.fixture
def db(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A raw autocommit connection for looking at (and tampering with) the database directly."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def table(schema: str, name: str) -> sql.Composed:
    """``schema.name``, quoted."""
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(name))


def count(db: psycopg.Connection[Any], schema: str, name: str) -> int:
    """Rows in ``schema.name``."""
    row = db.execute(sql.SQL("SELECT count(*) FROM {}").format(table(schema, name))).fetchone()
    assert row is not None
    return int(row[0])
