"""The SQLite engine's ack: each held job deleted, fenced, its read folded into the delete; many in one statement.

A job whose row nothing needs after its delete (no result kept, no dependents, no key's line: most acks) is
deleted without reading it back, counted by the delete's changes (ADR 063, amended 2026-12-07 (later)).

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
    if len(held) == 1:
        item = held[0]
        plain = not isinstance(item, port.Done)
        if plain and tables.cursor.execute(sql.ACK_PLAIN_JOB, (item.job_id, item.fence)).rowcount:
            return []
        distinct = True
    else:
        distinct = len({item.job_id for item in held}) == len(held)
        if distinct and (gone := _plain(tables.cursor, [item for item in held if not isinstance(item, port.Done)])):
            # every one deleted (the pairs are distinct): nothing left to look for, one at a time
            held = [] if len(gone) == len(held) else [item for item in held if (item.job_id, item.fence) not in gone]
    # One job, or one acked twice in the call (the second finds it gone: stale), goes one at a time.
    batched = distinct and len(held) > 1
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


def _plain(cursor: sqlite3.Cursor, held: Sequence[port.Held]) -> set[tuple[int, int]]:
    """Delete those of ``held`` (distinct jobs, no result kept of any) whose rows nothing needs after (no
    dependents, no key's line) without reading them back: the ``(id, fence)`` pairs deleted. The others are
    left to ``ACK_JOB(S)``, which also tells a stale ack from them."""
    if not held:
        return set()
    pairs = json.dumps([(item.job_id, item.fence) for item in held])
    return {(row[0], row[1]) for row in cursor.execute(sql.ACK_PLAIN_JOBS, (pairs,)).fetchall()}


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
