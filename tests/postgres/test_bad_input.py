"""Bad input only the Postgres engine can meet: schema names with ``%``, and caller connections that
are not inside a transaction (ended, autocommit, closed): named errors, nothing committed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from alkstore import InvalidTransaction, ManualClock, Store
from alkstore.adapters.postgres.testing import drop_schema, unique_schema

from .conftest import OpenStore, count

pytestmark = pytest.mark.postgres


@pytest.fixture
def percent_schemas(pg_dsn: str) -> Iterator[tuple[str, str]]:
    base = unique_schema("pct")
    schemas = (f"{base}%b", f"{base}%%b")
    yield schemas
    for schema in schemas:
        drop_schema(pg_dsn, schema)


def test_schema_names_with_percent_signs_work_and_name_different_schemas(
    open_store: OpenStore, percent_schemas: tuple[str, str], db: psycopg.Connection[Any], clock: ManualClock
) -> None:
    single, double = (open_store(schema, clock=clock) for schema in percent_schemas)
    single.queue("jobs").enqueue("in a%b")
    double.queue("jobs").enqueue("in a%%b")
    with double.transaction() as tx:
        double.enqueue_tx(tx, "jobs", "also in a%%b")
    single.schedule("beat", "@every 1s", "jobs")
    clock.advance(1)
    assert [fire.schedule for fire in single.tick()] == ["beat"]
    assert double.tick() == []
    assert [count(db, schema, "jobs") for schema in percent_schemas] == [2, 2]
    seen = {schema: drain(store) for schema, store in zip(percent_schemas, (single, double), strict=True)}
    assert seen == {percent_schemas[0]: ["in a%b", None], percent_schemas[1]: ["in a%%b", "also in a%%b"]}


def drain(store: Store) -> list[object]:
    payloads = []
    while (job := store.queue("jobs").claim("w")) is not None:
        payloads.append(job.payload)
        job.ack()
    return payloads


def test_a_connection_that_is_not_inside_a_transaction_is_refused_and_nothing_commits(
    store: Store, pg_dsn: str, pg_module_schema: str, db: psycopg.Connection[Any]
) -> None:
    before = count(db, pg_module_schema, "jobs")
    with store.transaction() as ended:  # back in the pool once the block ends
        pass
    with psycopg.connect(pg_dsn, autocommit=True) as autocommit:
        closed = psycopg.connect(pg_dsn)
        closed.close()
        for conn in (ended, autocommit, closed):
            with pytest.raises(InvalidTransaction):
                store.enqueue_tx(conn, "jobs", "would commit alone")
            with pytest.raises(InvalidTransaction):
                store.outbox_enqueue_tx(conn, "mail", "would commit alone")
    assert count(db, pg_module_schema, "jobs") == before
    assert store.queue("jobs").claim("probe") is None
