"""The PostgreSQL engine: the ``Engine`` port on psycopg 3 and psycopg_pool.

Every method takes one pooled connection in autocommit mode and, except the scheduler's
multi-statement transactions, does its work in one statement (a claim with something to sweep
calls, from that statement, the ``claim`` function the migrations create). psycopg errors are
translated here, once, into ``alkstore.DatabaseError`` raised from the original.
"""

from __future__ import annotations

import logging
import math
import select
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq.abc import PGconn
from psycopg.rows import RowFactory, tuple_row
from psycopg_pool import ConnectionPool, PoolClosed

from alkstore._boundary import registration_boundary
from alkstore._options import ScheduleOpts, as_duration
from alkstore._spec import Every
from alkstore._urls import redact
from alkstore.engine import (
    JOB_EXPIRED_ERROR,
    LEASE_EXPIRED_ERROR,
    Engine,
    JobRecord,
    JobState,
    LockRecord,
    NewJob,
    ScheduleRecord,
    TickResult,
    Waiter,
    plan_tick,
)
from alkstore.errors import DatabaseError, InvalidOptions, LeaseLost, StoreClosed

from . import _migrate
from ._sql import Statements

__all__ = ["PostgresEngine", "open_engine"]

log = logging.getLogger("alkstore.postgres")

Connection = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]

DEFAULT_SCHEMA = "alkstore"
DEFAULT_MIN_SIZE = 1
DEFAULT_MAX_SIZE = 10
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_POOL_TIMEOUT = 10.0
#: PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN - 1).
_MAX_IDENTIFIER_BYTES = 63
#: How long a parked claim waits for a listening connection before it falls back to polling.
_WAITER_CHECKOUT_S = 1.0
_MICROSECOND = timedelta(microseconds=1)
#: Queue channel names remembered per engine before the memo starts over.
_CHANNEL_CACHE_SIZE = 4096
#: ``select.poll`` where the platform has it (the pools' check falls back to a round trip).
_POLL = getattr(select, "poll", None)
#: The sweeps' error texts as stored (UTF-8), encoded once.
_LEASE_EXPIRED_ERROR = LEASE_EXPIRED_ERROR.encode()
_JOB_EXPIRED_ERROR = JOB_EXPIRED_ERROR.encode()
_OPTIONS = ("schema", "min_size", "max_size", "migrate", "connect_timeout", "pool_timeout")


def open_engine(url: str, **options: Any) -> PostgresEngine:
    """Entry point for ``postgresql://`` and ``postgres://`` URLs (see ``PostgresEngine``)."""
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise InvalidOptions(
            f"unknown option(s) for the postgres engine: {', '.join(unknown)} (known: {', '.join(_OPTIONS)})"
        )
    return PostgresEngine(url, **options)


