"""The worker runtime on every engine (ADR 021): concurrency, failures, leases, timeouts, stopping.

Time moves only when a test moves it: the worker's heartbeat thread sleeps on the store's
``ManualClock``, so ``step`` advances the clock and waits until it is parked again. The claim
loop polls every few hundredths of a wall second, so a job made due by the clock is taken soon.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from alkstore import (
    EnqueueOpts,
    InvalidArgument,
    InvalidOptions,
    Job,
    JobState,
    ManualClock,
    StopToken,
    Store,
    Tasks,
    Worker,
    WorkerStats,
    current_job,
)
from tests.support import PATIENCE, must_claim, must_get

from ._engines import T0
from ._runners import HoldingClock, helper, step, wait_until
from ._runtimes import task_call, worker_of

POLL = 0.02


class Gate:
    """A task body that blocks until opened, counting how many run at once."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.entered = 0
        self.running = 0
        self.most = 0
        self.saw_stop: list[bool] = []
        self._lock = threading.Lock()

    def __call__(self, **_: Any) -> None:
        with self._lock:
            self.entered += 1
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            stop = current_job().stop
            while not self.opened.is_set() and not stop.is_cancelled():
                self.opened.wait(0.01)
            self.saw_stop.append(stop.is_cancelled())
        finally:
            with self._lock:
                self.running -= 1


class Running:
    """A worker on its own thread."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.stop = StopToken()
        self.abort = StopToken()
        self.stats: WorkerStats | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="contract-worker", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            self.stats = self.worker.run(self.stop, abort=self.abort)
        except BaseException as exc:
            self.error = exc

    def finish(self, *, abort: bool = False) -> WorkerStats:
        self.stop.cancel()
        if abort:
            self.abort.cancel()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "the worker did not stop"
        if self.error is not None:
            raise self.error
        assert self.stats is not None
        return self.stats


def one_gated_run(
    store: Store, started: Callable[[Worker], Running], task: dict[str, Any] | None = None, **worker: Any
) -> tuple[Gate, int, Running]:
    """A worker (``worker`` options) running one ``Gate`` job of queue ``work`` (``task`` options), once started."""
    tasks, gate = Tasks(), Gate()
    gated = tasks.task("gated", queue="work", **(task or {}))(gate)
    job_id = task_call(gated.enqueue, store)
    running = started(worker_of(store, tasks, poll_interval=POLL, **worker))
    wait_until(lambda: gate.entered == 1, "the run to start")
    return gate, job_id, running


@pytest.fixture
def started() -> Iterator[Callable[[Worker], Running]]:
    """Start workers on threads; every one started is stopped (at once) after the test."""
    running: list[Running] = []

    def start(worker: Worker) -> Running:
        running.append(Running(worker))
        return running[-1]

    yield start
    for each in running:
        each.stop.cancel()
        each.abort.cancel()
        each.thread.join(PATIENCE)


def is_at(store: Store, job_id: int, state: JobState, attempts: int) -> Callable[[], bool]:
    """Whether the job is in ``state`` after ``attempts`` (a predicate for ``wait_until``)."""

    def check() -> bool:
        info = store.get_job(job_id)
        return info is not None and (info.state, info.attempts) == (state, attempts)

    return check


def gated_jobs(store: Store, count: int) -> tuple[Tasks, Gate, list[int]]:
    """Tasks with one ``Gate`` task on queue ``work``, and the ids of ``count`` jobs enqueued for it."""
    tasks, gate = Tasks(), Gate()
    block = tasks.task("block", queue="work")(gate)
    return tasks, gate, [task_call(block.enqueue, store, n=n) for n in range(count)]


def states(store: Store, ids: list[int]) -> list[JobState | None]:
    return [None if (info := store.get_job(job_id)) is None else info.state for job_id in ids]


def test_a_worker_runs_at_most_its_concurrency_and_never_claims_beyond_its_free_threads(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    tasks, gate, ids = gated_jobs(store, 7)
    running = started(worker_of(store, tasks, concurrency=3, poll_interval=POLL))
    wait_until(lambda: gate.entered == 3, "three runs to start")
    assert states(store, ids).count(JobState.RUNNING) == 3, "it holds leases only for the jobs it runs"
    assert all(info is not None and info.attempts == 0 for info in map(store.get_job, ids[3:]))
    gate.opened.set()
    wait_until(lambda: states(store, ids) == [None] * 7, "every job to be done")
    assert gate.most == 3
    assert running.finish().succeeded == 7


def test_a_failing_run_is_retried_on_the_curve_with_its_traceback_then_buried(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    tasks = Tasks()

    @tasks.task("bounce", queue="mail", max_attempts=2)
    def bounce(to: str) -> None:
        raise ValueError(f"no mailbox {to!r}")

    job_id = task_call(bounce.enqueue, store, to="ada")
    running = started(worker_of(store, tasks, poll_interval=POLL))
    wait_until(is_at(store, job_id, JobState.PENDING, 1), "a first failure")
    info = must_get(store, job_id)
    assert info.last_error == "no mailbox 'ada'"
    assert info.task == "bounce"
    assert info.last_traceback is not None
    assert info.last_traceback.rstrip().endswith("ValueError: no mailbox 'ada'")
    assert info.run_at == clock.now() + timedelta(seconds=5)
    clock.advance(5)
    wait_until(is_at(store, job_id, JobState.DEAD, 2), "the last failure")
    dead = must_get(store, job_id)
    assert (dead.attempts, dead.last_error) == (2, "no mailbox 'ada'")
    stats = running.finish()
    assert (stats.retried, stats.buried, stats.succeeded) == (1, 1, 0)


class Halt(BaseException):
    """A ``BaseException`` of the application's own, which is no ``Exception``."""


