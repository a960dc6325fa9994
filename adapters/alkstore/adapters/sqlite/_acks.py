"""The SQLite engine's ack: each held job deleted, fenced, its read folded into the delete (where one is needed).

A job whose row nothing needs after its delete (no result kept, no dependents, no key's line: most acks) is
deleted without reading it back, counted by the delete's changes (ADR 063, amended 2026-12-07 (later)).

Of an ack of several jobs, the plain ones are deleted one short statement each on the engine's cursor (ADR 063,
amended 2026-12-07, narrower rows); the others all in one ``DELETE … RETURNING`` whose ``(id, fence)`` pairs come
as one JSON parameter (ADR 063, amended 2026-12-07). What each deleted row then needs (its kept result, its
dependents, the next of its key's line) follows in the order the jobs were acked, as one at a time.
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


def ack(
    tables: SqliteTables, db: sqlite3.Connection, held: Sequence[port.Held], tried: bool = False
) -> list[port.Held]:
    """Delete each held job (fenced) in ``db``'s write transaction, keeping its result where ``Done`` says;
    the stale ones (not held at that fence) returned. ``tried``: one job, whose plain delete (where it has no
    result to keep) its caller tried already, and which deleted nothing."""
    if len(held) == 1:
        item = held[0]
        plain = not tried and not isinstance(item, port.Done)
        if plain and tables.cursor.execute(sql.ACK_PLAIN_JOB, (item.job_id, item.fence)).rowcount:
            return []
        distinct = True
    else:
        distinct = len({item.job_id for item in held}) == len(held)
        if distinct:  # the plain ones first, each deleted without a read back; the rest go ``ACK_JOB(S)``'s way
            held = _plain(tables.cursor, held)
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


def _plain(cursor: sqlite3.Cursor, held: Sequence[port.Held]) -> list[port.Held]:
    """Delete those of ``held`` (distinct jobs) that keep no result and whose rows nothing needs after (no
    dependents, no key's line), each by ``ACK_PLAIN_JOB`` on the engine's cursor, told deleted by its changes:
    the others, left to ``ACK_JOB(S)``, which also tells a stale ack from them. One short statement a job
    costs less than one over a JSON array of the pairs (whose parsing and join were most of its work)."""
    execute = cursor.execute
    return [
        item
        for item in held
        if isinstance(item, port.Done) or not execute(sql.ACK_PLAIN_JOB, (item.job_id, item.fence)).rowcount
    ]


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
