"""The SQLite engine's every transition: one file, one connection per engine, one writer at a time.

SQLite serializes writers per file: a write transaction holds the file's one write lock from its
``BEGIN IMMEDIATE`` to its commit, across every process that opens the file. So each transition
here is one ``BEGIN IMMEDIATE`` transaction in which the engine reads, decides (the rules core
hands it, as the memory engine applies them) and writes; no other process can interleave, so
two processes never both claim a job, take a lock or fire a boundary (ADR 063). A deferred
transaction is never used for a write: it would upgrade to the write lock after reading, and a
peer's commit in between would make it fail or act on what it read before.

Over 500 lines: it is the whole engine (jobs, locks, schedules, workers, listings), each method
one transaction over the statements of ``_statements``, its rows read and written by ``_rows``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from alkstore import engine as port
from alkstore.engine import (
    after_key,
    listing_order,
    payload_contains,
    phase_at,
    plan_tick,
    registration_boundary,
)
from alkstore.errors import (
    DatabaseError,
    DatabaseUnavailable,
    InvalidTransaction,
    LeaseLost,
    SchemaOutOfDate,
    StoreClosed,
)

from . import _acks
from . import _dependencies as deps
from . import _statements as sql
from ._callers import caller_connection
from ._ids import JobIds
from ._options import SqliteOptions
from ._rates import rate_values, rated_rows, rated_soonest
from ._rows import (
    EPOCH,
    US,
    bare,
    bare_job_row,
    bind_as_they_are,
    claimed_of,
    config_of,
    delta,
    instant,
    job_of,
    job_row,
    maybe_at,
    maybe_us,
    pack_log,
    plain_job_row,
    result_of,
    schedule_of,
    span,
    unpack_log,
    us,
    worker_of,
)

__all__ = ["SCHEMA_VERSION", "SqliteTables", "SqliteTransaction", "named", "translated"]

SCHEMA_VERSION = len(sql.MIGRATIONS)
_Fenced = TypeVar("_Fenced", bound=port.Held)


# -- errors ------------------------------------------------------------------------------------------


def _busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Driver errors as alkstore's named ones (``named``)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise named(exc, what) from exc


def named(exc: sqlite3.Error, what: str) -> Exception:
    """The named error for a driver's: a lock held past the busy timeout is ``DatabaseUnavailable`` (a retry
    may succeed), a closed connection ``StoreClosed``, anything else ``DatabaseError``."""
    if isinstance(exc, sqlite3.ProgrammingError):
        if "closed" in str(exc).lower():
            return StoreClosed("this store is closed")
        return DatabaseError(f"SQLite refused {what}: {exc}")
    if _busy(exc):
        return DatabaseUnavailable(
            f"the SQLite file stayed locked by another writer past the busy timeout during {what}: {exc}"
        )
    text = str(exc).lower()
    if "readonly" in text or "read-only" in text:
        return DatabaseError(f"the SQLite file is read-only; {what} wrote nothing: {exc}")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return DatabaseError(f"the SQLite file is not a sound database; {what} wrote nothing: {exc}")
    return DatabaseError(f"SQLite failed during {what}: {exc}")


# -- the engine's transaction --------------------------------------------------------------------


@dataclass
class _Buffered:
    id: int
    job: port.NewJob
    now: datetime


class SqliteTransaction:
    """A transaction of ``transaction()``: its enqueues take their ids at once and are written, all together,
    in one ``BEGIN IMMEDIATE`` transaction at commit (so nothing holds the file's write lock meanwhile)."""

    __slots__ = ("_after", "_pending", "_state", "_tables")

    def __init__(self, tables: SqliteTables) -> None:
        self._tables = tables
        self._pending: list[_Buffered] = []
        self._after: list[Callable[[sqlite3.Connection], None]] = []  # steps and emits, written first (ADR 069)
        self._state = "open"

    def __repr__(self) -> str:
        return f"<alkstore.adapters.sqlite.SqliteTransaction {self._state}, {len(self._pending)} enqueued>"


# -- the tables ----------------------------------------------------------------------------------


def connect(options: SqliteOptions) -> sqlite3.Connection:
    """A connection to the engine's file, in autocommit mode (every transaction is begun explicitly), with the
    busy timeout and the synchronous level of ``options``."""
    bind_as_they_are()
    db = sqlite3.connect(
        options.path, timeout=options.busy_timeout, isolation_level=None, check_same_thread=False, uri=False
    )
    try:
        db.execute(sql.FOREIGN_KEYS_OFF)
        db.execute(sql.SYNCHRONOUS[options.synchronous])
    except BaseException:
        db.close()
        raise
    return db


class _Write:
    """``SqliteTables._write``'s transaction: a class rather than a generator's context manager, whose own
    machinery cost about as much as a short statement on every write. Errors of SQLite are named here.

    It keeps no state of its own between its enter and its exit (its transaction's is the tables', under their
    lock), so one is made per kind of write and used again by every call of it: the claims, the acks and the
    enqueues make none each."""

    __slots__ = ("_tables", "_what")

    def __init__(self, tables: SqliteTables, what: str) -> None:
        self._tables = tables
        self._what = what

    def __enter__(self) -> sqlite3.Connection:
        tables = self._tables
        tables._lock.acquire()
        try:
            if tables._closed:
                raise StoreClosed("this store is closed")
            tables._signal = False
            tables.cursor.execute(sql.BEGIN_IMMEDIATE)
        except BaseException as exc:
            tables._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise named(exc, self._what) from exc
            raise
        return tables._db

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: object) -> None:
        tables = self._tables
        try:
            if exc is None:
                try:
                    tables.cursor.execute(sql.COMMIT)
                except BaseException as failed:
                    exc = failed
            if exc is not None:
                tables._ids.rolled_back()
                db = tables._db
                if db.in_transaction:
                    db.rollback()
            elif tables._ids.fresh:
                tables._ids.committed()
        except sqlite3.Error as failed:  # the rollback's own
            exc = failed
        finally:
            signal, tables._signal = tables._signal, False
            tables._lock.release()
        if exc is not None:
            if isinstance(exc, sqlite3.Error):
                raise named(exc, self._what) from exc
            if kind is None:
                raise exc
            return  # the body's own exception propagates as it was
        if signal:
            tables.on_signal()