def _exit_bare() -> None:
    raise SystemExit


def _exit_one() -> None:
    sys.exit(1)


def _interrupt() -> None:
    raise KeyboardInterrupt


def _halt() -> None:
    raise Halt("stop here")


#: What a task raises that is no ``Exception``: how it raises it, the error kept, its traceback's last line.
BASE_EXCEPTIONS: dict[str, tuple[Callable[[], None], str, str]] = {
    "raise SystemExit": (_exit_bare, "SystemExit", "SystemExit"),
    "sys.exit(1)": (_exit_one, "SystemExit: 1", "SystemExit: 1"),
    "raise KeyboardInterrupt": (_interrupt, "KeyboardInterrupt", "KeyboardInterrupt"),
    "a BaseException of its own": (_halt, "Halt: stop here", f"{__name__}.Halt: stop here"),
}


@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_whatever_a_task_raises_fails_its_attempt_and_the_worker_serves_on(
    store: Store, started: Callable[[Worker], Running], kind: str
) -> None:
    raise_it, error, last_line = BASE_EXCEPTIONS[kind]
    tasks = Tasks()
    done: list[str] = []
    halt = tasks.task("halt", queue="work", max_attempts=2)(lambda: raise_it())
    after = tasks.task("after", queue="work")(lambda: done.append("after"))
    failing = task_call(halt.enqueue, store)
    task_call(after.enqueue, store)
    running = started(worker_of(store, tasks, poll_interval=POLL))  # one slot: the same serves the next job
    wait_until(is_at(store, failing, JobState.PENDING, 1), "the attempt to fail, to be retried")
    wait_until(lambda: done == ["after"], "the next job to run")
    info = must_get(store, failing)
    assert info.last_error == error
    assert info.last_traceback is not None
    assert info.last_traceback.rstrip().endswith(last_line)
    assert running.thread.is_alive(), "the worker serves on"
    stats = running.finish()
    assert (stats.retried, stats.buried, stats.succeeded) == (1, 0, 1)


