"""Queues on PostgreSQL: concurrency, fencing across workers, caller transactions, waking, failures.

The behaviour shared with the memory engine is the contract suite's; these tests cover what
only a real server shows: several threads and processes, the caller's own psycopg
transaction, LISTEN/NOTIFY, dropped connections and driver errors.
"""

from __future__ import annotations

import multiprocessing
import re
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import PoolTimeout

import alkstore
from alkstore import (
    DatabaseError,
    EnqueueOpts,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    InvalidSpec,
    JobState,
    LeaseLost,
    ManualClock,
    ReservedName,
    Store,
    StoreClosed,
)
from alkstore.adapters.postgres import _waiting
from alkstore.engine import JOB_EXPIRED_ERROR, LEASE_EXPIRED_ERROR, ClaimRequest, Waiter
from tests._claimer import Claimer
from tests.support import must_claim, must_get

from . import _procs
from .conftest import PATIENCE, OpenStore, count, engine_of, table, wait_until

pytestmark = pytest.mark.postgres


def unique(prefix: str) -> str:
    """A queue name no other test of the module uses (the module shares one schema)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def with_app_name(dsn: str, name: str) -> str:
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


def terminate(db: psycopg.Connection[Any], app_name: str, query_like: str = "%") -> int:
    """Terminate (and wait for) the backends of ``app_name`` whose last query matches; return how many."""
    rows = db.execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
        " WHERE application_name = %s AND query LIKE %s AND pid <> pg_backend_pid()",
        [app_name, query_like],
    ).fetchall()
    assert all(ok for (ok,) in rows)
    return len(rows)


# -- many workers ---------------------------------------------------------------------------


def test_worker_processes_draining_a_queue_claim_every_job_exactly_once(
    open_store: OpenStore, pg_dsn: str, pg_module_schema: str
) -> None:
    name = unique("drain-processes")
    queue = open_store().queue(name)  # the system clock, like the worker processes
    enqueued = {queue.enqueue({"n": n}) for n in range(150)}
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(3)
    results = context.Queue()
    processes = [
        context.Process(target=_procs.drain, args=(pg_dsn, pg_module_schema, name, barrier, results)) for _ in range(3)
    ]
    for process in processes:
        process.start()
    claimed = [job_id for _ in processes for job_id in results.get(timeout=PATIENCE * 2)]
    for process in processes:
        process.join(PATIENCE)
    assert [process.exitcode for process in processes] == [0, 0, 0]
    assert sorted(claimed) == sorted(enqueued)


def test_a_worker_whose_lease_lapsed_loses_its_job_and_its_late_calls_change_nothing(
    open_store: OpenStore, clock: ManualClock
) -> None:
    slow, fast = open_store(clock=clock), open_store(clock=clock)
    name = unique("lapse")
    job_id = slow.queue(name).enqueue("work")
    stale = must_claim(slow.queue(name), "slow-worker")
    clock.advance(slow.queue(name).defaults().visibility_timeout)
    fresh = must_claim(fast.queue(name), "fast-worker")
    assert (fresh.id, fresh.attempts, fresh.worker_id) == (job_id, 2, "fast-worker")
    before = fast.get_job(job_id)

    with pytest.raises(LeaseLost):
        stale.ack()
    with pytest.raises(LeaseLost):
        stale.retry("late", delay=0)
    with pytest.raises(LeaseLost):
        stale.fail("late")
    with pytest.raises(LeaseLost):
        stale.heartbeat()

    assert fast.get_job(job_id) == before
    fresh.ack()
    assert fast.get_job(job_id) is None


def test_a_lapsed_last_attempt_goes_to_the_dead_letter_table_with_every_field(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    queue = store.queue(unique("lapse-dead"))
    opts = EnqueueOpts(priority=7, max_attempts=1, expires=timedelta(days=1))
    job_id = queue.enqueue(b"\x00raw", opts)
    must_claim(queue)
    clock.advance(queue.defaults().visibility_timeout)
    assert queue.claim("w2") is None
    dead = must_get(store, job_id)
    assert (dead.state, dead.attempts, dead.last_error, dead.died_at) == (
        JobState.DEAD,
        1,
        LEASE_EXPIRED_ERROR,
        clock.now(),
    )
    row = db.execute(
        sql.SQL(
            "SELECT queue, payload, priority, attempts, max_attempts, last_error, died_at FROM {} WHERE id = %s"
        ).format(table(pg_module_schema, "dead_jobs")),
        [job_id],
    ).fetchone()
    assert row == (queue.name, store.codec.encode(b"\x00raw"), 7, 1, 1, LEASE_EXPIRED_ERROR.encode(), clock.now())
    live = db.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE id = %s").format(table(pg_module_schema, "jobs")), [job_id]
    )
    assert live.fetchone() == (0,)
    assert store.requeue_dead(job_id)
    requeued = must_get(store, job_id)
    assert (requeued.state, requeued.attempts, requeued.last_error) == (JobState.PENDING, 0, LEASE_EXPIRED_ERROR)


def test_an_expired_job_is_buried_by_the_next_claim_not_claimed(store: Store, clock: ManualClock) -> None:
    queue = store.queue(unique("expiry"))
    doomed = queue.enqueue("late", EnqueueOpts(delay=10, expires=20))
    clock.advance(20)
    assert queue.claim("w") is None
    dead = must_get(store, doomed)
    assert (dead.state, dead.last_error, dead.attempts) == (JobState.DEAD, JOB_EXPIRED_ERROR, 0)


def test_error_strings_round_trip_exactly_whatever_they_contain(store: Store) -> None:
    queue = store.queue(unique("errors"))
    job_id = queue.enqueue(1, EnqueueOpts(max_attempts=2))
    text = "NUL \x00, surrogate \ud800, quote ' \" and é漢🙂"
    job = must_claim(queue)
    job.retry(text, delay=0)
    again = must_claim(queue)
    assert again.last_error == text
    again.fail(text + "!")
    dead = must_get(store, job_id)
    assert dead.last_error == text + "!"


# -- the caller's transaction ---------------------------------------------------------------


def test_enqueue_tx_is_invisible_until_the_callers_commit(store: Store, pg_dsn: str) -> None:
    name = unique("tx-commit")
    with psycopg.connect(pg_dsn) as conn:
        job_id = store.enqueue_tx(conn, name, {"order": 1})
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert store.get_job(job_id) is None
        assert store.queue(name).claim("w") is None
        conn.commit()
    job = must_claim(store.queue(name))
    assert (job.id, job.payload) == (job_id, {"order": 1})
    job.ack()


def test_enqueue_tx_leaves_nothing_when_the_caller_rolls_back(
    store: Store, pg_dsn: str, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    name = unique("tx-rollback")
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SELECT 1")
        job_id = store.enqueue_tx(conn, name, "never")
        outbox_id = store.outbox_enqueue_tx(conn, name, "never either")
        conn.rollback()
    assert store.get_job(job_id) is None
    assert store.get_job(outbox_id) is None
    assert store.queue(name).claim("w") is None
    assert store.outbox(name).run_once("w", lambda payload, job: None) is False
    rows = db.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE id IN (%s, %s)").format(table(pg_module_schema, "jobs")),
        [job_id, outbox_id],
    )
    assert rows.fetchone() == (0,)
    assert store.queue(name).enqueue("next") > outbox_id


def test_the_notify_of_enqueue_tx_is_delivered_at_commit_only(
    store: Store, pg_dsn: str, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    name = unique("tx-notify")
    channel_query = sql.SQL("SELECT {}.channel(%s, %s)").format(sql.Identifier(pg_module_schema))
    row = db.execute(channel_query, [pg_module_schema, name]).fetchone()
    assert row is not None
    channel = row[0]
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        with psycopg.connect(pg_dsn) as conn:
            store.enqueue_tx(conn, name, "rolled back")
            conn.rollback()
            store.enqueue_tx(conn, name, "committed")
            assert list(listener.notifies(timeout=0.2)) == [], "nothing may be announced before the commit"
            conn.commit()
        got = list(listener.notifies(timeout=PATIENCE, stop_after=1))
        assert [notify.channel for notify in got] == [channel]
        assert list(listener.notifies(timeout=0.2)) == [], "the rolled-back enqueue announced nothing"


def test_transaction_commits_on_exit_rolls_back_on_error_and_passes_the_callers_errors_through(
    store: Store,
) -> None:
    name = unique("store-tx")
    with store.transaction() as conn:
        assert isinstance(conn, psycopg.Connection)
        kept = store.enqueue_tx(conn, name, "kept")
    dropped: list[int] = []

    def abandon() -> None:
        with store.transaction() as conn:
            dropped.append(store.enqueue_tx(conn, name, "dropped"))
            raise RuntimeError("abandon")

    def fail_in_sql() -> None:
        with store.transaction() as conn:
            dropped.append(store.enqueue_tx(conn, name, "dropped too"))
            conn.execute("SELECT * FROM no_such_table_anywhere")

    with pytest.raises(RuntimeError, match="abandon"):
        abandon()
    with pytest.raises(psycopg.errors.UndefinedTable):
        fail_in_sql()
    assert store.get_job(kept) is not None
    assert [store.get_job(job_id) for job_id in dropped] == [None, None]
    job = must_claim(store.queue(name))
    assert job.id == kept
    job.ack()
    assert store.queue(name).claim("w") is None


@pytest.mark.parametrize("tx", [None, object(), "conn", b"conn"])
def test_enqueue_tx_wants_a_psycopg_connection(store: Store, tx: object) -> None:
    with pytest.raises(TypeError, match=r"psycopg\.Connection"):
        store.enqueue_tx(tx, "q", 1)


def test_enqueue_tx_refuses_a_cursor_and_a_memory_transaction(store: Store, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn, conn.cursor() as cursor, pytest.raises(TypeError):
        store.enqueue_tx(cursor, "q", 1)
    with alkstore.open("memory://") as memory, memory.transaction() as foreign, pytest.raises(TypeError):
        store.enqueue_tx(foreign, "q", 1)


# -- waking ---------------------------------------------------------------------------------


def test_a_parked_claim_is_woken_by_enqueue_tx_at_commit(store: Store, pg_dsn: str) -> None:
    name = unique("wake-tx")
    claimer = Claimer(store, name)
    with psycopg.connect(pg_dsn) as conn:
        job_id = store.enqueue_tx(conn, name, "at commit")
    assert claimer.acked().id == job_id


def test_a_lost_notify_costs_one_poll_interval_not_the_wait(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    name = unique("lost-notify")
    claimer = Claimer(store, name, poll_interval=0.2)
    # A job that arrives without any NOTIFY (as if the notification were lost).
    inserted = db.execute(
        sql.SQL(
            "INSERT INTO {} (queue, payload, state, priority, run_at, max_attempts, enqueued_at)"
            " VALUES (%s, %s, 'pending', 0, %s, 3, %s) RETURNING id"
        ).format(table(pg_module_schema, "jobs")),
        [name, b'"silent"', clock.now(), clock.now()],
    ).fetchone()
    assert inserted is not None
    job = claimer.returned()
    assert job is not None
    assert (job.id, job.payload) == (inserted[0], "silent")
    job.ack()


ODD_QUEUE_NAMES = [
    "q" * 128,
    "é" * 128,
    "🙂" * 128,
    "Q",
    "q",
    'double"quote',
    "single'quote",
    "semi;colon -- dash",
    "名前 with spaces",
    "$1 %s {} \\",
]


def test_channel_names_are_short_safe_and_distinct_for_any_queue_name(
    store: Store, open_store: OpenStore, pg_schema: str, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    open_store(pg_schema)
    reserved = [store.outbox("o" * 128).queue, store.outbox("x").queue]
    names = ODD_QUEUE_NAMES + reserved
    here = sql.SQL("SELECT {}.channel(%s, %s)").format(sql.Identifier(pg_module_schema))
    there = sql.SQL("SELECT {}.channel(%s, %s)").format(sql.Identifier(pg_schema))
    channels = [db.execute(here, [pg_module_schema, name]).fetchone()[0] for name in names]  # type: ignore[index]
    elsewhere = [db.execute(there, [pg_schema, name]).fetchone()[0] for name in names]  # type: ignore[index]
    assert all(re.fullmatch(r"alkstore_[0-9a-f]{40}", channel) for channel in channels + elsewhere)
    assert len(set(channels + elsewhere)) == 2 * len(names), "queues and schemas never share a channel"


@pytest.mark.parametrize("name", [*ODD_QUEUE_NAMES, "outbox"])
def test_a_parked_claim_on_an_odd_queue_name_is_woken_by_its_enqueue(store: Store, name: str) -> None:
    if name == "outbox":
        outbox = store.outbox("o" * 128)
        name = outbox.queue
        engine = engine_of(store)
        with engine.waiter(name) as waiter:
            woken = threading.Event()
            thread = threading.Thread(target=_wait_then_set, args=(waiter, woken), daemon=True)
            thread.start()
            job_id = outbox.enqueue("message")
            assert woken.wait(PATIENCE), "the outbox's backing queue was not announced"
        delivered: list[Any] = []
        assert outbox.run_once("w", lambda payload, job: delivered.append((payload, job.id)))
        assert delivered == [("message", job_id)]
        return
    claimer = Claimer(store, name)
    job_id = store.queue(name).enqueue("odd")
    job = claimer.returned()
    assert job is not None
    assert (job.id, job.queue) == (job_id, name)
    job.ack()


def _wait_then_set(waiter: Waiter, woken: threading.Event) -> None:
    waiter.wait(3600)
    woken.set()


def test_a_waiter_sleeps_through_a_neighbours_enqueue_and_wakes_on_its_own(store: Store) -> None:
    name = unique("own-channel")
    with engine_of(store).waiter(name) as waiter:
        woken = threading.Event()
        thread = threading.Thread(target=_wait_then_set, args=(waiter, woken), daemon=True)
        thread.start()
        store.queue(name.upper()).enqueue("neighbour")
        store.queue(name + "x").enqueue("neighbour")
        assert not woken.wait(0.5), "woken by another queue's enqueue"
        store.queue(name).enqueue("mine")
        assert woken.wait(PATIENCE)


# -- bad input ------------------------------------------------------------------------------


def test_a_probe_that_arrived_while_its_waiter_was_busy_is_read_before_it_is_judged(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A worker opens its waiter once and parks on it only when idle: the probe's NOTIFY may sit
    # unread on the connection long past the probe's deadline. It still says LISTEN works.
    monkeypatch.setattr(_waiting, "PROBE_S", 0.2)
    engine = engine_of(store)
    before = engine.listening_works
    assert before is None, "a fresh store has no verdict yet"
    with engine.waiter("busy") as waiter:
        time.sleep(0.5)  # busy: not waiting, past the deadline
        waiter.wait(0.05)
    assert engine.listening_works is True
    assert not [record for record in caplog.records if "notifications do not reach" in record.getMessage()]


def test_a_probe_that_arrives_in_one_packet_with_a_queues_notification_is_heard(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Under a stream of enqueues the probe's NOTIFY shares a packet with the queue's: a waiter that
    # left at the queue's notification dropped the probe, and a worker judged a direct connection deaf.
    monkeypatch.setattr(_waiting, "PROBE_S", 0.5)
    engine = engine_of(store)
    listening = engine._listening
    send = listening._notify
    monkeypatch.setattr(listening, "_notify", lambda queues: send(["busy", *queues]))  # one statement, one packet
    with engine.waiter("busy") as waiter:
        waiter.wait(PATIENCE)  # woken by the queue's notification
        time.sleep(0.6)  # past the probe's deadline
        waiter.wait(0.05)
    assert engine.listening_works is True
    assert not [record for record in caplog.records if "notifications do not reach" in record.getMessage()]


def test_a_probe_that_missed_its_deadline_is_sent_again_and_parked_claims_listen_once_it_arrives(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A probe can miss its deadline on a loaded machine, or while the server restarts: the
    # verdict that notifications do not arrive is tried again, not kept for the process's life.
    monkeypatch.setattr(_waiting, "PROBE_S", 0.2)
    monkeypatch.setattr(_waiting, "REPROBE_S", 0.5)
    engine = engine_of(store)
    listening = engine._listening
    send = listening._notify
    monkeypatch.setattr(listening, "_notify", lambda queues: None)  # the first probe's NOTIFY is lost

    def verdict() -> bool | None:
        return engine.listening_works  # read afresh each time (a property mypy would narrow)

    with engine.waiter("lost") as waiter:
        waiter.wait(0.5)
    assert verdict() is False
    monkeypatch.setattr(listening, "_notify", send)
    with engine.waiter("soon") as waiter:  # before REPROBE_S: polls, no probe
        assert not waiter.hears
    time.sleep(0.6)
    with engine.waiter("later") as waiter:
        waiter.wait(0.5)
    assert verdict() is True
    with engine.waiter("hears") as waiter:
        assert waiter.hears
    said = [record.getMessage() for record in caplog.records if record.name == "alkstore.postgres"]
    assert sum("do not reach" in line for line in said) == 1, said
    assert sum(line.startswith("notifications reach") for line in said) == 1, said


def test_bad_input_raises_the_named_error_before_any_sql_and_leaves_the_database_untouched(
    store: Store, pg_dsn: str, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    tables = ("jobs", "dead_jobs", "locks", "schedules")
    before = {name: count(db, pg_module_schema, name) for name in tables}
    requests = engine_of(store).pool.get_stats().get("requests_num", 0)
    queue = store.queue("fine")
    with psycopg.connect(pg_dsn) as caller:
        cases: list[tuple[type[Exception], Any]] = [
            (InvalidName, lambda: store.queue("")),
            (InvalidName, lambda: store.queue(" padded")),
            (InvalidName, lambda: store.queue("line\nbreak")),
            (InvalidName, lambda: store.queue("x" * 129)),
            (ReservedName, lambda: store.queue("__alkstore_mine")),
            (InvalidPayload, lambda: queue.enqueue(object())),
            (InvalidPayload, lambda: queue.enqueue(float("nan"))),
            (InvalidOptions, lambda: queue.enqueue(1, EnqueueOpts(delay=-1))),
            (InvalidOptions, lambda: queue.enqueue(1, EnqueueOpts(max_attempts=0))),
            (InvalidOptions, lambda: queue.enqueue(1, EnqueueOpts(expires=-5))),
            (ReservedName, lambda: store.enqueue_tx(caller, "__alkstore_outbox:x", 1)),
            (InvalidName, lambda: store.enqueue_tx(caller, "", 1)),
            (InvalidPayload, lambda: store.enqueue_tx(caller, "fine", {1, 2})),
            (InvalidName, lambda: store.outbox_enqueue_tx(caller, "bad\tname", 1)),
            (InvalidSpec, lambda: store.schedule("s", "*/5 * * * *", "fine")),
            (InvalidSpec, lambda: store.schedule("s", "@every 0s", "fine")),
            (ReservedName, lambda: store.schedule("s", "@every 1m", "__alkstore_outbox:x")),
            (ReservedName, lambda: store.schedule("__alkstore_s", "@every 1m", "fine")),
            (InvalidPayload, lambda: store.schedule("s", "@every 1m", "fine", object())),
            (ReservedName, lambda: store.try_lock("__alkstore_scheduler", "me", 10)),
            (InvalidName, lambda: store.try_lock("lock", "", 10)),
            (InvalidOptions, lambda: store.try_lock("lock", "me", 0)),
            (InvalidName, lambda: store.outbox("")),
            (InvalidName, lambda: queue.claim("")),
            (ReservedName, lambda: store.unschedule("__alkstore_s")),
        ]
        for error, call in cases:
            with pytest.raises(error):
                call()
        assert caller.info.transaction_status == psycopg.pq.TransactionStatus.IDLE, "no SQL ran on the caller's conn"
    assert engine_of(store).pool.get_stats().get("requests_num", 0) == requests, "no pooled connection was used"
    assert {name: count(db, pg_module_schema, name) for name in tables} == before


# -- failures -------------------------------------------------------------------------------


def test_connections_dropped_by_the_server_are_replaced_by_the_pool(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any], clock: ManualClock
) -> None:
    app = f"alkstore-drop-{uuid.uuid4().hex[:8]}"
    store = open_store(url=with_app_name(pg_dsn, app), clock=clock, min_size=2, max_size=2)
    engine = engine_of(store)
    wait_until(lambda: engine.pool.get_stats()["pool_available"] == 2, "the pool to fill")
    queue = store.queue(unique("dropped"))
    for _ in range(2):
        assert terminate(db, app) >= 2
        job_id = queue.enqueue("survives")
        job = must_claim(queue)
        assert job.id == job_id
        job.ack()


def test_a_parked_claim_whose_listener_is_killed_falls_back_to_polling(
    open_store: OpenStore, pg_dsn: str, db: psycopg.Connection[Any], clock: ManualClock
) -> None:
    app = f"alkstore-listener-{uuid.uuid4().hex[:8]}"
    store = open_store(url=with_app_name(pg_dsn, app), clock=clock)
    name = unique("killed-listener")
    claimer = Claimer(store, name, poll_interval=0.2)
    assert terminate(db, app, "%listen(%") == 1
    job_id = store.queue(name).enqueue("still found")
    assert claimer.acked().id == job_id


def test_driver_errors_become_database_errors_caused_by_the_driver_error(
    open_store: OpenStore, pg_schema: str, db: psycopg.Connection[Any]
) -> None:
    store = open_store(pg_schema)
    db.execute(sql.SQL("DROP TABLE {} CASCADE").format(table(pg_schema, "jobs")))
    with pytest.raises(DatabaseError) as raised:
        store.queue("q").enqueue(1)
    assert isinstance(raised.value.__cause__, psycopg.errors.UndefinedTable)
    with pytest.raises(DatabaseError) as raised:
        store.get_job(1)
    assert isinstance(raised.value.__cause__, psycopg.Error)


def test_enqueue_tx_on_a_failed_caller_transaction_is_a_database_error(store: Store, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1/0")
        with pytest.raises(DatabaseError) as raised:
            store.enqueue_tx(conn, "q", 1)
        assert isinstance(raised.value.__cause__, psycopg.errors.InFailedSqlTransaction)


def test_an_exhausted_pool_is_a_database_error_caused_by_the_pool_timeout(open_store: OpenStore) -> None:
    store = open_store(min_size=1, max_size=1, pool_timeout=0.2)
    with store.transaction(), pytest.raises(DatabaseError) as raised:
        store.queue("q").enqueue(1)
    assert isinstance(raised.value.__cause__, PoolTimeout)


def test_a_closed_engine_raises_store_closed(open_store: OpenStore, clock: ManualClock) -> None:
    store = open_store(clock=clock)
    engine = engine_of(store)
    engine.close()
    engine.close()
    now = clock.now()
    with pytest.raises(StoreClosed):
        engine.claim(ClaimRequest("q", "w", now, timedelta(seconds=1)))
    with pytest.raises(StoreClosed), engine.waiter("q"):
        pass
    with pytest.raises(StoreClosed), engine.transaction():
        pass
