"""The caller's async transaction (ADR 019 in the async runtime): a ``psycopg.AsyncConnection``, or a
SQLAlchemy ``AsyncSession`` or ``AsyncConnection`` on psycopg.

Whatever the caller writes and the jobs (or outbox messages) it enqueues commit together or not
at all; what would commit a job on its own, at once, is refused before anything is written.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_scoped_session, async_sessionmaker, create_async_engine

import alkstore
from alkstore import AsyncStore, InvalidTransaction
from alkstore.adapters.postgres.testing import drop_schema, unique_schema

from .conftest import run

pytestmark = pytest.mark.postgres


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema holding the store's tables and the caller's own ``orders``."""
    name = unique_schema("aio")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE TABLE {}.orders (id integer PRIMARY KEY)").format(sql.Identifier(name)))
    yield name
    drop_schema(pg_dsn, name)


@asynccontextmanager
async def store_on(dsn: str, schema: str) -> AsyncIterator[AsyncStore]:
    store = await alkstore.open_async(dsn, schema=schema, migrate=True, max_size=2)
    try:
        yield store
    finally:
        await store.close()


def orders(dsn: str, schema: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT id FROM {}.orders ORDER BY id").format(sql.Identifier(schema))
        return [int(row[0]) for row in conn.execute(query)]


async def messages(store: AsyncStore, outbox: str) -> list[Any]:
    delivered: list[Any] = []
    while await store.outbox(outbox).run_once("courier", lambda payload, job: delivered.append(payload)):
        pass
    return delivered


def sqlalchemy_engine(dsn: str) -> AsyncEngine:
    scheme, _, rest = dsn.partition("://")
    assert scheme in ("postgresql", "postgres")
    return create_async_engine(f"postgresql+psycopg://{rest}", pool_size=2, max_overflow=0)


class Rollback(Exception):
    """Raised to roll a caller's transaction back."""


def test_a_psycopg_async_connection_commits_its_rows_and_its_jobs_together(pg_dsn: str, schema: str) -> None:
    insert = sql.SQL("INSERT INTO {}.orders (id) VALUES (%s)").format(sql.Identifier(schema))

    async def body() -> None:
        async with store_on(pg_dsn, schema) as store:
            async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
                async with conn.transaction():
                    await conn.execute(insert, (1,))
                    await store.outbox_enqueue_tx(conn, "hooks", {"order": 1})
                    await store.enqueue_tx(conn, "jobs", {"order": 1})
                try:
                    async with conn.transaction():
                        await conn.execute(insert, (2,))
                        await store.outbox_enqueue_tx(conn, "hooks", {"order": 2})
                        raise Rollback
                except Rollback:
                    pass
            assert orders(pg_dsn, schema) == [1]
            assert await messages(store, "hooks") == [{"order": 1}]
            job = await store.queue("jobs").claim("w")
            assert job is not None
            assert job.payload == {"order": 1}
            assert await store.queue("jobs").claim("w") is None

    run(body)


def test_a_sqlalchemy_async_session_commits_the_order_and_the_message_or_neither(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        engine = sqlalchemy_engine(pg_dsn)
        sessions = async_sessionmaker(engine)
        try:
            async with store_on(pg_dsn, schema) as store:
                async with sessions() as session:
                    await session.execute(text(f'INSERT INTO "{schema}".orders (id) VALUES (1)'))
                    await store.outbox_enqueue_tx(session, "hooks", {"order": 1})
                    await session.commit()
                async with sessions() as session:
                    await session.execute(text(f'INSERT INTO "{schema}".orders (id) VALUES (2)'))
                    await store.outbox_enqueue_tx(session, "hooks", {"order": 2})
                    await session.rollback()
                async with sessions() as session:  # a session whose transaction the enqueue begins
                    await store.enqueue_tx(session, "jobs", {"order": 3})
                    await session.commit()
                assert orders(pg_dsn, schema) == [1]
                assert await messages(store, "hooks") == [{"order": 1}]
                job = await store.queue("jobs").claim("w")
                assert job is not None
                assert job.payload == {"order": 3}
        finally:
            await engine.dispose()

    run(body)


def test_a_sqlalchemy_async_connection_and_a_scoped_session_are_callers_transactions(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        engine = sqlalchemy_engine(pg_dsn)
        scoped = async_scoped_session(async_sessionmaker(engine), scopefunc=lambda: "one scope")
        try:
            async with store_on(pg_dsn, schema) as store:
                async with engine.connect() as conn:
                    await store.enqueue_tx(conn, "jobs", "through a connection")  # begins its transaction
                    await conn.rollback()
                async with engine.begin() as conn:
                    await store.enqueue_tx(conn, "jobs", "committed")
                await store.enqueue_tx(scoped, "jobs", "through a scoped session")
                await scoped.commit()
                await scoped.remove()
                payloads = []
                while (job := await store.queue("jobs").claim("w")) is not None:
                    payloads.append(job.payload)
                    await job.ack()
                assert payloads == ["committed", "through a scoped session"]
        finally:
            await engine.dispose()

    run(body)


def test_what_would_commit_a_job_on_its_own_is_refused_before_anything_is_written(pg_dsn: str, schema: str) -> None:
    async def body() -> None:
        async with store_on(pg_dsn, schema) as store:
            async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
                with pytest.raises(InvalidTransaction, match="autocommit"):
                    await store.enqueue_tx(conn, "jobs", 1)
            with psycopg.connect(pg_dsn) as sync_conn, pytest.raises(InvalidTransaction, match="AsyncConnection"):
                await store.enqueue_tx(sync_conn, "jobs", 1)  # the sync runtime's connection
            with pytest.raises(InvalidTransaction, match="AsyncConnection"):
                await store.enqueue_tx(object(), "jobs", 1)
            assert await store.queue("jobs").claim("w") is None

    run(body)


def test_each_store_is_independent_of_the_callers_schema_name(pg_dsn: str, schema: str) -> None:
    """A second store in another schema of the same database sees none of the first's jobs."""
    other = unique_schema("aio")

    async def body() -> None:
        async with store_on(pg_dsn, schema) as first, store_on(pg_dsn, other) as second:
            await first.queue("jobs").enqueue(uuid.uuid4().hex)
            assert await second.queue("jobs").claim("w") is None
            assert await first.queue("jobs").claim("w") is not None

    try:
        run(body)
    finally:
        drop_schema(pg_dsn, other)
