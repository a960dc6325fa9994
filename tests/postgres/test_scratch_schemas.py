"""The Postgres scratch stores (``alkstore.testing``, ADR 072): a schema given back is handed out again only as
empty as a fresh migration leaves it; one holding anything else is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import ManualClock
from alkstore.adapters.postgres.testing import SCRATCH, TRUNCATE_ABOVE, VERSION_TABLE, schema_objects
from alkstore.testing import Scratch, ScratchStore

from .conftest import T0

pytestmark = pytest.mark.postgres


@pytest.fixture
def scratch() -> Scratch:
    provisioned = SCRATCH.provision()
    assert not isinstance(provisioned, str), provisioned
    return provisioned


def contents(dsn: str, schema: str) -> dict[str, Any]:
    """Every table's row count and every sequence's next value in ``schema``."""
    found: dict[str, Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for kind, name in schema_objects(conn, schema):
            if kind == "r" and name != VERSION_TABLE:
                query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, name))
            elif kind == "S":
                query = sql.SQL("SELECT nextval({})").format(sql.Literal(f"{schema}.{name}"))
            else:
                continue
            row = conn.execute(query).fetchone()
            assert row is not None
            found[name] = row[0]
    return found


def used(where: ScratchStore, work: Callable[[alkstore.Store], object]) -> str:
    """Open a store at ``where``, do ``work`` on it, close and dispose of it: its schema's name."""
    store = alkstore.open(where.url, clock=ManualClock(T0), **where.options)
    try:
        work(store)
    finally:
        store.close()
        where.dispose()
    return str(where.options["schema"])


def fill(store: alkstore.Store) -> None:
    queue = store.queue("q")
    queue.enqueue_many(["a", "b", "c"])
    job = queue.claim("w")
    assert job is not None
    job.fail("dead")
    assert store.try_lock("held", "me", 60) is not None
    store.schedule("beat", "@every 5m", "q")


def test_a_given_back_schema_is_handed_out_again_as_empty_as_a_fresh_one(scratch: Scratch, pg_dsn: str) -> None:
    fresh = scratch()
    untouched = contents(pg_dsn, used(fresh, lambda store: None))  # given back as it was made
    again = scratch()
    assert again.options["schema"] == fresh.options["schema"]
    schema = used(again, fill)

    third = scratch()
    assert third.options["schema"] == schema
    assert contents(pg_dsn, schema) == untouched  # no rows, every sequence where a migration leaves it
    used(third, lambda store: store.queue("q").enqueue("x"))


def sizes(dsn: str, schema: str) -> dict[str, int]:
    """Each table's size on disk with its indexes, in ``schema``."""
    found: dict[str, int] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for kind, name in schema_objects(conn, schema):
            if kind == "r":
                row = conn.execute("SELECT pg_total_relation_size(%s::regclass)", (f"{schema}.{name}",)).fetchone()
                assert row is not None
                found[name] = int(row[0])
    return found


def test_a_given_back_schema_keeps_no_more_than_a_few_pages_of_dead_rows_whatever_was_stored(
    scratch: Scratch, pg_dsn: str
) -> None:
    schema = used(
        scratch(), lambda store: store.queue("q").enqueue_many([{"n": n, "pad": "x" * 200} for n in range(3000)])
    )
    again = scratch()
    assert again.options["schema"] == schema
    assert max(sizes(pg_dsn, schema).values()) <= TRUNCATE_ABOVE
    used(again, lambda store: None)


def test_a_schema_holding_what_no_migration_made_is_dropped_not_handed_out(scratch: Scratch, pg_dsn: str) -> None:
    def add_a_table(store: alkstore.Store) -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            orders = sql.Identifier(str(where.options["schema"]), "orders")
            conn.execute(sql.SQL("CREATE TABLE {} (id int)").format(orders))

    where = scratch()
    schema = used(where, add_a_table)

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
    assert scratch().options["schema"] != schema
