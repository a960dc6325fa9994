"""Through PgBouncer, in transaction and in session pooling (ADR 019).

Transaction pooling hands each transaction whichever server connection is free, so a store
behind it must not prepare statements (``prepare_threshold=None``) and cannot LISTEN there:
parked claims listen through ``listen_url`` (direct, or session-pooled), and a store that
listens through the transaction pooler finds out, warns once and polls. Session pooling pins
each client to a server connection: sized for the store's bound (``max_size +
listen_max_size``), parked claims wake by notification and ``close()`` waits for nothing.
Each module run starts its own PgBouncers (see ``_pgbouncer``) and stops them afterwards.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import DatabaseError, InvalidOptions, ManualClock, PoolerMisconfigured, Store
from alkstore.adapters.postgres import _errors
from tests._claimer import Claimer
from tests.support import must_claim

from ._pgbouncer import PgBouncer, running_pgbouncer
from .conftest import PATIENCE, OpenStore, engine_of, wait_until

pytestmark = pytest.mark.postgres

#: Server connections of the transaction pooler: fewer than the store's pool, so clients share them.
TRANSACTION_POOL = 2
#: The store's pools behind the session pooler, and the pooler's size: exactly the store's bound.
SESSION_MAX_SIZE = 2
SESSION_LISTEN_MAX_SIZE = 2
SESSION_POOL = SESSION_MAX_SIZE + SESSION_LISTEN_MAX_SIZE


@pytest.fixture(scope="module")
def transaction_pooler(pg_dsn: str) -> Iterator[PgBouncer]:
    with running_pgbouncer(pg_dsn, "transaction", TRANSACTION_POOL) as bouncer:
        yield bouncer


@pytest.fixture(scope="module")
def session_pooler(pg_dsn: str) -> Iterator[PgBouncer]:
    with running_pgbouncer(pg_dsn, "session", SESSION_POOL) as bouncer:
        yield bouncer


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def through_transaction_pooler(open_store: OpenStore, pooler: PgBouncer, pg_dsn: str, **options: Any) -> Store:
    """A store whose calls go through the transaction pooler and whose parked claims listen directly."""
    options.setdefault("listen_url", pg_dsn)
    return open_store(url=pooler.url(), prepare_threshold=None, max_size=4, **options)


@pytest.fixture
def listening_pooled(
    open_store: OpenStore, transaction_pooler: PgBouncer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> Store:
    """A store wholly behind the transaction pooler, listening through it too (which cannot work)."""
    caplog.set_level(logging.WARNING, logger="alkstore.postgres")
    return through_transaction_pooler(open_store, transaction_pooler, "", clock=clock, listen_url=None)


def through_session_pooler(open_store: OpenStore, pooler: PgBouncer, **options: Any) -> Store:
    """A store wholly behind the session pooler, its bound the pooler's size (unless ``options`` say otherwise)."""
    options.setdefault("max_size", SESSION_MAX_SIZE)
    options.setdefault("listen_max_size", SESSION_LISTEN_MAX_SIZE)
    return open_store(url=pooler.url(), **options)


def drain(store: Store, queue: str, threads: int) -> tuple[list[int], list[BaseException]]:
    """Claim and ack ``queue`` from ``threads`` threads until it is empty (some one at a time, some in batches)."""
    claimed: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(batch: int) -> None:
        handle = store.queue(queue)
        try:
            while True:
                if batch == 1:
                    job = handle.claim(f"worker-{batch}")
                    jobs = [] if job is None else [job]
                else:
                    jobs = handle.claim_many(f"worker-{batch}", batch)
                if not jobs:
                    return
                with lock:
                    claimed.extend(job.id for job in jobs)
                if len(jobs) == 1:
                    jobs[0].ack()
                else:
                    assert store.ack_many(jobs) == []
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(1 + n % 3,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(PATIENCE * 2)
    assert not any(worker.is_alive() for worker in workers), "a drainer is stuck"
    return claimed, errors


# -- the options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prepare_threshold": "never"}, "prepare_threshold must be an int"),
        ({"prepare_threshold": -1}, "prepare_threshold must be at least 0"),
        ({"prepare_threshold": True}, "prepare_threshold must be an int"),
        ({"listen_url": "mysql://somewhere/db"}, "postgresql:// URLs"),
        ({"listen_url": "postgresql+asyncpg://somewhere/db"}, "runs on psycopg"),
        ({"listen_url": 5432}, "must be a str"),
        ({"listen_max_size": 0}, "listen_max_size must be at least 1"),
    ],
)
def test_bad_pooler_options_are_refused_before_connecting(options: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptions, match=message):
        alkstore.open("postgresql://nobody@127.0.0.1:1/nothing", **options)


