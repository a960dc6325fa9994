"""The worker's parts that do no I/O, shared by both runtimes' workers (ADR 021, 029).

``WorkerOptions`` checks a worker's options once; ``WorkerStats`` and ``Tally`` count what it
did; a ``Run`` is one claimed job as the worker tracks it; ``AckBuffer`` holds finished runs
whose ack rides on the next claim (ADR 022). The worker (``_worker_async`` and its sync twin)
composes these with its run table, liveness and reporting.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._acompat import is_async
from alkstore.rules._names import validate_label, validate_name
from alkstore.rules._operations import pickup_latency_ms
from alkstore.rules._options import as_duration
from alkstore.store._tasks import Tasks

from ._couriers import served_couriers
from ._upkeep import DEFAULT_ACTION_RETENTION

__all__ = [
    "CANCEL_CHECK_EVERY",
    "DEFAULT_ACK_DELAY",
    "DEFAULT_GRACE",
    "DEFAULT_POLL_INTERVAL",
    "FORGET_AFTER",
    "GATHER_PAUSE",
    "GATHER_WAIT",
    "HEARTBEAT_TICK",
    "IDLE_RECHECK",
    "IDLE_REPORT_EVERY",
    "MAX_CONCURRENCY",
    "REPORT_EVERY",
    "SUMMARY_EVERY",
    "AckBuffer",
    "Gathering",
    "KnownDue",
    "Run",
    "Tally",
    "WorkerOptions",
    "WorkerStats",
    "describe",
    "new_worker_id",
    "put_back",
]

#: How often (seconds of the store's clock) the liveness loop looks at the running jobs.
HEARTBEAT_TICK = 1.0
#: How often (seconds of the store's clock) a busy worker asks whether a running job's cancel was requested.
CANCEL_CHECK_EVERY = 2.0
#: How long (wall seconds) an idle worker parks before it looks again without being woken when its
#: waiter cannot hear enqueues, or its queues hold work it could not take (ADR 044); and the step in
#: which it checks the store's clock against the instant it waits for.
DEFAULT_POLL_INTERVAL = 1.0
#: How often (wall seconds) an idle worker whose waiter hears enqueues reads again the soonest instant its
#: queues may have work (ADR 044): what bounds the sweep of a lease granted after its last read, and the
#: pick-up of a job whose notification was lost.
IDLE_RECHECK = 5.0
#: The longest a successful run's ack waits before it is written (wall seconds, ADR 022): acks ride
#: on the worker's next claim, which follows at once while there is work; this bounds the wait
#: when there is none. A crash loses at most this much of acks: those jobs run again.
DEFAULT_ACK_DELAY = 0.02
#: The longest (wall seconds) a claim round under a backlog waits for the worker's busy slots to free
#: (ADR 022, amended): one claim for every slot carries their acks in one commit where a claim each
#: would flush the WAL once each. Never longer than ``ack_delay``, nor than the worker's last claim took.
GATHER_WAIT = 0.002
#: Claim rounds a worker begins at once after a gathering wait that ended before every slot was free
#: (runs of differing lengths: waiting would idle slots for little), before it gathers again.
GATHER_PAUSE = 16
#: How often (seconds of the store's clock) a worker reports itself for ``workers()`` (ADR 020).
REPORT_EVERY = 5.0
#: How often (seconds of the store's clock) a worker reports itself while its figures stay the same
#: (ADR 044): well within the minute ``alkstore status`` lists workers for.
IDLE_REPORT_EVERY = 30.0
#: A worker that has not reported for this long stopped without saying so; a reporting worker forgets it.
FORGET_AFTER = timedelta(hours=1)
#: Default grace a stopping worker gives running jobs (wall seconds).
DEFAULT_GRACE = 30.0
#: How often (wall seconds) a running worker logs its summary.
SUMMARY_EVERY = 60.0
MAX_CONCURRENCY = 1000


@dataclass(frozen=True, slots=True)
class KnownDue:
    """An idle worker's last read of the soonest instant its queues may have work (ADR 066): ``at`` as read,
    ``read`` its ``time.monotonic()``, ``put_back`` the worker's own runs that had put a job back by then."""

    at: datetime | None
    read: float
    put_back: int

    def holds(self, now: datetime, mono: float, put_back: int, recheck: float) -> bool:
        """Whether an idle wait may go on this read instead of a new one: younger than ``recheck``, the
        instant it names still ahead, and no job put back by the worker since (its ``run_at`` is unknown)."""
        return put_back == self.put_back and mono - self.read < recheck and (self.at is None or self.at > now)


