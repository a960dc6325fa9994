"""Where this engine's claims of a queue start reading the ready index (ADR 061), in process memory.

Under a pinned xmin horizon every job claimed and finished leaves a dead ``jobs_claim`` entry at
the index's left end, where a claim starts; a claim that starts from the key of a job claimed a
moment ago reads past none of them. So the engine keeps, per queue and per priority band it
claimed from, a lower bound on (``run_at``, id), and its claims read each band from there (a
priority it has no band for, from that priority's left end). The bound is a hint: a job can
become ready behind it (a released or retried job, the next job of an ordering key, an enqueue
committed late, one put back by another engine), so a claim reads the whole index at least
every ``backstop`` (by the claims' clock), after a sweep, and after this engine put a job of the
queue back or finished one of an ordering key. Nothing here is written anywhere: each engine
keeps its own.

A full read walks every dead entry a pinned horizon keeps, and that grows with the pin's age
(about 8,000 buffers at 144,000 jobs finished since the pin, ADR 066). So the backstop has two
tiers (ADR 067): every ``backstop`` a *wide* claim reads each band from ``WIDE`` before its
newest job (an enqueue committed up to that late, a job put back by another engine, a host's
clock that far behind), and only every ``FULL_EVERY`` backstops a full one, for what stands
further behind.

The lapsed-lease probe is bounded the same way: a claim probes ``jobs_lease`` from the instant
the last probe of the queue looked up to (a lease ending before it was seen then),
and from the left end with every full claim.

An idle worker's read of the soonest due instant (``soonest_due``) reads from the same places
(ADR 078): the ready jobs from where the queue's next wide claim reads, the leases from the last
probe's instant to ``LEASE_AHEAD`` past it; what it leaves out, the full claim finds.

A job this engine claimed with dependents (ADR 073) may make them ready when it ends, in any
queue. A dependent was enqueued after its parent, so its key (``run_at``, id) is at or after the
parent's (``enqueued_at``, id): a band whose bound is not past that finds it. So the end of such
a job resets each queue with a band whose bound is past it (its next claim reads in full), and
no other: a chain's next job is found from the cursor. (A dependent given a ``run_at`` before its
parent's enqueue is left to the backstop, as any job enqueued with a past ``run_at`` is.) The
engine asks ``parents`` whether the acks it is about to write are of such jobs (the claim it
sends with them then runs after them).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from alkstore import engine as port

from ._positional import FixedIntArray, InstantArray, IntArray

__all__ = ["DEFAULT_BACKSTOP", "ClaimCursors", "claim_params", "full_params"]

#: The longest a job ready behind a cursor waits for a full claim, by default (seconds).
DEFAULT_BACKSTOP = 1.0
#: How far behind the newest job claimed from a band its bound stays, at most, in ``run_at``: a job
#: enqueued by a transaction that committed that late is still found by the next claim.
MARGIN = timedelta(seconds=1)
#: How far behind its newest job a band's wide claim reads from (a claim every ``backstop``).
WIDE = timedelta(seconds=10)
#: A full claim every this many backstops; the wide claims in between.
FULL_EVERY = 60
#: How far behind it stays at most in claims: the bound is never older than the first job of the
#: claim this many claims back, so a backlog of jobs of one ``run_at`` is not read again and again.
LAG = 16
#: How far past its queue's last probe ``soonest_due`` looks for a lease's end (ADR 078): more than the worker's
#: ``IDLE_RECHECK``, so an idle worker, whose every round claims (and probes), reads each lease end before it comes.
LEASE_AHEAD = timedelta(seconds=10)
#: The bands a queue's cursor keeps, the most recently claimed from (a band left out waits for a full claim).
BANDS = 8
#: Jobs this engine claimed and remembers the queue of, until their end (past it, the memory starts over).
HELD = 100_000
#: The errors a claim's sweep writes on the jobs it buries.
_LEASE_EXPIRED_ERROR = port.LEASE_EXPIRED_ERROR.encode()
_JOB_EXPIRED_ERROR = port.JOB_EXPIRED_ERROR.encode()
_MICROSECOND = timedelta(microseconds=1)
#: What ``_held`` says of a job this engine does not hold (no queue is empty-named).
_UNKNOWN: tuple[str, bool, tuple[datetime, int] | None] = ("", False, None)
#: The lower bound of a full probe of the leases: before any lease.
_EVER = datetime.min.replace(tzinfo=UTC)
#: The upper bound of a full look at the leases: after any lease.
_NEVER = datetime.max.replace(tzinfo=UTC)
#: The priorities a job can have (a 32-bit integer).
_PRIORITY_MAX, _PRIORITY_MIN = 2**31 - 1, -(2**31)


@dataclass(slots=True)
class _Band:
    """One priority band's bound: the first key of its last ``LAG`` claims, and its newest ``run_at``."""

    firsts: deque[tuple[datetime, int]] = field(default_factory=lambda: deque(maxlen=LAG))
    newest: datetime | None = None
    #: The least of ``firsts``, kept as they change: a claim reads it more often than it adds to it.
    lowest: tuple[datetime, int] | None = None

    def add_first(self, key: tuple[datetime, int]) -> None:
        """Note the first key a claim took from this band."""
        self.firsts.append(key)
        self.lowest = min(self.firsts)

    def bound(self) -> tuple[datetime, int]:
        assert self.newest is not None
        assert self.lowest is not None
        return max(self.lowest, (_before(self.newest, MARGIN), 0))

    def wide_bound(self) -> tuple[datetime, int]:
        """Where a wide claim reads this band from: ``WIDE`` before its newest job, or its bound if that is earlier."""
        assert self.newest is not None
        return min(self.bound(), (_before(self.newest, WIDE), 0))


