"""Generated schedule scenarios, how to play one on a store, and a naive model of what must happen.

A scenario is a list of steps — register (new, same spec, the same interval respelled, or a
changed spec), unschedule, advance the clock (a little, onto or just before a boundary, or
thousands of boundaries ahead), tick, and work (claim fired jobs and ack, retry, fail or
drop each) — played on a fresh store under a manual clock. Playing it records everything a
user can observe: what ``schedule`` returned, what ``unschedule`` said, per tick the fires,
the fired jobs as ``get_job`` shows them, every schedule's next boundary and the soonest of
them, per work step the jobs handled, and at the end a census of every fired job.

``ScheduleModel`` restates the rules of docs/design.md from first principles (integer
microseconds, fired boundaries stepped through one by one, skipped ones counted from their
definition, claims and their sweeps as the ``Engine`` docstrings state them) without calling
``alkstore``'s boundary math, so that a bug in the one shared implementation shows up as a
disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from alkstore import ScheduleOpts, Store
from alkstore.engine import JOB_EXPIRED_ERROR, LEASE_EXPIRED_ERROR

__all__ = [
    "CAP",
    "Advance",
    "Outcome",
    "Register",
    "Scenario",
    "ScheduleModel",
    "Tick",
    "TickSeen",
    "Unschedule",
    "Work",
    "expected",
    "play",
    "scenarios",
]

#: The catch-up cap as docs/design.md states it (deliberately not ``alkstore.CATCH_UP_CAP``).
CAP = 64
#: Schedule names and target queues a scenario draws from (few, so names are re-registered).
NAMES = ("alpha", "bravo", "charlie", "delta")
QUEUES = ("fires-a", "fires-b")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_COUNT = {"s": 120, "m": 120, "h": 48, "d": 14}
#: The queue defaults a fired job falls back to (plain queues: priority 0, 3 attempts).
DEFAULT_PRIORITY, DEFAULT_MAX_ATTEMPTS = 0, 3
#: A plain queue's lease and retry curve: 300 s visibility, 5 s * 2**(attempt-1), capped at 1 h.
VISIBILITY_S, BACKOFF_BASE_S, BACKOFF_CAP_S = 300, 5, 3600
WORKER = "worker"
_US = 1_000_000
_MICRO = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: A far advance aims up to 5000 boundaries ahead, but no more than about thirty years.
_FAR_LIMIT_US = 30 * 365 * 86400 * _US


def to_us(instant: datetime) -> int:
    """An instant as integer microseconds since the epoch."""
    delta = instant - _EPOCH
    return (delta.days * 86400 + delta.seconds) * _US + delta.microseconds


def from_us(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


# -- steps -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Register:
    """``store.schedule(name, spec, queue, payload, opts)`` at the current instant."""

    name: str
    spec: str
    queue: str
    payload: Any
    opts: ScheduleOpts


@dataclass(frozen=True)
class Unschedule:
    name: str


@dataclass(frozen=True)
class Advance:
    by: timedelta


@dataclass(frozen=True)
class Tick:
    pass


@dataclass(frozen=True)
class Work:
    """Claim from ``queue`` once per disposition, then ack, retry (on the curve), fail or drop the job."""

    queue: str
    dispositions: tuple[str, ...]


Step = Register | Unschedule | Advance | Tick | Work


@dataclass(frozen=True)
class Scenario:
    """A start instant and the steps to play from it."""

    start: datetime
    steps: tuple[Step, ...]

    def __repr__(self) -> str:
        lines = [f"Scenario(start={self.start.isoformat()}, steps=["]
        lines += [f"    {step!r}," for step in self.steps]
        return "\n".join([*lines, "])"])


# -- the naive model ---------------------------------------------------------------------------


def interval_of(spec: str) -> int:
    """Seconds of an ``@every <n><unit>`` spec, read independently of ``alkstore.parse_spec``."""
    assert spec.startswith("@every ")
    amount = spec.removeprefix("@every ")
    return int(amount[:-1]) * UNIT_SECONDS[amount[-1]]


@dataclass
class _ModelSchedule:
    spec: str
    interval_us: int
    queue: str
    payload: Any
    opts: ScheduleOpts
    next_us: int


@dataclass
class _ModelJob:
    """A fired job as the model tracks it; ``index`` is its place in fire order (ids follow it)."""

    index: int
    queue: str
    payload: Any
    schedule: str
    boundary_us: int
    priority: int
    max_attempts: int
    run_at_us: int
    expires_at_us: int | None
    state: str = "pending"
    attempts: int = 0
    last_error: str | None = None
    worker_id: str | None = None
    lease_until_us: int | None = None
    died_at_us: int | None = None

    def die(self, error: str, now_us: int) -> None:
        self.state, self.last_error, self.died_at_us = "dead", error, now_us
        self.worker_id = self.lease_until_us = None

    def census(self) -> tuple[Any, ...] | None:
        if self.state == "done":
            return None
        return (
            self.queue,
            self.payload,
            self.schedule,
            from_us(self.boundary_us),
            self.priority,
            self.max_attempts,
            from_us(self.run_at_us),
            _maybe(self.expires_at_us),
            self.state,
            self.attempts,
            self.last_error,
            self.worker_id,
            _maybe(self.lease_until_us),
            _maybe(self.died_at_us),
        )


def _maybe(micros: int | None) -> datetime | None:
    return None if micros is None else from_us(micros)


@dataclass
class ScheduleModel:
    """What docs/design.md says a store holds, fires and hands out, computed one boundary at a time."""

    now_us: int
    schedules: dict[str, _ModelSchedule] = field(default_factory=dict)
    jobs: list[_ModelJob] = field(default_factory=list)

    def register(self, step: Register) -> tuple[Any, ...]:
        interval_us = interval_of(step.spec) * _US
        old = self.schedules.get(step.name)
        keeps_phase = old is not None and old.interval_us == interval_us
        next_us = old.next_us if keeps_phase and old is not None else self.now_us + interval_us
        self.schedules[step.name] = _ModelSchedule(step.spec, interval_us, step.queue, step.payload, step.opts, next_us)
        return self.view(step.name)

    def unschedule(self, name: str) -> bool:
        return self.schedules.pop(name, None) is not None

    def tick(self) -> list[_ModelJob]:
        """Fire: per schedule the oldest elapsed boundaries up to the cap; skip the rest; keep the phase."""
        fires: list[tuple[int, str]] = []
        for name in sorted(self.schedules):
            schedule = self.schedules[name]
            boundary = schedule.next_us
            fired = 0
            while boundary <= self.now_us and fired < CAP:
                fires.append((boundary, name))
                fired += 1
                boundary += schedule.interval_us
            if boundary <= self.now_us:  # more were elapsed than the cap: skip them, phase kept
                skipped = (self.now_us - boundary) // schedule.interval_us + 1
                boundary += skipped * schedule.interval_us
            assert boundary > self.now_us
            schedule.next_us = boundary
        new: list[_ModelJob] = []
        for boundary, name in sorted(fires):
            new.append(self._fire(name, boundary, len(self.jobs) + len(new)))
        self.jobs.extend(new)
        return new

    def _fire(self, name: str, boundary_us: int, index: int) -> _ModelJob:
        schedule = self.schedules[name]
        opts = schedule.opts
        assert opts.expires is None or isinstance(opts.expires, timedelta)
        return _ModelJob(
            index=index,
            queue=schedule.queue,
            payload=schedule.payload,
            schedule=name,
            boundary_us=boundary_us,
            priority=DEFAULT_PRIORITY if opts.priority is None else opts.priority,
            max_attempts=DEFAULT_MAX_ATTEMPTS if opts.max_attempts is None else opts.max_attempts,
            run_at_us=self.now_us,
            expires_at_us=None if opts.expires is None else self.now_us + opts.expires // _MICRO,
        )

    def claim(self, queue: str) -> _ModelJob | None:
        """Sweep the queue's lapsed leases, then its expired jobs, then take the best due job."""
        now = self.now_us
        mine = [job for job in self.jobs if job.queue == queue]
        for job in mine:
            if job.state == "running" and job.lease_until_us is not None and job.lease_until_us <= now:
                if job.attempts >= job.max_attempts:
                    job.die(LEASE_EXPIRED_ERROR, now)
                else:
                    job.state, job.worker_id, job.lease_until_us = "pending", None, None
        for job in mine:
            if job.state == "pending" and job.expires_at_us is not None and job.expires_at_us <= now:
                job.die(JOB_EXPIRED_ERROR, now)
        due = [job for job in mine if job.state == "pending" and job.run_at_us <= now]
        best = min(due, key=lambda job: (-job.priority, job.run_at_us, job.index), default=None)
        if best is not None:
            best.state, best.attempts, best.worker_id = "running", best.attempts + 1, WORKER
            best.lease_until_us = now + VISIBILITY_S * _US
        return best

    def work(self, step: Work, index: int) -> tuple[Any, ...]:
        handled = []
        for disposition in step.dispositions:
            job = self.claim(step.queue)
            if job is None:
                break
            handled.append((job.schedule, from_us(job.boundary_us), job.attempts, disposition))
            error = f"{disposition} at step {index}"
            if disposition == "ack":
                job.state, job.worker_id, job.lease_until_us = "done", None, None
            elif disposition == "fail" or (disposition == "retry" and job.attempts >= job.max_attempts):
                job.die(error, self.now_us)
            elif disposition == "retry":
                wait_s = min(BACKOFF_BASE_S * 2 ** (job.attempts - 1), BACKOFF_CAP_S)
                job.state, job.run_at_us, job.last_error = "pending", self.now_us + wait_s * _US, error
                job.worker_id = job.lease_until_us = None
        return tuple(handled)

    def view(self, name: str) -> tuple[Any, ...]:
        s = self.schedules[name]
        return (name, s.spec, timedelta(microseconds=s.interval_us), s.queue, s.payload, s.opts, from_us(s.next_us))

    def listing(self) -> list[tuple[Any, ...]]:
        return [self.view(name) for name in sorted(self.schedules)]

    def soonest(self) -> datetime | None:
        return from_us(min(s.next_us for s in self.schedules.values())) if self.schedules else None


