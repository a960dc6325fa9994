"""The in-memory engine's state and every transition of it: every table a dict, every index a
lazily-cleaned heap, one lock. Both runtimes' memory engines (``_engine_async`` and its sync twin)
are thin layers over one ``MemoryTables``; only how a parked claim waits differs between them
(``wait_signal`` for a thread, ``wait_signal_async`` for a task).

Over 500 lines: it is the whole in-memory database (jobs, locks, schedules, workers, listings),
kept in one class so that every transition happens under its one lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from alkstore import engine as port
from alkstore.engine import (
    StopToken,
    after_key,
    listing_order,
    payload_contains,
    phase_at,
    plan_tick,
    registration_boundary,
    soonest,
)
from alkstore.errors import InvalidTransaction, LeaseLost, StoreClosed

__all__ = ["MemoryTables", "MemoryTransaction"]

#: Any of the port's fenced items: each names a job and the fence it was claimed under.
_Fenced = TypeVar("_Fenced", bound=port.Held)
#: How often (wall seconds) a parked claim looks at its stop token.
_STOP_POLL_S = 0.05


def _new_row(job_id: int, job: port.NewJob, now: datetime) -> port.JobRecord:
    return port.JobRecord(
        id=job_id,
        queue=job.queue,
        payload=job.payload,
        state=port.JobState.PENDING,
        priority=job.priority,
        run_at=job.run_at,
        expires_at=job.expires_at,
        attempts=0,
        max_attempts=job.max_attempts,
        last_error=None,
        schedule=None,
        boundary=None,
        enqueued_at=now,
        worker_id=None,
        lease_until=None,
        died_at=None,
        fence=0,
        visibility=job.visibility,
        task=job.task,
        trace=job.trace,
        unique_key=job.unique_key,
        unique_running=job.unique_running,
        ordering_key=job.ordering_key,
    )


def _result_row(job: port.JobRecord, done: port.Done, attempts: tuple[bytes, ...]) -> port.ResultRecord:
    """The kept outcome of ``job``, acked by ``done`` after the failed ``attempts`` it logged."""
    return port.ResultRecord(
        id=job.id,
        queue=job.queue,
        payload=job.payload,
        task=job.task,
        attempts=job.attempts,
        max_attempts=job.max_attempts,
        enqueued_at=job.enqueued_at,
        started_at=done.started_at,
        finished_at=done.finished_at,
        keep_until=done.keep_until,
        worker_id=job.worker_id,
        result=done.result,
        attempt_log=attempts,
    )


class _Line:
    """The jobs of one ordering key in one queue: the one that may run (``head``), and those behind it in
    the order they were published."""

    __slots__ = ("head", "waiting")

    def __init__(self, head: int) -> None:
        self.head = head
        self.waiting: deque[int] = deque()


class _QueueIndex:
    """Heaps over one queue's jobs.

    Rows are immutable and replaced on every change, so an entry carries the row it was made
    for and is live only while that very row is still the stored one. Each entry has a unique
    serial before the row, so ties (one job re-entered under the same key) never compare rows.
    """

    __slots__ = ("delayed", "expiry", "leases", "ready", "running", "signals")

    def __init__(self) -> None:
        self.running: set[int] = set()  # ids of the queue's running jobs (for its global limit)
        self.ready: list[tuple[int, datetime, int, int, port.JobRecord]] = []  # (-priority, run_at, id, serial, row)
        self.delayed: list[tuple[datetime, int, port.JobRecord]] = []  # (run_at, serial, row)
        self.leases: list[tuple[datetime, int, port.JobRecord]] = []  # (lease_until, serial, row)
        self.expiry: list[tuple[datetime, int, port.JobRecord]] = []  # (expires_at, serial, row)
        self.signals = 0


class MemoryTransaction:
    """The memory engine's transaction: enqueues are buffered and published atomically at commit."""

    __slots__ = ("_pending", "_state", "_tables")

    def __init__(self, tables: MemoryTables) -> None:
        self._tables = tables
        self._pending: list[port.JobRecord] = []
        self._state = "open"

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.MemoryTransaction {self._state}, {len(self._pending)} enqueued>"


