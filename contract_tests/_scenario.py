"""Generated schedule scenarios, how to play one on a store, and a naive model of what must happen.

A scenario is a list of steps — register (new, same spec, the same interval respelled, or a
changed spec), unschedule, advance the clock (a little, onto or just before a boundary, or
thousands of boundaries ahead), tick — played on a fresh store under a manual clock. Playing
it records everything a user can observe: what ``schedule`` returned, what ``unschedule``
said, and per tick the fires, the fired jobs as ``get_job`` shows them, every schedule's
next boundary and the soonest of them.

``ScheduleModel`` restates the rules of DESIGN.md from first principles (integer
microseconds, boundaries enumerated one by one) without calling ``alkstore``'s boundary
math, so that a bug in the one shared implementation shows up as a disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from alkstore import ScheduleOpts, Store

__all__ = [
    "CAP",
    "Advance",
    "Register",
    "Scenario",
    "ScheduleModel",
    "Tick",
    "Unschedule",
    "play",
    "scenarios",
]

#: The catch-up cap as DESIGN.md states it (deliberately not ``alkstore.CATCH_UP_CAP``).
CAP = 64
#: Schedule names and target queues a scenario draws from (few, so names are re-registered).
NAMES = ("alpha", "bravo", "charlie", "delta")
QUEUES = ("fires-a", "fires-b")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_COUNT = {"s": 120, "m": 120, "h": 48, "d": 14}
#: The queue defaults a fired job falls back to (plain queues: priority 0, 3 attempts).
DEFAULT_PRIORITY, DEFAULT_MAX_ATTEMPTS = 0, 3
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


Step = Register | Unschedule | Advance | Tick


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
class ScheduleModel:
    """What DESIGN.md says a store holds and fires, computed one boundary at a time."""

    now_us: int
    schedules: dict[str, _ModelSchedule] = field(default_factory=dict)

    def register(self, step: Register) -> tuple[Any, ...]:
        interval_us = interval_of(step.spec) * _US
        old = self.schedules.get(step.name)
        keeps_phase = old is not None and old.interval_us == interval_us
        next_us = old.next_us if keeps_phase and old is not None else self.now_us + interval_us
        self.schedules[step.name] = _ModelSchedule(step.spec, interval_us, step.queue, step.payload, step.opts, next_us)
        return self.view(step.name)

    def unschedule(self, name: str) -> bool:
        return self.schedules.pop(name, None) is not None

    def elapsed(self, name: str) -> list[int]:
        """Every elapsed boundary of ``name`` (for small backlogs; used to check the model itself)."""
        schedule = self.schedules[name]
        out, boundary = [], schedule.next_us
        while boundary <= self.now_us:
            out.append(boundary)
            boundary += schedule.interval_us
        return out

    def tick(self) -> list[tuple[str, int, str]]:
        """Fire: per schedule the oldest elapsed boundaries up to the cap; skip the rest; keep the phase."""
        fires = []
        for name in sorted(self.schedules):
            schedule = self.schedules[name]
            boundary = schedule.next_us
            fired = 0
            while boundary <= self.now_us and fired < CAP:
                fires.append((name, boundary, schedule.queue))
                fired += 1
                boundary += schedule.interval_us
            if boundary <= self.now_us:  # more were elapsed than the cap: skip them, phase kept
                skipped = (self.now_us - boundary) // schedule.interval_us + 1
                boundary += skipped * schedule.interval_us
            assert boundary > self.now_us
            schedule.next_us = boundary
        fires.sort(key=lambda fire: (fire[1], fire[0]))
        return fires

    def job_view(self, name: str, boundary_us: int, queue: str) -> tuple[Any, ...]:
        schedule = self.schedules[name]
        opts = schedule.opts
        expires = opts.expires
        assert expires is None or isinstance(expires, timedelta)
        return (
            queue,
            schedule.payload,
            name,
            from_us(boundary_us),
            DEFAULT_PRIORITY if opts.priority is None else opts.priority,
            DEFAULT_MAX_ATTEMPTS if opts.max_attempts is None else opts.max_attempts,
            from_us(self.now_us),
            None if expires is None else from_us(self.now_us) + expires,
            "pending",
            0,
        )

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


def _job_view(store: Store, job_id: int) -> tuple[Any, ...]:
    info = store.get_job(job_id)
    assert info is not None, f"fired job {job_id} is missing"
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
    )


def play(store: Store, clock: Any, scenario: Scenario) -> list[Seen]:
    """Play ``scenario`` on ``store`` (whose manual ``clock`` starts at ``scenario.start``); what was seen."""
    seen: list[Seen] = []
    for step in scenario.steps:
        if isinstance(step, Register):
            seen.append(_schedule_view(store.schedule(step.name, step.spec, step.queue, step.payload, step.opts)))
        elif isinstance(step, Unschedule):
            seen.append(store.unschedule(step.name))
        elif isinstance(step, Advance):
            clock.advance(step.by)
            seen.append(None)
        else:
            fires = store.tick()
            listing = tuple(_schedule_view(s) for s in store.schedules())
            seen.append(
                TickSeen(
                    now=clock.now(),
                    fires=tuple((f.schedule, f.boundary.astimezone(UTC), f.queue) for f in fires),
                    jobs=tuple(_job_view(store, f.job_id) for f in fires),
                    listing=listing,
                    soonest=min((entry[6] for entry in listing), default=None),
                    job_ids=tuple(f.job_id for f in fires),
                )
            )
    return seen


def expected(scenario: Scenario) -> list[Seen]:
    """What the model says playing ``scenario`` must show."""
    model = ScheduleModel(to_us(scenario.start))
    out: list[Seen] = []
    for step in scenario.steps:
        if isinstance(step, Register):
            out.append(model.register(step))
        elif isinstance(step, Unschedule):
            out.append(model.unschedule(step.name))
        elif isinstance(step, Advance):
            model.now_us += step.by // _MICRO
            out.append(None)
        else:
            fires = model.tick()
            out.append(
                TickSeen(
                    now=from_us(model.now_us),
                    fires=tuple((name, from_us(b), queue) for name, b, queue in fires),
                    jobs=tuple(model.job_view(name, b, queue) for name, b, queue in fires),
                    listing=tuple(model.listing()),
                    soonest=model.soonest(),
                    job_ids=(),
                )
            )
    return out


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
    priority=st.none() | st.integers(-5, 5),
    max_attempts=st.none() | st.integers(1, 9),
    expires=st.none() | st.integers(1, 7200) | st.integers(1, 7200 * _US).map(lambda us: timedelta(microseconds=us)),
)


def _spec(draw: st.DrawFn) -> str:
    unit = draw(st.sampled_from("smhd"))
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


_KINDS = ["register"] * 3 + ["unschedule"] + ["advance"] * 3 + ["tick"] * 3
_ADVANCES = ["little"] * 2 + ["boundary"] * 3 + ["far"] * 2 + ["days"]


@st.composite
def scenarios(draw: st.DrawFn, max_steps: int = 14) -> Scenario:
    """A scenario whose clock moves forward only, with horizons up to thousands of boundaries."""
    start = datetime(2031, 5, 17, tzinfo=UTC) + timedelta(microseconds=draw(st.integers(0, 86400 * _US - 1)))
    model = ScheduleModel(to_us(start))  # follows the steps so advances can aim at boundaries
    steps: list[Step] = []
    for index in range(draw(st.integers(1, max_steps))):
        kind = "register" if index == 0 else draw(st.sampled_from(_KINDS))
        registered = sorted(model.schedules)
        if kind == "register":
            name = draw(st.sampled_from(NAMES))
            current = model.schedules.get(name)
            mode = draw(st.sampled_from(["same", "respelled", "new"])) if current else "new"
            if current is None or mode == "new":
                spec = _spec(draw)
            else:
                spec = current.spec if mode == "same" else _respelled(current.spec)
            registration = Register(name, spec, draw(st.sampled_from(QUEUES)), draw(_payloads), draw(_opts))
            model.register(registration)
            step: Step = registration
        elif kind == "unschedule":
            name = draw(st.sampled_from(registered or list(NAMES)))
            step = Unschedule(name)
            model.unschedule(name)
        elif kind == "advance":
            step = Advance(_advance(draw, model, registered))
            model.now_us += step.by // _MICRO
        else:
            step = Tick()
            model.tick()
        steps.append(step)
    steps.append(Tick())
    return Scenario(start, tuple(steps))


def _advance(draw: st.DrawFn, model: ScheduleModel, registered: list[str]) -> timedelta:
    """A forward move: a little, onto (or a microsecond before) a boundary, or far out."""
    how = draw(st.sampled_from(_ADVANCES if registered else ["little", "days"]))
    if how == "little":
        return timedelta(microseconds=draw(st.integers(0, 3 * _US)))
    if how == "days":
        return timedelta(days=draw(st.integers(1, 400)), microseconds=draw(st.integers(0, _US)))
    schedule = model.schedules[draw(st.sampled_from(registered))]
    farthest = max(1, min(5000, _FAR_LIMIT_US // schedule.interval_us))
    behind = draw(st.integers(0, farthest) if how == "far" else st.integers(0, 3))
    target = schedule.next_us + behind * schedule.interval_us - draw(st.sampled_from([0, 0, 1]))
    return timedelta(microseconds=max(0, target - model.now_us))