def put_back(stats: WorkerStats) -> int:
    """How many of a worker's runs ended putting their job back to wait (retried, given up, released, asleep)."""
    return stats.retried + stats.timed_out + stats.released + stats.slept


class Gathering:
    """When a worker's claim round begins (ADR 022, amended): at once for its first free slot, unless its
    last claim came back full (a backlog). Then the round, its turn held, waits for every slot to be
    free, so one claim carries their acks and jobs in one commit (each claim saved is a WAL flush
    saved), but for no longer than ``GATHER_WAIT``, ``ack_delay`` (the acks waiting ride on that claim)
    or the last claim took (on the store's clock); and after a wait that ended with slots still busy
    the next ``GATHER_PAUSE`` rounds claim at once. Used by one round at a time (the turn's holder)."""

    __slots__ = ("_ack_delay", "_claim_took", "_full", "_paused", "slots")

    def __init__(self, slots: int, ack_delay: float) -> None:
        self.slots = slots
        self._ack_delay = ack_delay
        self._full = False  # the last round claimed all it asked for
        self._claim_took = 0.0  # how long the last round took (seconds)
        self._paused = 0  # rounds left that begin at once after a wait that fell short

    def want(self) -> int:
        """How many free slots a round waits for: every slot while gathering, else one."""
        return self.slots if self._full and not self._paused else 1

    def wait(self, free: int) -> float:
        """How long (seconds) a round for ``free`` slots waits for more to free (``0``: it claims now)."""
        if free >= self.want():
            return 0.0
        return min(GATHER_WAIT, self._ack_delay, self._claim_took)

    def waited(self, free: int) -> None:
        """A gathering wait ended with ``free`` slots free: short of every slot, the next rounds claim at once."""
        if free < self.want():
            self._paused = GATHER_PAUSE

    def claimed(self, asked: int, got: int, began: datetime, now: datetime) -> None:
        """A round that began at ``began`` asked for ``asked`` jobs and got ``got``, ending ``now``."""
        self._full = got >= asked
        self._claim_took = max(0.0, (now - began).total_seconds())
        if self._paused:
            self._paused -= 1


@dataclass
class WorkerStats:
    """What a worker did: runs finished by outcome, and jobs it gave up or handed back."""

    succeeded: int = 0
    retried: int = 0
    buried: int = 0
    timed_out: int = 0
    lost: int = 0
    released: int = 0
    cancelled: int = 0  # runs stopped because their job was cancelled while they ran (ADR 035)
    slept: int = 0  # runs that ended with their job asleep: a sleep or an event's wait (ADR 069)

    @property
    def processed(self) -> int:
        """Runs that reached an outcome: succeeded, retried or buried."""
        return self.succeeded + self.retried + self.buried


#: The outcomes a run that failed ends in, for the per-queue counts (ADR 048): retried, dead, given up.
_FAILED = ("retried", "buried", "timed_out")


