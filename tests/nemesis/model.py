"""Hand-built histories for the checker's tests: a recorder of one clock, clean runs of a simple
model, and plants that add exactly one anomaly each."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from .checker import Anomaly, AnomalyKind, Params
from .history import Event, Kind, Snapshot

PARAMS = Params(ttl=2.0, catch_up=1.0, ordered_outboxes=frozenset({"out"}))
#: A lease as the model grants it, and the clock's step between two events (seconds).
LEASE = 30.0
STEP = 0.01


@dataclass
class Recorder:
    """Builds a history on one clock (``mono`` and ``wall`` alike), with the final state beside it."""

    now: float = 1000.0
    events: list[Event] = field(default_factory=list)
    pending: set[int] = field(default_factory=set)
    dead: set[int] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)
    ticking: dict[str, tuple[float, float]] = field(default_factory=dict)
    fired: set[tuple[str, int]] = field(default_factory=set)
    _seq: Counter[str] = field(default_factory=Counter)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def log(self, kind: Kind, process: str, *, began: float | None = None, **fields: Any) -> Event:
        self._seq[process] += 1
        event = Event(kind, process, self._seq[process], self.now, self.now, began, **fields)
        self.events.append(event)
        self.now += STEP
        return event

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def job(self) -> int:
        return next(self._ids)

    def message(self) -> str:
        return f"m{next(self._ids)}"

    def enqueue(self, job: int, *, committed: bool = True, max_attempts: int = 3) -> Event:
        kind = Kind.ENQUEUE_COMMITTED if committed else Kind.ENQUEUE_ROLLED_BACK
        return self.log(kind, "producer", job=job, queue="q", tag=f"t{job}", max_attempts=max_attempts)

    def claim(self, job: int, fence: int, worker: str, lease: float = LEASE) -> Event:
        return self.log(Kind.CLAIM, worker, job=job, fence=fence, worker=worker, lease_until=self.now + lease)

    def run_start(self, job: int, fence: int, worker: str) -> Event:
        return self.log(Kind.RUN_START, worker, job=job, fence=fence, worker=worker)

    def run_end(self, job: int, fence: int, worker: str) -> Event:
        return self.log(Kind.RUN_END, worker, job=job, fence=fence, worker=worker)

    def ack(self, job: int, fence: int, worker: str, *, ok: bool = True) -> Event:
        return self.log(Kind.ACK, worker, began=self.now - STEP / 2, job=job, fence=fence, worker=worker, ok=ok)

    def retry(self, job: int, fence: int, worker: str) -> Event:
        return self.log(Kind.RETRY, worker, job=job, fence=fence, worker=worker)

    def release(self, job: int, fence: int, worker: str) -> Event:
        return self.log(Kind.RELEASE, worker, job=job, fence=fence, worker=worker)

    def bury(self, job: int, fence: int, worker: str) -> Event:
        return self.log(Kind.BURY, worker, job=job, fence=fence, worker=worker)

    def register(self, schedule: str, first: float, interval: float, *, ticking: bool = True) -> Event:
        if ticking:
            self.ticking[schedule] = (first, interval)
        return self.log(Kind.SCHEDULE_REGISTER, "scheduler-0", schedule=schedule, boundary=first, interval=interval)

    def fire(self, schedule: str, boundary: float, process: str = "scheduler-0") -> Event:
        return self.log(Kind.SCHEDULE_FIRE, process, schedule=schedule, boundary=boundary)

    def fire_due(self) -> None:
        """Fire every due boundary of the ticking schedules not fired yet, oldest first."""
        for schedule, (first, interval) in self.ticking.items():
            for step in itertools.count():
                boundary = first + step * interval
                if boundary > self.now:
                    break
                if (schedule, step) not in self.fired:
                    self.fired.add((schedule, step))
                    self.fire(schedule, boundary)

    def skip_due(self) -> None:
        """Skip every due boundary unfired, as catch-up's skip-forward does after a long outage."""
        for schedule, (first, interval) in self.ticking.items():
            for step in itertools.count():
                if first + step * interval > self.now:
                    break
                self.fired.add((schedule, step))

    def commit(self, message: str, key: str, outbox: str = "out") -> Event:
        return self.log(
            Kind.OUTBOX_COMMIT, "producer", began=self.now - STEP / 2, message=message, key=key, queue=outbox
        )

    def deliver(self, message: str, key: str) -> Event:
        self.delivered.add(message)
        return self.log(Kind.DELIVERY, "courier", began=self.now - STEP / 2, message=message, key=key)

    def finish(self) -> None:
        """End the run: let every required boundary come due, fire them, and read the snapshot."""
        self.fire_due()
        self.advance(PARAMS.ttl + PARAMS.catch_up + 2)
        self.fire_due()
        self.log(Kind.SNAPSHOT, "harness")

    def snapshot(self) -> Snapshot:
        return Snapshot(pending=frozenset(self.pending), dead=frozenset(self.dead), delivered=frozenset(self.delivered))