class PostgresEngine(Engine):
    """Queues, leases and schedules in one PostgreSQL schema; see ``alkstore.engine.Engine``.

    Options: ``schema`` (default ``"alkstore"``, any name up to 63 bytes, always quoted),
    ``min_size``/``max_size`` of the connection pool (1/10), ``migrate`` (``False``: opening
    an unmigrated or older schema raises ``SchemaOutOfDate``; ``True`` migrates first),
    ``connect_timeout`` (seconds per connection attempt; default the URL's, else 10) and
    ``pool_timeout`` (seconds to wait for a free pooled connection, 10). Parked claims hold a
    connection of a second, lazily filled pool of at most ``max_size`` listening connections.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        min_size: int = DEFAULT_MIN_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        migrate: bool = False,
        connect_timeout: float | None = None,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> None:
        params = _check_url(url)
        self._schema = _check_schema(schema)
        min_size = _check_int(min_size, "min_size", 0)
        max_size = _check_int(max_size, "max_size", max(1, min_size))
        if not isinstance(migrate, bool):
            raise InvalidOptions(f"migrate must be a bool, not {type(migrate).__name__}")
        if connect_timeout is None:
            connect_timeout = _url_connect_timeout(params)
        connect_timeout = _check_seconds(connect_timeout, "connect_timeout")
        self._pool_timeout = _check_seconds(pool_timeout, "pool_timeout")
        self._url = url
        self._sql = Statements.for_schema(self._schema)
        self._closed = False
        self._channels: dict[str, str] = {}
        self._closing = threading.Event()  # set by close(): parked waits return at once
        self._parked_lock = threading.Lock()
        self._parked: Counter[str] = Counter()  # queues with a parked claim in this engine
        # libpq takes whole seconds (and treats anything below 2 as 2).
        connect_kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, math.ceil(connect_timeout))}

        # A direct connection first, so a wrong URL or an old schema fails now with the real cause.
        try:
            with psycopg.connect(url, **connect_kwargs) as conn:
                if migrate:
                    _migrate.apply(conn, self._sql, self._schema)
                _migrate.check(conn, self._sql, self._schema, url)
        except psycopg.Error as exc:
            _raise_translated(exc)

        self._pool: ConnectionPool[_PooledConnection] = ConnectionPool(
            url,
            connection_class=_PooledConnection,
            kwargs=connect_kwargs,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=self._configure,
            check=_check_connection,
            timeout=self._pool_timeout,
            name=f"alkstore:{self._schema}",
            num_workers=2,
        )
        self._waiter_pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            kwargs=connect_kwargs,
            min_size=0,
            max_size=max_size,
            open=False,
            configure=self._configure,
            check=_check_connection,
            reset=self._reset_listener,
            timeout=self._pool_timeout,
            max_idle=60.0,
            name=f"alkstore:{self._schema}:listen",
            num_workers=1,
        )
        self._pool.open(wait=False)
        self._waiter_pool.open(wait=False)

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return f"<alkstore.adapters.postgres.PostgresEngine url={redact(self._url)!r} schema={self._schema!r}{state}>"

    @property
    def schema(self) -> str:
        """The schema holding every table and function of this store."""
        return self._schema

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def pool(self) -> ConnectionPool[_PooledConnection]:
        """The connection pool of every operation but parked claims."""
        return self._pool

    @property
    def waiter_pool(self) -> ConnectionPool[Connection]:
        """The pool of listening connections held by claims parked in ``claim(wait=…)``."""
        return self._waiter_pool

    # -- connections -------------------------------------------------------------------

    def _configure(self, conn: Connection) -> None:
        conn.execute(self._sql.use_utc)

    def _reset_listener(self, conn: Connection) -> None:
        conn.execute(self._sql.unlisten)
        for _ in conn.notifies(timeout=0):  # drop what arrived for the last holder
            pass

    def _channel(self, cur: Connection | Cursor, queue: str) -> str:
        """The NOTIFY channel of ``queue``: asked of the schema's ``channel()`` once, then remembered.

        The SQL function stays the one owner of the formula; enqueues pass the name as a
        parameter instead of hashing it again in every statement.
        """
        channel = self._channels.get(queue)
        if channel is None:
            row = cur.execute(self._sql.channel, {"schema": self._schema, "queue": queue}).fetchone()
            assert row is not None
            channel = str(row[0])
            if len(self._channels) >= _CHANNEL_CACHE_SIZE:
                self._channels.clear()
            self._channels[queue] = channel
        return channel

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A pooled autocommit connection; psycopg errors inside become ``DatabaseError``.

        ``getconn``/``putconn`` rather than ``pool.connection()``, whose exit also runs the
        connection's own ``with`` exit: a commit that autocommit makes a no-op, but not a free one.
        """
        try:
            conn = self._pool.getconn()
        except psycopg.Error as exc:
            _raise_translated(exc)
        try:
            yield conn
        except psycopg.Error as exc:
            _raise_translated(exc)
        finally:
            self._pool.putconn(conn)

    def _one(self, statement: str, params: Mapping[str, Any], *, binary: bool = False) -> tuple[Any, ...] | None:
        """Run one statement on a pooled connection; its first row, or ``None``.

        The hot calls' form of ``_connection()``: the same checkout and translation, inline.
        """
        pool = self._pool
        try:
            conn = pool.getconn()
        except psycopg.Error as exc:
            _raise_translated(exc)
        try:
            return conn.run(statement, params, binary=binary).fetchone()
        except psycopg.Error as exc:
            _raise_translated(exc)
        finally:
            pool.putconn(conn)

    # -- lifecycle -----------------------------------------------------------------------

    def migrate(self) -> None:
        with self._connection() as conn:
            applied = _migrate.apply(conn, self._sql, self._schema)
        if applied:
            log.info("migrated schema %r to version %s", self._schema, applied[-1])

    def close(self) -> None:
        """Close both pools; parked claims are woken first, so they return promptly."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        with self._parked_lock:
            parked = sorted(self._parked)
        if parked:
            # A claim parked in conn.notifies() on another thread wakes only through its socket.
            try:
                with self._pool.connection(timeout=_WAITER_CHECKOUT_S) as conn:
                    conn.execute(self._sql.notify_queues, {"schema": self._schema, "queues": parked})
            except psycopg.Error as exc:
                log.warning("could not wake the claims parked on %s at close: %s", parked, exc)
        self._waiter_pool.close()
        self._pool.close()

    # -- jobs ----------------------------------------------------------------------------

    def enqueue(self, job: NewJob, now: datetime) -> int:
        channel = self._channels.get(job.queue)
        if channel is None:
            with self._connection() as conn:
                channel = self._channel(conn, job.queue)
        row = self._one(self._sql.enqueue, _job_params(job, now, channel))
        assert row is not None
        return int(row[0])

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection inside a transaction: commits on normal exit, rolls back on error.

        The caller's own psycopg errors pass through untouched; a failure to begin or commit
        is a ``DatabaseError``.
        """
        in_body = False
        try:
            with self._pool.connection() as conn, conn.transaction():
                in_body = True
                yield conn
                in_body = False
        except psycopg.Error as exc:
            if in_body:
                raise
            _raise_translated(exc)

    def enqueue_tx(self, tx: Any, job: NewJob, now: datetime) -> int:
        if not isinstance(tx, psycopg.Connection):
            raise TypeError(f"expected the caller's psycopg.Connection, not {type(tx).__name__}")
        try:
            with tx.cursor(row_factory=tuple_row) as cur:
                params = _job_params(job, now, self._channel(cur, job.queue))
                row = cur.execute(self._sql.enqueue, params).fetchone()
        except psycopg.Error as exc:
            _raise_translated(exc)
        assert row is not None
        return int(row[0])

    def claim(self, queue: str, worker_id: str, now: datetime, lease_until: datetime) -> JobRecord | None:
        params = {
            "queue": queue,
            "worker": worker_id,
            "now": now,
            "lease_until": lease_until,
            "lease_expired_error": _LEASE_EXPIRED_ERROR,
            "job_expired_error": _JOB_EXPIRED_ERROR,
        }
        row = self._one(self._sql.claim, params, binary=True)
        return None if row is None else _claimed_record(row, queue, worker_id, lease_until)

    @contextmanager
    def waiter(self, queue: str) -> Iterator[Waiter]:
        with self._parked_lock:
            self._parked[queue] += 1
        try:
            with self._listening(queue) as waiter:
                yield waiter
        finally:
            with self._parked_lock:
                self._parked[queue] -= 1
                if not self._parked[queue]:
                    del self._parked[queue]

    @contextmanager
    def _listening(self, queue: str) -> Iterator[Waiter]:
        try:
            conn = self._waiter_pool.getconn(timeout=min(self._pool_timeout, _WAITER_CHECKOUT_S))
        except PoolClosed as exc:
            raise StoreClosed("this store is closed") from exc
        except psycopg.Error as exc:
            log.debug("no listening connection for queue %r (%s); the wait polls", queue, exc)
            yield _PollingWaiter(self._closing)
            return
        try:
            try:
                conn.execute(self._sql.listen, {"schema": self._schema, "queue": queue})
            except psycopg.Error as exc:
                _raise_translated(exc)
            yield _ListeningWaiter(conn, queue, self._closing)
        finally:
            self._waiter_pool.putconn(conn)

    def ack(self, job_id: int, lease: int) -> None:
        if self._one(self._sql.ack, {"id": job_id, "lease": lease}) is None:
            _lease_lost(job_id, lease)

    def retry(self, job_id: int, lease: int, error: str, run_at: datetime) -> None:
        params = {"id": job_id, "lease": lease, "error": _error_bytes(error), "run_at": run_at, "schema": self._schema}
        if self._one(self._sql.retry, params) is None:
            _lease_lost(job_id, lease)

    def bury(self, job_id: int, lease: int, error: str, now: datetime) -> None:
        params = {"id": job_id, "lease": lease, "error": _error_bytes(error), "now": now}
        if self._one(self._sql.bury, params) is None:
            _lease_lost(job_id, lease)

    def heartbeat(self, job_id: int, lease: int, lease_until: datetime) -> None:
        params = {"id": job_id, "lease": lease, "lease_until": lease_until}
        if self._one(self._sql.heartbeat, params) is None:
            _lease_lost(job_id, lease)

    def get_job(self, job_id: int) -> JobRecord | None:
        row = self._one(self._sql.get_job, {"id": job_id}, binary=True)
        return None if row is None else _job_record(row)

    def requeue_dead(self, job_id: int, now: datetime) -> bool:
        with self._connection() as conn:
            params = {"id": job_id, "now": now, "schema": self._schema}
            row = conn.execute(self._sql.requeue_dead, params).fetchone()
        return row is not None

    # -- locks ---------------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        params = {"name": name, "owner": owner, "now": now, "expires_at": expires_at}
        with self._connection() as conn:
            row = conn.execute(self._sql.try_lock, params).fetchone()
        return None if row is None else _lock_record(row)

    def renew_lock(self, lock: LockRecord, now: datetime, expires_at: datetime) -> LockRecord:
        params = {"name": lock.name, "token": lock.token, "now": now, "expires_at": expires_at}
        with self._connection() as conn:
            row = conn.execute(self._sql.renew_lock, params).fetchone()
        if row is None:
            raise LeaseLost(f"lease {lock.name!r} is no longer held by {lock.owner!r}")
        return _lock_record(row)

    def release_lock(self, lock: LockRecord) -> bool:
        with self._connection() as conn:
            done = conn.execute(self._sql.release_lock, {"name": lock.name, "token": lock.token}).rowcount
        return done == 1

    # -- schedules -----------------------------------------------------------------------

    def register_schedule(
        self,
        name: str,
        every: Every,
        queue: str,
        payload: bytes,
        opts: ScheduleOpts,
        now: datetime,
    ) -> ScheduleRecord:
        expires = None if opts.expires is None else as_duration(opts.expires, "expires") // _MICROSECOND
        params: dict[str, Any] = {
            "name": name,
            "spec": str(every),
            "interval_s": every.seconds,
            "queue": queue,
            "payload": payload,
            "priority": opts.priority,
            "max_attempts": opts.max_attempts,
            "expires_us": expires,
        }
        with self._connection() as conn, conn.transaction():
            while True:
                row = conn.execute(self._sql.lock_schedule, {"name": name}).fetchone()
                existing = None if row is None else (int(row[0]), _utc(row[1]))
                params["next_boundary"] = registration_boundary(existing, every.seconds, now)
                statement = self._sql.insert_schedule if row is None else self._sql.update_schedule
                stored = conn.execute(statement, params).fetchone()
                if stored is not None:
                    return _schedule_record(stored)
                # A concurrent registration inserted the name first: lock its row and decide again.

    def unschedule(self, name: str) -> bool:
        with self._connection() as conn:
            return conn.execute(self._sql.unschedule, {"name": name}).rowcount == 1

    def schedules(self) -> list[ScheduleRecord]:
        with self._connection() as conn:
            rows = conn.execute(self._sql.schedules).fetchall()
        return sorted((_schedule_record(row) for row in rows), key=lambda record: record.name)

    def tick(self, now: datetime) -> TickResult:
        with self._connection() as conn, conn.transaction():
            due = [_schedule_record(row) for row in conn.execute(self._sql.due_schedules, {"now": now})]
            plan = plan_tick(due, now)
            ids: list[int] = []
            if plan.planned:
                rows = conn.execute(self._sql.next_job_ids, {"count": len(plan.planned)}).fetchall()
                ids = sorted(int(row[0]) for row in rows)
                conn.execute(self._sql.insert_fires, _fire_params(ids, plan.jobs, now))
            if plan.advanced:
                names, boundaries = zip(*plan.advanced, strict=True)
                conn.execute(self._sql.advance_schedules, {"names": list(names), "boundaries": list(boundaries)})
            if plan.planned:
                queues = sorted({job.queue for job in plan.jobs})
                conn.execute(self._sql.notify_queues, {"schema": self._schema, "queues": queues})
            row = conn.execute(self._sql.soonest_boundary).fetchone()
        soonest = None if row is None or row[0] is None else _utc(row[0])
        return TickResult(plan.fires(ids), plan.skipped, soonest)

    def soonest_boundary(self) -> datetime | None:
        with self._connection() as conn:
            row = conn.execute(self._sql.soonest_boundary).fetchone()
        return None if row is None or row[0] is None else _utc(row[0])