@dataclass(slots=True)
class _Queue:
    """One queue's cursor: its bands, the last full claim's instant, and how far its leases were probed."""

    full_at: datetime
    probed_to: datetime
    #: The last wide or full claim's instant.
    wide_at: datetime
    bands: OrderedDict[int, _Band] = field(default_factory=OrderedDict)
    stale: bool = False
    #: Counts the resets: a full claim that began before the last one does not make the cursor current again.
    resets: int = 0

    def past(self, key: tuple[datetime, int]) -> bool:
        """Whether a claim from this queue's cursor may not read as far back as ``key``, in some band."""
        return any(band.newest is not None and band.bound() > key for band in self.bands.values())

    def ahead_of(self, now: datetime) -> bool:
        """Whether a band's newest job is later than ``now``: the claims' clock went back, the bounds are void."""
        return any(band.newest is not None and band.newest > now for band in self.bands.values())


class ClaimCursors:
    """Per queue, the bounds a claim reads from, the next full claim, and the lease probe's start."""

    def __init__(self, backstop: float) -> None:
        self._backstop = timedelta(seconds=backstop)
        self._full_every = self._backstop * FULL_EVERY
        self._lock = threading.Lock()
        self._queues: dict[str, _Queue] = {}
        #: Per job this engine claimed: its queue, whether it has an ordering key, and if it has dependents, the
        #: key no dependent of it stands before: its (enqueued_at, id).
        self._held: dict[int, tuple[str, bool, tuple[datetime, int] | None]] = {}

    def params(self, queue: str, now: datetime) -> dict[str, Any]:
        """The parameters of a claim of ``queue`` at ``now``: a full one when due, a wide one every backstop,
        else one from the bands. ``resets`` and ``wide`` are not statement parameters: ``claimed`` reads
        them back."""
        with self._lock:
            state = self._queues.get(queue)
            if state is None:
                return {**full_params(), "resets": 0}
            due = state.stale or not state.full_at <= now < state.full_at + self._full_every
            if due or not state.bands or state.ahead_of(now):
                return {**full_params(), "resets": state.resets}
            wide = not state.wide_at <= now < state.wide_at + self._backstop
            if wide:
                bounds = {priority: band.wide_bound() for priority, band in state.bands.items()}
                probed_after = _before(min(state.probed_to, now), WIDE)
            else:
                bounds = {priority: band.bound() for priority, band in state.bands.items()}
                probed_after = min(state.probed_to, now)
            segments = _segments(bounds)
            return {"full": False, "wide": wide, **segments, "probed_after": probed_after, "resets": state.resets}

    def claimed(self, queue: str, now: datetime, params: dict[str, Any], jobs: Sequence[port.JobRecord]) -> None:
        """Note a claim of ``queue`` at ``now`` (``params`` as it ran, its probe included) and the ``jobs`` it took."""
        with self._lock:
            state = self._queues.get(queue)
            if params["full"]:
                if state is None:
                    state = self._queues[queue] = _Queue(full_at=now, probed_to=now, wide_at=now)
                if now < state.full_at or state.ahead_of(now):
                    state.bands.clear()
                state.full_at = state.wide_at = now
                if params["resets"] == state.resets:
                    state.stale = False
            elif state is None:
                return
            elif params.get("wide"):
                state.wide_at = now
            if params["probe"]:
                state.probed_to = now if params["full"] else max(state.probed_to, now)
            firsts: dict[int, tuple[datetime, int]] = {}
            for job in jobs:
                parent = (job.enqueued_at, job.id) if job.dependents else None
                self._held[job.id] = (queue, job.ordering_key is not None, parent)
                band = state.bands.get(job.priority)
                key = (job.run_at, job.id)
                if band is not None and band.lowest is not None and key < band.bound():
                    continue  # found behind the bound by a full claim: not where the next claims start
                firsts.setdefault(job.priority, key)
                if band is None:
                    band = state.bands[job.priority] = _Band()
                    while len(state.bands) > BANDS:
                        state.bands.popitem(last=False)
                else:
                    state.bands.move_to_end(job.priority)
                band.newest = job.run_at if band.newest is None else max(band.newest, job.run_at)
            for priority, key in firsts.items():
                band = state.bands.get(priority)
                if band is not None:
                    band.add_first(key)
            if len(self._held) > HELD:  # ended through another engine: only the backstop finds what they free
                self._held.clear()

    def idle_params(self, queues: Sequence[str]) -> dict[str, Any]:
        """The parameters of ``soonest_due`` over ``queues`` (ADR 078): each queue's ready jobs read from where its
        next wide claim reads (``WIDE`` before each band's newest job), its leases from where its last probe looked
        up to ``LEASE_AHEAD`` past it; a queue whose next claim reads in full (never claimed here, reset, a backstop
        of 0) from the left end of both, the leases without end. A ready job this misses is one only a full claim
        finds; a lease end, one the worker's next round comes before."""
        queues = list(dict.fromkeys(queues))
        names, probed, ahead = [], InstantArray(), InstantArray()
        his, los, ats, ids = IntArray(), IntArray(), InstantArray(), IntArray()
        with self._lock:
            for queue in queues:
                state = self._queues.get(queue)
                whole = state is None or state.stale or not state.bands or not self._backstop
                bounds = {} if state is None or whole else {p: band.wide_bound() for p, band in state.bands.items()}
                segments = _segments(bounds)
                names += [queue] * len(segments["band_his"])
                his += segments["band_his"]
                los += segments["band_los"]
                ats += segments["band_ats"]
                ids += segments["band_ids"]
                probed.append(_EVER if state is None or whole else state.probed_to)
                ahead.append(_NEVER if state is None or whole else state.probed_to + LEASE_AHEAD)
        return {
            "queues": queues,
            "probed_afters": probed,
            "leases_to": ahead,
            "band_queues": names,
            "band_his": his,
            "band_los": los,
            "band_ats": ats,
            "band_ids": ids,
        }

    def swept(self, queue: str) -> None:
        """The claim of ``queue`` swept: what it reclaimed or promoted may stand behind any bound."""
        self.reset([queue])

    def parents(self, job_ids: Iterable[int]) -> bool:
        """Whether some of ``job_ids`` (held by this engine, not yet ended) had dependents when claimed."""
        with self._lock:
            return any(self._held.get(job_id, _UNKNOWN)[2] is not None for job_id in job_ids)

    def ended(self, job_ids: Iterable[int], put_back: bool = False) -> None:
        """Jobs this engine claimed ended (``put_back``: are pending again); a queue that holds the next job
        of an ordering key they held, or a job put back, reads in full at its next claim, and so does one
        whose cursor stands past where a dependent of theirs may be."""
        queues = []
        with self._lock:
            for job_id in job_ids:
                held = self._held.pop(job_id, _UNKNOWN)
                if held[0] and (put_back or held[1]):
                    queues.append(held[0])
                if held[2] is not None:
                    queues += [name for name, state in self._queues.items() if state.past(held[2])]
        if queues or put_back:
            self.reset(queues if queues else None)

    def reset(self, queues: Iterable[str] | None = None) -> None:
        """The next claim of each of ``queues`` (``None``: of every queue) reads in full, and its bands start
        over from what the claims after it take: a job put back behind a bound is no longer behind any."""
        with self._lock:
            for queue in self._queues if queues is None else queues:
                state = self._queues.get(queue)
                if state is not None:
                    state.stale = True
                    state.resets += 1
                    state.bands.clear()


