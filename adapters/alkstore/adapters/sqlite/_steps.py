"""The SQLite engine's steps port (ADR 069): checkpoints, sleeps and events over one engine's ``SqliteTables``.

Every call is one ``BEGIN IMMEDIATE`` write (or one read) of the tables' connection, so a fence read
and what it guards are one transaction, and an emit and a wait of one name never interleave (the
file has one writer at a time). In the engine's own ``transaction()`` a step or an emit is written at
its commit, before its enqueues, in the same write; in the caller's ``sqlite3`` connection it is
written there at once and commits with the caller's work.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from alkstore import engine as port
from alkstore.errors import LeaseLost

from . import _statements as sql
from ._rows import instant, job_of, us
from ._tables import SqliteTables, SqliteTransaction, translated

__all__ = ["SqliteSteps"]


class SqliteSteps:
    """The steps port's transitions on one engine's tables (both runtimes' engines call these)."""

    def __init__(self, tables: SqliteTables) -> None:
        self._tables = tables

    def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        with self._tables._write("resume") as db:
            if db.execute(sql.HELD_FENCE, (held.job_id, held.fence)).fetchone() is None:
                return None
            db.execute(sql.DELETE_WAIT, (held.job_id,))
            return _steps(db, held.job_id)

    def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        if tx is None:
            with self._tables._write("save_step") as db:
                return _save(db, held, step)
        caller = self._tables.caller_transaction(tx)
        if isinstance(caller, SqliteTransaction):

            def checkpoint(db: sqlite3.Connection) -> None:
                if not _save(db, held, step):
                    raise LeaseLost(f"job {held.job_id} is no longer held under its claim (fence {held.fence})")

            caller._after.append(checkpoint)
            return True
        with translated("save_step"):
            return _save(caller, held, step)

    def suspend(self, held: port.Held, wait: port.Wait, now: datetime, step: port.StepRecord | None = None) -> bool:
        tables = self._tables
        with tables._write("suspend") as db:
            row = db.execute(sql.HELD_JOB, (held.job_id, held.fence)).fetchone()
            if row is None:
                return False
            job = job_of(row)
            if step is not None:
                db.execute(sql.SAVE_STEP, (job.id, step.name, step.result, us(step.at)))
            if job.cancel_requested:
                tables._delete(db, job)
                return True
            emitted = wait.event is not None and db.execute(sql.LIVE_EVENT, (wait.event, us(now))).fetchone()
            db.execute(sql.SAVE_WAIT, (job.id, us(wait.until), wait.event))
            db.execute(sql.SUSPEND_JOB, (us(now) if emitted else us(wait.until), job.id))
            tables._signal = True
            return True

    def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        if tx is None:
            with self._tables._write("emit") as db:
                return self._emit(db, event)
        caller = self._tables.caller_transaction(tx)
        if isinstance(caller, SqliteTransaction):
            with self._tables._read_one("emit") as db:
                first = db.execute(sql.LIVE_EVENT, (event.name, us(event.at))).fetchone() is None

            def emitted(db: sqlite3.Connection) -> None:
                self._emit(db, event)

            caller._after.append(emitted)
            return first
        with translated("emit"):
            return self._emit(caller, event)

    def _emit(self, db: sqlite3.Connection, event: port.EventRecord) -> bool:
        at = us(event.at)
        first = db.execute(sql.LIVE_EVENT, (event.name, at)).fetchone() is None
        db.execute(sql.PURGE_EVENTS, (at, event.name))
        db.execute(sql.KEEP_EVENT, (event.name, event.payload, at, us(event.expires_at)))
        woken = [job_id for (job_id,) in db.execute(sql.WOKEN, (event.name,)).fetchall()]
        for job_id in woken:
            db.execute(sql.WAKE_JOB, (at, job_id))
        if woken:
            self._tables._signal = True
        return first

    def read_event(self, name: str, now: datetime) -> port.EventRecord | None:
        with self._tables._read_one("read_event") as db:
            row = db.execute(sql.LIVE_EVENT, (name, us(now))).fetchone()
        return None if row is None else port.EventRecord(row[0], bytes(row[1]), instant(row[2]), instant(row[3]))

    def purge_steps(self, limit: int) -> int:
        with self._tables._write("purge_steps") as db:
            gone = [job_id for (job_id,) in db.execute(sql.GONE_STEPS, (limit,)).fetchall()]
            for job_id in gone:
                db.execute(sql.DELETE_STEPS, (job_id,))
                db.execute(sql.DELETE_WAIT, (job_id,))
            return len(gone)

    def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        with self._tables._write("skip_step") as db:
            row = db.execute(sql.JOB_STATE, (job_id,)).fetchone()
            if row is None:
                return None
            state = port.JobState(row[0])
            if state is not port.JobState.RUNNING:
                db.execute(sql.BUMP_FENCE, (job_id,))
                db.execute(sql.SAVE_STEP, (job_id, step.name, step.result, us(step.at)))
            return state

    def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        with self._tables._read("job_steps") as db:
            steps = _steps(db, job_id)
            wait = db.execute(sql.WAIT, (job_id,)).fetchone()
        return steps, None if wait is None else port.Wait(instant(wait[0]), wait[1])


def _save(db: sqlite3.Connection, held: port.Held, step: port.StepRecord) -> bool:
    if db.execute(sql.HELD_FENCE, (held.job_id, held.fence)).fetchone() is None:
        return False
    db.execute(sql.SAVE_STEP, (held.job_id, step.name, step.result, us(step.at)))
    return True


def _steps(db: sqlite3.Connection, job_id: int) -> list[port.StepRecord]:
    return [port.StepRecord(name, bytes(result), instant(at)) for name, result, at in db.execute(sql.STEPS, (job_id,))]