def test_prepare_threshold_and_listen_url_reach_the_connections_they_are_for(
    open_store: OpenStore, transaction_pooler: PgBouncer, pg_dsn: str, clock: ManualClock
) -> None:
    store = through_transaction_pooler(open_store, transaction_pooler, pg_dsn, clock=clock)
    engine = engine_of(store)
    with engine.pool.connection() as conn:
        assert conn.prepare_threshold is None
        assert conn.info.port == transaction_pooler.port
    listening = engine.waiter_pool.getconn()
    assert listening is not None
    try:
        assert listening.prepare_threshold is None
        assert listening.info.port != transaction_pooler.port
    finally:
        engine.waiter_pool.putconn(listening)


# -- the pooler really pools ------------------------------------------------------------------


def test_the_transaction_pooler_shares_its_server_connections_between_clients(transaction_pooler: PgBouncer) -> None:
    clients = [psycopg.connect(transaction_pooler.url(), autocommit=True) for _ in range(TRANSACTION_POOL + 1)]
    try:
        backends = set()
        for client in clients:
            row = client.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            backends.add(row[0])
        assert len(backends) <= TRANSACTION_POOL < len(clients)
    finally:
        for client in clients:
            client.close()


# -- draining exactly once --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["transaction", "session"])
def test_threads_draining_through_the_pooler_claim_every_job_exactly_once(
    mode: str,
    open_store: OpenStore,
    pg_dsn: str,
    request: pytest.FixtureRequest,
) -> None:
    if mode == "transaction":
        store = through_transaction_pooler(open_store, request.getfixturevalue("transaction_pooler"), pg_dsn)
    else:
        store = through_session_pooler(open_store, request.getfixturevalue("session_pooler"))
    queue = unique(f"drain-{mode}")
    handle = store.queue(queue)
    enqueued = {handle.enqueue({"n": n}) for n in range(300)}  # the same statements, again and again

    claimed, errors = drain(store, queue, threads=4)

    assert errors == []
    assert sorted(claimed) == sorted(enqueued)  # every job, none twice
    assert [job_id for job_id in enqueued if store.get_job(job_id) is not None] == []  # every one acked


def test_every_finishing_call_works_through_the_transaction_pooler(
    open_store: OpenStore, transaction_pooler: PgBouncer, pg_dsn: str
) -> None:
    store = through_transaction_pooler(open_store, transaction_pooler, pg_dsn)
    queue = store.queue(unique("finishing"))
    for round_ in range(10):  # past psycopg's default threshold of 5 executions per statement
        ids = [queue.enqueue(n) for n in range(3)]
        first, second, third = queue.claim_many("w", 3)
        first.heartbeat()
        first.ack()
        second.retry("again", delay=0)
        third.fail("dead")
        assert store.requeue_dead(third.id)
        again = queue.claim_many("w", 3)
        assert sorted(job.id for job in again) == sorted(ids[1:]), f"round {round_}"
        assert store.ack_many(again) == []
        with store.transaction() as tx:
            store.enqueue_tx(tx, queue.name, "in tx")
        job = must_claim(queue)
        job.ack()


# -- waking through a transaction pooler -----------------------------------------------------


def test_parked_claims_behind_a_transaction_pooler_wake_through_listen_url(
    open_store: OpenStore, transaction_pooler: PgBouncer, pg_dsn: str, clock: ManualClock
) -> None:
    store = through_transaction_pooler(open_store, transaction_pooler, pg_dsn, clock=clock)
    name = unique("wake-direct")
    for _ in range(3):
        claimer = Claimer(store, name)  # no polling: only a notification can wake it
        job_id = store.queue(name).enqueue("wake")
        assert claimer.acked().id == job_id
    assert engine_of(store).listening_works is True