def test_a_plain_handler_that_exits_on_its_jobs_last_attempt_buries_it_and_the_worker_serves_on(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    seen: list[Any] = []

    def handle(payload: Any, job: Job) -> None:
        if payload == "exit":
            sys.exit(3)
        seen.append(payload)

    hooks = store.queue("hooks")
    dead_id = hooks.enqueue("exit", EnqueueOpts(max_attempts=1))
    hooks.enqueue("next")
    running = started(worker_of(store, handlers={"hooks": handle}, poll_interval=POLL))
    wait_until(is_at(store, dead_id, JobState.DEAD, 1), "the job to be buried")
    wait_until(lambda: seen == ["next"], "the next job to run")
    info = must_get(store, dead_id)
    assert info.last_error == "SystemExit: 3"
    assert info.last_traceback is not None
    assert info.last_traceback.rstrip().endswith("SystemExit: 3")
    stats = running.finish()
    assert (stats.buried, stats.succeeded) == (1, 1)


def test_heartbeats_keep_a_running_job_past_its_visibility_timeout(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    gate, job_id, running = one_gated_run(store, started, {"visibility_timeout": 30})
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # the heartbeat thread
    for _ in range(100):  # 100 s: more than three visibility timeouts
        step(clock, sleepers=1)
    info = must_get(store, job_id)
    assert info.state is JobState.RUNNING
    assert info.lease_until is not None
    assert info.lease_until > clock.now()
    assert store.queue("work").claim("rival") is None
    gate.opened.set()
    wait_until(lambda: store.get_job(job_id) is None, "the job to be done")
    assert running.finish().succeeded == 1
    assert gate.saw_stop == [False]


def given_up(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The worker's log lines that give up a run past its timeout."""
    return [record.getMessage() for record in caplog.records if "timed out after" in record.getMessage()]


def test_a_run_past_its_timeout_is_cancelled_and_its_job_retried(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="alkstore.worker")
    gate, job_id, running = one_gated_run(store, started, {"timeout": 10})
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    for _ in range(10):
        step(clock, sleepers=1)
    wait_until(lambda: gate.saw_stop == [True], "the run to see its cancellation")
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 1, "timed out after 10 s")
    assert given_up(caplog) == [
        f"job {job_id} (task gated, queue 'work', attempt 1/3) timed out after 10 s; it is given up, to be retried"
    ]
    gate.opened.set()
    clock.advance(5)  # the retry is due: the next run finishes at once
    wait_until(lambda: store.get_job(job_id) is None, "the retried run to finish")
    stats = running.finish()
    assert (stats.timed_out, stats.succeeded) == (1, 1)


def test_a_run_past_its_timeout_on_its_last_attempt_is_given_up_and_its_job_dead(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="alkstore.worker")
    gate, job_id, running = one_gated_run(store, started, {"timeout": 10, "max_attempts": 1})
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    for _ in range(10):
        step(clock, sleepers=1)
    wait_until(lambda: gate.saw_stop == [True], "the run to see its cancellation")
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.last_error) == (JobState.DEAD, 1, "timed out after 10 s")
    assert given_up(caplog) == [
        f"job {job_id} (task gated, queue 'work', attempt 1/1) timed out after 10 s;"
        " it is given up, dead, no attempts left"
    ]
    assert running.finish().timed_out == 1


def test_a_lost_lease_is_surfaced_to_the_run_and_its_outcome_discarded(
    engine: Any, started: Callable[[Worker], Running]
) -> None:
    clock = HoldingClock(T0)
    with engine.store(clock) as store:
        gate, job_id, running = one_gated_run(store, started, {"visibility_timeout": 30})
        clock.wait_for_sleepers(1, timeout=PATIENCE)
        beater = helper("alkstore-heartbeat-")
        clock.hold(beater)  # the worker is paused, as a stopped process is
        clock.advance(31)
        rival = store.queue("work").claim("rival")  # the lapsed lease is claimed again
        assert rival is not None
        assert rival.id == job_id
        clock.release(beater)
        wait_until(lambda: gate.saw_stop == [True], "the run to see its lease lost")
        rival.ack()
        stats = running.finish()
        assert (stats.lost, stats.succeeded) == (1, 0)


@pytest.mark.parametrize("abort", [False, True], ids=["grace", "abort"])
def test_a_stopping_worker_hands_back_what_still_runs_without_spending_an_attempt(
    store: Store, started: Callable[[Worker], Running], abort: bool
) -> None:
    gate, job_id, running = one_gated_run(store, started, grace=0.1 if not abort else PATIENCE)
    stats = running.finish(abort=abort)
    assert stats.released == 1
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.worker_id) == (JobState.PENDING, 0, None)
    taken = must_claim(store.queue("work"), "next-worker")
    assert (taken.id, taken.attempts) == (job_id, 1)
    wait_until(lambda: gate.saw_stop == [True], "the handed-back run to be told")


