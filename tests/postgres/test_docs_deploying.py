"""docs/deploying.md's examples run as written, only where they connect replaced: a store behind a
transaction-pooling PgBouncer, and SQLAlchemy's ``Session`` committing an order with its outbox message."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import sqlalchemy
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

import alkstore
from alkstore import Store
from tests._docs import block
from tests.postgres._pgbouncer import running_pgbouncer

pytestmark = pytest.mark.postgres

PAGE = "docs/deploying.md"


@pytest.fixture
def migrated(pg_database: str) -> str:
    """A database of the test's own with alkstore's default schema in it: its URL."""
    alkstore.open(pg_database, migrate=True, max_size=1).close()
    return pg_database


def test_the_pgbouncer_example_works_through_a_transaction_pooler(migrated: str) -> None:
    example = block(PAGE, "prepare_threshold=None")
    pooled, direct = '"postgresql://app@pgbouncer:6432/app"', '"postgresql://app@db:5432/app"'
    assert pooled in example
    assert direct in example
    with running_pgbouncer(migrated, "transaction", 4) as bouncer:
        namespace: dict[str, Any] = {"alkstore": alkstore}
        exec(example.replace(pooled, repr(bouncer.url())).replace(direct, repr(migrated)), namespace)
        store: Store = namespace["store"]
        try:
            emails = store.queue("emails")
            job_id = emails.enqueue({"to": "ada@example.com"})
            job = emails.claim("worker-1", wait=30)  # a parked claim, listening on the server itself
            assert job is not None
            assert job.id == job_id
            job.ack()
            assert store.get_job(job_id) is None
        finally:
            store.close()


class Base(DeclarativeBase):
    pass


class Order(Base):
    """The caller's own table, beside alkstore's schema."""

    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)


def test_the_sqlalchemy_example_commits_the_order_with_its_message(migrated: str) -> None:
    example = block(PAGE, "with Session(engine) as session")
    engine = sqlalchemy.create_engine(migrated.replace("postgresql://", "postgresql+psycopg://"), pool_size=1)
    Base.metadata.create_all(engine)
    try:
        with alkstore.open(migrated, max_size=2) as store:
            namespace: dict[str, Any] = {
                "Session": sqlalchemy.orm.Session,
                "engine": engine,
                "store": store,
                "order": Order(id=42),
            }
            exec(example, namespace)

            delivered: list[object] = []
            assert store.outbox("webhooks").run_once("courier-1", lambda payload, job: delivered.append(payload))
            assert delivered == [{"event": "order.paid", "order": 42}]
        with psycopg.connect(migrated) as conn:
            assert conn.execute("SELECT id FROM orders").fetchall() == [(42,)]
    finally:
        engine.dispose()
