"""The in-memory engine's state: every table a dict, every index a lazily-cleaned heap, one lock.

``TableState`` holds the tables, the waits on them and the internal moves every transition
shares (publishing a row, a job gone, a job dead); the transitions themselves are in the parts
that derive from it, one concept each: ``_jobs`` (queue configs and the job lifecycle),
``_schedules`` (locks and schedules) and ``_listings`` (the operations port). ``MemoryTables``
(``_tables``) is all of them over one state, so every transition still happens under its one
lock. Only how a parked claim waits differs between the runtimes (``wait_signal`` for a thread,
``wait_signal_async`` for a task).
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
from datetime import UTC, datetime
from typing import Any, TypeVar

from alkstore import engine as port
from alkstore.engine import (
    StopToken,
)
from alkstore.errors import StoreClosed

__all__ = ["Fenced", "MemoryTransaction", "QueueIndex", "TableState", "new_row", "result_row"]

#: Any of the port's fenced items: each names a job and the fence it was claimed under.
Fenced = TypeVar("Fenced", bound=port.Held)
#: How often (wall seconds) a parked claim looks at its stop token.
_STOP_POLL_S = 0.05


def new_row(job_id: int, job: port.NewJob, now: datetime) -> port.JobRecord:
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
        rate_key=job.rate_key,
    )


def result_row(job: port.JobRecord, done: port.Done, attempts: tuple[bytes, ...]) -> port.ResultRecord:
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


class QueueIndex:
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

    __slots__ = ("_events", "_pending", "_state", "_tables")

    def __init__(self, tables: TableState) -> None:
        self._tables = tables
        self._pending: list[port.JobRecord] = []
        #: Events emitted in it, stored and their waiters woken at commit (ADR 069).
        self._events: dict[str, port.EventRecord] = {}
        self._state = "open"

    def __repr__(self) -> str:
        return f"<alkstore.adapters.memory.MemoryTransaction {self._state}, {len(self._pending)} enqueued>"


class TableState:
    """All state of one memory store, guarded by one lock, and the internal moves its transitions share."""

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
        self._queues: dict[str, QueueIndex] = {}
        self._configs: dict[str, port.QueueConfig] = {}
        self._locks: dict[str, port.LockRecord] = {}
        self._schedules: dict[str, port.ScheduleRecord] = {}
        self._workers: dict[str, port.WorkerRecord] = {}
        self._throughput: dict[tuple[datetime, str], tuple[int, int]] = {}  # (minute, queue) -> (done, failed)
        #: (minute, queue, task) -> (done, failed, run ms, latency ms) (ADR 075)
        self._task_figures: dict[tuple[datetime, str, str], tuple[int, int, float, float]] = {}
        self._actions: list[port.ActionRecord] = []  # the action log, oldest first (ADR 068)
        self._action_ids = 0  # the last id the log gave (purged entries leave their ids unused)
        self._closed = False
        #: The job holding each (queue, unique key), and each (queue, ordering key)'s line (ADR 031, 032).
        self._holders: dict[tuple[str, str], int] = {}
        self._lines: dict[tuple[str, str], _Line] = {}
        #: The earliest next start of each (queue, rate key) and each queue's own (``QUEUE_RATE_KEY``; ADR 070).
        self._next_starts: dict[tuple[str, str], datetime] = {}
        #: Unique keys taken by jobs of open transactions (a later enqueue of one finds that job).
        self._reserved: dict[tuple[str, str], int] = {}
        #: The latest instant a call brought: when a dependent dies in a call that brings none (a cancel).
        self._seen = datetime.min.replace(tzinfo=UTC)

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

    def _index(self, queue: str) -> QueueIndex:
        index = self._queues.get(queue)
        if index is None:
            index = self._queues[queue] = QueueIndex()
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

    # -- dependencies: the hooks ``_dependencies.DependencyTables`` fills in (ADR 073) ------

    def _link(self, row: port.JobRecord) -> tuple[port.JobRecord, int | None]:
        return row, None

    def _died(self, job: port.JobRecord, now: datetime | None) -> None:
        """``job`` ended without success (its dependents follow their policies)."""

    def _follow(self, child: port.JobRecord, parent: int, now: datetime | None) -> None:
        """Apply ``child``'s policy for its ``parent`` that died."""

    def _unlink(self, job_id: int) -> None:
        """Forget the links of a job deleted for good."""

    def _publish(self, row: port.JobRecord) -> None:
        """Store a new (or requeued) job: the head of its ordering key's line, or waiting behind it (or
        behind its parents)."""
        if row.parents:
            row, died = self._link(row)
            self._make_pending(row)
            if died is not None and row.on_parent_failure is not port.ParentFailure.RUN:
                self._follow(row, died, None)
            return
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

    def _gone(self, job: port.JobRecord, now: datetime | None = None) -> None:
        """``job`` left the unfinished states (acked, dead, cancelled): free its keys, let the next job of
        its ordering key's line run, and its dependents still waiting (an ack took its own) follow it."""
        self._index(job.queue).running.discard(job.id)
        self._died(job, now)
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
        self._unlink(job.id)
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
        self._seen = max(self._seen, now)
        self._gone(job, now)
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
            waiting=False,
            parents_left=0,
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

    def _admit(self, jobs: Sequence[port.NewJob], now: datetime, keep: Callable[[port.JobRecord], None]) -> list[int]:
        """A row per job handed to ``keep`` in order, its id returned; ``Existing`` (and no row) for a job whose
        unique key is taken, by an earlier job of the same call too."""
        ids: list[int] = []
        for job in jobs:
            found = self._taken(job)
            if found is not None:
                ids.append(port.Existing(found))
                continue
            row = new_row(next(self._ids), job, now)
            if job.after or job.after_batch:
                parents = (*job.after, *(ids[position] for position in job.after_batch))
                row = replace(row, parents=tuple(dict.fromkeys(parents)), on_parent_failure=job.on_parent_failure)
            keep(row)
            ids.append(row.id)
        return ids

    def _taken(self, job: port.NewJob) -> int | None:
        """The job already holding (or, in an open transaction, reserving) ``job``'s unique key, if any."""
        if job.unique_key is None:
            return None
        held = self._holder(job.queue, job.unique_key)
        return held if held is not None else self._reserved.get((job.queue, job.unique_key))


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