def test_a_stopping_worker_lets_running_jobs_finish_within_its_grace(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    gate, job_id, running = one_gated_run(store, started, grace=PATIENCE)
    running.stop.cancel()
    threading.Timer(0.2, gate.opened.set).start()
    stats = running.finish()
    assert (stats.succeeded, stats.released) == (1, 0)
    assert store.get_job(job_id) is None


def test_a_draining_worker_acks_a_run_that_finishes_within_its_grace_at_once(
    store: Store, started: Callable[[Worker], Running], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore.worker")
    tasks, quick_gate, long_gate = Tasks(), Gate(), Gate()
    quick = tasks.task("quick", queue="work")(quick_gate)
    long = tasks.task("long", queue="work")(long_gate)
    quick_id, long_id = task_call(quick.enqueue, store), task_call(long.enqueue, store)
    running = started(worker_of(store, tasks, concurrency=2, grace=PATIENCE * 4, poll_interval=POLL))
    wait_until(lambda: quick_gate.entered == long_gate.entered == 1, "both runs to start")
    running.stop.cancel()
    wait_until(lambda: "2 running jobs get 120 s of grace" in caplog.text, "the drain to begin: no claim follows")
    quick_gate.opened.set()
    wait_until(lambda: store.get_job(quick_id) is None, "the finished run's ack, within the grace")
    assert running.thread.is_alive(), "still in its grace"
    assert must_get(store, long_id).state is JobState.RUNNING
    stats = running.finish(abort=True)
    assert (stats.succeeded, stats.released) == (1, 1), "only what still ran was handed back"
    assert (must_get(store, long_id).state, store.get_job(quick_id)) == (JobState.PENDING, None)


def test_a_job_for_an_unknown_task_fails_on_the_job_and_the_worker_carries_on(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    tasks, other = Tasks(), Tasks()
    done: list[int] = []
    known = tasks.task("known", queue="work")(lambda n: done.append(n))
    stranger = other.task("stranger", queue="work")(lambda: None)
    lost_id = task_call(stranger.enqueue, store)
    task_call(known.enqueue, store, n=1)
    running = started(worker_of(store, tasks, poll_interval=POLL))
    wait_until(lambda: done == [1], "the known task to run")
    wait_until(is_at(store, lost_id, JobState.PENDING, 1), "the unknown one to fail")
    info = must_get(store, lost_id)
    assert info.last_error == "unknown task 'stranger' (this worker knows: known)"
    assert running.finish().retried == 1


def test_plain_handlers_run_the_jobs_of_their_queues(store: Store, started: Callable[[Worker], Running]) -> None:
    seen: list[tuple[Any, str]] = []
    store.queue("hooks").enqueue({"event": "paid"})
    handlers = {"hooks": lambda payload, job: seen.append((payload, job.queue))}
    running = started(worker_of(store, handlers=handlers, poll_interval=POLL))
    wait_until(lambda: seen == [({"event": "paid"}, "hooks")], "the handler to run")
    assert running.finish().succeeded == 1


def test_periodic_tasks_register_their_schedules_and_a_worker_with_schedules_fires_them(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    tasks = Tasks()
    ran: list[dict[str, Any]] = []

    @tasks.periodic("@every 1m", queue="maintenance", name="vacuum", kwargs={"table": "events"})
    def vacuum(table: str) -> None:
        ran.append({"table": table, "boundary": current_job().boundary})

    running = started(worker_of(store, tasks, schedules=True, poll_interval=POLL))
    wait_until(lambda: [s.name for s in store.schedules()] == ["vacuum"], "the schedule to be registered")
    (schedule,) = store.schedules()
    assert (schedule.spec, schedule.queue, schedule.payload) == ("@every 1m", "maintenance", {"table": "events"})
    clock.wait_for_sleepers(2, timeout=PATIENCE)  # the heartbeat thread and the leader
    for _ in range(60):
        step(clock, sleepers=2)
    wait_until(lambda: len(ran) == 1, "the fire to run")
    assert ran == [{"table": "events", "boundary": schedule.next_boundary}]
    running.finish()
    restarted = started(worker_of(store, tasks, poll_interval=POLL))  # a restart keeps the phase
    wait_until(lambda: restarted.thread.is_alive(), "the second worker")
    assert [s.next_boundary for s in store.schedules()] == [schedule.next_boundary + timedelta(minutes=1)]
    restarted.finish()


def test_a_task_enqueued_in_a_transaction_is_run_after_commit(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    tasks = Tasks()
    done: list[str] = []
    note = tasks.task("note", queue="work")(lambda text: done.append(text))
    with store.transaction() as tx:
        job_id = task_call(note.enqueue_tx, store, tx, text="committed")
    later = task_call(note.with_options(EnqueueOpts(priority=5)).enqueue, store, text="later")
    info = must_get(store, later)
    assert (info.task, info.priority, info.payload) == ("note", 5, {"text": "later"})
    running = started(worker_of(store, tasks, poll_interval=POLL))
    wait_until(lambda: sorted(done) == ["committed", "later"], "both runs")
    wait_until(lambda: store.get_job(job_id) is None, "its ack (written within the ack delay)")
    running.finish()


@pytest.mark.parametrize("ack_delay", [0, 0.02])
def test_a_worker_acks_each_job_before_it_runs_the_next_and_counts_it_once_acked(
    store: Store, started: Callable[[Worker], Running], ack_delay: float
) -> None:
    tasks = Tasks()
    seen: list[tuple[int, list[JobState | None]]] = []
    ids: list[int] = []

    def step(n: int) -> None:
        seen.append((n, states(store, ids[:n])))

    task = tasks.task("step", queue="work")(step)
    ids.extend(task_call(task.enqueue, store, n=n) for n in range(4))
    running = started(worker_of(store, tasks, concurrency=1, poll_interval=POLL, ack_delay=ack_delay))
    wait_until(lambda: len(seen) == 4, "four runs")
    stats = running.finish()
    assert seen == [(n, [None] * n) for n in range(4)], "each earlier job was acked before the next ran"
    assert (stats.succeeded, stats.retried, stats.lost) == (4, 0, 0)
    assert states(store, ids) == [None] * 4


def test_bad_worker_and_task_input_is_refused_before_anything_runs(store: Store) -> None:
    tasks = Tasks()
    with pytest.raises(InvalidOptions, match="at least one queue"):
        worker_of(store, tasks)
    tasks.task("t", queue="work")(lambda: None)
    for concurrency in (0, 1001):
        with pytest.raises(InvalidOptions, match="concurrency"):
            worker_of(store, tasks, concurrency=concurrency)
    for prefetch in (-1, 1001, 1.5, True):
        with pytest.raises(InvalidOptions, match="prefetch"):
            worker_of(store, tasks, prefetch=prefetch)
    durations: dict[str, Any] = {"ack_delay": -1, "grace": -1, "poll_interval": 0}
    for name, bad in durations.items():
        with pytest.raises(InvalidOptions, match=name):
            worker_of(store, tasks, **{name: bad})
    with pytest.raises(InvalidArgument, match="Store"):
        worker_of("memory://", tasks)
    with pytest.raises(InvalidOptions, match="already registered"):
        tasks.task("t", queue="work")(lambda: None)
    task = tasks.get("t")
    assert task is not None
    with pytest.raises(InvalidArgument, match="by keyword"):
        task_call(task.enqueue, store, 1)
    with pytest.raises(InvalidArgument, match="outside a job"):
        current_job()
    assert store.queue("work").claim("probe") is None


def test_a_waiting_claim_ends_when_its_stop_token_is_cancelled(store: Store) -> None:
    stop = StopToken()
    got: list[Job | None] = []
    waiter = threading.Thread(target=lambda: got.append(store.queue("q").claim("w", wait=3600, stop=stop)))
    waiter.start()
    threading.Timer(0.1, stop.cancel).start()
    waiter.join(PATIENCE)
    assert not waiter.is_alive()
    assert got == [None]


def test_the_outbox_courier_delivers_until_stopped_and_run_once_can_wait(store: Store) -> None:
    outbox = store.outbox("hooks")
    delivered: list[Any] = []
    stop = StopToken()

    def deliver(payload: Any, job: Job) -> None:
        delivered.append(payload)

    courier = threading.Thread(
        target=lambda: delivered.append(outbox.run("courier", deliver, stop, poll_interval=POLL))
    )
    courier.start()
    for n in range(3):
        outbox.enqueue(n)
    wait_until(lambda: delivered == [0, 1, 2], "three deliveries")
    stop.cancel()
    courier.join(PATIENCE)
    assert delivered == [0, 1, 2, 3]  # the loop's return value: how many it delivered
    later = threading.Timer(0.1, lambda: outbox.enqueue("late"))
    later.start()
    assert outbox.run_once("courier", deliver, wait=PATIENCE, poll_interval=POLL) is True
    assert delivered[-1] == "late"


def test_a_running_worker_reports_itself_and_a_stopped_one_is_gone(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    tasks, gate = Tasks(), Gate()
    block = tasks.task("block", queue="work")(gate)
    quick = tasks.task("quick", queue="other")(lambda: None)
    task_call(block.enqueue, store)
    task_call(quick.enqueue, store)
    running = started(worker_of(store, tasks, concurrency=2, poll_interval=POLL, worker_id="reporter"))
    wait_until(lambda: gate.entered == 1, "the run to start")
    (seen,) = store.workers()
    assert (seen.id, seen.queues, seen.concurrency, seen.started_at) == ("reporter", ("other", "work"), 2, T0)
    assert seen.pid > 0
    assert seen.host
    wait_until(lambda: running.worker.stats.succeeded == 1, "the quick job to be done and acked")
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # the heartbeat thread
    for _ in range(5):  # one report interval
        step(clock, sleepers=1)
    wait_until(lambda: store.workers()[0].seen_at == T0 + timedelta(seconds=5), "the next report")
    (seen,) = store.workers()
    assert (seen.started_at, seen.running, seen.processed, seen.failed) == (T0, 1, 1, 0)
    gate.opened.set()
    running.finish()
    assert store.workers(within=timedelta(days=1)) == [], "a stopped worker removed its report"


def test_a_prefetching_worker_holds_its_threads_and_prefetch_and_hands_back_the_waiting_jobs_at_once(
    store: Store, started: Callable[[Worker], Running]
) -> None:
    tasks, gate, ids = gated_jobs(store, 6)
    running = started(worker_of(store, tasks, concurrency=1, prefetch=2, poll_interval=POLL, grace=PATIENCE))
    wait_until(
        lambda: gate.entered == 1 and states(store, ids).count(JobState.RUNNING) == 3, "a run and two prefetched jobs"
    )
    assert all(info is not None and info.attempts == 0 for info in map(store.get_job, ids[3:]))
    running.stop.cancel()  # the two waiting jobs go back at once; the running one gets its grace
    wait_until(lambda: states(store, ids).count(JobState.PENDING) == 5, "the waiting jobs handed back")
    assert [info.attempts for info in map(store.get_job, ids[1:3]) if info] == [0, 0], "no attempt spent"
    assert gate.saw_stop == []
    gate.opened.set()
    stats = running.finish()
    assert (stats.succeeded, stats.released) == (1, 2)
    assert states(store, ids) == [None] + [JobState.PENDING] * 5


def test_a_prefetched_jobs_lease_is_kept_while_it_waits_and_its_timeout_counts_from_its_start(
    store: Store, clock: ManualClock, started: Callable[[Worker], Running]
) -> None:
    tasks, gate = Tasks(), Gate()
    block = tasks.task("block", queue="work", visibility_timeout=30)(gate)
    done: list[int] = []
    quick = tasks.task("quick", queue="work", visibility_timeout=30, timeout=10)(lambda: done.append(1))
    first = task_call(block.enqueue, store)
    waiting = task_call(quick.enqueue, store)
    running = started(worker_of(store, tasks, concurrency=1, prefetch=1, poll_interval=POLL))
    wait_until(lambda: states(store, [first, waiting]) == [JobState.RUNNING] * 2, "a run and a prefetched job")
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # the heartbeat thread
    for _ in range(100):  # 100 s: past three visibility timeouts, and ten times the quick task's timeout
        step(clock, sleepers=1)
    info = must_get(store, waiting)
    assert (info.state, info.attempts) == (JobState.RUNNING, 1)
    assert info.lease_until is not None
    assert info.lease_until > clock.now()
    gate.opened.set()
    wait_until(lambda: done == [1], "the prefetched job to run")
    stats = running.finish()
    assert (stats.succeeded, stats.timed_out, stats.lost) == (2, 0, 0)