def _before(at: datetime, span: timedelta) -> datetime:
    """``span`` before ``at``, or before any instant if ``at`` is nearer the beginning of time than that."""
    return at - span if at - _EVER > span else _EVER


def claim_params(request: port.ClaimRequest) -> dict[str, Any]:
    """The parameters of a claim of ``request`` but where it reads from (``ClaimCursors.params``,
    ``full_params``): what claim.sql's and rates.sql's claims share, the look for what to sweep asked."""
    return {
        "probe": True,
        "queue": request.queue,
        "worker": request.worker_id,
        "now": request.now,
        "lease_us": request.lease // _MICROSECOND,
        "limit": request.limit,
        "limited": request.concurrency is not None,
        "lease_expired_error": _LEASE_EXPIRED_ERROR,
        "job_expired_error": _JOB_EXPIRED_ERROR,
    }


def full_params() -> dict[str, Any]:
    """The parameters of a full claim (``claim_full``: no segments, from the left end of the ready index), and a
    full probe of the leases."""
    return {"full": True, "probed_after": _EVER}


def _segments(bounds: dict[int, tuple[datetime, int]]) -> dict[str, Any]:
    """The whole claim order cut into segments, as the claim's four arrays (highest and lowest
    priority, ``run_at``, id of each): each band of ``bounds`` from its bound, the priorities
    between, above and below them from their left end."""
    his, los, starts = _layout(tuple(sorted(bounds, reverse=True)))
    ats, ids = InstantArray(), IntArray()
    for band in starts:
        at, job_id = (_EVER, 0) if band is None else bounds[band]
        ats.append(at)
        ids.append(job_id)
    return {"band_his": his, "band_los": los, "band_ats": ats, "band_ids": ids}


@functools.lru_cache(maxsize=1024)
def _layout(priorities: tuple[int, ...]) -> tuple[FixedIntArray, FixedIntArray, tuple[int | None, ...]]:
    """The segments of the claim order for bands of ``priorities`` (highest first): each one's highest and
    lowest priority, and the band whose bound it starts at (``None``: its left end). Made once per set of
    priorities, the same while a queue's bands are: its claims send the two arrays as they were."""
    his: list[int] = []
    los: list[int] = []
    starts: list[int | None] = []
    above = _PRIORITY_MAX
    for priority in priorities:
        if above > priority:
            his.append(above)
            los.append(priority + 1)
            starts.append(None)
        his.append(priority)
        los.append(priority)
        starts.append(priority)
        above = priority - 1
    if above >= _PRIORITY_MIN:
        his.append(above)
        los.append(_PRIORITY_MIN)
        starts.append(None)
    return FixedIntArray(his), FixedIntArray(los), tuple(starts)