# The plants: each adds one anomaly of its kind to a recorder and returns the anomaly expected.


def plant_lost(rec: Recorder) -> Anomaly:
    job = rec.job()
    return Anomaly(AnomalyKind.LOST, f"job {job}", (rec.enqueue(job),))


def plant_rolled_back_ran(rec: Recorder) -> Anomaly:
    job = rec.job()
    rollback = rec.enqueue(job, committed=False)
    claim = rec.claim(job, 1, "worker-p")
    rec.run_start(job, 1, "worker-p")
    rec.run_end(job, 1, "worker-p")
    rec.ack(job, 1, "worker-p")
    return Anomaly(AnomalyKind.ROLLED_BACK_RAN, f"job {job}", (rollback, claim))


def plant_double_ack(rec: Recorder) -> Anomaly:
    job = rec.job()
    rec.enqueue(job)
    rec.claim(job, 1, "worker-p")
    rec.run_start(job, 1, "worker-p")
    rec.run_end(job, 1, "worker-p")
    first = rec.ack(job, 1, "worker-p")
    second = rec.ack(job, 1, "worker-p")
    return Anomaly(AnomalyKind.DOUBLE_ACK, f"job {job}", (first, second))


def plant_stale_ack(rec: Recorder) -> Anomaly:
    """A stalled holder acks after its lease lapsed and a newer claim was granted (and retried)."""
    job = rec.job()
    rec.enqueue(job)
    rec.claim(job, 1, "worker-p", lease=1.0)
    rec.run_start(job, 1, "worker-p")
    rec.advance(2.0)
    newer = rec.claim(job, 2, "worker-q")
    rec.run_start(job, 2, "worker-q")
    rec.run_end(job, 2, "worker-q")
    rec.retry(job, 2, "worker-q")
    rec.run_end(job, 1, "worker-p")
    stale = rec.ack(job, 1, "worker-p")
    return Anomaly(AnomalyKind.STALE_ACK, f"job {job}", (stale, newer))


def plant_overlapping_runs(rec: Recorder) -> Anomaly:
    """A second claim is granted while the first holder runs under a live lease."""
    job = rec.job()
    rec.enqueue(job)
    claim = rec.claim(job, 1, "worker-p")
    first = rec.run_start(job, 1, "worker-p")
    rec.claim(job, 2, "worker-q")
    second = rec.run_start(job, 2, "worker-q")
    rec.run_end(job, 2, "worker-q")
    rec.ack(job, 2, "worker-q")
    rec.run_end(job, 1, "worker-p")
    rec.ack(job, 1, "worker-p", ok=False)
    return Anomaly(AnomalyKind.OVERLAPPING_RUNS, f"job {job}", (first, claim, second))


def plant_too_many_runs(rec: Recorder) -> Anomaly:
    job = rec.job()
    enqueue = rec.enqueue(job, max_attempts=1)
    rec.claim(job, 1, "worker-p")
    first = rec.run_start(job, 1, "worker-p")
    rec.run_end(job, 1, "worker-p")
    rec.retry(job, 1, "worker-p")
    rec.claim(job, 2, "worker-p")
    second = rec.run_start(job, 2, "worker-p")
    rec.run_end(job, 2, "worker-p")
    rec.ack(job, 2, "worker-p")
    return Anomaly(AnomalyKind.TOO_MANY_RUNS, f"job {job}", (enqueue, first, second))


def plant_double_fire(rec: Recorder) -> Anomaly:
    """Two schedulers fire one boundary (a schedule of its own, whose next boundary never comes due)."""
    boundary = rec.now + 0.5
    rec.register("planted", boundary, 1e6, ticking=False)
    rec.advance(1.0)
    first = rec.fire("planted", boundary, "scheduler-0")
    second = rec.fire("planted", boundary, "scheduler-1")
    return Anomaly(AnomalyKind.DOUBLE_FIRE, f"schedule planted at {boundary}", (first, second))


