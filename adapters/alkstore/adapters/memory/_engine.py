"""The in-memory engine: every table a dict, every index a lazily-cleaned heap, one lock."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

from alkstore._boundary import registration_boundary, soonest
from alkstore._options import ScheduleOpts
from alkstore._spec import Every
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
from alkstore.errors import InvalidOptions, LeaseLost

__all__ = ["MemoryEngine", "MemoryTransaction", "open_engine"]


def open_engine(url: str, **options: Any) -> MemoryEngine:
    """Entry point for ``memory://``: each call is a new, empty, private store."""
    if url.rstrip("/").lower() != "memory:":
        raise InvalidOptions(f"the memory engine takes the URL 'memory://' only, not {url!r}")
    if options:
        raise InvalidOptions(f"the memory engine takes no options, not {', '.join(sorted(options))}")
    return MemoryEngine()


def _new_row(job_id: int, job: NewJob, now: datetime) -> JobRecord:
    stamps = job.stamps
    return JobRecord(
        id=job_id,
        queue=job.queue,
        payload=job.payload,
        state=JobState.PENDING,
        priority=stamps.priority,
        run_at=stamps.run_at,
        expires_at=stamps.expires_at,
        attempts=0,
        max_attempts=stamps.max_attempts,
        last_error=None,
        schedule=job.schedule,
        boundary=job.boundary,
        enqueued_at=now,
        worker_id=None,
        lease_until=None,
        died_at=None,
        lease=0,
    )


class _QueueIndex:
    """Heaps over one queue's jobs.

    Rows are immutable and replaced on every change, so an entry carries the row it was made
    for and is live only while that very row is still the stored one. Each entry has a unique
    serial before the row, so ties (one job re-entered under the same key) never compare rows.
    """

    __slots__ = ("delayed", "expiry", "leases", "ready", "signals")

    def __init__(self) -> None:
        self.ready: list[tuple[int, datetime, int, int, JobRecord]] = []  # (-priority, run_at, id, serial, row)
        self.delayed: list[tuple[datetime, int, JobRecord]] = []  # (run_at, serial, row)
        self.leases: list[tuple[datetime, int, JobRecord]] = []  # (lease_until, serial, row)
        self.expiry: list[tuple[datetime, int, JobRecord]] = []  # (expires_at, serial, row)
        self.signals = 0


class MemoryTransaction:
    """The memory engine's transaction: enqueues are buffered and published atomically at commit."""

    __slots__ = ("_engine", "_pending", "_state")

    def __init__(self, engine: MemoryEngine) -> None:
        self._engine = engine
        self._pending: list[JobRecord] = []
        self._state = "open"

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.MemoryTransaction {self._state}, {len(self._pending)} enqueued>"


class _MemoryWaiter(Waiter):
    def __init__(self, engine: MemoryEngine, queue: str) -> None:
        self._engine = engine
        self._queue = queue
        self._seen = engine._index(queue).signals

    def wait(self, timeout: float) -> None:
        engine = self._engine
        with engine._cond:
            index = engine._index(self._queue)
            if index.signals == self._seen and not engine._closed:
                engine._cond.wait(timeout)
            self._seen = index.signals


