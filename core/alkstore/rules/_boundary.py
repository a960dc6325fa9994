"""Boundary math for ``@every`` schedules: the one place it is computed (ADR 003).

A schedule has an interval ``I`` and a next boundary ``B``. A tick at ``now`` fires the
elapsed boundaries ``B, B+I, … <= now`` oldest first, at most ``CATCH_UP_CAP`` of them;
the rest are skipped, and ``B`` moves to the first boundary of the same phase strictly
after ``now``. A schedule's phase is its registration's, or its anchor's: an anchored
schedule's boundaries are ``anchor + k*I`` (ADR 034). Arithmetic is in integer microseconds,
the resolution both engines store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["CATCH_UP_CAP", "CatchUp", "catch_up", "first_after", "registration_boundary", "soonest"]

CATCH_UP_CAP = 64
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What one tick does to one schedule: the boundaries to fire, how many it skips, the new ``B``."""

    fired: tuple[datetime, ...]
    skipped: int
    next_boundary: datetime


def catch_up(next_boundary: datetime, interval_s: int, now: datetime, cap: int = CATCH_UP_CAP) -> CatchUp:
    """Fire the elapsed boundaries of one schedule at ``now`` (oldest first, at most ``cap``)."""
    if next_boundary > now:
        return CatchUp((), 0, next_boundary)
    step_us = interval_s * 1_000_000
    elapsed = (now - next_boundary) // _MICROSECOND // step_us + 1
    step = timedelta(seconds=interval_s)
    fired = tuple(next_boundary + i * step for i in range(min(elapsed, cap)))
    return CatchUp(fired, max(0, elapsed - cap), next_boundary + elapsed * step)


def first_after(anchor: datetime, interval_s: int, now: datetime) -> datetime:
    """The first boundary of ``anchor``'s phase strictly after ``now`` (``anchor`` may lie either side of it)."""
    step_us = interval_s * 1_000_000
    behind_us = (now - anchor) // _MICROSECOND  # negative when the anchor is ahead
    return anchor + (behind_us // step_us + 1) * timedelta(seconds=interval_s)


def registration_boundary(
    existing: tuple[int, datetime, datetime | None] | None,
    interval_s: int,
    now: datetime,
    anchor: datetime | None = None,
) -> datetime:
    """The next boundary after (re-)registering a schedule at ``now``.

    The same interval and anchor keep the stored boundary, so the phase and any backlog survive
    restarts. Otherwise (a new schedule, a changed interval or anchor) the schedule starts on its
    phase: the first boundary of its ``anchor``'s phase strictly after ``now``, or, without an
    anchor, ``now + I``. ``existing`` is the stored ``(interval_s, next_boundary, anchor)``, or
    ``None``.
    """
    if existing is not None and existing[0] == interval_s and existing[2] == anchor:
        return existing[1]
    if anchor is not None:
        return first_after(anchor, interval_s, now)
    return now + timedelta(seconds=interval_s)


def soonest(boundaries: Iterable[datetime]) -> datetime | None:
    """The runner's wake-up deadline: the earliest pending boundary, or ``None`` if there is none."""
    return min(boundaries, default=None)