# -- connections -----------------------------------------------------------------------------


class _PooledConnection(psycopg.Connection[tuple[Any, ...]]):
    """A connection of the engine's main pool, keeping one cursor for the engine's statements.

    ``Connection.execute`` builds a cursor (and its adaptation context) for every statement;
    the hot calls reuse this one instead. The pool lends the connection to one thread at a
    time, so the cursor is never shared, and it goes with the connection.
    """

    def __init__(self, pgconn: PGconn, row_factory: RowFactory[tuple[Any, ...]] = tuple_row) -> None:
        super().__init__(pgconn, row_factory)
        self._statement_cursor: Cursor | None = None

    def run(self, statement: str, params: Mapping[str, Any], *, binary: bool = False) -> Cursor:
        """Execute ``statement`` on the kept cursor (text or binary results) and return it."""
        cursor = self._statement_cursor
        if cursor is None or cursor.closed:
            cursor = self._statement_cursor = self.cursor()
        return cursor.execute(statement, params, binary=binary)


# -- waiting ---------------------------------------------------------------------------------


class _ListeningWaiter(Waiter):
    """Parks on a connection that LISTENs on the queue's channel."""

    def __init__(self, conn: Connection, queue: str, closing: threading.Event) -> None:
        self._conn: Connection | None = conn
        self._queue = queue
        self._closing = closing

    def __repr__(self) -> str:
        return f"<alkstore.adapters.postgres waiter queue={self._queue!r}>"

    def wait(self, timeout: float) -> None:
        if timeout <= 0 or self._closing.is_set():
            return
        if self._conn is not None:
            try:
                for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                    pass
            except psycopg.Error as exc:
                # The row is the truth: a dead listener only turns the rest of the wait into polling.
                log.warning("listening for queue %r failed (%s); polling instead", self._queue, exc)
                self._conn = None
            else:
                return
        self._closing.wait(timeout)