class MemoryEngine(Engine):
    """All state in this process, guarded by one lock; see ``alkstore.engine.Engine`` for the contract."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self._serials = itertools.count()  # tie-breakers of heap entries
        self._jobs: dict[int, JobRecord] = {}
        self._dead: dict[int, JobRecord] = {}
        self._queues: dict[str, _QueueIndex] = {}
        self._locks: dict[str, LockRecord] = {}
        self._schedules: dict[str, ScheduleRecord] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.MemoryEngine jobs={len(self._jobs)} dead={len(self._dead)}>"

    # -- lifecycle -----------------------------------------------------------------

    def migrate(self) -> None:
        """Nothing to migrate in memory."""

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- internals -----------------------------------------------------------------

    def _index(self, queue: str) -> _QueueIndex:
        index = self._queues.get(queue)
        if index is None:
            index = self._queues[queue] = _QueueIndex()
        return index

    def _make_pending(self, job: JobRecord, **changes: Any) -> None:
        row = replace(job, state=JobState.PENDING, worker_id=None, lease_until=None, **changes)
        self._jobs[row.id] = row
        index = self._index(row.queue)
        heapq.heappush(index.delayed, (row.run_at, next(self._serials), row))
        if row.expires_at is not None:
            heapq.heappush(index.expiry, (row.expires_at, next(self._serials), row))

    def _signal(self, queue: str) -> None:
        self._index(queue).signals += 1
        self._cond.notify_all()

    def _insert(self, job_id: int, job: NewJob, now: datetime) -> None:
        self._make_pending(_new_row(job_id, job, now))

    def _live(self, row: JobRecord) -> bool:
        return self._jobs.get(row.id) is row

    def _fenced(self, job_id: int, lease: int) -> JobRecord:
        job = self._jobs.get(job_id)
        if job is None or job.state is not JobState.RUNNING or job.lease != lease:
            raise LeaseLost(f"job {job_id} is no longer held under lease {lease}")
        return job

    def _to_dead(self, job: JobRecord, error: str, now: datetime) -> None:
        del self._jobs[job.id]
        self._dead[job.id] = replace(
            job, state=JobState.DEAD, last_error=error, died_at=now, worker_id=None, lease_until=None
        )

    # -- jobs ----------------------------------------------------------------------

    def enqueue(self, job: NewJob, now: datetime) -> int:
        with self._cond:
            job_id = next(self._ids)
            self._insert(job_id, job, now)
            self._signal(job.queue)
            return job_id

    @contextmanager
    def transaction(self) -> Iterator[MemoryTransaction]:
        tx = MemoryTransaction(self)
        try:
            yield tx
        except BaseException:
            tx._state = "rolled back"
            tx._pending.clear()
            raise
        with self._cond:
            tx._state = "committed"
            for row in tx._pending:
                self._make_pending(row)
            for queue in {row.queue for row in tx._pending}:
                self._signal(queue)

    def enqueue_tx(self, tx: Any, job: NewJob, now: datetime) -> int:
        if not isinstance(tx, MemoryTransaction) or tx._engine is not self:
            raise TypeError(f"expected a transaction from this store's transaction(), not {type(tx).__name__}")
        if tx._state != "open":
            raise ValueError(f"the transaction is already {tx._state}")
        with self._cond:
            job_id = next(self._ids)
        tx._pending.append(_new_row(job_id, job, now))
        return job_id

    def claim(self, queue: str, worker_id: str, now: datetime, lease_until: datetime) -> JobRecord | None:
        with self._cond:
            index = self._index(queue)
            self._sweep_leases(index, now)
            self._sweep_expired(index, now)
            while index.delayed and index.delayed[0][0] <= now:
                _, _, row = heapq.heappop(index.delayed)
                if self._live(row):
                    heapq.heappush(index.ready, (-row.priority, row.run_at, row.id, next(self._serials), row))
            while index.ready:
                _, run_at, job_id, _, row = heapq.heappop(index.ready)
                if not self._live(row):
                    continue
                if run_at > now:  # the clock went backwards since it was ready
                    heapq.heappush(index.delayed, (run_at, next(self._serials), row))
                    continue
                claimed = replace(
                    row,
                    state=JobState.RUNNING,
                    attempts=row.attempts + 1,
                    lease=row.lease + 1,
                    worker_id=worker_id,
                    lease_until=lease_until,
                )
                self._jobs[job_id] = claimed
                heapq.heappush(index.leases, (lease_until, next(self._serials), claimed))
                return claimed
            return None

    def _sweep_leases(self, index: _QueueIndex, now: datetime) -> None:
        while index.leases and index.leases[0][0] <= now:
            _, _, row = heapq.heappop(index.leases)
            if not self._live(row):
                continue
            if row.attempts >= row.max_attempts:
                self._to_dead(row, LEASE_EXPIRED_ERROR, now)
            else:
                self._make_pending(row)

    def _sweep_expired(self, index: _QueueIndex, now: datetime) -> None:
        while index.expiry and index.expiry[0][0] <= now:
            _, _, row = heapq.heappop(index.expiry)
            if self._live(row):
                self._to_dead(row, JOB_EXPIRED_ERROR, now)

    @contextmanager
    def waiter(self, queue: str) -> Iterator[Waiter]:
        with self._cond:
            waiter = _MemoryWaiter(self, queue)
        yield waiter

    def ack(self, job_id: int, lease: int) -> None:
        with self._cond:
            self._fenced(job_id, lease)
            del self._jobs[job_id]

    def retry(self, job_id: int, lease: int, error: str, run_at: datetime) -> None:
        with self._cond:
            job = self._fenced(job_id, lease)
            self._make_pending(job, run_at=run_at, last_error=error)
            self._signal(job.queue)

    def bury(self, job_id: int, lease: int, error: str, now: datetime) -> None:
        with self._cond:
            self._to_dead(self._fenced(job_id, lease), error, now)

    def heartbeat(self, job_id: int, lease: int, lease_until: datetime) -> None:
        with self._cond:
            row = replace(self._fenced(job_id, lease), lease_until=lease_until)
            self._jobs[job_id] = row
            heapq.heappush(self._index(row.queue).leases, (lease_until, next(self._serials), row))

    def get_job(self, job_id: int) -> JobRecord | None:
        with self._cond:
            return self._jobs.get(job_id) or self._dead.get(job_id)

    def requeue_dead(self, job_id: int, now: datetime) -> bool:
        with self._cond:
            job = self._dead.pop(job_id, None)
            if job is None:
                return False
            self._make_pending(job, attempts=0, run_at=now, expires_at=None, died_at=None)
            self._signal(job.queue)
            return True

    # -- locks ---------------------------------------------------------------------

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        with self._cond:
            held = self._locks.get(name)
            if held is not None and held.expires_at > now:
                if held.owner != owner:
                    return None
                lock = replace(held, expires_at=expires_at)
            else:
                lock = LockRecord(name, owner, next(self._tokens), expires_at)
            self._locks[name] = lock
            return lock

    def renew_lock(self, lock: LockRecord, now: datetime, expires_at: datetime) -> LockRecord:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token or held.expires_at <= now:
                raise LeaseLost(f"lease {lock.name!r} is no longer held by {lock.owner!r}")
            renewed = replace(held, expires_at=expires_at)
            self._locks[lock.name] = renewed
            return renewed

    def release_lock(self, lock: LockRecord) -> bool:
        with self._cond:
            held = self._locks.get(lock.name)
            if held is None or held.token != lock.token:
                return False
            del self._locks[lock.name]
            return True

    # -- schedules -----------------------------------------------------------------

    def register_schedule(
        self,
        name: str,
        every: Every,
        queue: str,
        payload: bytes,
        opts: ScheduleOpts,
        now: datetime,
    ) -> ScheduleRecord:
        with self._cond:
            old = self._schedules.get(name)
            existing = None if old is None else (old.interval_s, old.next_boundary)
            record = ScheduleRecord(
                name=name,
                spec=str(every),
                interval_s=every.seconds,
                queue=queue,
                payload=payload,
                opts=opts,
                next_boundary=registration_boundary(existing, every.seconds, now),
            )
            self._schedules[name] = record
            return record

    def unschedule(self, name: str) -> bool:
        with self._cond:
            return self._schedules.pop(name, None) is not None

    def schedules(self) -> list[ScheduleRecord]:
        with self._cond:
            return [self._schedules[name] for name in sorted(self._schedules)]

    def tick(self, now: datetime) -> TickResult:
        with self._cond:
            plan = plan_tick(self._schedules.values(), now)
            ids = [next(self._ids) for _ in plan.planned]
            for job_id, job in zip(ids, plan.jobs, strict=True):
                self._insert(job_id, job, now)
            for name, boundary in plan.advanced:
                self._schedules[name] = replace(self._schedules[name], next_boundary=boundary)
            for queue in {job.queue for job in plan.jobs}:
                self._signal(queue)
            return TickResult(plan.fires(ids), plan.skipped, self._soonest())

    def _soonest(self) -> datetime | None:
        return soonest(record.next_boundary for record in self._schedules.values())

    def soonest_boundary(self) -> datetime | None:
        with self._cond:
            return self._soonest()