@pytest.mark.slow
def test_listening_through_a_transaction_pooler_is_detected_warned_once_and_parked_claims_poll(
    listening_pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    store = listening_pooled
    engine = engine_of(store)
    name = unique("wake-pooled")

    claimer = Claimer(store, name, poll_interval=0.2)
    wait_until(lambda: engine.listening_works is False, "the probe to find that notifications never arrive")
    job_id = store.queue(name).enqueue("found by polling")
    assert claimer.acked().id == job_id

    lent = engine.waiter_pool.get_stats().get("requests_num", 0)
    claimer = Claimer(store, name, poll_interval=0.2)  # polls at once, without a listening connection
    job_id = store.queue(name).enqueue("found by polling again")
    assert claimer.acked().id == job_id
    assert engine.waiter_pool.get_stats().get("requests_num", 0) == lent

    warnings = [record for record in caplog.records if "notifications do not reach" in record.getMessage()]
    assert len(warnings) == 1
    assert "listen_url" in warnings[0].getMessage()


@pytest.mark.slow
def test_a_claim_that_returns_before_the_probe_is_due_still_leads_to_the_warning(
    listening_pooled: Store, caplog: pytest.LogCaptureFixture
) -> None:
    name = unique("wake-pooled-short")
    claimer = Claimer(listening_pooled, name, poll_interval=0.2)
    job_id = listening_pooled.queue(name).enqueue("found at once")  # the claim returns long before the probe is due
    assert claimer.acked().id == job_id
    engine = engine_of(listening_pooled)
    wait_until(lambda: engine.listening_works is False, "the probe, left to finish on its own, to be due")

    def warnings() -> int:
        return len([record for record in caplog.records if "notifications do not reach" in record.getMessage()])

    wait_until(lambda: warnings() > 0, "the warning, logged just after the flag is set")
    assert warnings() == 1


# -- session pooling: no starvation ------------------------------------------------------------


def test_parked_claims_behind_a_session_pooler_sized_for_the_store_wake_by_notification_round_after_round(
    open_store: OpenStore, session_pooler: PgBouncer, clock: ManualClock
) -> None:
    store = through_session_pooler(open_store, session_pooler, clock=clock)
    engine = engine_of(store)
    queues = [unique("session-wake") for _ in range(SESSION_LISTEN_MAX_SIZE)]
    for round_ in range(5):
        claimers = [Claimer(store, name) for name in queues]  # every listening connection lent out
        for name in queues:
            store.queue(name).enqueue(round_)
        for claimer in claimers:
            assert claimer.acked().payload == round_
        stats = engine.waiter_pool.get_stats()
        assert stats["pool_available"] == stats["pool_size"], "a listening connection was not given back"
    assert engine.listening_works is True


def test_close_behind_a_session_pooler_returns_without_waiting_for_a_pool_worker(
    open_store: OpenStore, session_pooler: PgBouncer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="psycopg.pool")
    store = through_session_pooler(open_store, session_pooler, clock=clock)
    name = unique("session-close")
    parked = [Claimer(store, name) for _ in range(SESSION_LISTEN_MAX_SIZE)]
    job = store.queue(name).enqueue("one of them")
    assert job

    closer = threading.Thread(target=store.close, daemon=True)
    closer.start()
    closer.join(PATIENCE)

    assert not closer.is_alive(), "close() did not return"
    for claimer in parked:
        assert claimer.finished(), "a parked claim outlived close()"
    assert [record.getMessage() for record in caplog.records if "couldn't stop" in record.getMessage()] == []


def test_behind_a_session_pooler_too_small_for_the_store_listening_claims_wake_the_rest_poll_and_close_returns(
    open_store: OpenStore, session_pooler: PgBouncer, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # The main pool holds two of the pooler's four server connections; the listening pool may want four.
    store = through_session_pooler(open_store, session_pooler, clock=clock, min_size=2, listen_max_size=4)
    engine = engine_of(store)
    wait_until(lambda: engine.pool.get_stats()["pool_available"] == 2, "the main pool to fill")
    name = unique("session-small")
    listening = [Claimer(store, name) for _ in range(SESSION_POOL - SESSION_MAX_SIZE)]  # no polling
    polling = [Claimer(store, name, poll_interval=0.2) for _ in range(2)]  # no server left for these

    enqueued = {store.queue(name).enqueue(n) for n in range(len(listening) + len(polling))}

    claimed = set()
    for claimer in listening + polling:
        job = claimer.returned()
        assert job is not None
        claimed.add(job.id)
        job.ack()
    assert claimed == enqueued
    unserved = [record for record in caplog.records if "was not served within" in record.getMessage()]
    assert len(unserved) == 1
    assert "max_size + listen_max_size" in unserved[0].getMessage()

    closer = threading.Thread(target=store.close, daemon=True)
    closer.start()
    closer.join(PATIENCE)
    assert not closer.is_alive(), "close() did not return"
    assert [record.getMessage() for record in caplog.records if record.name.startswith("psycopg")] == []


# -- a transaction pooler without the options ------------------------------------------------


def test_a_transaction_pooler_without_its_options_raises_pooler_misconfigured_naming_the_fix_logged_once(
    open_store: OpenStore,
    transaction_pooler: PgBouncer,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_errors, "_told", False)  # once per process: this test's process
    store = open_store(url=transaction_pooler.url(), max_size=4)  # psycopg prepares after 5 executions
    queue = store.queue(unique("prepared"))
    caplog.set_level(logging.ERROR, "alkstore.postgres")
    raised: list[BaseException] = []

    def call(_: int) -> None:
        try:
            queue.enqueue(1)
        except DatabaseError as exc:
            raised.append(exc)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(call, range(200)))
    assert raised, "no call met another client's server connection"
    assert {type(exc) for exc in raised} == {PoolerMisconfigured}
    message = str(raised[0])
    assert "prepare_threshold=None" in message
    assert "listen_url" in message
    assert "_pg3_" in message or "bind message" in message
    told = [record for record in caplog.records if "prepare_threshold=None" in record.getMessage()]
    assert len(told) == 1
