"""Rate limits on the SQLite engine (ADR 070): a claim of a limited queue takes a ready job only when core's
rule (``may_start``) lets its queue and its key start, and counts the start; ``soonest_due`` waits for them.

Every claim holds the file's write lock (``BEGIN IMMEDIATE``), so the starts it reads and writes are
those of every process, one claim after another.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from alkstore import engine as port

from . import _statements as sql

__all__ = ["rate_limit", "rate_values", "rated_rows", "rated_soonest"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Where a row of ``JOB_COLUMNS`` holds the job's rate key.
_RATE_KEY = sql.JOB_COLUMNS.replace(" ", "").split(",").index("rate_key")


def rate_limit(count: int | None, per_us: int | None) -> port.RateLimit | None:
    """A stored limit (``None`` when the queue has none)."""
    return None if count is None or per_us is None else port.RateLimit(count, timedelta(microseconds=per_us))


def rate_values(limit: port.RateLimit | None) -> tuple[int | None, int | None]:
    """A limit as it is stored: its count and its period in microseconds."""
    return (None, None) if limit is None else (limit.count, limit.per // _US)


def _next_start(db: sqlite3.Connection, queue: str, key: str) -> datetime | None:
    row = db.execute(sql.NEXT_START, (queue, key)).fetchone()
    return None if row is None else _EPOCH + timedelta(microseconds=row[0])


def rated_rows(db: sqlite3.Connection, request: port.ClaimRequest, limit: int) -> list[Sequence[Any]]:
    """The ready jobs (rows of ``JOB_COLUMNS``) a claim of a limited queue takes, in claim order, their starts
    counted: at most one while the queue's own limit lets it start, and one per key its limit lets start."""
    queue, now = request.queue, request.now
    if request.rate is not None:
        if not port.may_start(_next_start(db, queue, port.QUEUE_RATE_KEY), now):
            return []
        limit = min(limit, 1)
    taken: list[Sequence[Any]] = []
    started: set[str] = set()
    cursor = db.execute(sql.CLAIMABLE, (queue, (now - _EPOCH) // _US, -1))
    for row in _until(cursor, lambda: len(taken) >= limit):
        key = row[_RATE_KEY]
        if request.key_rate is not None and key is not None:
            if key in started or not port.may_start(_next_start(db, queue, key), now):
                continue  # left where it is: not taken, no attempt spent
            started.add(key)
        taken.append(row)
    cursor.close()
    if request.key_rate is not None:
        for key in sorted(started):
            db.execute(sql.STORE_NEXT_START, (queue, key, _stored(port.next_start(now, request.key_rate))))
    if taken and request.rate is not None:
        db.execute(sql.STORE_NEXT_START, (queue, port.QUEUE_RATE_KEY, _stored(port.next_start(now, request.rate))))
    return taken


def _until(cursor: sqlite3.Cursor, done: Any) -> Iterator[Sequence[Any]]:
    while not done() and (row := cursor.fetchone()) is not None:
        yield row


def _stored(at: datetime) -> int:
    return (at - _EPOCH) // _US


def rated_soonest(db: sqlite3.Connection, queue: str, config: port.QueueConfig | None) -> list[int | None]:
    """What ``soonest_due`` reads of ``queue``: its soonest ready ``run_at`` or lease end, and for a queue
    stored with a limit, its ready jobs' starts as the limits allow instead of their ``run_at``s."""
    if config is None or (config.rate is None and config.key_rate is None):
        return [value for (value,) in db.execute(sql.SOONEST_DUE, (queue,)).fetchall()]
    leases = db.execute(sql.SOONEST_LEASE, (queue,)).fetchone()
    own = _next_start(db, queue, port.QUEUE_RATE_KEY) if config.rate is not None else None
    dues = []
    for run_at, key in db.execute(sql.READY_RUN_ATS, (queue,)).fetchall():
        keyed = _next_start(db, queue, key) if config.key_rate is not None and key is not None else None
        dues.append(_stored(port.rated_due(_EPOCH + timedelta(microseconds=run_at), own, keyed)))
    return [leases[0], min(dues, default=None)]
