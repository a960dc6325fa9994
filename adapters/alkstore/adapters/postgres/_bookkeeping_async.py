"""The PostgreSQL engine's records of its operators' figures: workers, throughput, task figures and the
action log, as a part the engine inherits.

Kept apart from ``_engine_async`` (a module with a ceiling, ADR 062): each call is one statement of
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
from ._connections_async import AsyncConnections
from ._sql import Statements

__all__ = ["AsyncPostgresBookkeeping"]

_SCALAR: BaseRowFactory[Any] = scalar_row


class AsyncPostgresBookkeeping:
    """Workers, throughput, task figures and actions over the engine's pool and statements (set by the engine)."""

    _connections: AsyncConnections
    _sql: Statements

    async def record_worker(
        self,
        worker: port.WorkerRecord,
        throughput: Sequence[port.ThroughputRecord] = (),
        figures: Sequence[port.TaskFiguresRecord] = (),
    ) -> None:
        counting = bool(throughput or figures)
        statement = self._sql.record_worker_counting if counting else self._sql.record_worker
        await self._connections.one(statement, _rows.worker_params(worker, throughput, figures), _SCALAR)

    async def remove_worker(self, worker_id: str) -> bool:
        return await self._connections.one(self._sql.remove_worker, {"id": worker_id}, _SCALAR) is not None

    async def workers(self, since: datetime) -> list[port.WorkerRecord]:
        return await self._connections.all(self._sql.workers, {"since": since}, _rows.WORKER)

    async def forget_workers(self, seen_before: datetime) -> int:
        return int(await self._connections.one(self._sql.forget_workers, {"before": seen_before}, _SCALAR) or 0)

    async def throughput(self, since: datetime) -> list[port.ThroughputRecord]:
        return await self._connections.all(self._sql.throughput, {"since": since}, _rows.THROUGHPUT)

    async def purge_throughput(self, before: datetime) -> int:
        return int(await self._connections.one(self._sql.purge_throughput, {"before": before}, _SCALAR) or 0)

    async def task_figures(self, since: datetime, queue: str | None = None) -> list[port.TaskFiguresRecord]:
        params = {"since": since, "queue": queue}
        return await self._connections.all(self._sql.task_figures, params, _rows.TASK_FIGURES)

    async def roll_up_task_figures(self, before: datetime) -> int:
        statement = self._sql.roll_up_task_figures
        return int(await self._connections.one(statement, {"before": before}, _SCALAR) or 0)

    async def purge_task_figures(self, before: datetime) -> int:
        return int(await self._connections.one(self._sql.purge_task_figures, {"before": before}, _SCALAR) or 0)

    async def record_action(self, action: port.NewAction) -> int:
        return int(await self._connections.one(self._sql.record_action, asdict(action), _SCALAR) or 0)

    async def list_actions(self, limit: int, before: int | None = None) -> list[port.ActionRecord]:
        return await self._connections.all(self._sql.list_actions, {"limit": limit, "before": before}, _rows.ACTION)

    async def purge_actions(self, before: datetime, limit: int) -> int:
        found = await self._connections.one(self._sql.purge_actions, {"before": before, "limit": limit}, _SCALAR)
        return int(found or 0)
