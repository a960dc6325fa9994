"""The SQLite engine's ack: each held job deleted, fenced, its read folded into the delete; many in one statement.

An ack of several jobs deletes them all in one ``DELETE … RETURNING`` whose ``(id, fence)`` pairs come
as one JSON parameter (ADR 063, amended 2026-12-07): one statement instead of one per job. What each
deleted row then needs (its kept result, its dependents, the next of its key's line) follows in the
order the jobs were acked, as one at a time.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from alkstore import engine as port

from . import _dependencies as deps
from . import _statements as sql
from ._rows import maybe_us, us

if TYPE_CHECKING:
    from ._tables import SqliteTables

__all__ = ["ack"]


def ack(tables: SqliteTables, db: sqlite3.Connection, held: Sequence[port.Held]) -> list[port.Held]:
    """Delete each held job (fenced) in ``db``'s write transaction, keeping its result where ``Done`` says;
    the stale ones (not held at that fence) returned."""
    # One job, or one acked twice in the call (the second finds it gone: stale), goes one at a time.
    batched = len(held) > 1 and len({item.job_id for item in held}) == len(held)
    rows: dict[int, Any] = {}
    if batched:
        pairs = json.dumps([(item.job_id, item.fence) for item in held])
        rows = {row[0]: row[1:] for row in db.execute(sql.ACK_JOBS, (pairs,)).fetchall()}
    stale = []
    for item in held:
        row = rows.get(item.job_id) if batched else db.execute(sql.ACK_JOB, (item.job_id, item.fence)).fetchone()
        if row is None:
            stale.append(port.Held(item.job_id, item.fence))
            continue
        _acked(tables, db, item, row)
    return stale


def _acked(tables: SqliteTables, db: sqlite3.Connection, item: port.Held, row: Sequence[Any]) -> None:
    """What the deleted job's ``row`` (``ACK_JOB``'s returned values) leaves to do: its kept result, its
    dependents, the next of its key's line."""
    queue, payload, task, attempts, max_attempts, enqueued_at, worker_id, cancel, key, waiting, log, dependents = row
    if isinstance(item, port.Done) and not cancel:
        db.execute(
            sql.INSERT_RESULT,
            (
                item.job_id,
                queue,
                payload,
                task,
                attempts,
                max_attempts,
                enqueued_at,
                maybe_us(item.started_at),
                us(item.finished_at),
                us(item.keep_until),
                worker_id,
                item.result,
                log,
            ),
        )
    if dependents:  # its dependents count it done, or follow their policies if it was cancelled (ADR 068)
        deps.ended(tables, db, item, dependents, succeeded=not cancel)
    tables._line_moves(db, queue, key, bool(waiting))