class _PollingWaiter(Waiter):
    """Used when no listening connection is free: each wait sleeps its whole timeout (or until close)."""

    def __init__(self, closing: threading.Event) -> None:
        self._closing = closing

    def __repr__(self) -> str:
        return "<alkstore.adapters.postgres polling waiter>"

    def wait(self, timeout: float) -> None:
        if timeout > 0:
            self._closing.wait(timeout)


# -- translation -----------------------------------------------------------------------------


def _raise_translated(exc: psycopg.Error) -> NoReturn:
    """Raise the alkstore error for a psycopg error, ``from`` it."""
    if isinstance(exc, PoolClosed):
        raise StoreClosed("this store is closed") from exc
    code = f" [{exc.sqlstate}]" if exc.sqlstate else ""
    raise DatabaseError(f"PostgreSQL error{code}: {type(exc).__name__}: {exc}".rstrip(": ")) from exc


def _lease_lost(job_id: int, lease: int) -> NoReturn:
    raise LeaseLost(f"job {job_id} is no longer held under lease {lease}")


def _check_connection(conn: Connection) -> None:
    """The pools' check: a round trip only if the idle connection's socket has something to say.

    An idle connection the server dropped (terminated backend, restart) has a readable socket
    (the error message, or EOF), so the pool discards it and hands out another; a healthy one
    costs a ``poll`` system call, not a round trip.
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    if _POLL is not None:
        poller = _POLL()
        poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)
        if not poller.poll(0):
            return
    ConnectionPool.check_connection(conn)


# -- records and parameters ------------------------------------------------------------------


def _utc(value: datetime) -> datetime:
    """``value`` in ``datetime.UTC``; a naive value is read as UTC, as the engine's sessions store it."""
    if value.tzinfo is UTC:
        return value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else _utc(value)


