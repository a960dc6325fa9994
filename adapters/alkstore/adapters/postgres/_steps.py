# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_steps_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The PostgreSQL engine's steps port (ADR 069): checkpoints, sleeps and events, as a part the engine inherits.

Kept apart from ``_engine`` (a module with a ceiling, ADR 062); the statements are
``statements/steps.sql``. A step's fence is read under a key-share lock on the job held until its
transaction ends, so a checkpoint written in a caller's transaction commits only while the claim
still holds; the emits and waits of one event name serialize on an advisory lock taken in a
statement before the one that reads (so it reads what a racing one committed).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import scalar_row, tuple_row

from alkstore import engine as port

from ._connections import Connections
from ._cursors import ClaimCursors
from ._errors import raise_translated
from ._sql import Statements
from ._transactions import caller_connection

__all__ = ["PostgresSteps"]


class PostgresSteps(port.StepsPort):
    """The steps port over the engine's pool, statements and claim cursors (set by the engine)."""

    _connections: Connections
    _sql: Statements
    _schema: str
    _cursors: ClaimCursors

    def resume(self, held: port.Held) -> list[port.StepRecord] | None:
        params = {"id": int(held.job_id), "fence": held.fence}
        rows = self._connections.all(self._sql.step_resume, params, tuple_row, binary=True)
        if not rows:
            return None
        return [port.StepRecord(name, bytes(result), at) for name, result, at in rows if name is not None]

    def save_step(self, held: port.Held, step: port.StepRecord, tx: Any = None) -> bool:
        params = {"id": int(held.job_id), "fence": held.fence, "name": step.name, "result": step.result, "at": step.at}
        if tx is None:
            return self._connections.one(self._sql.step_save, params, scalar_row) is not None
        conn = caller_connection(tx)
        try:
            return (conn.execute(self._sql.step_save, params)).fetchone() is not None
        except psycopg.Error as exc:
            raise_translated(exc)

    def suspend(self, held: port.Held, wait: port.Wait, now: Any, step: port.StepRecord | None = None) -> bool:
        params = {
            "id": int(held.job_id),
            "fence": held.fence,
            "ids": [int(held.job_id)],
            "fences": [held.fence],
            "now": now,
            "until": wait.until,
            "event": wait.event,
            "name": None if step is None else step.name,
            "result": None if step is None else step.result,
            "schema": self._schema,
        }
        with self._connections.transaction() as conn:
            if wait.event is not None:
                conn.execute(self._sql.event_lock, params)
            with conn.cursor(row_factory=scalar_row) as cursor:
                rows = (cursor.execute(self._sql.step_suspend, params)).fetchall()
        self._cursors.ended((held.job_id,), put_back=True)
        return any(value is not None for value in rows)

    def emit(self, event: port.EventRecord, tx: Any = None) -> bool:
        params = {
            "event": event.name,
            "payload": event.payload,
            "now": event.at,
            "expires_at": event.expires_at,
            "schema": self._schema,
        }
        if tx is None:
            with self._connections.transaction() as conn:
                first, queues = self._emit(conn, params)
        else:
            try:
                first, queues = self._emit(caller_connection(tx), params)
            except psycopg.Error as exc:
                raise_translated(exc)
        if queues:
            self._cursors.reset(queues)
        return first

    def _emit(self, conn: psycopg.Connection[Any], params: dict[str, Any]) -> tuple[bool, list[str]]:
        conn.execute(self._sql.event_lock, params)
        with conn.cursor(row_factory=tuple_row) as cursor:
            row = (cursor.execute(self._sql.emit, params)).fetchone()
        assert row is not None
        return bool(row[0]), list(row[1])

    def read_event(self, name: str, now: Any) -> port.EventRecord | None:
        row = self._connections.one(self._sql.read_event, {"event": name, "now": now}, tuple_row, binary=True)
        return None if row is None else port.EventRecord(row[0], bytes(row[1]), row[2], row[3])

    def purge_steps(self, limit: int) -> int:
        purged = self._connections.one(self._sql.purge_steps, {"limit": limit}, scalar_row)
        return int(purged or 0)

    def skip_step(self, job_id: int, step: port.StepRecord) -> port.JobState | None:
        params = {"id": int(job_id), "name": step.name, "result": step.result, "at": step.at}
        state = self._connections.one(self._sql.step_skip, params, scalar_row)
        return None if state is None else port.JobState(state)

    def job_steps(self, job_id: int) -> tuple[list[port.StepRecord], port.Wait | None]:
        rows = self._connections.all(self._sql.job_steps, {"id": int(job_id)}, tuple_row, binary=True)
        steps = [port.StepRecord(name, bytes(result), at) for wait, name, result, at in rows if not wait]
        waits = [port.Wait(at, name) for wait, name, _, at in rows if wait]
        return steps, waits[0] if waits else None