class SqliteTables:
    """One engine's connection and every transition over it; calls of many threads take turns (one lock)."""

    def __init__(self, options: SqliteOptions) -> None:
        self.options = options
        self._lock = threading.RLock()
        self._closed = False
        self._reserved: dict[tuple[str, str], int] = {}
        self._ids = JobIds()
        #: Queues whose last claim here took jobs: their next claim goes straight to the write (it likely will).
        self._busy: set[str] = set()
        #: Called after a commit that made jobs claimable (the engine's waiters listen).
        self.on_signal: Callable[[], None] = lambda: None
        self._signal = False
        with translated("opening the file"):
            self._db = connect(options)
        #: The engine's own cursor, for the statements of every claim and ack, under the engine's lock, each read
        #: at once: ``Connection.execute`` makes a cursor per statement, which cost more than a short statement.
        self.cursor = self._db.cursor()
        #: One ``_Write`` per kind of write, made at its first use (``_write``); every job's own kept at hand.
        self._writes: dict[str, _Write] = {}
        self._claiming, self._acking, self._enqueuing = (self._write(what) for what in ("claim", "ack", "enqueue"))

    def __repr__(self) -> str:
        return f"<alkstore.adapters.sqlite.SqliteTables {self.options.path!r}>"

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosed("this store is closed")

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def prepare(self, migrate: bool) -> None:
        """Check the file is a database, turn WAL on and bring the schema up to date (or check it is)."""
        with self._lock, translated("opening the file"):
            db = self._db
            db.execute(sql.QUICK_CHECK if self.options.check else sql.HAS_VERSION).fetchall()
            mode = db.execute(sql.JOURNAL_MODE).fetchone()[0]
            if str(mode).lower() != "wal":
                mode = db.execute(sql.JOURNAL_WAL).fetchone()[0]
                if str(mode).lower() != "wal":
                    raise DatabaseError(f"the SQLite file refused WAL mode (it is in {mode!r} mode)")
            version = self._version(db)
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise SchemaOutOfDate(
                    f"the SQLite file is at schema version {version}, newer than this code's {SCHEMA_VERSION}"
                )
            if not migrate:
                raise SchemaOutOfDate(
                    f"the SQLite file is at schema version {version}, this code needs {SCHEMA_VERSION}:"
                    " open it with migrate=True or run `alkstore migrate`"
                )
        self.migrate()

    @staticmethod
    def _version(db: sqlite3.Connection) -> int:
        if not db.execute(sql.HAS_VERSION).fetchone()[0]:
            return 0
        return db.execute(sql.READ_VERSION).fetchone()[0] or 0

    def migrate(self) -> None:
        """Apply the migrations the file lacks, each in one ``BEGIN IMMEDIATE`` transaction (so two processes
        migrating at once apply each once)."""
        with self._write("migrating") as db:
            db.execute(sql.CREATE_VERSION)
            version = self._version(db)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in sql.MIGRATIONS[number - 1]:
                    db.execute(statement)
                db.execute(sql.WRITE_VERSION, (number,))

    # -- transactions -----------------------------------------------------------------------

    def _write(self, what: str) -> _Write:
        """One write transaction on the engine's connection: ``BEGIN IMMEDIATE`` … ``COMMIT``; waiters are
        signalled after a commit that made jobs claimable."""
        write = self._writes.get(what)
        if write is None:
            write = self._writes[what] = _Write(self, what)
        return write

    @contextmanager
    def _read(self, what: str) -> Iterator[sqlite3.Connection]:
        """A read of one snapshot (a deferred transaction, which never writes)."""
        with self._lock:
            self.check_open()
            db = self._db
            with translated(what):
                db.execute(sql.BEGIN)
                try:
                    yield db
                finally:
                    if db.in_transaction:
                        db.rollback()

    @contextmanager
    def _read_one(self, what: str) -> Iterator[sqlite3.Connection]:
        """The connection for one read statement, in autocommit: the statement is its own snapshot."""
        with self._lock:
            self.check_open()
            with translated(what):
                yield self._db

    def _next(self, db: sqlite3.Connection, counter: str, count: int = 1) -> int:
        """Take ``count`` values of ``counter``; the last one taken (the first is ``last - count + 1``)."""
        value: int = db.execute(sql.NEXT_COUNTER, (count, counter)).fetchone()[0]
        return value

    def _next_jobs(self, db: sqlite3.Connection, count: int, own: bool = True) -> tuple[int, int]:
        """The first of ``count`` new job ids (``JobIds.take``) and the first of their places in their keys' lines."""
        if not count:
            return 0, 0
        return self._ids.take(db, count, own), self._next(db, "line", count) - count + 1

    # -- queue configuration ----------------------------------------------------------------

    def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        with self._write("configure_queue") as db:
            old = config_of(db.execute(sql.QUEUE_CONFIG, (queue,)).fetchone())
            return self._store_config(db, queue, replace(config, paused=old is not None and old.paused))

    def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        with self._write("set_paused") as db:
            old = config_of(db.execute(sql.QUEUE_CONFIG, (queue,)).fetchone()) or port.QueueConfig()
            if not paused:
                self._signal = True
            return self._store_config(db, queue, replace(old, paused=paused))

    @staticmethod
    def _store_config(db: sqlite3.Connection, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        if config == port.QueueConfig():
            db.execute(sql.DELETE_QUEUE_CONFIG, (queue,))
            return None
        db.execute(
            sql.STORE_QUEUE_CONFIG,
            (
                queue,
                span(config.visibility_timeout),
                config.max_attempts,
                span(config.backoff_base),
                span(config.backoff_cap),
                config.priority,
                config.concurrency,
                span(config.keep_results),
                int(config.paused),
                *rate_values(config.rate),
                *rate_values(config.key_rate),
            ),
        )
        return config

    def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        if tx is not None and isinstance(caller := self.caller_transaction(tx), sqlite3.Connection):
            with translated("queue_config"):
                return config_of(caller.execute(sql.QUEUE_CONFIG, (queue,)).fetchone())
        with self._read_one("queue_config") as db:
            return config_of(db.execute(sql.QUEUE_CONFIG, (queue,)).fetchone())

    # -- enqueue and the caller's transactions ---------------------------------------------

    def caller_transaction(self, tx: Any) -> SqliteTransaction | sqlite3.Connection:
        if isinstance(tx, SqliteTransaction):
            if tx._tables is not self:
                raise InvalidTransaction("expected a transaction of this store's transaction(), not another store's")
            if tx._state != "open":
                raise InvalidTransaction(f"the transaction is already {tx._state}; nothing was enqueued")
            return tx
        db = caller_connection(tx)
        try:
            if not db.in_transaction:
                db.execute(sql.BEGIN_IMMEDIATE)
        except sqlite3.ProgrammingError as exc:
            raise InvalidTransaction(f"the sqlite3 connection cannot take an enqueue: {exc}") from exc
        except sqlite3.Error as exc:
            with translated("beginning the caller's transaction"):
                raise exc
        return db

    def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        if tx is not None:
            caller = self.caller_transaction(tx)
            if isinstance(caller, SqliteTransaction):
                return self._buffer(caller, jobs, now)
            return self._enqueue_on(caller, jobs, now)
        with self._enqueuing as db:
            ids = self._admit(db, jobs, now)
            self._signal = True
            return ids

    def _enqueue_on(self, db: sqlite3.Connection, jobs: Sequence[port.NewJob], now: datetime) -> list[int]:
        """Enqueue in the caller's own transaction on their connection: published by their commit (a waiter of
        another connection hears it through the file's data version)."""
        with translated("enqueue in the caller's transaction"):
            files = {row[1]: row[2] for row in db.execute(sql.DATABASE_LIST).fetchall()}
            if not files.get("main") or os.path.realpath(files["main"]) != os.path.realpath(self.options.path):
                raise InvalidTransaction(
                    f"the sqlite3 connection is to {files.get('main')!r}, not to this store's file;"
                    " nothing was enqueued"
                )
            return self._admit(db, jobs, now, own=False)

    def _admit(self, db: sqlite3.Connection, jobs: Sequence[port.NewJob], now: datetime, own: bool = True) -> list[int]:
        """Insert ``jobs`` in order on ``db`` (in its open write transaction; ``own``: the engine's); ``Existing``
        for a taken unique key."""
        ids: list[int] = []
        fresh = list(jobs)
        checked = fresh[:1] if isinstance(jobs, port.Alike) else fresh  # Alike: the first job tells for all
        for job in checked:
            if job.unique_key is not None or job.ordering_key is not None or job.rate_key is not None:
                break
            if job.after or job.after_batch:
                break
        else:
            # No key to look up first, no line to take a place in, no parent (none to check): ids only, and the rows
            # in order.
            count = len(fresh)
            first = self._ids.take(db, count, own)
            stamp = (now - EPOCH) // US
            on = self.cursor if own else db  # the engine's own transaction: its cursor
            if count == 1:
                job = fresh[0]
                if job.expires_at is None and job.visibility is None and job.task is None and job.trace is None:  # bare
                    on.execute(sql.INSERT_BARE_JOB, bare_job_row(first, job, stamp))
                else:
                    on.execute(sql.INSERT_PLAIN_JOB, plain_job_row(first, job, stamp))
                return [first]
            insert, row_of = (
                (sql.INSERT_BARE_JOB, bare_job_row)
                if all(map(bare, checked))
                else (sql.INSERT_PLAIN_JOB, plain_job_row)
            )
            on.executemany(insert, [row_of(first + offset, job, stamp) for offset, job in enumerate(fresh)])
            return list(range(first, first + count))
        deps.check_parents(db, fresh)
        first, line = self._next_jobs(db, len(fresh), own)
        for offset, job in enumerate(fresh):
            if job.unique_key is not None:
                found = db.execute(sql.UNIQUE_HOLDER, (job.queue, job.unique_key)).fetchone()
                if found is not None:
                    ids.append(port.Existing(found[0]))
                    continue
            job_id = first + offset
            self._insert(db, job_id, deps.resolved(job, ids), now, line + offset)
            ids.append(job_id)
        return ids

    def _insert(
        self,
        db: sqlite3.Connection,
        job_id: int,
        job: port.NewJob,
        now: datetime,
        line: int,
        schedule: str | None = None,
        boundary: datetime | None = None,
    ) -> None:
        waiting = job.ordering_key is not None and db.execute(sql.LINE_BUSY, (job.queue, job.ordering_key)).fetchone()
        db.execute(sql.INSERT_JOB, job_row(job_id, job, us(now), line, bool(waiting), schedule, boundary))
        if job.after:  # waits on its parents too (ADR 073)
            deps.insert_links(self, db, job_id, job, now)

    def begin(self) -> SqliteTransaction:
        self.check_open()
        return SqliteTransaction(self)

    def _buffer(self, tx: SqliteTransaction, jobs: Sequence[port.NewJob], now: datetime) -> list[int]:
        """Take ids for ``jobs`` now (one short write) and keep them for ``tx``'s commit; a unique key is
        reserved for the transaction (a later enqueue of it, here, gets this job's id)."""
        ids: list[int] = []
        with self._write("enqueue in a transaction") as db:
            deps.check_parents(db, jobs, (item.id for item in tx._pending))
            for job in (deps.resolved(job, ids) for job in jobs):
                if job.unique_key is not None:
                    found = db.execute(sql.UNIQUE_HOLDER, (job.queue, job.unique_key)).fetchone()
                    held = found[0] if found is not None else self._reserved.get((job.queue, job.unique_key))
                    if held is not None:
                        ids.append(port.Existing(held))
                        continue
                job_id = self._ids.take(db, 1)
                if job.unique_key is not None:
                    self._reserved[(job.queue, job.unique_key)] = job_id
                tx._pending.append(_Buffered(job_id, job, now))
                ids.append(job_id)
        return ids

    def commit(self, tx: SqliteTransaction) -> None:
        """Write what ``tx`` enqueued, all together, in the order it was enqueued."""
        try:
            if tx._pending or tx._after:
                with self._write("commit") as db:
                    for write in tx._after:
                        write(db)
                    line = self._next(db, "line", len(tx._pending)) - len(tx._pending) + 1
                    for offset, item in enumerate(tx._pending):
                        self._insert(db, item.id, item.job, item.now, line + offset)
                    self._signal = True
            tx._state = "committed"
        finally:
            self._unreserve(tx)

    def rollback(self, tx: SqliteTransaction) -> None:
        tx._state = "rolled back"
        self._unreserve(tx)
        tx._pending.clear()

    def _unreserve(self, tx: SqliteTransaction) -> None:
        with self._lock:
            for item in tx._pending:
                key = (item.job.queue, item.job.unique_key or "")
                if item.job.unique_key is not None and self._reserved.get(key) == item.id:
                    del self._reserved[key]

    # -- claims ----------------------------------------------------------------------------------

    def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        queue, busy = request.queue, self._busy
        if queue not in busy and not self._claimable(request):
            return []
        with self._claiming as db:
            claimed = self._take(db, request)
            if claimed:  # ``_claim``'s, inline: a claim of every job
                busy.add(queue)
            else:
                busy.discard(queue)
            return claimed

    def _claimable(self, request: port.ClaimRequest) -> bool:
        """Whether a claim has anything to do (a due job, a lapsed lease, an expired job): read first, so that
        an idle claim never takes the file's write lock. Skipped while the queue's last claim here took jobs."""
        with self._read_one("claim"):
            return bool(self.cursor.execute(sql.CLAIM_WORK, (request.queue, us(request.now))).fetchone()[0])

    def _claim(self, db: sqlite3.Connection, request: port.ClaimRequest) -> list[port.JobRecord]:
        claimed = self._take(db, request)
        if claimed:
            self._busy.add(request.queue)
        else:
            self._busy.discard(request.queue)
        return claimed

    def _take(self, db: sqlite3.Connection, request: port.ClaimRequest) -> list[port.JobRecord]:
        """Sweep the queue's lapsed leases and expired jobs (when it has any), then take its best due jobs."""
        now = (request.now - EPOCH) // US  # ``us`` and ``span``, inline: a claim of every job
        cursor = self.cursor
        simple = request.limit > 0 and request.concurrency is None and request.rate is None and request.key_rate is None
        if simple:  # most claims: one statement, which takes nothing while a sweep is due
            taken = (request.worker_id, now, request.lease // US, request.queue, request.limit)
            if rows := cursor.execute(sql.CLAIM_JOBS_UNSWEPT, taken).fetchall():
                return claimed_of(rows, request)
        if cursor.execute(sql.SWEEPS_DUE, (request.queue, now)).fetchone()[0]:
            self._sweep(db, request)
        elif simple:
            return []
        limit = request.limit
        if request.concurrency is not None:
            config = config_of(db.execute(sql.QUEUE_CONFIG, (request.queue,)).fetchone())
            if config is not None and config.concurrency is not None:  # the stored limit binds (ADR 033)
                running = db.execute(sql.LIVE_LEASES, (request.queue, now)).fetchone()[0]
                limit = min(limit, max(0, config.concurrency - running))
        if limit <= 0:
            return []
        if request.rate is not None or request.key_rate is not None:
            return self._take_rated(db, request, limit)
        taken = (request.worker_id, now, request.lease // US, request.queue, limit)
        return claimed_of(cursor.execute(sql.CLAIM_JOBS, taken).fetchall(), request)

    def _take_rated(self, db: sqlite3.Connection, request: port.ClaimRequest, limit: int) -> list[port.JobRecord]:
        """A claim of a rate-limited queue (ADR 070): the ready jobs its limits let start, one by one."""
        claimed = []
        now = us(request.now)
        for row in rated_rows(db, request, limit):
            job = job_of(row)
            lease_until = request.now + (job.visibility if job.visibility is not None else request.lease)
            db.execute(sql.TAKE_JOB, (request.worker_id, us(lease_until), now, job.id))
            claimed.append(
                replace(
                    job,
                    state=port.JobState.RUNNING,
                    attempts=job.attempts + 1,
                    fence=job.fence + 1,
                    worker_id=request.worker_id,
                    lease_until=lease_until,
                    claimed_at=request.now,
                    unique_key=job.unique_key if job.unique_running else None,
                )
            )
        return claimed

    def _sweep(self, db: sqlite3.Connection, request: port.ClaimRequest) -> None:
        now = us(request.now)
        for row in db.execute(sql.LAPSED_LEASES, (request.queue, now)).fetchall():
            job = job_of(row)
            if job.cancel_requested:
                self._delete(db, job)
            elif job.attempts >= job.max_attempts:
                self._to_dead(db, job, port.LEASE_EXPIRED_ERROR, None, request.now)
            else:
                db.execute(sql.MAKE_PENDING, (job.id,))
        for row in db.execute(sql.EXPIRED_PENDING, (request.queue, now)).fetchall():
            self._to_dead(db, job_of(row), port.JOB_EXPIRED_ERROR, None, request.now)

    def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        if not acks:
            return [], self.claim(request)
        with self._write("ack_and_claim") as db:
            stale = _acks.ack(self, db, acks)
            return stale, self._claim(db, request)

    # -- leaving the unfinished states ------------------------------------------------------

    def _gone(self, db: sqlite3.Connection, job: port.JobRecord) -> None:
        """``job`` left the unfinished states: the next waiting job of its ordering key's line may run (and its
        dependents still waiting on it follow their policies)."""
        deps.died(self, db, job, None)
        self._line_moves(db, job.queue, job.ordering_key, job.waiting)

    def _line_moves(self, db: sqlite3.Connection, queue: str, ordering_key: str | None, waiting: bool) -> None:
        """A job of ``queue`` with ``ordering_key`` (``waiting`` or not) left: the next of its line may run."""
        if ordering_key is None or waiting:
            return
        following = db.execute(sql.NEXT_IN_LINE, (queue, ordering_key)).fetchone()
        if following is not None:
            db.execute(sql.END_WAIT, (following[0],))
            self._signal = True

    def _delete(self, db: sqlite3.Connection, job: port.JobRecord) -> None:
        db.execute(sql.DELETE_JOB, (job.id,))
        self._gone(db, job)

    def _to_dead(
        self,
        db: sqlite3.Connection,
        job: port.JobRecord,
        error: str,
        traceback: str | None,
        now: datetime,
        attempt: bytes | None = None,
    ) -> None:
        if job.cancel_requested:  # a job asked to stop ends cancelled, whatever its run came to
            self._delete(db, job)
            return
        # A dead job keeps its attempt log, its last attempt appended when the burial logged it (ADR 064).
        log = db.execute(sql.ATTEMPT_LOG, (job.id,)).fetchone()[0]
        if attempt is not None:
            log = pack_log((*unpack_log(log), attempt))
        db.execute(sql.BURY_JOB, (error, traceback, us(now), log, job.id))
        self._gone(db, job)

    def _hand_back(self, db: sqlite3.Connection, job: port.JobRecord) -> bool:
        """Whether ``job`` goes back to pending; one asked to stop is deleted instead (ADR 035)."""
        if job.cancel_requested:
            self._delete(db, job)
            return False
        self._signal = True
        return True

    # -- fenced finishing calls -------------------------------------------------------------

    def _each_held(
        self,
        db: sqlite3.Connection,
        items: Sequence[_Fenced],
        change: Callable[[sqlite3.Connection, port.JobRecord, _Fenced], None],
    ) -> list[port.Held]:
        stale = []
        for item in items:
            row = db.execute(sql.HELD_JOB, (item.job_id, item.fence)).fetchone()
            if row is None:
                stale.append(port.Held(item.job_id, item.fence))
            else:
                change(db, job_of(row), item)
        return stale

    def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        if not held:
            return []
        with self._acking as db:
            if len(held) != 1:
                return _acks.ack(self, db, held)
            # An ack of one job (most acks): its plain delete here, on the engine's cursor, as ``_acks.ack`` tries it.
            item = held[0]
            if (
                not isinstance(item, port.Done)
                and self.cursor.execute(sql.ACK_PLAIN_JOB, (item.job_id, item.fence)).rowcount
            ):
                return []
            return _acks.ack(self, db, held, tried=True)

    def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        def retry(db: sqlite3.Connection, job: port.JobRecord, item: port.Retry) -> None:
            if self._hand_back(db, job):
                log = unpack_log(db.execute(sql.ATTEMPT_LOG, (job.id,)).fetchone()[0])
                if item.attempt is not None:
                    log = (*log, item.attempt)
                db.execute(sql.RETRY_JOB, (us(item.run_at), item.error, item.traceback, pack_log(log), job.id))

        with self._write("retry") as db:
            return self._each_held(db, retries, retry)

    def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        def bury(db: sqlite3.Connection, job: port.JobRecord, item: port.Burial) -> None:
            self._to_dead(db, job, item.error, item.traceback, now, item.attempt)

        with self._write("bury") as db:
            return self._each_held(db, burials, bury)

    def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        def release(db: sqlite3.Connection, job: port.JobRecord, _: port.Held) -> None:
            if self._hand_back(db, job):
                db.execute(sql.RELEASE_JOB, (job.id,))

        with self._write("release") as db:
            return self._each_held(db, held, release)

    def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        asked: list[port.Held] = []

        def beat(db: sqlite3.Connection, job: port.JobRecord, item: port.Heartbeat) -> None:
            db.execute(sql.HEARTBEAT, (us(item.lease_until), job.id))
            if job.cancel_requested:
                asked.append(port.Held(item.job_id, item.fence))

        with self._write("heartbeat") as db:
            return self._each_held(db, beats, beat), asked

    def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        asked = []
        with self._read("cancel_requested") as db:
            for pair in held:
                row = db.execute(sql.HELD_JOB, (pair.job_id, pair.fence)).fetchone()
                if row is not None and job_of(row).cancel_requested:
                    asked.append(port.Held(pair.job_id, pair.fence))
        return asked

    def get_job(self, job_id: int) -> port.JobRecord | None:
        with self._read_one("get_job") as db:
            row = db.execute(sql.GET_JOB, (job_id,)).fetchone()
            return None if row is None else deps.with_links(db, job_of(row))

    def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        requeued = []
        with self._write("requeue_dead") as db:
            for job_id in sorted(set(job_ids)):
                dead = db.execute(sql.DEAD_JOB, (job_id,)).fetchone()
                if dead is None:
                    continue
                queue, ordering_key = dead
                waiting = ordering_key is not None and db.execute(sql.LINE_BUSY, (queue, ordering_key)).fetchone()
                db.execute(sql.REQUEUE_DEAD, (us(now), int(bool(waiting)), self._next(db, "line"), job_id)).fetchall()
                deps.relink(self, db, job_id, now)
                requeued.append(job_id)
            self._signal = bool(requeued)
        return requeued

    # -- locks -------------------------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        with self._write("try_lock") as db:
            held = self._lock_row(db, name)
            if held is not None and held.expires_at > now:
                if held.owner != owner:
                    return None
                lock = replace(held, expires_at=expires_at)
            else:
                lock = port.LockRecord(name, owner, self._next(db, "token"), expires_at)
            db.execute(sql.STORE_LOCK, (lock.name, lock.owner, lock.token, us(lock.expires_at)))
            return lock

    @staticmethod
    def _lock_row(db: sqlite3.Connection, name: str) -> port.LockRecord | None:
        row = db.execute(sql.READ_LOCK, (name,)).fetchone()
        return None if row is None else port.LockRecord(row[0], row[1], row[2], instant(row[3]))

    def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        with self._write("renew_lock") as db:
            held = self._lock_row(db, lock.name)
            if held is None or held.token != lock.token or held.expires_at <= now:
                raise LeaseLost(f"lock {lock.name!r} is no longer held by {lock.owner!r}")
            renewed = replace(held, expires_at=expires_at)
            db.execute(sql.STORE_LOCK, (renewed.name, renewed.owner, renewed.token, us(expires_at)))
            return renewed

    def renew_lock_peek(
        self, lock: port.LockRecord, now: datetime, expires_at: datetime
    ) -> tuple[port.LockRecord, datetime | None]:
        with self._lock:
            renewed = self.renew_lock(lock, now, expires_at)
            return renewed, self.soonest_boundary()

    def release_lock(self, lock: port.LockRecord) -> bool:
        with self._write("release_lock") as db:
            return db.execute(sql.DELETE_LOCK, (lock.name, lock.token)).rowcount > 0

    def read_lock(self, name: str) -> port.LockRecord | None:
        with self._read_one("read_lock") as db:
            return self._lock_row(db, name)

    def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        with self._read("list_locks") as db:
            rows = db.execute(sql.LIST_LOCKS, (us(now), after, after, limit)).fetchall()
        return [port.LockRecord(row[0], row[1], row[2], instant(row[3])) for row in rows]

    # -- schedules ---------------------------------------------------------------------------------

    def register_schedules(self, schedules: Sequence[port.NewSchedule], now: datetime) -> list[port.ScheduleRecord]:
        with self._write("register_schedules") as db:
            stored = []
            for new in schedules:
                row = db.execute(sql.GET_SCHEDULE, (new.name,)).fetchone()
                old = None if row is None else schedule_of(row)
                existing = None if old is None else (old.interval_s, old.next_boundary, old.anchor)
                record = port.ScheduleRecord(
                    name=new.name,
                    spec=new.spec,
                    interval_s=new.interval_s,
                    queue=new.queue,
                    payload=new.payload,
                    priority=new.priority,
                    max_attempts=new.max_attempts,
                    expires=new.expires,
                    task=new.task,
                    anchor=new.anchor,
                    next_boundary=registration_boundary(existing, new.interval_s, now, new.anchor),
                    last_boundary=None if old is None else old.last_boundary,
                )
                db.execute(
                    sql.STORE_SCHEDULE,
                    (
                        record.name,
                        record.spec,
                        record.interval_s,
                        record.queue,
                        record.payload,
                        record.priority,
                        record.max_attempts,
                        span(record.expires),
                        record.task,
                        maybe_us(record.anchor),
                        us(record.next_boundary),
                        maybe_us(record.last_boundary),
                    ),
                )
                stored.append(record)
            return stored

    def unschedule(self, name: str) -> bool:
        with self._write("unschedule") as db:
            return db.execute(sql.DELETE_SCHEDULE, (name,)).rowcount > 0

    def schedules(self) -> list[port.ScheduleRecord]:
        with self._read("schedules") as db:
            return [schedule_of(row) for row in db.execute(sql.ALL_SCHEDULES).fetchall()]

    def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        with self._write("tick") as db:
            due = [
                port.DueSchedule(row[0], row[1], row[2], row[3], row[4], delta(row[5]), instant(row[6]), row[7])
                for row in db.execute(sql.DUE_SCHEDULES, (us(now),)).fetchall()
            ]
            configs = {
                schedule.queue: config_of(db.execute(sql.QUEUE_CONFIG, (schedule.queue,)).fetchone())
                for schedule in due
            }
            plan = plan_tick(due, configs, now, budget, fired)
            ids: list[int] = []
            if plan.fires:
                first, line = self._next_jobs(db, len(plan.fires))
                for offset, fire in enumerate(plan.fires):
                    payload, task = db.execute(sql.SCHEDULE_SOURCE, (fire.schedule,)).fetchone()
                    job = port.NewJob(
                        fire.queue,
                        bytes(payload),
                        fire.priority,
                        fire.run_at,
                        fire.expires_at,
                        fire.max_attempts,
                        task=task,
                    )
                    self._insert(db, first + offset, job, now, line + offset, fire.schedule, fire.boundary)
                    ids.append(first + offset)
                self._signal = True
            for name, boundary, last in plan.advanced:
                db.execute(sql.ADVANCE_SCHEDULE, (us(boundary), maybe_us(last), name))
            soonest = maybe_at(db.execute(sql.SOONEST_BOUNDARY).fetchone()[0])
            return plan.result(ids, soonest)

    def soonest_boundary(self) -> datetime | None:
        with self._read_one("soonest_boundary") as db:
            return maybe_at(db.execute(sql.SOONEST_BOUNDARY).fetchone()[0])

    def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        with self._read("soonest_due") as db:
            paused = {row[0] for row in db.execute(sql.PAUSED_QUEUES).fetchall()}
            dues = [
                value
                for queue in dict.fromkeys(queues)
                if queue not in paused
                for value in rated_soonest(db, queue, config_of(db.execute(sql.QUEUE_CONFIG, (queue,)).fetchone()))
                if value is not None
            ]
        return maybe_at(min(dues, default=None))

    # -- inspection and actions ------------------------------------------------------------------

    def queue_counts(self, now: datetime, queue: str | None = None, cap: int | None = None) -> list[port.QueueCounts]:
        with self._read("queue_counts") as db:
            rows = {row[0]: row for row in db.execute(sql.COUNTS, (us(now), queue)).fetchall()}
            paused = {row[0] for row in db.execute(sql.PAUSED_QUEUES).fetchall()}
        names = {queue} if queue is not None else set(rows) | paused

        def capped(value: int | None) -> int:
            value = value or 0
            return value if cap is None else min(value, cap)

        counts = []
        for name in sorted(names):
            row = rows.get(name) or (name, 0, 0, 0, 0, None, 0)
            counts.append(
                port.QueueCounts(
                    name,
                    capped(row[1]),
                    capped(row[2]),
                    capped(row[3]),
                    capped(row[4]),
                    maybe_at(row[5]),
                    capped(row[6]),
                    name in paused,
                )
            )
        return counts

    def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        phase, now, after = query.phase, query.now, query.after
        state = {port.JobPhase.DEAD: "dead", port.JobPhase.RUNNING: "running"}.get(phase, "pending")
        with self._read("list_jobs") as db:
            rows = [job_of(row) for row in db.execute(sql.JOBS_IN_STATE[state], (query.queue,)).fetchall()]
        rows = [row for row in rows if phase_at(row, now) is phase]
        if query.contains is not None:
            rows = [row for row in rows if payload_contains(row.payload, query.contains)]
        if query.task is not None:
            rows = [row for row in rows if row.task == query.task]
        rows.sort(key=listing_order(phase, query.reverse))
        if after is not None:
            rows = [row for row in rows if after_key(row, after, phase, query.reverse)]
        return rows[: query.limit]

    def cancel(self, job_ids: Sequence[int]) -> list[int]:
        cancelled = []
        with self._write("cancel") as db:
            for job_id in sorted(set(job_ids)):
                row = db.execute(sql.PENDING_JOB, (job_id,)).fetchone()
                if row is not None:
                    self._delete(db, job_of(row))
                    cancelled.append(job_id)
        return cancelled

    def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        with self._write("request_cancel") as db:
            return [
                job_id
                for job_id in sorted(set(job_ids))
                if db.execute(sql.REQUEST_CANCEL, (job_id,)).fetchone() is not None
            ]

    def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        with self._write("purge_dead") as db:
            return db.execute(sql.PURGE_DEAD, (queue, us(died_before), limit)).rowcount

    def purge_dead_jobs(self, job_ids: Sequence[int]) -> list[int]:
        with self._write("purge_dead_jobs") as db:
            return [
                job_id
                for job_id in sorted(set(job_ids))
                if db.execute(sql.PURGE_DEAD_JOB, (job_id,)).fetchone() is not None
            ]

    # -- kept results ----------------------------------------------------------------------------

    def get_result(self, job_id: int) -> port.ResultRecord | None:
        with self._read_one("get_result") as db:
            row = db.execute(sql.GET_RESULT, (job_id,)).fetchone()
        return None if row is None else result_of(row)

    def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        at = None if after is None else maybe_us(after.at)
        with self._read("list_results") as db:
            rows = db.execute(sql.LIST_RESULTS, (queue, at, 0 if after is None else after.id, limit)).fetchall()
        return [result_of(row) for row in rows]

    def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        with self._write("purge_results") as db:
            return db.execute(sql.PURGE_RESULTS, (queue, us(now), limit)).rowcount

    def record_action(self, action: port.NewAction) -> int:
        with self._write("record_action") as db:
            row = (us(action.at), action.role, action.address, action.action, action.target, action.outcome)
            return int(db.execute(sql.RECORD_ACTION, row).fetchone()[0])

    def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        with self._read_one("list_actions") as db:
            rows = db.execute(sql.LIST_ACTIONS, (before, before, limit)).fetchall()
        return [port.ActionRecord(row[0], instant(row[1]), *row[2:]) for row in rows]

    def purge_actions(self, before: datetime, limit: int) -> int:
        with self._write("purge_actions") as db:
            return db.execute(sql.PURGE_ACTIONS, (us(before), limit)).rowcount

    # -- workers and throughput ------------------------------------------------------------------

    def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        with self._write("record_worker") as db:
            db.execute(
                sql.STORE_WORKER,
                (
                    worker.id,
                    worker.host,
                    worker.pid,
                    json.dumps(list(worker.queues)),
                    worker.concurrency,
                    us(worker.started_at),
                    us(worker.seen_at),
                    worker.running,
                    worker.processed,
                    worker.failed,
                ),
            )
            for count in throughput:
                db.execute(sql.ADD_THROUGHPUT, (us(count.minute), count.queue, count.done, count.failed))
            for f in figures:
                db.execute(
                    sql.ADD_TASK_FIGURES, (us(f.minute), f.queue, f.task, f.done, f.failed, f.run_ms, f.latency_ms)
                )

    def remove_worker(self, worker_id: str) -> bool:
        with self._write("remove_worker") as db:
            return db.execute(sql.DELETE_WORKER, (worker_id,)).rowcount > 0

    def workers(self, since: datetime) -> list[port.WorkerRecord]:
        with self._read("workers") as db:
            return [worker_of(row) for row in db.execute(sql.WORKERS_SINCE, (us(since),)).fetchall()]

    def forget_workers(self, seen_before: datetime) -> int:
        with self._write("forget_workers") as db:
            return db.execute(sql.FORGET_WORKERS, (us(seen_before),)).rowcount

    def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        with self._read("throughput") as db:
            rows = db.execute(sql.THROUGHPUT_SINCE, (us(since),)).fetchall()
        return [port.ThroughputRecord(row[0], instant(row[1]), row[2], row[3]) for row in rows]

    def purge_throughput(self, before: datetime) -> int:
        with self._write("purge_throughput") as db:
            return db.execute(sql.PURGE_THROUGHPUT, (us(before),)).rowcount

    def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        with self._read("task_figures") as db:
            rows = db.execute(sql.TASK_FIGURES_SINCE, (us(since), queue, queue)).fetchall()
        return [port.TaskFiguresRecord(row[0], row[1], instant(row[2]), *row[3:]) for row in rows]

    def roll_up_task_figures(self, before: datetime) -> int:
        with self._write("roll_up_task_figures") as db:
            db.execute(sql.ROLL_UP_TASK_FIGURES, (us(before),))
            return db.execute(sql.FOLDED_TASK_FIGURES, (us(before),)).rowcount

    def purge_task_figures(self, before: datetime) -> int:
        with self._write("purge_task_figures") as db:
            return db.execute(sql.PURGE_TASK_FIGURES, (us(before),)).rowcount