def _error_bytes(error: str) -> bytes:
    """Error text as stored: UTF-8 with lone surrogates passed through, so every str round-trips."""
    return error.encode("utf-8", "surrogatepass")


def _error_text(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


def _job_record(row: tuple[Any, ...]) -> JobRecord:
    died_at = row[16] if len(row) > 16 else None
    return JobRecord(
        id=int(row[0]),
        queue=row[1],
        payload=bytes(row[2]),
        state=JobState(row[3]),
        priority=row[4],
        run_at=_utc(row[5]),
        expires_at=_utc_or_none(row[6]),
        attempts=row[7],
        max_attempts=row[8],
        last_error=_error_text(row[9]),
        schedule=row[10],
        boundary=_utc_or_none(row[11]),
        enqueued_at=_utc(row[12]),
        worker_id=row[13],
        lease_until=_utc_or_none(row[14]),
        died_at=_utc_or_none(died_at),
        lease=int(row[15]),
    )


def _claimed_record(row: tuple[Any, ...], queue: str, worker_id: str, lease_until: datetime) -> JobRecord:
    """A job the claim statement just leased: the row gives what it kept, the claim's own values the rest."""
    return JobRecord(
        id=row[0],
        queue=queue,
        payload=row[1],
        state=JobState.RUNNING,
        priority=row[2],
        run_at=_utc(row[3]),
        expires_at=_utc_or_none(row[4]),
        attempts=row[5],
        max_attempts=row[6],
        last_error=_error_text(row[7]),
        schedule=row[8],
        boundary=_utc_or_none(row[9]),
        enqueued_at=_utc(row[10]),
        worker_id=worker_id,
        lease_until=_utc(lease_until),
        died_at=None,
        lease=row[11],
    )


def _lock_record(row: tuple[Any, ...]) -> LockRecord:
    return LockRecord(name=row[0], owner=row[1], token=int(row[2]), expires_at=_utc(row[3]))


def _schedule_record(row: tuple[Any, ...]) -> ScheduleRecord:
    name, spec, interval_s, queue, payload, priority, max_attempts, expires_us, next_boundary = row
    expires = None if expires_us is None else timedelta(microseconds=expires_us)
    return ScheduleRecord(
        name=name,
        spec=spec,
        interval_s=int(interval_s),
        queue=queue,
        payload=bytes(payload),
        opts=ScheduleOpts(priority=priority, max_attempts=max_attempts, expires=expires),
        next_boundary=_utc(next_boundary),
    )


def _job_params(job: NewJob, now: datetime, channel: str) -> dict[str, Any]:
    stamps = job.stamps
    return {
        "channel": channel,
        "queue": job.queue,
        "payload": job.payload,
        "priority": stamps.priority,
        "run_at": stamps.run_at,
        "expires_at": stamps.expires_at,
        "max_attempts": stamps.max_attempts,
        "schedule": job.schedule,
        "boundary": job.boundary,
        "now": now,
    }


def _fire_params(ids: list[int], jobs: list[NewJob], now: datetime) -> dict[str, Any]:
    return {
        "ids": ids,
        "queues": [job.queue for job in jobs],
        "payloads": [job.payload for job in jobs],
        "priorities": [job.stamps.priority for job in jobs],
        "run_ats": [job.stamps.run_at for job in jobs],
        "expires_ats": [job.stamps.expires_at for job in jobs],
        "max_attempts": [job.stamps.max_attempts for job in jobs],
        "schedules": [job.schedule for job in jobs],
        "boundaries": [job.boundary for job in jobs],
        "now": now,
    }


# -- option checks ---------------------------------------------------------------------------


def _check_url(url: object) -> Mapping[str, Any]:
    if not isinstance(url, str):
        raise InvalidOptions(f"the URL must be a str, not {type(url).__name__}")
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in ("postgresql", "postgres"):
        raise InvalidOptions(f"the postgres engine takes postgresql:// URLs, not {redact(url)!r}")
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise InvalidOptions(f"invalid PostgreSQL URL {redact(url)!r}: {exc}") from exc


def _url_connect_timeout(params: Mapping[str, Any]) -> float:
    value = params.get("connect_timeout")
    if not value:
        return DEFAULT_CONNECT_TIMEOUT
    try:
        return float(value)
    except ValueError as exc:
        raise InvalidOptions(f"the URL's connect_timeout is not a number of seconds: {value!r}") from exc


def _check_schema(schema: object) -> str:
    if not isinstance(schema, str):
        raise InvalidOptions(f"schema must be a str, not {type(schema).__name__}")
    size = len(schema.encode("utf-8", "surrogatepass"))
    if not 0 < size <= _MAX_IDENTIFIER_BYTES:
        raise InvalidOptions(f"schema must be 1 to {_MAX_IDENTIFIER_BYTES} bytes of UTF-8, not {size}: {schema!r}")
    if "\x00" in schema or any(0xD800 <= ord(char) <= 0xDFFF for char in schema):
        raise InvalidOptions(f"schema {schema!r} contains a NUL or a lone surrogate")
    if schema.startswith("pg_"):
        raise InvalidOptions(f"schema {schema!r}: names starting with 'pg_' are reserved by PostgreSQL")
    return schema


def _check_int(value: object, what: str, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be an int, not {type(value).__name__}")
    if value < low:
        raise InvalidOptions(f"{what} must be at least {low}, not {value}")
    return value


def _check_seconds(value: object, what: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be seconds (int or float), not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidOptions(f"{what} must be a positive number of seconds, not {value!r}")
    return float(value)
