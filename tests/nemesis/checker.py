"""The nemesis run's checker: every anomaly a history and the final snapshot show, with its evidence.

Pure: it reads events and a snapshot already loaded (``history.load_history``, ``load_snapshot``)
and returns anomalies; no clock, no files. Each rule is sound for the history as logged: events
are logged after their step returned, and ``began`` (when set) is when the step was issued, so
"A before B" below means A was logged before B began.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

from .history import Event, Kind, Snapshot

__all__ = ["Anomaly", "AnomalyKind", "Params", "check", "judged_boundaries"]


class AnomalyKind(StrEnum):
    """What went wrong; one rule each."""

    LOST = "lost"
    ROLLED_BACK_RAN = "rolled_back_ran"
    DOUBLE_ACK = "double_ack"
    STALE_ACK = "stale_ack"
    OVERLAPPING_RUNS = "overlapping_runs"
    DOUBLE_FIRE = "double_fire"
    MISSED_FIRE = "missed_fire"
    UNDELIVERED = "undelivered"
    OUT_OF_ORDER = "out_of_order"
    TOO_MANY_RUNS = "too_many_runs"


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One anomaly: its kind, what it is about (a job, a boundary, a message) and the events that show it."""

    kind: AnomalyKind
    subject: str
    evidence: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class Params:
    """The run's tolerances, in seconds.

    ``ttl`` is the scheduler lock's lease (how long a lost leader still holds it), ``catch_up``
    how long a new leader may take to fire the backlog, ``slack`` the most the hosts' and the
    database's clocks may disagree. Keyed delivery order is checked for ``ordered_outboxes`` only.
    """

    ttl: float
    catch_up: float
    slack: float = 0.0
    ordered_outboxes: frozenset[str] = frozenset()


def check(events: Sequence[Event], snapshot: Snapshot, params: Params) -> list[Anomaly]:
    """Every anomaly ``events`` and ``snapshot`` show, rule by rule."""
    history = sorted(events, key=lambda event: (event.mono, event.process, event.seq))
    by_job: defaultdict[int, list[Event]] = defaultdict(list)
    for event in history:
        if event.job is not None:
            by_job[event.job].append(event)
    return [
        *_lost(history, by_job, snapshot),
        *_rolled_back_ran(history, by_job),
        *_acks(by_job),
        *_overlapping_runs(history, by_job, params),
        *_too_many_runs(history, by_job),
        *_double_fires(history),
        *_missed_fires(history, params),
        *_undelivered(history, snapshot),
        *_out_of_order(history, params),
    ]


def _start(event: Event) -> float:
    """When the step behind ``event`` was issued: ``began``, or the log time when none was kept."""
    return event.began if event.began is not None else event.mono


def _of(events: Sequence[Event], *kinds: Kind) -> list[Event]:
    return [event for event in events if event.kind in kinds]


def _ok_acks(events: Sequence[Event]) -> list[Event]:
    return [event for event in events if event.kind is Kind.ACK and event.ok]


def _maybe_acked(events: Sequence[Event]) -> bool:
    """An ``ok`` ack, or one issued whose outcome was never logged (``ok`` unset: its process died)."""
    return any(event.kind is Kind.ACK and event.ok is not False for event in events)


def _lost(history: Sequence[Event], by_job: dict[int, list[Event]], snapshot: Snapshot) -> Iterator[Anomaly]:
    """A committed job is acked (done), dead, or still pending or running; anything else is lost."""
    kept = snapshot.pending | snapshot.running | snapshot.dead
    for enqueue in _of(history, Kind.ENQUEUE_COMMITTED):
        assert enqueue.job is not None
        if enqueue.job not in kept and not _maybe_acked(by_job[enqueue.job]):
            yield Anomaly(AnomalyKind.LOST, f"job {enqueue.job}", (enqueue,))


#: How long after the nemesis logs a server crash (it logs before it acts) the crash may still come.
CRASH_LAG_S = 5.0


def _rolled_back_ran(history: Sequence[Event], by_job: dict[int, list[Event]]) -> Iterator[Anomaly]:
    """A job whose enqueue rolled back was never stored, so nothing may claim or run it.

    PostgreSQL may give a rolled-back transaction's sequence values out again after a crash (it
    flushes a sequence's advance only with a commit), so an id rolled back, then committed by an
    enqueue after a crash that followed the rollback, names that later job from its commit on.
    """
    crashes = [event.mono for event in _of(history, Kind.FAULT) if event.action == "server_immediate"]
    for rollback in _of(history, Kind.ENQUEUE_ROLLED_BACK):
        assert rollback.job is not None
        events = by_job[rollback.job]
        again = [
            commit
            for commit in _of(events, Kind.ENQUEUE_COMMITTED)
            if any(_start(rollback) - CRASH_LAG_S <= crash <= _start(commit) for crash in crashes)
            and _start(commit) > _start(rollback)
        ]
        until = min((_start(commit) for commit in again), default=float("inf"))
        ran = [event for event in _of(events, Kind.CLAIM, Kind.RUN_START) if _start(event) < until]
        if ran:
            yield Anomaly(AnomalyKind.ROLLED_BACK_RAN, f"job {rollback.job}", (rollback, ran[0]))