# -- observations ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TickSeen:
    """What one tick did, as a user sees it."""

    now: datetime
    fires: tuple[tuple[str, datetime, str], ...]
    jobs: tuple[tuple[Any, ...], ...]
    listing: tuple[tuple[Any, ...], ...]
    soonest: datetime | None
    job_ids: tuple[int, ...] = field(compare=False)


Seen = tuple[Any, ...] | bool | TickSeen | None


@dataclass(frozen=True)
class Outcome:
    """What playing a scenario showed: one observation per step, then every fired job as it ended."""

    seen: list[Seen]
    census: tuple[tuple[Any, ...] | None, ...]


def _utc(instant: datetime | None) -> datetime | None:
    return None if instant is None else instant.astimezone(UTC)


def _schedule_view(schedule: Any) -> tuple[Any, ...]:
    return (
        schedule.name,
        schedule.spec,
        schedule.interval,
        schedule.queue,
        schedule.payload,
        schedule.opts,
        _utc(schedule.next_boundary),
    )


def _fired_view(job: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """A just-fired job: its census view up to ``attempts`` (its lease and error are still empty)."""
    assert job is not None, "a fired job is missing"
    return job[:10]


def _census(store: Store, job_id: int) -> tuple[Any, ...] | None:
    info = store.get_job(job_id)
    if info is None:
        return None
    return (
        info.queue,
        info.payload,
        info.schedule,
        _utc(info.boundary),
        info.priority,
        info.max_attempts,
        _utc(info.run_at),
        _utc(info.expires_at),
        info.state.value,
        info.attempts,
        info.last_error,
        info.worker_id,
        _utc(info.lease_until),
        _utc(info.died_at),
    )


def play(store: Store, clock: Any, scenario: Scenario) -> Outcome:
    """Play ``scenario`` on ``store`` (whose manual ``clock`` starts at ``scenario.start``); what was seen."""
    seen: list[Seen] = []
    fired: list[int] = []
    for index, step in enumerate(scenario.steps):
        if isinstance(step, Register):
            seen.append(_schedule_view(store.schedule(step.name, step.spec, step.queue, step.payload, step.opts)))
        elif isinstance(step, Unschedule):
            seen.append(store.unschedule(step.name))
        elif isinstance(step, Advance):
            clock.advance(step.by)
            seen.append(None)
        elif isinstance(step, Work):
            seen.append(_work(store, step, index))
        else:
            fires = store.tick()
            fired.extend(f.job_id for f in fires)
            listing = tuple(_schedule_view(s) for s in store.schedules())
            seen.append(
                TickSeen(
                    now=clock.now(),
                    fires=tuple((f.schedule, f.boundary.astimezone(UTC), f.queue) for f in fires),
                    jobs=tuple(_fired_view(_census(store, f.job_id)) for f in fires),
                    listing=listing,
                    soonest=min((entry[6] for entry in listing), default=None),
                    job_ids=tuple(f.job_id for f in fires),
                )
            )
    return Outcome(seen, tuple(_census(store, job_id) for job_id in fired))


def _work(store: Store, step: Work, index: int) -> tuple[Any, ...]:
    handled = []
    queue = store.queue(step.queue)
    for disposition in step.dispositions:
        job = queue.claim(WORKER)
        if job is None:
            break
        handled.append((job.schedule, _utc(job.boundary), job.attempts, disposition))
        error = f"{disposition} at step {index}"
        if disposition == "ack":
            job.ack()
        elif disposition == "retry":
            job.retry(error)
        elif disposition == "fail":
            job.fail(error)
    return tuple(handled)


def expected(scenario: Scenario) -> Outcome:
    """What the model says playing ``scenario`` must show."""
    model = ScheduleModel(to_us(scenario.start))
    out: list[Seen] = []
    for index, step in enumerate(scenario.steps):
        if isinstance(step, Register):
            out.append(model.register(step))
        elif isinstance(step, Unschedule):
            out.append(model.unschedule(step.name))
        elif isinstance(step, Advance):
            model.now_us += step.by // _MICRO
            out.append(None)
        elif isinstance(step, Work):
            out.append(model.work(step, index))
        else:
            fires = model.tick()
            out.append(
                TickSeen(
                    now=from_us(model.now_us),
                    fires=tuple((job.schedule, from_us(job.boundary_us), job.queue) for job in fires),
                    jobs=tuple(_fired_view(job.census()) for job in fires),
                    listing=tuple(model.listing()),
                    soonest=model.soonest(),
                    job_ids=(),
                )
            )
    return Outcome(out, tuple(job.census() for job in model.jobs))


# -- strategies ----------------------------------------------------------------------------------

_payloads = st.one_of(
    st.none(),
    st.integers(-(2**31), 2**31),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    st.lists(st.integers(0, 9), max_size=3),
    st.dictionaries(st.sampled_from("abc"), st.integers(0, 9), max_size=2),
    st.binary(max_size=4),
)
_opts = st.builds(
    ScheduleOpts,
    priority=st.sampled_from([None, None, -3, 0, 2, 5]),  # distinct values, so claims choose by priority
    max_attempts=st.none() | st.integers(1, 9),
    expires=st.none() | st.integers(1, 7200) | st.integers(1, 7200 * _US).map(lambda us: timedelta(microseconds=us)),
)


def _spec(draw: st.DrawFn, usual_unit: str) -> str:
    """Mostly the scenario's usual unit, so its schedules fire at comparable rates and share queues."""
    unit = draw(st.sampled_from([usual_unit] * 3 + list("smhd")))
    return f"@every {draw(st.integers(1, MAX_COUNT[unit]))}{unit}"


def _respelled(spec: str) -> str:
    """The same interval written in another unit, where one exists."""
    seconds = interval_of(spec)
    for unit in ("d", "h", "m", "s"):
        size = UNIT_SECONDS[unit]
        candidate = f"@every {seconds // size}{unit}"
        if seconds % size == 0 and candidate != spec:
            return candidate
    return spec


_IDLE_KINDS = ["register"] * 3 + ["unschedule"] + ["advance"] * 3 + ["tick"] * 3
_BUSY_KINDS = ["register", "unschedule"] + ["advance"] * 3 + ["tick"] * 2 + ["work"] * 4
_WEIGHTED_QUEUES = [QUEUES[0]] * 3 + [QUEUES[1]]
_WEIGHTED_DISPOSITIONS = ["ack", "retry", "retry", "fail", "drop"]
_ADVANCES = ["little"] * 2 + ["minutes"] * 2 + ["boundary"] * 3 + ["far"] * 2 + ["days"]
_SHORT_ADVANCES = ["little"] * 2 + ["minutes"] * 3 + ["boundary"] * 3


@st.composite
def scenarios(draw: st.DrawFn, max_steps: int = 14) -> Scenario:
    """A scenario whose clock moves forward only, with horizons up to thousands of boundaries."""
    start = datetime(2031, 5, 17, tzinfo=UTC) + timedelta(microseconds=draw(st.integers(0, 86400 * _US - 1)))
    model = ScheduleModel(to_us(start))  # follows the steps so advances and work can aim
    far_out = draw(st.booleans())  # else short moves only, so queues stay small and jobs come back
    usual_unit = draw(st.sampled_from("smhd"))
    steps: list[Step] = []
    for index in range(draw(st.integers(2, max_steps))):
        registered = sorted(model.schedules)
        busy = sorted({job.queue for job in model.jobs if job.state in ("pending", "running")})
        kind = "register" if index < 2 else draw(st.sampled_from(_BUSY_KINDS if busy else _IDLE_KINDS))
        if kind == "register":
            name = draw(st.sampled_from(NAMES))
            current = model.schedules.get(name)
            mode = draw(st.sampled_from(["same", "respelled", "new"])) if current else "new"
            if current is None or mode == "new":
                spec = _spec(draw, usual_unit)
            else:
                spec = current.spec if mode == "same" else _respelled(current.spec)
            queue = draw(st.sampled_from(_WEIGHTED_QUEUES))  # mostly one queue: claims then choose among schedules
            opts = draw(_opts)
            if index == 1 and isinstance(steps[0], Register):  # a rival on the same queue at another priority
                first = steps[0]
                queue, taken = first.queue, first.opts.priority or 0
                opts = replace(opts, priority=draw(st.sampled_from([p for p in (-3, 0, 2, 5) if p != taken])))
            registration = Register(name, spec, queue, draw(_payloads), opts)
            model.register(registration)
            step: Step = registration
        elif kind == "unschedule":
            name = draw(st.sampled_from(registered or list(NAMES)))
            step = Unschedule(name)
            model.unschedule(name)
        elif kind == "advance":
            step = Advance(_advance(draw, model, registered, far_out))
            model.now_us += step.by // _MICRO
        elif kind == "work":
            dispositions = draw(st.lists(st.sampled_from(_WEIGHTED_DISPOSITIONS), min_size=1, max_size=24))
            work = Work(draw(st.sampled_from(busy)), tuple(dispositions))
            model.work(work, index)
            step = work
        else:
            step = Tick()
            model.tick()
        steps.append(step)
    steps.append(Tick())
    model.tick()
    live = [job.queue for job in model.jobs if job.state in ("pending", "running")]
    if live:  # end with a worker on the busiest queue, so most scenarios see claims choose
        busiest = max(sorted(set(live)), key=live.count)
        dispositions = draw(st.lists(st.sampled_from(_WEIGHTED_DISPOSITIONS), min_size=1, max_size=24))
        steps.append(Work(busiest, tuple(dispositions)))
    return Scenario(start, tuple(steps))


def _advance(draw: st.DrawFn, model: ScheduleModel, registered: list[str], far_out: bool) -> timedelta:
    """A forward move: a little, minutes, onto (or 1 µs before) a boundary or a job's edge, or far out."""
    choices = _ADVANCES if far_out else _SHORT_ADVANCES
    if not registered:
        choices = [how for how in choices if how not in ("boundary", "far")]
    edges = sorted(
        {
            instant
            for job in model.jobs
            if job.state in ("pending", "running")
            for instant in (job.run_at_us, job.expires_at_us, job.lease_until_us)
            if instant is not None and instant > model.now_us
        }
    )
    how = draw(st.sampled_from([*choices, "job edge", "job edge"] if edges else choices))
    if how == "job edge":  # onto (or 1 µs before) a fired job's run_at, expiry or lease end
        target = draw(st.sampled_from(edges)) - draw(st.sampled_from([0, 1]))
        return timedelta(microseconds=target - model.now_us)
    if how == "little":
        return timedelta(microseconds=draw(st.integers(0, 3 * _US)))
    if how == "minutes":  # enough for retries to come due and leases (300 s) to lapse
        return timedelta(seconds=draw(st.integers(4, 700)))
    if how == "days":
        return timedelta(days=draw(st.integers(1, 400)), microseconds=draw(st.integers(0, _US)))
    schedule = model.schedules[draw(st.sampled_from(registered))]
    farthest = max(1, min(5000, _FAR_LIMIT_US // schedule.interval_us))
    behind = draw(st.integers(0, farthest) if how == "far" else st.integers(0, 3))
    target = schedule.next_us + behind * schedule.interval_us - draw(st.sampled_from([0, 0, 1]))
    return timedelta(microseconds=max(0, target - model.now_us))