def plant_missed_fire(rec: Recorder) -> Anomaly:
    """A schedule whose first boundary comes due (``finish`` waits long enough) and never fires.

    Its boundary lies beyond ``ttl + catch_up`` of any fault before it, so nothing excuses it.
    """
    rec.advance(PARAMS.ttl + PARAMS.catch_up + 1)
    boundary = rec.now + 0.5
    register = rec.register("planted", boundary, 1e6, ticking=False)
    return Anomaly(AnomalyKind.MISSED_FIRE, f"schedule planted at {boundary}", (register,))


def plant_undelivered(rec: Recorder) -> Anomaly:
    message = rec.message()
    return Anomaly(AnomalyKind.UNDELIVERED, f"message {message}", (rec.commit(message, "planted"),))


def plant_out_of_order(rec: Recorder) -> Anomaly:
    earlier, later = rec.message(), rec.message()
    c_earlier, c_later = rec.commit(earlier, "planted"), rec.commit(later, "planted")
    d_later, d_earlier = rec.deliver(later, "planted"), rec.deliver(earlier, "planted")
    subject = f"key planted: {later} before {earlier}"
    return Anomaly(AnomalyKind.OUT_OF_ORDER, subject, (c_earlier, c_later, d_later, d_earlier))


PLANTS: dict[AnomalyKind, Callable[[Recorder], Anomaly]] = {
    AnomalyKind.LOST: plant_lost,
    AnomalyKind.ROLLED_BACK_RAN: plant_rolled_back_ran,
    AnomalyKind.DOUBLE_ACK: plant_double_ack,
    AnomalyKind.STALE_ACK: plant_stale_ack,
    AnomalyKind.OVERLAPPING_RUNS: plant_overlapping_runs,
    AnomalyKind.TOO_MANY_RUNS: plant_too_many_runs,
    AnomalyKind.DOUBLE_FIRE: plant_double_fire,
    AnomalyKind.MISSED_FIRE: plant_missed_fire,
    AnomalyKind.UNDELIVERED: plant_undelivered,
    AnomalyKind.OUT_OF_ORDER: plant_out_of_order,
}


# The clean model: jobs run one after another by two workers, some attempts die with their
# worker (killed; the next claim waits out the lease), the last attempt acks, buries or leaves
# the job pending; a schedule ticks every second; keyed messages are delivered in commit order.

_attempt = st.sampled_from(["retry", "killed", "stale"])


@st.composite
def clean_histories(draw: st.DrawFn) -> Recorder:
    """A history of the model with no anomaly, not yet finished (a plant may follow)."""
    rec = Recorder()
    rec.register("tick", rec.now + 1.0, 1.0)
    for _ in range(draw(st.integers(0, 6))):
        job = rec.job()
        if not draw(st.booleans()):
            rec.enqueue(job, committed=False)
            continue
        max_attempts = draw(st.integers(1, 3))
        outcome = draw(st.sampled_from(["done", "dead", "pending"]))
        rec.enqueue(job, max_attempts=max_attempts)
        attempts = {"done": draw(st.integers(1, max_attempts)), "dead": max_attempts}.get(outcome)
        if attempts is None:
            attempts = draw(st.integers(0, max_attempts - 1))
            rec.pending.add(job)
        for fence in range(1, attempts + 1):
            worker = f"worker-{fence % 2}"
            last = fence == attempts
            how = "last" if last else draw(_attempt)
            rec.claim(job, fence, worker, lease=1.0 if how in ("killed", "stale") else LEASE)
            rec.run_start(job, fence, worker)
            if how == "killed":
                rec.log(Kind.FAULT, "nemesis", action="kill", target=worker)
                rec.advance(1.5)
                rec.log(Kind.FAULT, "nemesis", action="restart", target=worker)
                continue
            if how == "stale":  # stalled past its lease: the late ack is refused
                rec.advance(1.5)
                rec.run_end(job, fence, worker)
                rec.ack(job, fence, worker, ok=False)
                continue
            rec.run_end(job, fence, worker)
            if last and outcome == "done":
                rec.ack(job, fence, worker)
            elif last and outcome == "dead":
                rec.bury(job, fence, worker)
                rec.dead.add(job)
            else:
                rec.retry(job, fence, worker)
        rec.fire_due()
    keys = draw(st.lists(st.sampled_from(["a", "b"]), max_size=5))
    messages = [(rec.message(), key) for key in keys]
    for message, key in messages:
        rec.commit(message, key)
    for message, key in messages:
        rec.deliver(message, key)
    rec.fire_due()
    return rec