def _acks(by_job: dict[int, list[Event]]) -> Iterator[Anomaly]:
    """A job is acked once, and only under the newest fence granted before the ack was issued."""
    for job, events in by_job.items():
        oks = _ok_acks(events)
        if len(oks) > 1:
            yield Anomaly(AnomalyKind.DOUBLE_ACK, f"job {job}", tuple(oks))
        claims = _of(events, Kind.CLAIM)
        for ack in oks:
            assert ack.fence is not None
            newer = [c for c in claims if c.fence is not None and c.fence > ack.fence and c.mono < _start(ack)]
            if newer:
                yield Anomaly(AnomalyKind.STALE_ACK, f"job {job}", (ack, newer[0]))


@dataclass(frozen=True, slots=True)
class _Run:
    start: Event
    claim: Event | None
    held_until: float  # wall: the earlier of the run's end and its lease's end


def _kills(history: Sequence[Event]) -> dict[str | None, list[Event]]:
    """The ``kill`` faults, by the process they killed."""
    kills: defaultdict[str | None, list[Event]] = defaultdict(list)
    for fault in _of(history, Kind.FAULT):
        if fault.action == "kill":
            kills[fault.target].append(fault)
    return kills


def _runs(kills: dict[str | None, list[Event]], events: Sequence[Event]) -> list[_Run]:
    """A job's runs, each held until it ended (or its process was killed) or its lease ran out."""
    runs = []
    for start in _of(events, Kind.RUN_START):
        ends = [
            e.wall
            for e in events
            if e.kind is Kind.RUN_END and e.fence == start.fence and e.process == start.process and e.mono > start.mono
        ]
        killed = [f.wall for f in kills.get(start.process, ()) if f.mono > start.mono]
        claims = [e for e in events if e.kind is Kind.CLAIM and e.fence == start.fence]
        leases = [e.lease_until for e in _of(events, Kind.CLAIM, Kind.HEARTBEAT) if e.fence == start.fence]
        lease = max((lease for lease in leases if lease is not None), default=math.inf)
        ended = min([*ends, *killed], default=math.inf)
        runs.append(_Run(start, claims[0] if claims else None, min(ended, lease)))
    return sorted(runs, key=lambda run: run.start.wall)


def _overlapping_runs(history: Sequence[Event], by_job: dict[int, list[Event]], params: Params) -> Iterator[Anomaly]:
    """A run may start only once every earlier run of its job has ended or lost its lease."""
    kills = _kills(history)
    for job, events in by_job.items():
        runs = _runs(kills, events)
        for i, first in enumerate(runs):
            for second in runs[i + 1 :]:
                if second.start.wall < first.held_until - params.slack:
                    evidence = (first.start, *((first.claim,) if first.claim else ()), second.start)
                    yield Anomaly(AnomalyKind.OVERLAPPING_RUNS, f"job {job}", evidence)


def _too_many_runs(history: Sequence[Event], by_job: dict[int, list[Event]]) -> Iterator[Anomaly]:
    """A job runs at most its ``max_attempts`` times; a run whose claim was released took no attempt."""
    for enqueue in _of(history, Kind.ENQUEUE_COMMITTED):
        assert enqueue.job is not None
        events = by_job[enqueue.job]
        released = {e.fence for e in _of(events, Kind.RELEASE)}
        runs = [e for e in _of(events, Kind.RUN_START) if e.fence not in released]
        if enqueue.max_attempts is not None and len(runs) > enqueue.max_attempts:
            yield Anomaly(AnomalyKind.TOO_MANY_RUNS, f"job {enqueue.job}", (enqueue, *runs))


def _boundary_key(boundary: float | None) -> int:
    """A boundary as whole microseconds (the store's resolution), so equal instants compare equal."""
    assert boundary is not None
    return round(boundary * 1_000_000)


def _double_fires(history: Sequence[Event]) -> Iterator[Anomaly]:
    """A schedule's boundary fires once."""
    fires: defaultdict[tuple[str | None, int], list[Event]] = defaultdict(list)
    for fire in _of(history, Kind.SCHEDULE_FIRE):
        fires[fire.schedule, _boundary_key(fire.boundary)].append(fire)
    for (schedule, _), same in fires.items():
        if len(same) > 1:
            yield Anomaly(AnomalyKind.DOUBLE_FIRE, f"schedule {schedule} at {same[0].boundary}", tuple(same))


