"""The SQLite engine's job dependencies (ADR 073): decided in Python inside the write transaction, as the
memory engine decides them under its lock.

A dependent's parents are rows of ``alkstore_job_dependencies`` (``waiting``, ``succeeded`` with the
result handed over, or ``failed``); it is stored ``waiting`` (never claimed) while one of them
waits. A parent's ack settles its rows as succeeded and lets a dependent with none left run; any
other end of a parent applies each waiting dependent's policy, transitively, in the same
transaction. A parent's ``dependents`` column says whether its end has anything to look at.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from alkstore import engine as port
from alkstore.errors import UnknownParent

from . import _statements as sql
from ._rows import job_of

if TYPE_CHECKING:
    from ._tables import SqliteTables

__all__ = ["check_parents", "died", "ended", "insert_links", "relink", "resolved", "succeeded", "with_links"]


def resolved(job: port.NewJob, ids: Sequence[int]) -> port.NewJob:
    """``job`` with its parents of the same call (``after_batch``, positions in ``ids``) among its ``after``."""
    if not job.after_batch:
        return job
    parents = tuple(dict.fromkeys((*job.after, *(ids[position] for position in job.after_batch))))
    return replace(job, after=parents, after_batch=())


def check_parents(db: sqlite3.Connection, jobs: Sequence[port.NewJob], also: Iterable[int] = ()) -> None:
    """``UnknownParent`` for an ``after`` id that is no job stored (live or dead), nor a kept result, nor one
    of ``also`` (the jobs of the caller's open transaction)."""
    pending: set[int] | None = None
    for job in jobs:
        for parent in job.after:
            if db.execute(sql.PARENT_STATE, (parent,)).fetchone() or db.execute(sql.KEPT_RESULT, (parent,)).fetchone():
                continue
            if pending is None:
                pending = set(also)
            if parent not in pending:
                raise UnknownParent(f"job {parent} (after=) is not stored: nothing was enqueued")


def insert_links(tables: SqliteTables, db: sqlite3.Connection, job_id: int, job: port.NewJob, now: datetime) -> None:
    """Link the just-inserted ``job_id`` to its parents as they are now: waiting on the live ones (each
    counted one dependent more), and following its policy at once for one that is dead already."""
    dead = None
    for position, parent in enumerate(job.after):
        found = db.execute(sql.PARENT_STATE, (parent,)).fetchone()
        result = None
        if found is not None and found[0] != "dead":
            state = "waiting"
            db.execute(sql.COUNT_DEPENDENT, (parent,))
        elif found is not None:
            state, dead = "failed", parent if dead is None else dead
        else:  # kept, or gone since it was checked: it succeeded
            state = "succeeded"
            kept = db.execute(sql.KEPT_RESULT, (parent,)).fetchone()
            result = None if kept is None else kept[0]
        db.execute(sql.LINK_PARENT, (job_id, parent, position, state, result))
    db.execute(sql.SET_PARENTS, (str(job.on_parent_failure), job_id))
    _promote(tables, db, job_id)
    if dead is not None and job.on_parent_failure is not port.ParentFailure.RUN:
        _follow(tables, db, job_id, dead, now)


def relink(tables: SqliteTables, db: sqlite3.Connection, job_id: int, now: datetime) -> None:
    """Link the just-requeued ``job_id``, if it is a dependent, again to its parents as they are now (ADR 077):
    waiting on the live ones, a finished one succeeded (its result as handed over, or kept), and following
    its policy at once for one that is dead."""
    found = db.execute(sql.LIVE_DEPENDENT, (job_id,)).fetchone()
    if found is None or found[0] is None:
        return
    policy = port.ParentFailure(found[0])
    dead = None
    for parent, _, handed in db.execute(sql.PARENT_LINKS, (job_id,)).fetchall():
        state = db.execute(sql.PARENT_STATE, (parent,)).fetchone()
        result = None
        if state is not None and state[0] != "dead":
            link = "waiting"
            db.execute(sql.COUNT_DEPENDENT, (parent,))
        elif state is not None:
            link, dead = "failed", parent if dead is None else dead
        else:
            link = "succeeded"
            kept = db.execute(sql.KEPT_RESULT, (parent,)).fetchone()
            result = handed if kept is None else kept[0]
        db.execute(sql.RELINK_PARENT, (link, result, job_id, parent))
    _promote(tables, db, job_id)
    if dead is not None and policy is not port.ParentFailure.RUN:
        _follow(tables, db, job_id, dead, now)


def succeeded(tables: SqliteTables, db: sqlite3.Connection, job: port.JobRecord, item: port.Held) -> None:
    """``job`` was acked by ``item``: its waiting dependents count it done (with its result, if it handed one)."""
    if job.dependents and not job.cancel_requested:
        _settled(tables, db, job.id, item)


def ended(tables: SqliteTables, db: sqlite3.Connection, item: port.Held, dependents: int, *, succeeded: bool) -> None:
    """The job ``item`` held, with ``dependents``, was acked (deleted): they count it done if it ``succeeded``,
    else (it was cancelled) each still waiting on it follows its policy."""
    if not dependents:
        return
    if succeeded:
        _settled(tables, db, item.job_id, item)
    else:
        _failed(tables, db, item.job_id, None)


def _settled(tables: SqliteTables, db: sqlite3.Connection, job_id: int, item: port.Held) -> None:
    result = item.result if isinstance(item, (port.Done, port.Handed)) else None
    for (child,) in db.execute(sql.SETTLE_LINKS, ("succeeded", result, job_id)).fetchall():
        _promote(tables, db, child)


def died(tables: SqliteTables, db: sqlite3.Connection, job: port.JobRecord, now: datetime | None) -> None:
    """``job`` ended without success: each dependent still waiting on it follows its policy."""
    if job.dependents:
        _failed(tables, db, job.id, now)


def _failed(tables: SqliteTables, db: sqlite3.Connection, job_id: int, now: datetime | None) -> None:
    children = sorted(child for (child,) in db.execute(sql.SETTLE_LINKS, ("failed", None, job_id)).fetchall())
    for child in children:
        _follow(tables, db, child, job_id, now if now is not None else datetime.now(UTC))


def _follow(tables: SqliteTables, db: sqlite3.Connection, child: int, parent: int, now: datetime) -> None:
    found = db.execute(sql.LIVE_DEPENDENT, (child,)).fetchone()
    if found is None:
        return
    policy = port.ParentFailure(found[0] or "cancel")
    if policy is port.ParentFailure.RUN:
        _promote(tables, db, child)
        return
    record = job_of(db.execute(sql.DEPENDENT_ROW, (child,)).fetchone())
    if policy is port.ParentFailure.CANCEL:
        tables._delete(db, record)
    else:
        tables._to_dead(db, record, port.parent_failed_error(parent), None, now)


def _promote(tables: SqliteTables, db: sqlite3.Connection, child: int) -> None:
    """``child`` waits while one of its parents does; the queue is woken when it no longer does."""
    (left,) = db.execute(sql.WAITING_LINKS, (child,)).fetchone()
    db.execute(sql.SET_WAITING, (int(left > 0), child))
    if not left:
        tables._signal = True


def with_links(db: sqlite3.Connection, record: port.JobRecord) -> port.JobRecord:
    """``record`` as ``get_job`` reads it: its parents' links and the jobs waiting on it."""
    links = tuple(
        port.ParentLink(parent, state, None if result is None else bytes(result))
        for parent, state, result in db.execute(sql.PARENT_LINKS, (record.id,)).fetchall()
    )
    children = tuple(child for (child,) in db.execute(sql.WAITING_CHILDREN, (record.id,)).fetchall())
    if not links and not children:
        return record
    return replace(record, parents=tuple(link.id for link in links), parent_links=links, children=children)
