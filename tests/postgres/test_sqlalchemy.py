"""SQLAlchemy's transactions as the caller's: a ``Session`` or a ``Connection`` on psycopg (ADR 019).

Whatever the caller writes and the job it enqueues commit together or not at all. SQLAlchemy
is only recognised (never imported by alkstore); a connection that would commit the job on its
own, at once, is refused before anything is written.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy
from psycopg import sql
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, scoped_session, sessionmaker

import alkstore
from alkstore import InvalidOptions, InvalidTransaction, Store

from .conftest import table

pytestmark = pytest.mark.postgres


def sqlalchemy_url(dsn: str) -> str:
    scheme, _, rest = dsn.partition("://")
    assert scheme in ("postgresql", "postgres"), f"the test server's DSN is not a URL: {dsn}"
    return f"postgresql+psycopg://{rest}"


@pytest.fixture(scope="module")
def engine(pg_dsn: str) -> Iterator[Engine]:
    """A SQLAlchemy engine on the psycopg dialect, at most two connections."""
    made = sqlalchemy.create_engine(sqlalchemy_url(pg_dsn), pool_size=2, max_overflow=0)
    yield made
    made.dispose()


@pytest.fixture
def orders(db: psycopg.Connection[Any], pg_module_schema: str, store: Store) -> Iterator[str]:
    """A table of the caller's own, beside the store's, as ``schema.table`` text."""
    name = f"orders_{uuid.uuid4().hex[:8]}"
    db.execute(sql.SQL("CREATE TABLE {} (id integer PRIMARY KEY)").format(table(pg_module_schema, name)))
    yield table(pg_module_schema, name).as_string(db)
    db.execute(sql.SQL("DROP TABLE {}").format(table(pg_module_schema, name)))


def rows(db: psycopg.Connection[Any], qualified: str) -> list[int]:
    return [int(row[0]) for row in db.execute(sql.SQL("SELECT id FROM {} ORDER BY id").format(sql.SQL(qualified)))]


def write_order(session_or_connection: Session | sqlalchemy.Connection, qualified: str, order: int) -> None:
    session_or_connection.execute(sqlalchemy.text(f"INSERT INTO {qualified} (id) VALUES (:id)"), {"id": order})


def published(store: Store, queue: str) -> list[Any]:
    payloads = []
    while (job := store.queue(queue).claim("check")) is not None:
        payloads.append(job.payload)
        job.ack()
    return payloads


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- Session --------------------------------------------------------------------------------


def test_a_session_commit_publishes_the_job_with_the_callers_writes(
    store: Store, engine: Engine, orders: str, db: psycopg.Connection[Any]
) -> None:
    queue = unique("session-commit")
    with Session(engine) as session:
        write_order(session, orders, 1)
        store.enqueue_tx(session, queue, {"order": 1})
        assert published(store, queue) == []  # not before the commit
        session.commit()
    assert published(store, queue) == [{"order": 1}]
    assert rows(db, orders) == [1]


def test_a_session_rollback_leaves_neither_the_job_nor_the_writes(
    store: Store, engine: Engine, orders: str, db: psycopg.Connection[Any]
) -> None:
    queue = unique("session-rollback")
    with Session(engine) as session:
        write_order(session, orders, 2)
        store.outbox_enqueue_tx(session, queue, {"order": 2})
        session.rollback()
    assert store.outbox(queue).run_once("courier", lambda payload, job: None) is False
    assert rows(db, orders) == []


def test_a_session_that_has_not_begun_is_begun_so_its_commit_is_the_one_that_publishes(
    store: Store, engine: Engine
) -> None:
    queue = unique("session-fresh")
    with Session(engine) as session:
        assert not session.in_transaction()
        store.enqueue_tx(session, queue, "first thing")
        assert session.in_transaction()
        session.rollback()
    assert published(store, queue) == []
    with Session(engine) as session, session.begin():
        store.enqueue_tx(session, queue, "committed by the block")
    assert published(store, queue) == ["committed by the block"]


# -- Connection -----------------------------------------------------------------------------


def test_a_connection_commit_publishes_the_job_with_the_callers_writes(
    store: Store, engine: Engine, orders: str, db: psycopg.Connection[Any]
) -> None:
    queue = unique("connection-commit")
    with engine.connect() as connection:
        write_order(connection, orders, 3)
        store.enqueue_tx(connection, queue, {"order": 3})
        assert published(store, queue) == []
        connection.commit()
    with engine.begin() as connection:  # the transaction of a block
        store.outbox_enqueue_tx(connection, queue, {"order": 4})
    assert published(store, queue) == [{"order": 3}]
    delivered: list[Any] = []
    assert store.outbox(queue).run_once("courier", lambda payload, job: delivered.append(payload))
    assert delivered == [{"order": 4}]
    assert rows(db, orders) == [3]


def test_a_connection_rollback_leaves_neither_the_job_nor_the_writes(
    store: Store, engine: Engine, orders: str, db: psycopg.Connection[Any]
) -> None:
    queue = unique("connection-rollback")
    with engine.connect() as connection:
        write_order(connection, orders, 5)
        store.enqueue_tx(connection, queue, {"order": 5})
        connection.rollback()
    with engine.connect() as connection:
        store.enqueue_tx(connection, queue, "never committed")  # closed without a commit: rolled back
    assert published(store, queue) == []
    assert rows(db, orders) == []


def test_a_connection_that_has_not_begun_is_begun(store: Store, engine: Engine) -> None:
    queue = unique("connection-fresh")
    with engine.connect() as connection:
        assert not connection.in_transaction()
        store.enqueue_tx(connection, queue, "begun for me")
        assert connection.in_transaction()
        connection.commit()
    assert published(store, queue) == ["begun for me"]


# -- refused --------------------------------------------------------------------------------


def test_an_autocommit_sqlalchemy_connection_is_refused_before_anything_is_written(
    store: Store, engine: Engine
) -> None:
    queue = unique("autocommit")
    with (
        engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection,
        pytest.raises(InvalidTransaction, match="autocommit"),
    ):
        store.enqueue_tx(connection, queue, "would commit alone")
    assert published(store, queue) == []


def test_an_autocommit_psycopg_connection_is_refused_outside_a_transaction_and_taken_inside_one(
    store: Store, pg_dsn: str
) -> None:
    queue = unique("autocommit-psycopg")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(InvalidTransaction, match="autocommit"):
            store.enqueue_tx(conn, queue, "would commit alone")
        with conn.transaction() as tx:
            store.enqueue_tx(conn, queue, "rolled back")
            raise_rollback(tx)
        with conn.transaction():
            store.enqueue_tx(conn, queue, "committed")
    assert published(store, queue) == ["committed"]


def raise_rollback(tx: psycopg.Transaction) -> None:
    raise psycopg.Rollback(tx)


def test_a_closed_connection_is_refused(store: Store, pg_dsn: str, engine: Engine) -> None:
    conn = psycopg.connect(pg_dsn)
    conn.close()
    with pytest.raises(InvalidTransaction, match="closed"):
        store.enqueue_tx(conn, "q", 1)
    connection = engine.connect()
    connection.close()
    with pytest.raises(InvalidTransaction, match="closed"):
        store.enqueue_tx(connection, "q", 1)


def test_a_session_on_another_driver_is_refused_naming_the_psycopg_dialect(store: Store) -> None:
    other = sqlalchemy.create_engine("sqlite://")
    try:
        with Session(other) as session, pytest.raises(InvalidTransaction, match=r"postgresql\+psycopg://"):
            store.enqueue_tx(session, "q", 1)
    finally:
        other.dispose()


def test_a_scoped_session_is_its_current_session(store: Store, engine: Engine) -> None:
    queue = unique("scoped")
    scoped = scoped_session(sessionmaker(engine))
    try:
        store.enqueue_tx(scoped, queue, "scoped")
        scoped.commit()
    finally:
        scoped.remove()
    assert published(store, queue) == ["scoped"]


def test_a_sqlalchemy_object_that_holds_no_transaction_is_refused(store: Store, engine: Engine) -> None:
    with pytest.raises(InvalidTransaction, match="Engine"):
        store.enqueue_tx(engine, "q", 1)


# -- URLs -----------------------------------------------------------------------------------


def test_a_postgresql_psycopg_url_opens_a_store(pg_dsn: str, pg_module_schema: str) -> None:
    with alkstore.open(sqlalchemy_url(pg_dsn), schema=pg_module_schema, max_size=1) as store:
        queue = unique("sqlalchemy-url")
        job_id = store.queue(queue).enqueue("via postgresql+psycopg")
        assert store.get_job(job_id) is not None
        assert published(store, queue) == ["via postgresql+psycopg"]


@pytest.mark.parametrize("scheme", ["postgresql+psycopg2", "postgresql+asyncpg", "mysql+psycopg"])
def test_another_driver_in_the_url_is_refused_before_connecting(scheme: str) -> None:
    with pytest.raises(InvalidOptions):
        alkstore.open(f"{scheme}://nobody@127.0.0.1:1/nothing")


def test_alkstore_never_imports_sqlalchemy_when_the_caller_does_not(pg_dsn: str, pg_module_schema: str) -> None:
    script = (
        "import sys, psycopg, alkstore\n"
        f"store = alkstore.open({pg_dsn!r}, schema={pg_module_schema!r}, max_size=1)\n"
        f"with psycopg.connect({pg_dsn!r}) as conn:\n"
        "    store.enqueue_tx(conn, 'no-sqlalchemy', 1)\n"
        "store.close()\n"
        "assert 'sqlalchemy' not in sys.modules, sorted(m for m in sys.modules if 'sqlalchemy' in m)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
