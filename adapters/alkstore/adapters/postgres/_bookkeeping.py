# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_bookkeeping_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The PostgreSQL engine's records of its operators' figures: workers, throughput, task figures and the
action log, as a part the engine inherits.

Kept apart from ``_engine`` (a module with a ceiling, ADR 062): each call is one statement of
``statements/operations.sql`` over the engine's pool, and none is on a job's path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from psycopg.rows import BaseRowFactory, scalar_row

from alkstore import engine as port

from . import _rows
from ._connections import Connections
from ._sql import Statements

__all__ = ["PostgresBookkeeping"]

_SCALAR: BaseRowFactory[Any] = scalar_row


class PostgresBookkeeping:
    """Workers, throughput, task figures and actions over the engine's pool and statements (set by the engine)."""

    _connections: Connections
    _sql: Statements

    def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        counting = bool(throughput or figures)
        statement = self._sql.record_worker_counting if counting else self._sql.record_worker
        self._connections.one(statement, _rows.worker_params(worker, throughput, figures), _SCALAR)

    def remove_worker(self, worker_id: str) -> bool:
        return self._connections.one(self._sql.remove_worker, {"id": worker_id}, _SCALAR) is not None

    def workers(self, since: datetime) -> list[port.WorkerRecord]:
        return self._connections.all(self._sql.workers, {"since": since}, _rows.WORKER)

    def forget_workers(self, seen_before: datetime) -> int:
        return int(self._connections.one(self._sql.forget_workers, {"before": seen_before}, _SCALAR) or 0)

    def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        return self._connections.all(self._sql.throughput, {"since": since}, _rows.THROUGHPUT)

    def purge_throughput(self, before: datetime) -> int:
        return int(self._connections.one(self._sql.purge_throughput, {"before": before}, _SCALAR) or 0)

    def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        params = {"since": since, "queue": queue}
        return self._connections.all(self._sql.task_figures, params, _rows.TASK_FIGURES)

    def roll_up_task_figures(self, before: datetime) -> int:
        statement = self._sql.roll_up_task_figures
        return int(self._connections.one(statement, {"before": before}, _SCALAR) or 0)

    def purge_task_figures(self, before: datetime) -> int:
        return int(self._connections.one(self._sql.purge_task_figures, {"before": before}, _SCALAR) or 0)

    def record_action(self, action: port.NewAction) -> int:
        return int(self._connections.one(self._sql.record_action, asdict(action), _SCALAR) or 0)

    def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        return self._connections.all(self._sql.list_actions, {"limit": limit, "before": before}, _rows.ACTION)

    def purge_actions(self, before: datetime, limit: int) -> int:
        found = self._connections.one(self._sql.purge_actions, {"before": before, "limit": limit}, _SCALAR)
        return int(found or 0)