class MemoryTables:
    """All state of one memory store, guarded by one lock; each method is one atomic transition or read.

    The engines call these for their port methods (see ``alkstore.engine.AsyncEngine`` for the
    contract each follows).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._serials = itertools.count()  # tie-breakers of heap entries
        self._jobs: dict[int, port.JobRecord] = {}
        self._dead: dict[int, port.JobRecord] = {}
        #: Kept outcomes of jobs that succeeded, and the attempt logs of live jobs (ADR 042).
        self._results: dict[int, port.ResultRecord] = {}
        self._attempts: dict[int, tuple[bytes, ...]] = {}
        self._queues: dict[str, _QueueIndex] = {}
        self._configs: dict[str, port.QueueConfig] = {}
        self._locks: dict[str, port.LockRecord] = {}
        self._schedules: dict[str, port.ScheduleRecord] = {}
        self._workers: dict[str, port.WorkerRecord] = {}
        self._throughput: dict[tuple[datetime, str], tuple[int, int]] = {}  # (minute, queue) -> (done, failed)
        self._closed = False
        #: The job holding each (queue, unique key), and each (queue, ordering key)'s line (ADR 031, 032).
        self._holders: dict[tuple[str, str], int] = {}
        self._lines: dict[tuple[str, str], _Line] = {}
        #: Unique keys taken by jobs of open transactions (a later enqueue of one finds that job).
        self._reserved: dict[tuple[str, str], int] = {}

        #: Tasks parked in ``wait_signal_async``: each woken (on its own loop) by a signal of its queues.
        self._listeners: list[_Listener] = []

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.MemoryTables jobs={len(self._jobs)} dead={len(self._dead)}>"

    # -- lifecycle and waiting -------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuse everything from now on, and wake every parked wait."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener.wake()

    def check_open(self) -> None:
        if self._closed:
            raise StoreClosed("this store is closed")

    def signals(self, queues: Sequence[str]) -> int:
        """How many times jobs were made claimable on ``queues`` so far (a waiter's baseline)."""
        with self._cond:
            return sum(self._index(queue).signals for queue in queues)

    def wait_signal(self, queues: Sequence[str], seen: int, timeout: float, stop: StopToken | None) -> int:
        """Block until ``queues`` were signalled past ``seen``, ``timeout`` wall seconds passed, the
        tables closed or ``stop`` was cancelled; the signal count then."""
        with self._cond:
            if stop is None:
                if self._signals(queues) == seen and not self._closed:
                    self._cond.wait(timeout)
            else:
                # A stop token has no way to notify this condition: look at it every slice.
                end = time.monotonic() + timeout
                while self._signals(queues) == seen and not self._closed and not stop.is_cancelled():
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(min(left, _STOP_POLL_S))
            return self._signals(queues)

    async def wait_signal_async(self, queues: Sequence[str], seen: int, timeout: float, stop: StopToken | None) -> int:
        """``wait_signal`` for a task of a running loop."""
        loop = asyncio.get_running_loop()
        listener = _Listener(frozenset(queues), loop, loop.create_future())
        with self._cond:
            if self._signals(queues) != seen or self._closed:
                return self._signals(queues)
            self._listeners.append(listener)
        waits: set[asyncio.Future[Any]] = {listener.future}
        stopped = None
        if stop is not None:
            stopped = asyncio.ensure_future(stop.wait_async(timeout))
            waits.add(stopped)
        try:
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stopped is not None and not stopped.done():
                stopped.cancel()
            with self._cond:
                if listener in self._listeners:
                    self._listeners.remove(listener)
        return self.signals(queues)

    def _signals(self, queues: Sequence[str]) -> int:
        return sum(self._index(queue).signals for queue in queues)

    # -- internals -----------------------------------------------------------------

    def _index(self, queue: str) -> _QueueIndex:
        index = self._queues.get(queue)
        if index is None:
            index = self._queues[queue] = _QueueIndex()
        return index

    def _make_pending(self, job: port.JobRecord, **changes: Any) -> None:
        row = replace(job, state=port.JobState.PENDING, worker_id=None, lease_until=None, **changes)
        self._jobs[row.id] = row
        index = self._index(row.queue)
        index.running.discard(row.id)
        if not row.waiting:
            heapq.heappush(index.delayed, (row.run_at, next(self._serials), row))
        if row.expires_at is not None:
            heapq.heappush(index.expiry, (row.expires_at, next(self._serials), row))

    def _publish(self, row: port.JobRecord) -> None:
        """Store a new (or requeued) job: the head of its ordering key's line, or waiting behind it."""
        if row.ordering_key is not None:
            line = self._lines.get((row.queue, row.ordering_key))
            if line is None:
                self._lines[(row.queue, row.ordering_key)] = _Line(row.id)
            else:
                line.waiting.append(row.id)
                row = replace(row, waiting=True)
        self._make_pending(row)

    def _holder(self, queue: str, key: str) -> int | None:
        """The job holding ``key`` on ``queue`` now, if any (a holder that moved on no longer holds it)."""
        holder = self._holders.get((queue, key))
        if holder is None:
            return None
        row = self._jobs.get(holder)
        if row is None or row.unique_key != key:
            del self._holders[(queue, key)]
            return None
        return holder

    def _gone(self, job: port.JobRecord) -> None:
        """``job`` left the unfinished states (acked, dead, cancelled): free its keys, and let the next job of
        its ordering key's line run."""
        self._index(job.queue).running.discard(job.id)
        if self._attempts:
            self._attempts.pop(job.id, None)
        if job.unique_key is not None and self._holders.get((job.queue, job.unique_key)) == job.id:
            del self._holders[(job.queue, job.unique_key)]
        if job.ordering_key is None:
            return
        line = self._lines.get((job.queue, job.ordering_key))
        if line is None:
            return
        if line.head != job.id:
            with contextlib.suppress(ValueError):
                line.waiting.remove(job.id)  # a waiting job cancelled: the line goes on as it was
            return
        while line.waiting:
            following = self._jobs.get(line.waiting.popleft())
            if following is not None and following.waiting:
                line.head = following.id
                self._make_pending(following, waiting=False)
                self._signal(job.queue)
                return
        del self._lines[(job.queue, job.ordering_key)]

    def _delete(self, job: port.JobRecord) -> None:
        """Delete a job (acked, cancelled, or ending cancelled)."""
        del self._jobs[job.id]
        self._gone(job)

    def _signal(self, queue: str) -> None:
        """Jobs became claimable on ``queue`` (called under the lock): wake the threads and tasks waiting on it."""
        self._index(queue).signals += 1
        self._cond.notify_all()
        if self._listeners:
            woken = [listener for listener in self._listeners if queue in listener.queues]
            if woken:
                self._listeners = [listener for listener in self._listeners if queue not in listener.queues]
                for listener in woken:
                    listener.wake()

    def _live(self, row: port.JobRecord) -> bool:
        return self._jobs.get(row.id) is row

    def _held(self, job_id: int, fence: int) -> port.JobRecord | None:
        job = self._jobs.get(job_id)
        if job is None or job.state is not port.JobState.RUNNING or job.fence != fence:
            return None
        return job

    def _to_dead(
        self, job: port.JobRecord, error: str, traceback: str | None, now: datetime, attempt: bytes | None = None
    ) -> None:
        if job.cancel_requested:  # a job asked to stop ends cancelled, whatever its run came to
            self._delete(job)
            return
        # A dead job keeps its attempt log, its last attempt appended when the burial logged it (ADR 064).
        logged = self._attempts.get(job.id, ()) + ((attempt,) if attempt is not None else ())
        del self._jobs[job.id]
        self._gone(job)
        self._dead[job.id] = replace(
            job,
            state=port.JobState.DEAD,
            last_error=error,
            last_traceback=traceback,
            died_at=now,
            worker_id=None,
            lease_until=None,
            unique_key=None,
            claimed_at=None,
            attempt_log=logged,
        )

    # -- queue configuration --------------------------------------------------------

    def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        with self._cond:
            old = self._configs.get(queue)
            return self._store_config(queue, replace(config, paused=old is not None and old.paused))

    def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        with self._cond:
            return self._store_config(queue, replace(self._configs.get(queue) or port.QueueConfig(), paused=paused))

    def _store_config(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        if config == port.QueueConfig():
            self._configs.pop(queue, None)
            return None
        self._configs[queue] = config
        return config

    def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        with self._cond:
            return self._configs.get(queue)

    # -- jobs ----------------------------------------------------------------------

    def caller_transaction(self, tx: Any) -> MemoryTransaction:
        if not isinstance(tx, MemoryTransaction) or tx._tables is not self:
            raise InvalidTransaction(f"expected a transaction from this store's transaction(), not {type(tx).__name__}")
        if tx._state != "open":
            raise InvalidTransaction(f"the transaction is already {tx._state}; nothing was enqueued")
        return tx

    def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        if tx is not None:
            return self._enqueue_tx(self.caller_transaction(tx), jobs, now)

        def publish(row: port.JobRecord) -> None:
            if row.unique_key is not None:
                self._holders[(row.queue, row.unique_key)] = row.id
            self._publish(row)

        with self._cond:
            ids = self._admit(jobs, now, publish)
            for queue in {job.queue for job in jobs}:
                self._signal(queue)
            return ids

    def begin(self) -> MemoryTransaction:
        """A new transaction of these tables (``StoreClosed`` once closed)."""
        self.check_open()
        return MemoryTransaction(self)

    def commit(self, tx: MemoryTransaction) -> None:
        """Publish what ``tx`` enqueued, at once and all together."""
        with self._cond:
            tx._state = "committed"
            for row in tx._pending:
                if row.unique_key is not None:
                    self._reserved.pop((row.queue, row.unique_key), None)
                    self._holders[(row.queue, row.unique_key)] = row.id
                self._publish(row)  # in commit order: ordering keys' lines follow it
            for queue in {row.queue for row in tx._pending}:
                self._signal(queue)

    def rollback(self, tx: MemoryTransaction) -> None:
        """Forget what ``tx`` enqueued (and the unique keys it reserved)."""
        with self._cond:
            tx._state = "rolled back"
            for row in tx._pending:
                if row.unique_key is not None and self._reserved.get((row.queue, row.unique_key)) == row.id:
                    del self._reserved[(row.queue, row.unique_key)]
            tx._pending.clear()

    def _enqueue_tx(self, tx: MemoryTransaction, jobs: Sequence[port.NewJob], now: datetime) -> list[int]:
        """Buffer ``jobs`` in ``tx``; a unique key is reserved for the transaction from now (where Postgres
        would have a later enqueue of the key wait for the transaction's end, memory answers at once)."""

        def buffer(row: port.JobRecord) -> None:
            if row.unique_key is not None:
                self._reserved[(row.queue, row.unique_key)] = row.id
            tx._pending.append(row)

        with self._cond:
            return self._admit(jobs, now, buffer)

    def _admit(self, jobs: Sequence[port.NewJob], now: datetime, keep: Callable[[port.JobRecord], None]) -> list[int]:
        """A row per job handed to ``keep`` in order, its id returned; ``Existing`` (and no row) for a job whose
        unique key is taken, by an earlier job of the same call too."""
        ids: list[int] = []
        for job in jobs:
            found = self._taken(job)
            if found is not None:
                ids.append(port.Existing(found))
                continue
            row = _new_row(next(self._ids), job, now)
            keep(row)
            ids.append(row.id)
        return ids

    def _taken(self, job: port.NewJob) -> int | None:
        """The job already holding (or, in an open transaction, reserving) ``job``'s unique key, if any."""
        if job.unique_key is None:
            return None
        held = self._holder(job.queue, job.unique_key)
        return held if held is not None else self._reserved.get((job.queue, job.unique_key))

    def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        now = request.now
        with self._cond:
            index = self._index(request.queue)
            self._sweep_leases(index, now)
            self._sweep_expired(index, now)
            while index.delayed and index.delayed[0][0] <= now:
                _, _, row = heapq.heappop(index.delayed)
                if self._live(row):
                    heapq.heappush(index.ready, (-row.priority, row.run_at, row.id, next(self._serials), row))
            claimed: list[port.JobRecord] = []
            limit = request.limit
            if request.concurrency is not None:
                config = self._configs.get(request.queue)
                if config is not None and config.concurrency is not None:  # the stored limit binds (ADR 033)
                    running = sum(1 for job_id in index.running if self._lease_live(job_id, now))
                    limit = min(limit, max(0, config.concurrency - running))
            while index.ready and len(claimed) < limit:
                _, run_at, job_id, _, row = heapq.heappop(index.ready)
                if not self._live(row):
                    continue
                if run_at > now:  # the clock went backwards since it was ready
                    heapq.heappush(index.delayed, (run_at, next(self._serials), row))
                    continue
                lease_until = now + (row.visibility if row.visibility is not None else request.lease)
                taken = replace(
                    row,
                    state=port.JobState.RUNNING,
                    attempts=row.attempts + 1,
                    fence=row.fence + 1,
                    worker_id=request.worker_id,
                    lease_until=lease_until,
                    claimed_at=now,
                    unique_key=row.unique_key if row.unique_running else None,  # held while it runs, by option
                )
                if row.unique_key is not None and not row.unique_running:
                    self._holders.pop((row.queue, row.unique_key), None)
                self._jobs[job_id] = taken
                index.running.add(job_id)
                heapq.heappush(index.leases, (lease_until, next(self._serials), taken))
                claimed.append(taken)
            return claimed

    def _lease_live(self, job_id: int, now: datetime) -> bool:
        row = self._jobs.get(job_id)
        return (
            row is not None
            and row.state is port.JobState.RUNNING
            and row.lease_until is not None
            and (row.lease_until > now)
        )

    def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        with self._cond:
            return self.ack(acks), self.claim(request)

    def _sweep_leases(self, index: _QueueIndex, now: datetime) -> None:
        while index.leases and index.leases[0][0] <= now:
            _, _, row = heapq.heappop(index.leases)
            if not self._live(row):
                continue
            if row.cancel_requested:
                self._delete(row)  # its worker is gone: it ends cancelled (ADR 035)
            elif row.attempts >= row.max_attempts:
                self._to_dead(row, port.LEASE_EXPIRED_ERROR, None, now)
            else:
                self._make_pending(row)

    def _sweep_expired(self, index: _QueueIndex, now: datetime) -> None:
        while index.expiry and index.expiry[0][0] <= now:
            _, _, row = heapq.heappop(index.expiry)
            if self._live(row):
                self._to_dead(row, port.JOB_EXPIRED_ERROR, None, now)

    def _hand_back(self, job: port.JobRecord, **changes: Any) -> None:
        """A held job goes back to pending with ``changes`` and its queue is woken, unless it was asked to
        stop: then it ends cancelled (ADR 035)."""
        if job.cancel_requested:
            self._delete(job)
            return
        self._make_pending(job, **changes)
        self._signal(job.queue)

    def _each_held(
        self, items: Sequence[_Fenced], change: Callable[[port.JobRecord, _Fenced], None]
    ) -> list[port.Held]:
        """Apply ``change`` to each job still held under its item's fence; return the stale pairs."""
        stale = []
        with self._cond:
            for item in items:
                job = self._held(item.job_id, item.fence)
                if job is None:
                    stale.append(port.Held(item.job_id, item.fence))
                else:
                    change(job, item)
        return stale

    def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        def ack(job: port.JobRecord, item: port.Held) -> None:
            if isinstance(item, port.Done) and not job.cancel_requested:
                self._results[job.id] = _result_row(job, item, self._attempts.get(job.id, ()))
            self._delete(job)

        return self._each_held(held, ack)

    def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        def retry(job: port.JobRecord, item: port.Retry) -> None:
            if item.attempt is not None:  # dropped with the job if it ends cancelled instead
                self._attempts[job.id] = (*self._attempts.get(job.id, ()), item.attempt)
            self._hand_back(job, run_at=item.run_at, last_error=item.error, last_traceback=item.traceback)

        return self._each_held(retries, retry)

    def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        def bury(job: port.JobRecord, item: port.Burial) -> None:
            self._to_dead(job, item.error, item.traceback, now, item.attempt)

        return self._each_held(burials, bury)

    def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        def release(job: port.JobRecord, _: port.Held) -> None:
            self._hand_back(job, attempts=max(0, job.attempts - 1))

        return self._each_held(held, release)

    def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        asked: list[port.Held] = []

        def beat(job: port.JobRecord, item: port.Heartbeat) -> None:
            row = self._jobs[job.id] = replace(job, lease_until=item.lease_until)
            heapq.heappush(self._index(row.queue).leases, (item.lease_until, next(self._serials), row))
            if row.cancel_requested:
                asked.append(port.Held(item.job_id, item.fence))

        return self._each_held(beats, beat), asked

    def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        with self._cond:
            return [
                port.Held(pair.job_id, pair.fence)
                for pair in held
                if (job := self._held(pair.job_id, pair.fence)) is not None and job.cancel_requested
            ]

    def get_job(self, job_id: int) -> port.JobRecord | None:
        with self._cond:
            live = self._jobs.get(job_id)
            if live is None:
                return self._dead.get(job_id)
            logged = self._attempts.get(job_id)
            return live if logged is None else replace(live, attempt_log=logged)

    def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        requeued = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                job = self._dead.pop(job_id, None)
                if job is None:
                    continue
                self._publish(
                    replace(
                        job,
                        state=port.JobState.PENDING,
                        attempts=0,
                        run_at=now,
                        expires_at=None,
                        died_at=None,
                        unique_key=None,
                        attempt_log=(),
                    )
                )
                self._signal(job.queue)
                requeued.append(job_id)
        return requeued

    # -- locks ---------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        with self._cond:
            held = self._locks.get(name)
            if held is not None and held.expires_at > now:
                if held.owner != owner:
                    return None
                lock = replace(held, expires_at=expires_at)
            else:
                lock = port.LockRecord(name, owner, next(self._tokens), expires_at)
            self._locks[name] = lock
            return lock

    def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token or held.expires_at <= now:
                raise LeaseLost(f"lock {lock.name!r} is no longer held by {lock.owner!r}")
            renewed = replace(held, expires_at=expires_at)
            self._locks[lock.name] = renewed
            return renewed

    def release_lock(self, lock: port.LockRecord) -> bool:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token:
                return False
            del self._locks[lock.name]
            return True

    # -- schedules -----------------------------------------------------------------

    def register_schedules(self, schedules: Sequence[port.NewSchedule], now: datetime) -> list[port.ScheduleRecord]:
        with self._cond:
            stored = []
            for new in schedules:
                old = self._schedules.get(new.name)
                existing = None if old is None else (old.interval_s, old.next_boundary, old.anchor)
                stored.append(
                    port.ScheduleRecord(
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
                )
            for record in stored:
                self._schedules[record.name] = record
            return stored

    def unschedule(self, name: str) -> bool:
        with self._cond:
            return self._schedules.pop(name, None) is not None

    def schedules(self) -> list[port.ScheduleRecord]:
        with self._cond:
            return [self._schedules[name] for name in sorted(self._schedules)]

    def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        with self._cond:
            due = [
                port.DueSchedule(
                    record.name,
                    record.interval_s,
                    record.queue,
                    record.priority,
                    record.max_attempts,
                    record.expires,
                    record.next_boundary,
                    len(record.payload),
                )
                for record in self._schedules.values()
                if record.next_boundary <= now
            ]
            configs = {schedule.queue: self._configs.get(schedule.queue) for schedule in due}
            plan = plan_tick(due, configs, now, budget, fired)
            ids = [next(self._ids) for _ in plan.fires]
            for job_id, fire in zip(ids, plan.fires, strict=True):
                source = self._schedules[fire.schedule]
                job = port.NewJob(
                    fire.queue,
                    source.payload,
                    fire.priority,
                    fire.run_at,
                    fire.expires_at,
                    fire.max_attempts,
                    task=source.task,
                )
                self._make_pending(replace(_new_row(job_id, job, now), schedule=fire.schedule, boundary=fire.boundary))
            for name, boundary, last in plan.advanced:
                record = self._schedules[name]
                self._schedules[name] = replace(
                    record, next_boundary=boundary, last_boundary=record.last_boundary if last is None else last
                )
            for queue in {fire.queue for fire in plan.fires}:
                self._signal(queue)
            return plan.result(ids, self._soonest())

    def _soonest(self) -> datetime | None:
        return soonest(record.next_boundary for record in self._schedules.values())

    def soonest_boundary(self) -> datetime | None:
        with self._cond:
            return self._soonest()

    def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        """The soonest ``run_at`` or ``lease_until`` that may make a claim of ``queues`` find work (paused
        queues left out): a scan under the lock, as the inspection reads are."""
        with self._cond:
            wanted = {queue for queue in queues if not (config := self._configs.get(queue)) or not config.paused}
            dues: list[datetime] = []
            for row in self._jobs.values():
                if row.queue not in wanted or row.waiting:  # a waiting job moves when the one ahead ends
                    continue
                if row.state is port.JobState.PENDING:
                    dues.append(row.run_at)
                elif row.state is port.JobState.RUNNING and row.lease_until is not None:
                    dues.append(row.lease_until)
            return min(dues, default=None)

    # -- inspection and actions ----------------------------------------------------
    # Scans under the one lock: a memory store is small, and reads never touch the heaps.

    def queue_counts(self, now: datetime, queue: str | None = None, cap: int | None = None) -> list[port.QueueCounts]:
        with self._cond:
            # ready, delayed, running, dead, oldest ready, waiting
            tallies: dict[str, list[Any]] = {} if queue is None else {queue: [0, 0, 0, 0, None, 0]}
            for row in itertools.chain(self._jobs.values(), self._dead.values()):
                if queue is not None and row.queue != queue:
                    continue
                tally = tallies.setdefault(row.queue, [0, 0, 0, 0, None, 0])
                if row.state is port.JobState.DEAD:
                    tally[3] += 1
                elif row.state is port.JobState.RUNNING:
                    tally[2] += 1
                elif row.waiting:
                    tally[5] += 1
                elif row.run_at > now:
                    tally[1] += 1
                else:
                    tally[0] += 1
                    tally[4] = row.run_at if tally[4] is None else min(tally[4], row.run_at)
            paused = {name for name, config in self._configs.items() if config.paused}
            if queue is None:
                for name in paused:
                    tallies.setdefault(name, [0, 0, 0, 0, None, 0])
        if cap is not None:
            for tally in tallies.values():
                tally[:4] = [min(count, cap) for count in tally[:4]]
                tally[5] = min(tally[5], cap)
        counts = []
        for name in sorted(tallies):
            ready, delayed, running, dead, oldest, waiting = tallies[name]
            counts.append(port.QueueCounts(name, ready, delayed, running, dead, oldest, waiting, name in paused))
        return counts

    def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        phase, now, after = query.phase, query.now, query.after
        with self._cond:
            source = self._dead.values() if phase is port.JobPhase.DEAD else self._jobs.values()
            rows = [row for row in source if row.queue == query.queue and phase_at(row, now) is phase]
        if query.contains is not None:
            rows = [row for row in rows if payload_contains(row.payload, query.contains)]
        if query.task is not None:
            rows = [row for row in rows if row.task == query.task]
        rows.sort(key=listing_order(phase, query.reverse))
        if after is not None:
            rows = [row for row in rows if after_key(row, after, phase, query.reverse)]
        return rows[: query.limit]

    def read_lock(self, name: str) -> port.LockRecord | None:
        with self._cond:
            return self._locks.get(name)

    def cancel(self, job_ids: Sequence[int]) -> list[int]:
        cancelled = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                row = self._jobs.get(job_id)
                if row is not None and row.state is port.JobState.PENDING:
                    self._delete(row)  # its heap entries are dead now: _live() no longer matches
                    cancelled.append(job_id)
        return cancelled

    def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        marked = []
        with self._cond:
            for job_id in sorted(set(job_ids)):
                row = self._jobs.get(job_id)
                if row is not None and row.state is port.JobState.RUNNING:
                    marked_row = self._jobs[job_id] = replace(row, cancel_requested=True)
                    if marked_row.lease_until is not None:  # the old heap entry is dead: _live() no longer matches
                        entry = (marked_row.lease_until, next(self._serials), marked_row)
                        heapq.heappush(self._index(row.queue).leases, entry)
                    marked.append(job_id)
        return marked

    def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        with self._cond:
            doomed = sorted(
                (row.died_at, row.id)
                for row in self._dead.values()
                if row.queue == queue and row.died_at is not None and row.died_at <= died_before
            )[:limit]
            for _, job_id in doomed:
                del self._dead[job_id]
        return len(doomed)

    # -- kept results (ADR 042) ------------------------------------------------------

    def get_result(self, job_id: int) -> port.ResultRecord | None:
        with self._cond:
            return self._results.get(job_id)

    def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        with self._cond:
            rows = [row for row in self._results.values() if row.queue == queue]
        rows.sort(key=lambda row: (row.finished_at, row.id), reverse=True)
        if after is not None and after.at is not None:
            rows = [row for row in rows if (row.finished_at, row.id) < (after.at, after.id)]
        return rows[:limit]

    def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        with self._cond:
            doomed = sorted(
                (row.keep_until, row.id)
                for row in self._results.values()
                if (queue is None or row.queue == queue) and row.keep_until <= now
            )[:limit]
            for _, job_id in doomed:
                del self._results[job_id]
        return len(doomed)

    def purge_dead_jobs(self, job_ids: Sequence[int]) -> list[int]:
        with self._cond:
            return [job_id for job_id in sorted(set(job_ids)) if self._dead.pop(job_id, None) is not None]

    def record_worker(self, worker: port.WorkerRecord, throughput: Sequence[port.ThroughputRecord] = ()) -> None:
        with self._cond:
            self._workers[worker.id] = worker
            for count in throughput:
                done, failed = self._throughput.get((count.minute, count.queue), (0, 0))
                self._throughput[(count.minute, count.queue)] = (done + count.done, failed + count.failed)

    def remove_worker(self, worker_id: str) -> bool:
        with self._cond:
            return self._workers.pop(worker_id, None) is not None

    def workers(self, since: datetime) -> list[port.WorkerRecord]:
        with self._cond:
            return [self._workers[key] for key in sorted(self._workers) if self._workers[key].seen_at >= since]

    def forget_workers(self, seen_before: datetime) -> int:
        with self._cond:
            stale = [key for key, worker in self._workers.items() if worker.seen_at < seen_before]
            for key in stale:
                del self._workers[key]
        return len(stale)

    def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        with self._cond:
            rows = sorted((key, counts) for key, counts in self._throughput.items() if key[0] >= since)
        return [port.ThroughputRecord(queue, minute, done, failed) for (minute, queue), (done, failed) in rows]

    def purge_throughput(self, before: datetime) -> int:
        with self._cond:
            doomed = [key for key in self._throughput if key[0] < before]
            for key in doomed:
                del self._throughput[key]
        return len(doomed)

    # -- storage upkeep: a dict keeps no dead rows, so there is nothing to count or reclaim ------

    def table_stats(self) -> list[port.TableStats]:
        return []

    def vacuum(self, tables: Sequence[str]) -> list[str]:
        return []


class _Listener:
    """A task parked on some queues: the future that wakes it, resolved on its own loop."""

    __slots__ = ("future", "loop", "queues")

    def __init__(self, queues: frozenset[str], loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        self.queues = queues
        self.loop = loop
        self.future = future

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop is closed: nothing waits there any more
            self.loop.call_soon_threadsafe(_resolve, self.future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
