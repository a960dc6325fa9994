"""A model-based check of the queue: random enqueue / claim / ack / retry / fail / heartbeat /
requeue / clock steps, against a small reference model written here, on every engine.

The model restates the job lifecycle of docs/design.md and the ``Engine`` docstrings: a claim
first sweeps lapsed leases (back to pending, or dead on the last attempt) and expired
pending jobs (dead), then takes the best due job by priority, run_at, id; ack, retry,
fail and heartbeat are fenced by the lease a worker claimed (a count of the job's claims
that ``requeue_dead`` does not reset, unlike ``attempts``). After every step each job's
``get_job`` view must equal the model's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from alkstore import EnqueueOpts, InvalidOptions, Job, JobState, LeaseLost, ManualClock
from alkstore.engine import JOB_EXPIRED_ERROR, LEASE_EXPIRED_ERROR

from ._engines import T0, EngineTarget
from ._profiles import MACHINE_EXAMPLES, sized

T = TypeVar("T")

QUEUE = "work"
VISIBILITY = timedelta(seconds=300)
BACKOFF_BASE = timedelta(seconds=5)
DEFAULT_ATTEMPTS = 3
MAX_JOBS = 10
#: Options and clock steps share whole seconds, so expiries, delays and lease ends often fall
#: exactly on "now" (the edge every ``<=`` in the contract is about); 1 µs steps probe just after.
JOB_OPTIONS = st.fixed_dictionaries(
    {
        "priority": st.none() | st.integers(-1, 1),
        "delay": st.none() | st.sampled_from([0, 1, 5, 30, 301]),
        "max_attempts": st.none() | st.integers(1, 4),
        "expires": st.none() | st.sampled_from([1, 5, 30, 300, 600]),
    }
)
STEPS = st.sampled_from([0.000001, 1, 4, 5, 30, 150, 299, 300, 301, 3600])


@dataclass(frozen=True)
class ModelJob:
    """What the model believes ``get_job`` shows; ``state`` ``"done"`` means acked (gone)."""

    id: int
    payload: Any
    state: str
    priority: int
    run_at: datetime
    expires_at: datetime | None
    attempts: int
    max_attempts: int
    last_error: str | None = None
    worker_id: str | None = None
    lease_until: datetime | None = None
    died_at: datetime | None = None
    leases: int = 0

    def died(self, error: str, now: datetime) -> ModelJob:
        return replace(self, state="dead", last_error=error, died_at=now, worker_id=None, lease_until=None)

    def view(self) -> tuple[Any, ...] | None:
        if self.state == "done":
            return None
        return (
            self.id,
            self.payload,
            self.state,
            self.priority,
            self.run_at,
            self.expires_at,
            self.attempts,
            self.max_attempts,
            self.last_error,
            self.worker_id,
            self.lease_until,
            self.died_at,
        )


def curve(attempt: int) -> timedelta:
    """The plain queue's retry wait after failed attempt ``attempt``: 5 s, 10 s, 20 s, … (capped at 1 h)."""
    return min(BACKOFF_BASE * (1 << (attempt - 1)), timedelta(hours=1))