def _outages(history: Sequence[Event], end: float) -> list[tuple[float, float]]:
    """The spans from each ``cut`` to the next ``heal`` (or the end), in wall time."""
    spans, cut = [], None
    for fault in _of(history, Kind.FAULT):
        if fault.action == "cut" and cut is None:
            cut = fault.wall
        elif fault.action == "heal" and cut is not None:
            spans.append((cut, fault.wall))
            cut = None
    if cut is not None:
        spans.append((cut, end))
    return spans


def _due_boundaries(history: Sequence[Event], params: Params) -> Iterator[tuple[Event, float, bool]]:
    """Each registered schedule's boundaries due by the end: its registration, the boundary, whether it is judged.

    A boundary is not judged when an outage covers it or a fault lies within ``ttl + catch_up``
    of it: near a fault it may be late, or skipped by catch-up's skip-forward (ADR 003). One
    whose deadline falls after the history's end is not due.
    """
    if not history:
        return
    end = max(event.wall for event in history)
    grace = params.ttl + params.catch_up + params.slack
    faults = [fault.wall for fault in _of(history, Kind.FAULT)]
    outages = _outages(history, end)
    registered: dict[str | None, Event] = {}
    for register in _of(history, Kind.SCHEDULE_REGISTER):
        registered.setdefault(register.schedule, register)
    for register in registered.values():
        first, interval = register.boundary, register.interval
        assert first is not None
        assert interval is not None
        assert interval > 0
        for step in itertools.count():
            boundary = first + step * interval
            if boundary + grace > end:
                break
            exempt = any(lo <= boundary <= hi for lo, hi in outages) or any(abs(t - boundary) <= grace for t in faults)
            yield register, boundary, not exempt


def judged_boundaries(events: Sequence[Event], params: Params) -> int:
    """How many boundaries ``missed_fire`` judges in ``events``: a run whose faults excuse them all checks none."""
    history = sorted(events, key=lambda event: (event.mono, event.process, event.seq))
    return sum(judged for _, _, judged in _due_boundaries(history, params))


def _missed_fires(history: Sequence[Event], params: Params) -> Iterator[Anomaly]:
    """Every boundary fires, unless it is excused (``_due_boundaries``)."""
    fired = {(fire.schedule, _boundary_key(fire.boundary)) for fire in _of(history, Kind.SCHEDULE_FIRE)}
    for register, boundary, judged in _due_boundaries(history, params):
        if judged and (register.schedule, _boundary_key(boundary)) not in fired:
            yield Anomaly(AnomalyKind.MISSED_FIRE, f"schedule {register.schedule} at {boundary}", (register,))


def _delivered(history: Sequence[Event], snapshot: Snapshot) -> set[str]:
    return set(snapshot.delivered) | {d.message for d in _of(history, Kind.DELIVERY) if d.message is not None}


def _undelivered(history: Sequence[Event], snapshot: Snapshot) -> Iterator[Anomaly]:
    """Every committed outbox message is delivered by the end of the run."""
    delivered = _delivered(history, snapshot)
    for commit in _of(history, Kind.OUTBOX_COMMIT):
        if commit.message not in delivered:
            yield Anomaly(AnomalyKind.UNDELIVERED, f"message {commit.message}", (commit,))


def _out_of_order(history: Sequence[Event], params: Params) -> Iterator[Anomaly]:
    """In a keyed-order outbox, a message committed before another of its key began is delivered first."""
    first_delivery: dict[str | None, Event] = {}
    for delivery in _of(history, Kind.DELIVERY):
        first_delivery.setdefault(delivery.message, delivery)
    by_key: defaultdict[tuple[str | None, str], list[Event]] = defaultdict(list)
    for commit in _of(history, Kind.OUTBOX_COMMIT):
        if commit.queue in params.ordered_outboxes and commit.key is not None:
            by_key[commit.queue, commit.key].append(commit)
    for (_, key), commits in by_key.items():
        for i, earlier in enumerate(commits):
            for later in commits[i + 1 :]:
                d_earlier, d_later = first_delivery.get(earlier.message), first_delivery.get(later.message)
                if d_earlier is None or d_later is None or earlier.mono >= _start(later):
                    continue
                if d_later.mono < _start(d_earlier):
                    subject = f"key {key}: {later.message} before {earlier.message}"
                    yield Anomaly(AnomalyKind.OUT_OF_ORDER, subject, (earlier, later, d_later, d_earlier))
