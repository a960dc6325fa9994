"""Driver errors, translated once (ADR 014): what a loop may retry is ``DatabaseUnavailable``, the rest is not."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg_pool import PoolTimeout

from alkstore import DatabaseError, DatabaseUnavailable, PoolerMisconfigured
from alkstore.adapters.postgres._errors import TRANSIENT_SQLSTATES, is_transient, translated

from .conftest import OpenStore, engine_of, table, wait_until

pytestmark = pytest.mark.postgres


def test_a_pool_timeout_is_transient(open_store: OpenStore) -> None:
    store = open_store(min_size=1, max_size=1, pool_timeout=0.2)
    with store.transaction(), pytest.raises(DatabaseUnavailable) as raised:
        store.queue("q").enqueue(1)
    assert isinstance(raised.value.__cause__, PoolTimeout)


def test_a_backend_killed_mid_call_is_transient_and_the_next_call_succeeds(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any]
) -> None:
    app = f"alkstore-killed-{uuid.uuid4().hex[:8]}"
    store = open_store(url=f"{pg_dsn}{'&' if '?' in pg_dsn else '?'}application_name={app}", min_size=1, max_size=1)
    store.queue("q").enqueue("warm")
    blocker = psycopg.connect(pg_dsn, autocommit=True)
    try:
        # Hold a lock the store's next statement waits on, then kill the store's backend under it.
        blocker.execute("BEGIN")
        lock = sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table(engine_of(store).schema, "jobs"))
        blocker.execute(lock)
        killer = psycopg.connect(pg_dsn, autocommit=True)

        def kill_when_waiting() -> None:
            wait_until(
                lambda: bool(
                    killer.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                        [app],
                    ).fetchone()
                ),
                "the store's statement to wait on the lock",
            )
            killer.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", [app])

        thread = threading.Thread(target=kill_when_waiting, daemon=True)
        thread.start()
        with pytest.raises(DatabaseUnavailable) as raised:
            store.queue("q").enqueue("lost with its connection")
        thread.join(30)
        killer.close()
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert isinstance(raised.value.__cause__, psycopg.OperationalError)
    assert isinstance(store.queue("q").enqueue("after"), int)  # the pool replaced the connection


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (pg_errors.SerializationFailure("conflict"), True),
        (pg_errors.DeadlockDetected("deadlock"), True),
        (pg_errors.AdminShutdown("shutting down"), True),
        (pg_errors.TooManyConnections("too many"), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (pg_errors.UndefinedTable("no table"), False),
        (pg_errors.InsufficientPrivilege("no"), False),
        (pg_errors.UniqueViolation("dup"), False),
        (pg_errors.InFailedSqlTransaction("aborted"), False),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else str(value),
)
def test_the_transient_class_is_the_errors_a_retry_can_outlive(error: psycopg.Error, transient: bool) -> None:
    assert is_transient(error) is transient
    assert isinstance(translated(error), DatabaseUnavailable) is transient
    assert isinstance(translated(error), DatabaseError)


def test_every_transient_sqlstate_names_a_psycopg_error_class() -> None:
    for sqlstate in TRANSIENT_SQLSTATES:
        assert pg_errors.lookup(sqlstate).sqlstate == sqlstate


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.InvalidSqlStatementName('prepared statement "_pg3_0" does not exist'),
        pg_errors.DuplicatePreparedStatement('prepared statement "_pg3_4" already exists'),
        pg_errors.ProtocolViolation('bind message supplies 8 parameters, but prepared statement "_pg3_1" requires 2'),
    ],
)
def test_what_only_a_transaction_pooler_losing_prepared_statements_causes_is_pooler_misconfigured(
    error: psycopg.Error,
) -> None:
    translation = translated(error)
    assert type(translation) is PoolerMisconfigured
    assert "prepare_threshold=None" in str(translation)
    assert "listen_url" in str(translation)
    assert str(error) in str(translation)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (pg_errors.InvalidSqlStatementName('prepared statement "mine" does not exist'), DatabaseError),
        (pg_errors.ProtocolViolation("server closed the session"), DatabaseUnavailable),
    ],
)
def test_the_same_sqlstates_without_psycopgs_statement_names_keep_their_translation(
    error: psycopg.Error, kind: type[DatabaseError]
) -> None:
    assert type(translated(error)) is kind