class QueueMachine(RuleBasedStateMachine):
    """One store on one engine, driven by random operations and checked against ``ModelJob``s."""

    handles = Bundle("handles")

    def __init__(self, target: EngineTarget) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self._opened = target.store(self.clock)
        self.store = self._opened.__enter__()
        self.queue = self.store.queue(QUEUE)
        self.jobs: dict[int, ModelJob] = {}
        self.held: dict[int, int] = {}  # id(handle) -> the lease it was claimed under
        self.errors = 0

    def teardown(self) -> None:
        self._opened.__exit__(None, None, None)

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def _error(self) -> str:
        self.errors += 1
        return f"error #{self.errors}"

    # -- rules ------------------------------------------------------------------------------

    @initialize(jobs=st.lists(JOB_OPTIONS, min_size=1, max_size=4))
    def some_jobs(self, jobs: list[dict[str, int | None]]) -> None:
        """Start with jobs: swarm testing switches rules off for whole runs, ``enqueue`` included."""
        for options in jobs:
            self.enqueue(**options)

    @precondition(lambda self: len(self.jobs) < MAX_JOBS)
    @rule(options=JOB_OPTIONS)
    def enqueue_one(self, options: dict[str, int | None]) -> None:
        self.enqueue(**options)

    def enqueue(self, priority: int | None, delay: int | None, max_attempts: int | None, expires: int | None) -> None:
        opts = EnqueueOpts(delay=delay, priority=priority, max_attempts=max_attempts, expires=expires)
        run_at = self.now + timedelta(seconds=delay or 0)
        expires_at = None if expires is None else self.now + timedelta(seconds=expires)
        if expires_at is not None and expires_at <= run_at:
            with pytest.raises(InvalidOptions):
                self.queue.enqueue(len(self.jobs), opts)
            return
        job_id = self.queue.enqueue(len(self.jobs), opts)
        assert all(job_id > known for known in self.jobs), "ids increase with every insert"
        self.jobs[job_id] = ModelJob(
            id=job_id,
            payload=len(self.jobs),
            state="pending",
            priority=priority or 0,
            run_at=run_at,
            expires_at=expires_at,
            attempts=0,
            max_attempts=max_attempts or DEFAULT_ATTEMPTS,
        )

    @rule(target=handles, worker=st.sampled_from(["w1", "w2"]))
    def claim(self, worker: str) -> Any:
        now = self.now
        for job in list(self.jobs.values()):
            if job.state == "running" and job.lease_until is not None and job.lease_until <= now:
                if job.attempts >= job.max_attempts:
                    self.jobs[job.id] = job.died(LEASE_EXPIRED_ERROR, now)
                else:
                    self.jobs[job.id] = replace(job, state="pending", worker_id=None, lease_until=None)
        for job in list(self.jobs.values()):
            if job.state == "pending" and job.expires_at is not None and job.expires_at <= now:
                self.jobs[job.id] = job.died(JOB_EXPIRED_ERROR, now)
        due = [job for job in self.jobs.values() if job.state == "pending" and job.run_at <= now]
        best = min(due, key=lambda job: (-job.priority, job.run_at, job.id), default=None)

        claimed = self.queue.claim(worker)
        assert (claimed.id if claimed else None) == (best.id if best else None), "claimed the wrong job"
        if claimed is None or best is None:
            return multiple()
        taken = replace(
            best,
            state="running",
            attempts=best.attempts + 1,
            leases=best.leases + 1,
            worker_id=worker,
            lease_until=now + VISIBILITY,
        )
        self.jobs[taken.id] = taken
        self.held[id(claimed)] = taken.leases
        assert _view(claimed) == taken.view()
        return claimed

    @rule(
        target=handles,
        worker=st.sampled_from(["w1", "w2"]),
        then=st.sampled_from(["ack", "retry", "fail", "heartbeat"]),
        delay=st.none() | st.sampled_from([0, 2, 45]),
    )
    def claim_and_finish(self, worker: str, then: str, delay: int | None) -> Any:
        """A claim followed at once by what a worker does with the job (lifecycles get further)."""
        handle = self.claim(worker)
        if isinstance(handle, Job):
            if then == "retry":
                self.retry(handle, delay)
            else:
                {"ack": self.ack, "fail": self.fail, "heartbeat": self.heartbeat}[then](handle)
        return handle

    def _fenced(self, handle: Job) -> ModelJob | None:
        """The model's job if ``handle`` still holds its lease (running under its claim), else ``None``."""
        job = self.jobs[handle.id]
        return job if job.state == "running" and job.leases == self.held[id(handle)] else None

    def _fenced_call(self, handle: Job, call: Callable[[], T]) -> tuple[ModelJob, T] | None:
        """A fenced ``call`` through ``handle``: ``None`` (refused with ``LeaseLost``) unless it holds the lease."""
        job = self._fenced(handle)
        if job is None:
            with pytest.raises(LeaseLost):
                call()
            return None
        return job, call()

    @rule(handle=handles)
    def ack(self, handle: Job) -> None:
        if done := self._fenced_call(handle, handle.ack):
            job, _ = done
            self.jobs[job.id] = replace(job, state="done")

    @rule(handle=handles, delay=st.none() | st.sampled_from([0, 2, 45]))
    def retry(self, handle: Job, delay: int | None) -> None:
        error = self._error()
        if not (done := self._fenced_call(handle, lambda: handle.retry(error, delay))):
            return
        job, _ = done
        now = self.now
        if job.attempts >= job.max_attempts:
            self.jobs[job.id] = job.died(error, now)
        else:
            wait = curve(job.attempts) if delay is None else timedelta(seconds=delay)
            self.jobs[job.id] = replace(
                job, state="pending", run_at=now + wait, last_error=error, worker_id=None, lease_until=None
            )

    @rule(handle=handles)
    def fail(self, handle: Job) -> None:
        error = self._error()
        if done := self._fenced_call(handle, lambda: handle.fail(error)):
            job, _ = done
            self.jobs[job.id] = job.died(error, self.now)

    @rule(handle=handles)
    def heartbeat(self, handle: Job) -> None:
        if done := self._fenced_call(handle, handle.heartbeat):
            job, lease_until = done
            assert lease_until == self.now + VISIBILITY
            self.jobs[job.id] = replace(job, lease_until=self.now + VISIBILITY)

    @rule(data=st.data())
    def requeue_dead(self, data: st.DataObject) -> None:
        if not self.jobs:
            return
        job = self.jobs[data.draw(st.sampled_from(sorted(self.jobs)), label="job")]
        requeued = self.store.requeue_dead(job.id)
        assert requeued is (job.state == "dead")
        if requeued:
            self.jobs[job.id] = replace(
                job, state="pending", attempts=0, run_at=self.now, expires_at=None, died_at=None
            )

    @rule(seconds=STEPS)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(data=st.data())
    def advance_to_an_edge(self, data: st.DataObject) -> None:
        """Move the clock exactly onto (or 1 µs before) a job's run_at, expiry or lease end."""
        now = self.now
        live = [job for job in self.jobs.values() if job.state in ("pending", "running")]
        edges = sorted({t for job in live for t in (job.run_at, job.expires_at, job.lease_until) if t and t > now})
        if edges:
            target = data.draw(st.sampled_from(edges), label="edge")
            before = data.draw(st.sampled_from([timedelta(0), timedelta(microseconds=1)]), label="before")
            self.clock.advance(target - now - before)

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def every_job_is_where_the_model_says(self) -> None:
        for job in self.jobs.values():
            info = self.store.get_job(job.id)
            assert (None if info is None else _view(info)) == job.view(), f"job {job.id}"

    @invariant()
    def every_job_is_done_dead_or_live_and_within_its_attempts(self) -> None:
        for job in self.jobs.values():
            assert job.state in ("done", "dead", "pending", "running")
            assert 0 <= job.attempts <= job.max_attempts


def _view(info: Any) -> tuple[Any, ...]:
    assert info.queue == QUEUE
    state = {JobState.PENDING: "pending", JobState.RUNNING: "running", JobState.DEAD: "dead"}[info.state]
    return (
        info.id,
        info.payload,
        state,
        info.priority,
        info.run_at,
        info.expires_at,
        info.attempts,
        info.max_attempts,
        info.last_error,
        info.worker_id,
        info.lease_until,
        info.died_at,
    )


def test_the_queue_behaves_like_its_reference_model(engine: EngineTarget, request: pytest.FixtureRequest) -> None:
    runs = 0

    def machine() -> QueueMachine:
        nonlocal runs
        runs += 1
        return QueueMachine(engine)

    try:
        run_state_machine_as_test(machine, settings=sized(0.75))  # type: ignore[arg-type]
    finally:
        MACHINE_EXAMPLES[request.node.nodeid] = runs
