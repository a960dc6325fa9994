"""The worker runtime: runs tasks (or plain per-queue handlers) for the jobs of its queues (ADR 021).

A worker owns ``concurrency`` threads and claims only for free ones, so it never holds a lease it
cannot work on; idle, it parks on one waiter over all its queues. While a job runs, one
heartbeat thread extends the leases of every running job (a third of the way into each lease)
and enforces task timeouts. The rules are core's: a failed run is retried on the queue's curve
or buried (``_lifecycle.on_failure``, through ``Job.retry``), an undecodable payload is buried
by the claim, a lease end is ``_lifecycle.lease_until``. The loop only decides how to wait.

Stopping: ``stop`` ends claiming; running jobs get ``grace`` seconds to finish; what still runs
then is handed back (``Job.release``: another worker takes it at once, without spending an
attempt). ``abort`` skips the grace. A handed-back, timed-out or lost job's later outcome is
discarded by its fence, so nothing is acked twice and nothing is lost.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue as threadqueue
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ._lifecycle import failure, lease_until
from ._maintenance import DEFAULT_DEAD_RETENTION, Maintenance
from ._names import validate_label, validate_name
from ._options import as_duration
from ._store import Job, Store
from ._tasks import Tasks, _set_current
from ._time import StopToken
from .engine import Heartbeat, Held, WorkerRecord
from .errors import AlkstoreError, DatabaseUnavailable, InvalidArgument, InvalidOptions, LeaseLost

__all__ = ["Handler", "Worker", "WorkerStats"]

log = logging.getLogger("alkstore.worker")

#: A plain handler of a queue's jobs: called with the decoded payload and the job; raising fails the run.
Handler = Callable[[Any, Job], None]

#: How often (seconds of the store's clock) the heartbeat thread looks at the running jobs.
HEARTBEAT_TICK = 1.0
#: How long (wall seconds) an idle worker parks before it looks again without being woken.
DEFAULT_POLL_INTERVAL = 1.0
#: The longest a successful run's ack waits before it is written (wall seconds, ADR 022): acks ride
#: on the worker's next claim, which follows at once while there is work; this bounds the wait
#: when there is none. A crash loses at most this much of acks: those jobs run again.
DEFAULT_ACK_DELAY = 0.02
#: How often (seconds of the store's clock) a worker reports itself for ``Store.workers`` (ADR 020).
REPORT_EVERY = 5.0
#: A worker that has not reported for this long stopped without saying so; a reporting worker forgets it.
FORGET_AFTER = timedelta(hours=1)
#: Default grace a stopping worker gives running jobs (wall seconds).
DEFAULT_GRACE = 30.0
#: How often (wall seconds) a running worker logs its summary.
SUMMARY_EVERY = 60.0
MAX_CONCURRENCY = 1000
_BACKOFF_FIRST, _BACKOFF_LAST = 0.1, 10.0


@dataclass
class WorkerStats:
    """What a worker did: runs finished by outcome, and jobs it gave up or handed back."""

    succeeded: int = 0
    retried: int = 0
    buried: int = 0
    timed_out: int = 0
    lost: int = 0
    released: int = 0

    @property
    def processed(self) -> int:
        """Runs that reached an outcome: succeeded, retried or buried."""
        return self.succeeded + self.retried + self.buried


@dataclass(eq=False)
class _Run:
    """One claimed job: waiting for a thread (prefetched) or running on one; when its lease was last extended."""

    job: Job
    started_at: datetime  # when it was claimed, then when it started running
    beat_at: datetime
    timeout: timedelta | None
    started: float = field(default_factory=time.monotonic)
    running: bool = False  # taken by a thread (else it waits in the inbox)
    abandoned: bool = False  # given up (timeout, lost lease, handed back): its outcome no longer counts


class Worker:
    """Runs the jobs of its queues: tasks from a ``Tasks`` registry, or plain handlers per queue.

    ``queues`` defaults to every queue of ``tasks`` and ``handlers``. ``concurrency`` threads run
    jobs; ``grace`` is how long a stopping worker waits for running jobs; with ``schedules``
    the worker also runs the scheduler (leading, or standing by). Periodic tasks of its queues
    register their schedules when the worker starts. A successful run's ack is written with the
    worker's next claim, at most ``ack_delay`` later (``0``: at once, by the run's thread).
    ``prefetch`` jobs may be claimed beyond the free threads, to wait for one (default 0: claim
    only for free threads); their leases are extended while they wait, and a stopping worker
    hands them back at once (ADR 022). Dead jobs of its queues are kept ``dead_retention``
    (default 7 days; ``None``: forever) and then pruned; a worker also vacuums the storage when
    its dead rows pile up (ADR 023).
    """

    def __init__(
        self,
        store: Store,
        tasks: Tasks | None = None,
        *,
        handlers: Mapping[str, Handler] | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int = 1,
        grace: float | timedelta = DEFAULT_GRACE,
        schedules: bool = False,
        worker_id: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        ack_delay: float | timedelta = DEFAULT_ACK_DELAY,
        prefetch: int = 0,
        dead_retention: float | timedelta | None = DEFAULT_DEAD_RETENTION,
    ) -> None:
        if not isinstance(store, Store):
            raise InvalidArgument(f"store must be an alkstore.Store, not {type(store).__name__}")
        if tasks is not None and not isinstance(tasks, Tasks):
            raise InvalidArgument(f"tasks must be an alkstore.Tasks, not {type(tasks).__name__}")
        self._store = store
        self._tasks = tasks if tasks is not None else Tasks()
        self._handlers: dict[str, Handler] = {}
        for name, handler in (handlers or {}).items():
            validate_name(name, "queue")
            if not callable(handler):
                raise InvalidArgument(f"the handler of queue {name!r} is not callable")
            self._handlers[name] = handler
        if queues is None:
            queues = sorted(set(self._tasks.queues) | set(self._handlers))
        elif isinstance(queues, str):
            raise InvalidArgument("queues must be a sequence of queue names, not one str")
        self._queues = [validate_name(name, "queue") for name in dict.fromkeys(queues)]
        if not self._queues:
            raise InvalidOptions("a worker needs at least one queue: register a task or give a handler")
        if not isinstance(concurrency, int) or isinstance(concurrency, bool):
            raise InvalidOptions(f"concurrency must be an int, not {type(concurrency).__name__}")
        if not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidOptions(f"concurrency must be between 1 and {MAX_CONCURRENCY}, not {concurrency}")
        self._concurrency = concurrency
        if not isinstance(prefetch, int) or isinstance(prefetch, bool):
            raise InvalidOptions(f"prefetch must be an int, not {type(prefetch).__name__}")
        if not 0 <= prefetch <= MAX_CONCURRENCY:
            raise InvalidOptions(f"prefetch must be between 0 and {MAX_CONCURRENCY}, not {prefetch}")
        self._slots = concurrency + prefetch  # jobs held at once: running, or waiting for a thread
        self._grace = as_duration(grace, "grace").total_seconds()
        self._poll_interval = as_duration(poll_interval, "poll_interval", allow_zero=False).total_seconds()
        self._ack_delay = as_duration(ack_delay, "ack_delay").total_seconds()
        if not isinstance(schedules, bool):
            raise InvalidOptions(f"schedules must be a bool, not {type(schedules).__name__}")
        self._schedules = schedules
        self.worker_id = validate_label(worker_id, "worker id") if worker_id is not None else _worker_id()
        retention = None if dead_retention is None else as_duration(dead_retention, "dead_retention")
        self._maintenance = Maintenance(store, self._queues, dead_retention=retention, label=self.worker_id)
        self.stats = WorkerStats()
        self._lock = threading.Condition()
        self._runs: dict[int, _Run] = {}  # by job id: the jobs this worker is running
        self._acks: list[tuple[Job, float]] = []  # finished runs whose ack is still to be written, with their ms
        self._inbox: threadqueue.SimpleQueue[Job | None] = threadqueue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._thread_names = itertools.count(1)
        self._stopping = StopToken()  # the internal stop of the helper threads
        self._started_at: datetime | None = None
        self._reported_at: datetime | None = None
        self._forgot_at: datetime | None = None

    def __repr__(self) -> str:
        return f"<alkstore.Worker {self.worker_id!r} queues={self._queues} concurrency={self._concurrency}>"

    def _count(self, **increments: int) -> None:
        """Add to the stats (from any of the worker's threads)."""
        with self._lock:
            for name, value in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)

    @property
    def queues(self) -> list[str]:
        """The queues this worker claims from, in the order it looks at them."""
        return list(self._queues)

    # -- running ----------------------------------------------------------------------

    def run(self, stop: StopToken, *, abort: StopToken | None = None) -> WorkerStats:
        """Work until ``stop`` is cancelled, then stop gracefully (``abort``: at once); return the stats."""
        if not isinstance(stop, StopToken) or (abort is not None and not isinstance(abort, StopToken)):
            raise InvalidArgument("stop and abort must be alkstore.StopTokens")
        abort = abort if abort is not None else StopToken()
        self._register_periodic()
        log.info(
            "worker %s serving %s with %d thread%s",
            self.worker_id,
            ", ".join(repr(name) for name in self._queues),
            self._concurrency,
            "" if self._concurrency == 1 else "s",
        )
        self._started_at = self._store.clock.now()
        self._report()
        for _ in range(self._concurrency):
            self._start_thread()
        helpers = [
            threading.Thread(target=self._beat, name=f"alkstore-heartbeat-{self.worker_id}", daemon=True),
            threading.Thread(
                target=self._maintenance.run,
                args=(self._stopping,),
                name=f"alkstore-maintenance-{self.worker_id}",
                daemon=True,
            ),
        ]
        scheduler_stop = StopToken()
        if self._schedules:
            helpers.append(
                threading.Thread(
                    target=self._lead, args=(scheduler_stop,), name=f"alkstore-scheduler-{self.worker_id}", daemon=True
                )
            )
        for thread in helpers:
            thread.start()
        try:
            self._claim_loop(stop, abort)
        finally:
            self._drain(abort)
            self._flush_acks()  # what finished within the grace
            self._stopping.cancel()
            scheduler_stop.cancel()
            for _ in self._threads:
                self._inbox.put(None)
            for thread in helpers:
                thread.join()
            self._unreport()
        log.info(
            "worker %s stopped: %d processed (%d ok, %d retried, %d dead), %d timed out, %d lost, %d handed back",
            self.worker_id,
            self.stats.processed,
            self.stats.succeeded,
            self.stats.retried,
            self.stats.buried,
            self.stats.timed_out,
            self.stats.lost,
            self.stats.released,
        )
        return self.stats

    def _register_periodic(self) -> None:
        for periodic in self._tasks.periodic_tasks:
            task = periodic.task
            if task.queue in self._queues:
                self._store._register(
                    task.name, periodic.spec, task.queue, dict(periodic.kwargs), periodic.opts, task.name
                )

    def _lead(self, stop: StopToken) -> None:
        try:
            self._store.run_schedules(stop, standby=True)
        except AlkstoreError as exc:  # permanent: stop the whole worker would lose running jobs' grace
            log.error("the scheduler of worker %s stopped: %s", self.worker_id, exc)

    def _claim_loop(self, stop: StopToken, abort: StopToken) -> None:
        store = self._store
        handles = [store.queue(name) for name in self._queues]
        backoff = _BACKOFF_FIRST
        start = 0
        summary_at = time.monotonic() + SUMMARY_EVERY
        with store._live().waiter(*self._queues) as waiter:
            while not stop.is_cancelled() and not abort.is_cancelled():
                free = self._free_slots(stop, abort)
                if not free:
                    break
                acks = self._take_acks()
                try:
                    claimed = 0
                    for offset in range(len(handles)):
                        queue = handles[(start + offset) % len(handles)]
                        held = [Held(job.id, job._record.fence) for job, _ in acks]
                        stale, jobs = queue._ack_and_claim(held, self.worker_id, free - claimed)
                        self._acked(acks, stale)
                        acks = []
                        for job in jobs:
                            self._dispatch(job)
                        claimed += len(jobs)
                        if claimed >= free:
                            break
                    start = (start + 1) % len(handles)
                    backoff = _BACKOFF_FIRST
                except DatabaseUnavailable as exc:
                    self._put_back(acks)  # fenced: written again later, or found done
                    log.warning("worker %s: database unavailable (%s); again in %.1f s", self.worker_id, exc, backoff)
                    stop.wait(backoff)
                    backoff = min(backoff * 2, _BACKOFF_LAST)
                    continue
                except (RecursionError, MemoryError) as exc:  # a job handed back by the claim (see _lifecycle)
                    log.error("worker %s: a claimed job could not be decoded (%r); handed back", self.worker_id, exc)
                    stop.wait(backoff)
                    continue
                if time.monotonic() >= summary_at:
                    self._summary()
                    summary_at = time.monotonic() + SUMMARY_EVERY
                if not claimed:
                    with self._lock:
                        busy = bool(self._acks) or any(not run.abandoned for run in self._runs.values())
                    waiter.wait(self._ack_delay if busy and self._ack_delay else self._poll_interval, stop)
            self._flush_acks()

    def _take_acks(self) -> list[tuple[Job, float]]:
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def _put_back(self, acks: list[tuple[Job, float]]) -> None:
        with self._lock:
            self._acks[:0] = acks

    def _flush_acks(self) -> None:
        """Write the acks still waiting (a stopping worker's), riding out a short outage."""
        acks = self._take_acks()
        if not acks:
            return
        held = [Held(job.id, job._record.fence) for job, _ in acks]
        try:
            stale: list[Held] = []
            self._with_retries(lambda: stale.extend(self._store._live().ack(held)))
        except DatabaseUnavailable as exc:
            log.error(
                "worker %s: %d acks could not be written (%s); those jobs run again", self.worker_id, len(held), exc
            )
            return
        self._acked(acks, stale)

    def _acked(self, acks: list[tuple[Job, float]], stale: list[Held]) -> None:
        """Count and log the runs whose acks were just written (``stale``: those whose lease was lost)."""
        lost = {pair.job_id for pair in stale}
        self._count(succeeded=len(acks) - len(lost), lost=len(lost))
        if self._store._telemetry is not None and acks:
            self._store._telemetry.acked([job._record for job, _ in acks if job.id not in lost])
        logged = log.isEnabledFor(logging.INFO)  # the hot path: describe each job only if it is logged
        for job, elapsed_ms in acks:
            if job.id in lost:
                log.warning("job %s (%s): its lease was lost before its ack; outcome discarded", job.id, _what(job))
            elif logged:
                log.info("job %s (%s) done in %.1f ms", job.id, _what(job), elapsed_ms)

    def _free_slots(self, stop: StopToken, abort: StopToken) -> int:
        """Wait for at least one free thread (or a stop); how many are free."""
        with self._lock:
            while not stop.is_cancelled() and not abort.is_cancelled():
                free = self._slots - sum(1 for run in self._runs.values() if not run.abandoned)
                if free > 0:
                    return free
                self._lock.wait(0.2)
        return 0

    def _dispatch(self, job: Job) -> None:
        task = self._tasks.get(job.task) if job.task is not None else None
        now = self._store.clock.now()
        with self._lock:
            self._runs[job.id] = _Run(job, now, now, None if task is None else task.timeout)
        self._inbox.put(job)

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._serve, name=f"alkstore-worker-{self.worker_id}-{next(self._thread_names)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    # -- one job ------------------------------------------------------------------------

    def _serve(self) -> None:
        while (job := self._inbox.get()) is not None:
            with self._lock:
                run = self._runs.get(job.id)
                if run is None or run.abandoned:
                    if run is not None:
                        del self._runs[job.id]
                    continue  # handed back (or lost) before it started
                run.running = True
            run.started_at = self._store.clock.now()  # its run (and its timeout) starts now
            run.started = time.monotonic()
            self._execute(run)
            if self._finished(run):
                return  # a replacement thread took this one's place when the run was given up

    def _finished(self, run: _Run) -> bool:
        """Forget a run that ended; whether it had been given up (its thread then retires)."""
        with self._lock:
            if self._runs.get(run.job.id) is run:
                del self._runs[run.job.id]
            self._lock.notify_all()
            return run.abandoned

    def _execute(self, run: _Run) -> None:
        job = run.job
        _set_current(job)
        error: BaseException | str | None = None
        telemetry = self._store._telemetry
        try:
            if telemetry is None:
                error = self._call(job)
            else:
                error = telemetry.run(job._record, self._store.clock, lambda: self._call(job))
        except Exception as exc:
            error = exc
        finally:
            _set_current(None)
        elapsed_ms = (time.monotonic() - run.started) * 1000
        with self._lock:
            if run.abandoned:
                log.warning(
                    "job %s (%s) finished after it was given up, in %.1f ms; its outcome is discarded",
                    job.id,
                    _what(job),
                    elapsed_ms,
                )
                return
        try:
            if error is None and self._ack_delay:
                with self._lock:
                    self._acks.append((job, elapsed_ms))  # the claim loop writes it with its next claim
                return
            if error is None:
                self._with_retries(job.ack)
                self._count(succeeded=1)
                log.info("job %s (%s) done in %.1f ms", job.id, _what(job), elapsed_ms)
            else:
                self._with_retries(lambda: job.retry(error))
                buried = job.attempts >= job.max_attempts
                if buried:
                    self._count(buried=1)
                else:
                    self._count(retried=1)
                log.info(
                    "job %s (%s) failed in %.1f ms: %s; %s",
                    job.id,
                    _what(job),
                    elapsed_ms,
                    f"{type(error).__name__}: {failure(error).error}" if isinstance(error, BaseException) else error,
                    "dead, no attempts left" if buried else "to be retried",
                )
        except LeaseLost:
            self._count(lost=1)
            log.warning(
                "job %s (%s): its lease was lost before it finished; its outcome is discarded", job.id, _what(job)
            )
        except DatabaseUnavailable as exc:
            log.error(
                "job %s (%s): could not record its outcome (%s); it will be run again once its lease lapses",
                job.id,
                _what(job),
                exc,
            )

    def _call(self, job: Job) -> str | None:
        """Run the job's task (or its queue's handler); the reason it cannot be run, if it cannot."""
        handler = self._handlers.get(job.queue)
        task = self._tasks.get(job.task) if job.task is not None else None
        if task is None and handler is not None:
            handler(job.payload, job)
            return None
        if job.task is None:
            return f"queue {job.queue!r} has no handler here, and the job names no task"
        if task is None:
            known = ", ".join(sorted(t.name for t in self._tasks)) or "none"
            return f"unknown task {job.task!r} (this worker knows: {known})"
        if not isinstance(job.payload, dict):
            return f"the payload of a task run must be its keyword arguments, not {type(job.payload).__name__}"
        task.func(**job.payload)
        return None

    def _with_retries(self, call: Callable[[], None]) -> None:
        """Record an outcome, riding out a short outage (fenced calls are safe to repeat)."""
        pause = _BACKOFF_FIRST
        deadline = time.monotonic() + 30.0
        while True:
            try:
                call()
                return
            except DatabaseUnavailable:
                if time.monotonic() + pause > deadline or self._stopping.is_cancelled():
                    raise
                time.sleep(pause)
                pause = min(pause * 2, _BACKOFF_LAST)

    # -- heartbeats, timeouts, summaries ------------------------------------------------

    def _beat(self) -> None:
        store = self._store
        while not self._stopping.is_cancelled():
            store.clock.sleep(HEARTBEAT_TICK, self._stopping)
            if self._stopping.is_cancelled():
                return
            try:
                self._heartbeat_and_time_out()
            except DatabaseUnavailable as exc:
                log.warning("worker %s: heartbeats failed (%s); trying again", self.worker_id, exc)
            except Exception:
                log.exception("worker %s: the heartbeat thread hit an error; it carries on", self.worker_id)
            reported = self._reported_at
            if reported is None or store.clock.now() - reported >= timedelta(seconds=REPORT_EVERY):
                self._report()

    # -- reporting itself (Store.workers, alkstore status) --------------------------------

    def _report(self) -> None:
        """Store what this worker is and has done, for operators; now and then forget workers long gone.

        Best effort: a failure is logged and the next report tries again; it never stops the worker.
        """
        store = self._store
        now = store.clock.now()
        with self._lock:
            running = sum(1 for run in self._runs.values() if run.running and not run.abandoned)
            stats = self.stats
            failed = stats.retried + stats.buried + stats.timed_out
            record = WorkerRecord(
                self.worker_id,
                socket.gethostname(),
                os.getpid(),
                tuple(self._queues),
                self._concurrency,
                self._started_at or now,
                now,
                running,
                stats.processed + stats.timed_out,
                failed,
            )
        try:
            engine = store._live()
            engine.record_worker(record)
            self._reported_at = now
            if self._forgot_at is None or now - self._forgot_at >= FORGET_AFTER / 60:
                engine.forget_workers(now - FORGET_AFTER)
                self._forgot_at = now
        except DatabaseUnavailable as exc:
            log.warning("worker %s: could not report itself (%s); trying again later", self.worker_id, exc)
        except AlkstoreError as exc:
            log.error("worker %s: could not report itself: %s", self.worker_id, exc)

    def _unreport(self) -> None:
        """A clean stop: this worker is no longer one of ``Store.workers``."""
        try:
            self._store._live().remove_worker(self.worker_id)
        except AlkstoreError as exc:
            log.warning("worker %s: could not remove its report (%s); it is forgotten later", self.worker_id, exc)

    def _heartbeat_and_time_out(self) -> None:
        store = self._store
        now = store.clock.now()
        with self._lock:
            runs = [run for run in self._runs.values() if not run.abandoned]
        timed_out = [
            run for run in runs if run.running and run.timeout is not None and now - run.started_at >= run.timeout
        ]
        for run in timed_out:
            self._give_up(run, f"timed out after {run.timeout.total_seconds():g} s")  # type: ignore[union-attr]
        due = []
        for run in runs:
            if run in timed_out:
                continue
            defaults = store._defaults(run.job.queue)
            visibility = run.job._record.visibility or defaults.visibility_timeout
            if now - run.beat_at >= visibility / 3:
                due.append((run, lease_until(run.job._record, defaults, now)))
        if not due:
            return
        beats = [Heartbeat(run.job.id, run.job._record.fence, until) for run, until in due]
        stale = {held.job_id for held in store._live().heartbeat(beats)}
        for run, until in due:
            if run.job.id in stale:
                self._lost(run)
            else:
                run.beat_at = now
                object.__setattr__(run.job, "lease_until", until)

    def _give_up(self, run: _Run, reason: str) -> None:
        """A run that outlived its timeout: cancel it, retry its job now, and free its thread."""
        job = run.job
        with self._lock:
            if run.abandoned:
                return
            run.abandoned = True
            self._lock.notify_all()
        job.stop.cancel()
        self._count(timed_out=1)
        log.warning("job %s (%s) %s; it is given up and retried, its thread replaced", job.id, _what(job), reason)
        try:
            job.retry(reason)
        except LeaseLost:
            self._count(lost=1)
        except DatabaseUnavailable as exc:
            log.error("job %s: could not give it up (%s); it runs again once its lease lapses", job.id, exc)
        self._start_thread()

    def _lost(self, run: _Run) -> None:
        """A heartbeat found the lease taken over: tell the handler, discard its outcome."""
        with self._lock:
            if run.abandoned:
                return
            run.abandoned = True
            running = run.running
            self._lock.notify_all()
        run.job.stop.cancel()
        self._count(lost=1)
        log.warning(
            "job %s (%s): its lease was lost (taken over by another claim); the run is cancelled and its outcome "
            "will not count",
            run.job.id,
            _what(run.job),
        )
        if running:  # its thread may never return: another takes its place (a waiting job has none)
            self._start_thread()

    def _summary(self) -> None:
        with self._lock:
            running = sum(1 for run in self._runs.values() if run.running and not run.abandoned)
        stats = self.stats
        log.info(
            "worker %s: %d processed (%d ok, %d retried, %d dead), %d running",
            self.worker_id,
            stats.processed,
            stats.succeeded,
            stats.retried,
            stats.buried,
            running,
        )

    # -- stopping -----------------------------------------------------------------------

    def _drain(self, abort: StopToken) -> None:
        """Hand back the jobs waiting for a thread at once; give running jobs the grace, then hand back the rest."""
        with self._lock:
            waiting = [run for run in self._runs.values() if not run.running and not run.abandoned]
            for run in waiting:
                run.abandoned = True
        self._hand_back(waiting, "waiting")
        deadline = time.monotonic() + self._grace
        with self._lock:
            while not abort.is_cancelled():
                running = [run for run in self._runs.values() if not run.abandoned]
                left = deadline - time.monotonic()
                if not running or left <= 0:
                    break
                self._lock.wait(min(left, 0.1))
            remaining = [run for run in self._runs.values() if not run.abandoned]
            for run in remaining:
                run.abandoned = True
        self._hand_back(remaining, "running")

    def _hand_back(self, runs: list[_Run], what: str) -> None:
        """Release the jobs of ``runs`` (``what`` they were doing: running, waiting) for another worker."""
        if not runs:
            return
        for run in runs:
            run.job.stop.cancel()
        held = [Held(run.job.id, run.job._record.fence) for run in runs]
        try:
            stale = {pair.job_id for pair in self._store._live().release(held, self._store.clock.now())}
        except AlkstoreError as exc:
            log.error(
                "worker %s could not hand back %d %s jobs (%s); they run again once their leases lapse",
                self.worker_id,
                len(held),
                what,
                exc,
            )
            return
        self._count(released=len(held) - len(stale))
        log.info(
            "worker %s handed back %d %s job%s (%s) for another worker to take at once",
            self.worker_id,
            len(held) - len(stale),
            what,
            "" if len(held) - len(stale) == 1 else "s",
            ", ".join(str(run.job.id) for run in runs if run.job.id not in stale),
        )


def _what(job: Job) -> str:
    """How a log line names a job: its task (or queue), queue and attempt."""
    task = f"task {job.task}, " if job.task is not None else ""
    return f"{task}queue {job.queue!r}, attempt {job.attempts}/{job.max_attempts}"


def _worker_id() -> str:
    """A worker id unique to this process and run: host, pid and randomness."""
    return f"{socket.gethostname()[:48]}:{os.getpid()}:{secrets.token_hex(3)}"