class Tally:
    """A worker's ``WorkerStats``, added to from any of its threads or tasks; and, per queue, the runs done and
    failed since the counts were last taken (its report stores them, ADR 048), and per queue and task the same
    with their summed run time and pickup latency (ADR 075)."""

    __slots__ = ("_lock", "_queues", "_tasks", "stats")

    def __init__(self) -> None:
        self.stats = WorkerStats()
        self._lock = threading.Lock()
        self._queues: dict[str, list[int]] = {}  # queue -> [done, failed] since the last take
        self._tasks: dict[tuple[str, str], list[float]] = {}  # (queue, task) -> [done, failed, run ms, latency ms]

    def add(self, queue: str | None = None, job: Any = None, run_ms: float = 0.0, **increments: int) -> None:
        """Add ``increments`` to the stats; with ``queue``, count the runs they say succeeded or failed as that
        queue's too, and with ``job`` (of ``queue``) as its task's, ``run_ms`` long."""
        with self._lock:
            for name, value in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)
            if queue is not None:
                done = increments.get("succeeded", 0)
                failed = sum(increments.get(name, 0) for name in _FAILED)
                if done or failed:
                    counts = self._queues.setdefault(queue, [0, 0])
                    counts[0] += done
                    counts[1] += failed
                    if job is not None:
                        self._figure(job, run_ms, done, failed)

    def _figure(self, job: Any, run_ms: float, done: int, failed: int) -> None:
        key = (job.queue, job.task or "")
        figures = self._tasks.get(key)
        if figures is None:
            figures = self._tasks[key] = [0, 0, 0.0, 0.0]
        figures[0] += done
        figures[1] += failed
        figures[2] += run_ms
        figures[3] += pickup_latency_ms(job.run_at, job._claimed_at)

    def acked(self, runs: Sequence[tuple[Any, float]], lost: int) -> None:
        """Acks written: each of ``runs`` (a job and its run time in ms) succeeded, ``lost`` more lost their lease."""
        with self._lock:
            self.stats.succeeded += len(runs)
            self.stats.lost += lost
            queues = self._queues
            for job, run_ms in runs:
                counts = queues.get(job.queue)
                if counts is None:
                    counts = queues[job.queue] = [0, 0]
                counts[0] += 1
                self._figure(job, run_ms, 1, 0)

    def take_counts(self) -> dict[str, tuple[int, int]]:
        """The runs done and failed per queue since the last take (none counted after)."""
        with self._lock:
            taken, self._queues = self._queues, {}
        return {queue: (done, failed) for queue, (done, failed) in taken.items()}

    def put_back_counts(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Counts taken that could not be stored (an outage): counted again for the next take."""
        with self._lock:
            for queue, (done, failed) in counts.items():
                mine = self._queues.setdefault(queue, [0, 0])
                mine[0] += done
                mine[1] += failed

    def take_figures(self) -> dict[tuple[str, str], list[float]]:
        """Per (queue, task): done, failed, run ms and latency ms since the last take (none counted after)."""
        with self._lock:
            taken, self._tasks = self._tasks, {}
        return taken

    def put_back_figures(self, figures: Mapping[tuple[str, str], list[float]]) -> None:
        """Figures taken that could not be stored: counted again for the next take."""
        with self._lock:
            for key, sums in figures.items():
                mine = self._tasks.setdefault(key, [0, 0, 0.0, 0.0])
                for index, value in enumerate(sums):
                    mine[index] += value


@dataclass(eq=False, slots=True)
class Run:
    """One claimed job: waiting for a slot (prefetched) or running in one; when its lease was last extended.

    ``task`` is the asyncio task running it (the async runtime cancels it to end the run early).
    """

    job: Any
    started_at: datetime  # when it was claimed, then when it started running
    beat_at: datetime
    timeout: timedelta | None
    started: float = field(default_factory=time.monotonic)
    running: bool = False  # taken by a slot (else it waits in the inbox)
    abandoned: bool = False  # given up (timeout, lost lease, handed back): its outcome no longer counts
    task: Any = None
    value: Any = None  # what its task (or handler) returned: the result a queue keeping results keeps


class AckBuffer:
    """Finished runs whose ack is still to be written, with their run time in ms and the ack itself (the
    pair, or a ``Done`` keeping the result: ADR 022, 042). A stopping worker closes it: no claim follows
    to carry an ack, so each run writes its own at once (ADR 054)."""

    __slots__ = ("_acks", "_closed", "_lock")

    def __init__(self) -> None:
        self._acks: list[tuple[Any, float, Any]] = []
        self._closed = False
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._acks)

    def push(self, job: Any, elapsed_ms: float, held: Any) -> bool:
        """Hold an ack for the next claim; ``False`` (nothing held) once closed: the run writes it itself."""
        with self._lock:
            if self._closed:
                return False
            self._acks.append((job, elapsed_ms, held))
            return True

    def close(self) -> list[tuple[Any, float, Any]]:
        """Take every ack waiting and hold no more (``push`` refuses from now on)."""
        with self._lock:
            self._closed = True
            acks, self._acks = self._acks, []
        return acks

    def take(self) -> list[tuple[Any, float, Any]]:
        """Every ack waiting, in the order the runs finished; the buffer is empty after."""
        with self._lock:
            acks, self._acks = self._acks, []
        return acks

    def put_back(self, acks: list[tuple[Any, float, Any]]) -> None:
        """Acks that could not be written (an outage): first in line for the next claim."""
        with self._lock:
            self._acks[:0] = acks


@dataclass(frozen=True)
class WorkerOptions:
    """A worker's options, checked: what each means is said on ``Worker``."""

    tasks: Tasks
    handlers: Mapping[str, Any]
    queues: tuple[str, ...]
    concurrency: int
    prefetch: int
    grace: float
    poll_interval: float
    ack_delay: float
    schedules: bool
    worker_id: str
    dead_retention: timedelta | None
    action_retention: timedelta | None
    timeouts: Mapping[str, timedelta] = field(default_factory=dict)  # a courier's, by backing queue (ADR 057)

    @property
    def slots(self) -> int:
        """Jobs held at once: running, or waiting for a slot (prefetched)."""
        return self.concurrency + self.prefetch

    def timeout_of(self, job: Any) -> timedelta | None:
        """How long a run of ``job`` may last: its task's ``timeout``, or its outbox courier's."""
        task = self.tasks.get(job.task) if job.task is not None else None
        return task.timeout if task is not None else self.timeouts.get(job.queue)

    @classmethod
    def check(
        cls,
        tasks: object,
        *,
        handlers: object,
        queues: object,
        concurrency: object,
        grace: object,
        schedules: object,
        worker_id: object,
        poll_interval: object,
        ack_delay: object,
        prefetch: object,
        dead_retention: object,
        runtime: str,
        outboxes: object = None,
        action_retention: object = DEFAULT_ACTION_RETENTION,
    ) -> WorkerOptions:
        """The options checked before the worker does anything; ``runtime`` is the worker's, ``"async"`` or
        ``"sync"`` (only the async one runs ``async def`` tasks and handlers). The couriers of ``outboxes``
        are served as handlers of their backing queues (ADR 057)."""
        coroutines = runtime == "async"
        if tasks is not None and not isinstance(tasks, Tasks):
            raise InvalidArgument(f"tasks must be an alkstore.Tasks, not {type(tasks).__name__}")
        registry = tasks if tasks is not None else Tasks()
        checked: dict[str, Any] = {}
        if handlers is not None and not isinstance(handlers, Mapping):
            raise InvalidArgument(
                f"handlers must be a mapping of queue names to handlers, not {type(handlers).__name__}"
            )
        for name, handler in (handlers or {}).items():
            validate_name(name, "queue")
            if not callable(handler):
                raise InvalidArgument(f"the handler of queue {name!r} is not callable")
            if not coroutines and is_async(handler):
                raise InvalidOptions(f"the handler of queue {name!r} is async: run it with alkstore.AsyncWorker")
            checked[name] = handler
        if not coroutines:
            for task in registry:
                if is_async(task.func):
                    raise InvalidOptions(
                        f"task {task.name!r} is an async def: run it with alkstore.AsyncWorker (alkstore worker does)"
                    )
        couriers = served_couriers(registry, outboxes, coroutines=coroutines)
        if queues is None:
            names: Sequence[Any] = sorted(set(registry.queues) | set(checked))
        elif isinstance(queues, str) or not isinstance(queues, Sequence):
            raise InvalidArgument("queues must be a sequence of queue names, not one str")
        else:
            names = queues
        served = tuple(validate_name(name, "queue") for name in dict.fromkeys(names))
        served += tuple(courier.queue for courier in couriers)
        checked.update((courier.queue, courier.delivery) for courier in couriers)
        if not served:
            raise InvalidOptions("a worker needs at least one queue: register a task or a courier, or give a handler")
        _check_count(concurrency, "concurrency", 1)
        _check_count(prefetch, "prefetch", 0)
        if not isinstance(schedules, bool):
            raise InvalidOptions(f"schedules must be a bool, not {type(schedules).__name__}")
        return cls(
            tasks=registry,
            handlers=checked,
            queues=served,
            concurrency=concurrency,  # type: ignore[arg-type]
            prefetch=prefetch,  # type: ignore[arg-type]
            grace=as_duration(grace, "grace").total_seconds(),
            poll_interval=as_duration(poll_interval, "poll_interval", allow_zero=False).total_seconds(),
            ack_delay=as_duration(ack_delay, "ack_delay").total_seconds(),
            schedules=schedules,
            worker_id=validate_label(worker_id, "worker id") if worker_id is not None else new_worker_id(),
            dead_retention=None if dead_retention is None else as_duration(dead_retention, "dead_retention"),
            action_retention=None if action_retention is None else as_duration(action_retention, "action_retention"),
            timeouts={courier.queue: courier.timeout for courier in couriers if courier.timeout is not None},
        )


def _check_count(value: object, what: str, low: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidOptions(f"{what} must be an int, not {type(value).__name__}")
    if not low <= value <= MAX_CONCURRENCY:
        raise InvalidOptions(f"{what} must be between {low} and {MAX_CONCURRENCY}, not {value}")


def describe(job: Any) -> str:
    """How a log line names a job: its task (or queue), queue and attempt."""
    task = f"task {job.task}, " if job.task is not None else ""
    return f"{task}queue {job.queue!r}, attempt {job.attempts}/{job.max_attempts}"


def new_worker_id() -> str:
    """A worker id unique to this process and run: host, pid and randomness."""
    return f"{socket.gethostname()[:48]}:{os.getpid()}:{secrets.token_hex(3)}"
