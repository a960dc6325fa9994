"""Rate limits on starts (ADR 070): the one owner of when a limited job may start.

A ``RateLimit`` of ``count`` starts per ``per`` is kept as one instant per queue and one per key:
the earliest next start. A start at ``now`` is allowed when that instant is not after ``now``,
and moves it to ``now + interval`` (``per / count``, rounded up): GCRA without a burst
tolerance, so the starts in any window of ``per`` never exceed ``count``. The memory and SQLite
engines call these functions; PostgreSQL's ``rate_start`` function is the same rule in SQL.
"""

from __future__ import annotations

from datetime import datetime

from alkstore.port._records import RateLimit

__all__ = ["QUEUE_RATE_KEY", "may_start", "next_start", "rated_due"]

#: The key under which an engine keeps a queue's own next start (a ``rate_key`` is never empty).
QUEUE_RATE_KEY = ""


def may_start(next_at: datetime | None, now: datetime) -> bool:
    """Whether a start at ``now`` keeps to a limit whose earliest next start is ``next_at`` (``None``: none yet)."""
    return next_at is None or next_at <= now


def next_start(now: datetime, limit: RateLimit) -> datetime:
    """The earliest next start once one is made at ``now`` under ``limit``."""
    return now + limit.interval


def rated_due(run_at: datetime, *next_starts: datetime | None) -> datetime:
    """When a ready job may start: its ``run_at``, or later the earliest next start of a limit it is under."""
    return max([run_at, *(at for at in next_starts if at is not None)])
