"""A worker's storage duty (ADR 023): vacuum the tables ``_upkeep.vacuum_due`` names, prune old dead jobs,
expired results, the throughput counts (ADR 048) and the action log's entries (ADR 068) past their retention.

Every call is best effort: a failure is logged, never raised, and the next pass tries again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError, DatabaseUnavailable
from alkstore.port._records import TableStats
from alkstore.port._time import StopToken
from alkstore.rules._operations import (
    BATCH,
    TASK_FIGURES_RETENTION,
    THROUGHPUT_RETENTION,
    task_figures_roll_up_before,
)

from ._upkeep import (
    CHURN_POLL,
    DEFAULT_ACTION_RETENTION,
    HELD_BACK_PAUSE,
    PRUNE_BATCHES,
    PRUNE_EVERY,
    VACUUM_CHECK_EVERY,
    held_back,
    look_due,
    retry_held_back,
    vacuum_due,
)

if TYPE_CHECKING:
    from alkstore.store._kernel_async import AsyncKernel

__all__ = ["AsyncMaintenance"]

log = logging.getLogger("alkstore.worker")


class AsyncMaintenance:
    """One worker's storage duty over ``queues``: vacuum when ``vacuum_due`` says so, prune dead jobs.

    ``dead_retention`` is how long a dead job of ``queues`` is kept (``None``: forever), ``action_retention``
    how long an entry of the action log is (``None``: forever; the log is the store's, not a queue's). ``label``
    names the worker in log lines. With ``churn`` (the runs the worker ended so far), ``run`` looks at
    the dead rows between prunes when ``look_due`` says so (an idle worker leaves none, ADR 044).
    Every call is best effort: a failure is logged, never raised.
    """

    def __init__(
        self,
        kernel: AsyncKernel,
        queues: Sequence[str],
        *,
        dead_retention: timedelta | None,
        label: str,
        churn: Callable[[], int] | None = None,
        action_retention: timedelta | None = DEFAULT_ACTION_RETENTION,
    ) -> None:
        self._kernel = kernel
        self._churn = churn  # a count of what the worker did that leaves dead rows (its finished runs)
        self._queues = list(queues)
        self._retention = dead_retention
        self._action_retention = action_retention
        self._label = label
        self._may_vacuum = True  # until the storage refuses this role once
        self._held: dict[str, tuple[TableStats, float]] = {}  # tables held back: counts before, when (monotonic)

    async def vacuum(self) -> list[str]:
        """Vacuum the tables that are due; the ones vacuumed (none once this role was found unable to)."""
        if not self._may_vacuum:
            return []
        try:
            engine = self._kernel.offered()
            if engine is None:
                return []  # an engine without the operations port: no upkeep to run (ADR 062)
            now = time.monotonic()
            due = [table for table in vacuum_due(await engine.table_stats()) if self._retry(table, now)]
            if not due:
                return []
            refused = [table for table in due if not table.vacuumable]
            if refused:
                self._refused(refused)
                return []
            done = await engine.vacuum([table.table for table in due])
            if done:
                self._hold_back([table for table in due if table.table in done], await engine.table_stats(), now)
        except DatabaseUnavailable as exc:
            log.warning("worker %s: could not look after its storage (%s); trying again later", self._label, exc)
            return []
        except AlkstoreError as exc:
            log.error("worker %s: could not vacuum its storage: %s", self._label, exc)
            return []
        for table in due:
            if table.table in done:
                log.info(
                    "worker %s vacuumed table %s (%d dead rows, %d live; the server's autovacuum is %s)",
                    self._label,
                    table.table,
                    table.dead_rows,
                    table.live_rows,
                    "on but behind" if table.autovacuum else "off",
                )
        return done

    def _retry(self, table: TableStats, now: float) -> bool:
        """Whether a due table is vacuumed now: always, unless a vacuum left it due and ``retry_held_back``
        says its horizon has not let go yet."""
        held = self._held.get(table.table)
        if held is None:
            return True
        if not retry_held_back(held[0], table, now - held[1]):
            return False
        del self._held[table.table]
        return True

    def _hold_back(self, vacuumed: Sequence[TableStats], after: Sequence[TableStats], now: float) -> None:
        """Leave alone the vacuumed tables ``held_back`` says an open transaction keeps the dead rows of
        (``vacuumed``: their counts before the vacuum) for at least ``HELD_BACK_PAUSE``, and until their
        horizon moves."""
        before = {table.table: table for table in vacuumed}
        for table in after:
            if table.table not in before or not held_back(before[table.table], table):
                continue
            self._held[table.table] = (before[table.table], now)
            log.warning(
                "worker %s: table %s still holds %d dead rows after a vacuum: an open transaction started before "
                "they died keeps them (see pg_stat_activity%s); trying again in %g s at the earliest, once it ends",
                self._label,
                table.table,
                table.dead_rows,
                "" if table.horizon is None else f": the oldest backend_xmin or backend_xid is {table.horizon}",
                HELD_BACK_PAUSE,
            )

    def _refused(self, tables: Sequence[TableStats]) -> None:
        self._may_vacuum = False
        log.warning(
            "worker %s: table%s %s hold%s %s dead rows and this database role may not VACUUM %s (only the "
            "table's owner, the database's owner or a superuser may); alkstore stops trying. Claims slow down "
            "as dead rows pile up: turn the server's autovacuum on, or vacuum these tables as their owner.",
            self._label,
            "" if len(tables) == 1 else "s",
            ", ".join(table.table for table in tables),
            "s" if len(tables) == 1 else "",
            " and ".join(f"{table.dead_rows:,}" for table in tables),
            "it" if len(tables) == 1 else "them",
        )

    async def prune(self) -> int:
        """Purge dead jobs of the queues that died more than the retention ago, and their kept results past
        their ``keep_until`` (ADR 042), a bounded pass, every queue's throughput counts older than a day
        (ADR 048) and the action log's entries older than its retention (ADR 068), a bounded pass; how many
        dead jobs."""
        pruned = expired = forgotten = 0
        try:
            engine = self._kernel.offered()
            if engine is None:
                return 0  # an engine without the operations port: nothing to prune through it (ADR 062)
            now = self._kernel.clock.now()
            before = None if self._retention is None else now - self._retention
            for queue in self._queues:
                for _ in range(PRUNE_BATCHES if before is not None else 0):
                    assert before is not None
                    count = await engine.purge_dead(queue, before, BATCH)
                    pruned += count
                    if count < BATCH:
                        break
                for _ in range(PRUNE_BATCHES):
                    count = await engine.purge_results(queue, now, BATCH)
                    expired += count
                    if count < BATCH:
                        break
            await engine.purge_throughput(now - THROUGHPUT_RETENTION)
            await engine.roll_up_task_figures(task_figures_roll_up_before(now))  # per hour after a day (ADR 075)
            await engine.purge_task_figures(now - TASK_FIGURES_RETENTION)  # a week
            for _ in range(PRUNE_BATCHES if self._action_retention is not None else 0):
                assert self._action_retention is not None
                count = await engine.purge_actions(now - self._action_retention, BATCH)
                forgotten += count
                if count < BATCH:
                    break
            stepper = self._kernel.stepper_or_none()
            for _ in range(PRUNE_BATCHES if stepper is not None else 0):  # steps of jobs gone (ADR 069)
                assert stepper is not None
                if await stepper.purge(BATCH) < BATCH:
                    break
        except DatabaseUnavailable as exc:
            log.warning("worker %s: could not prune dead jobs (%s); trying again later", self._label, exc)
        except AlkstoreError as exc:
            log.error("worker %s: could not prune dead jobs: %s", self._label, exc)
        if pruned:
            log.info(
                "worker %s pruned %d dead job%s kept longer than %s",
                self._label,
                pruned,
                "" if pruned == 1 else "s",
                self._retention,
            )
        if expired:
            log.info("worker %s pruned %d expired result%s", self._label, expired, "" if expired == 1 else "s")
        if forgotten:
            log.info("worker %s pruned %d action log entr%s", self._label, forgotten, "y" if forgotten == 1 else "ies")
        return pruned

    async def run(self, stop: StopToken) -> None:
        """Until ``stop``: prune now and every ``PRUNE_EVERY`` seconds, look at the dead rows then and,
        between, when ``look_due`` says so (every ``VACUUM_CHECK_EVERY`` without ``churn``); wall seconds,
        as the storage counts in wall time. While runs end, their count is polled every ``CHURN_POLL``."""
        pruned_at = looked_at = time.monotonic()
        looked = polled = self._churn() if self._churn is not None else 0
        moving = False
        await self.prune()
        await self.vacuum()
        while not await stop.wait_async(CHURN_POLL if moving else VACUUM_CHECK_EVERY):
            now = time.monotonic()
            churn = self._churn() if self._churn is not None else None
            if churn is not None:
                moving, polled = churn != polled, churn
            if now - pruned_at >= PRUNE_EVERY:
                await self.prune()
                pruned_at = now
            elif churn is not None and not look_due(churn - looked, now - looked_at):
                continue
            await self.vacuum()
            looked, looked_at = polled, now
