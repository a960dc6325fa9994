"""A worker's upkeep of storage (ADR 023): vacuum tables whose dead rows pile up, prune old dead jobs.

Every claimed and acked job leaves dead rows, and dead entries where the claim starts reading its
index; only a vacuum reclaims them. A server whose autovacuum is off, or behind, lets them pile
up until every claim, and every idle poll, walks them. So a worker checks the storage's counts
every ``VACUUM_CHECK_EVERY`` seconds and vacuums the tables ``vacuum_due`` names (the rule is
here, once); a role that may not vacuum them is told once, at warning, and never asked again.
Dead jobs are kept ``dead_retention`` and then purged a bounded batch at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from ._operations import BATCH
from ._time import StopToken
from .engine import TableStats
from .errors import AlkstoreError, DatabaseUnavailable

if TYPE_CHECKING:
    from ._store import Store

__all__ = [
    "BEHIND_DEAD_ROWS",
    "DEFAULT_DEAD_RETENTION",
    "HELD_BACK_PAUSE",
    "PRUNE_BATCHES",
    "PRUNE_EVERY",
    "VACUUM_CHECK_EVERY",
    "VACUUM_DEAD_FRACTION",
    "VACUUM_DEAD_ROWS",
    "Maintenance",
    "vacuum_due",
]

log = logging.getLogger("alkstore.worker")

#: How long a dead job is kept before a worker (or ``alkstore prune``) purges it, by default.
DEFAULT_DEAD_RETENTION = timedelta(days=7)
#: How often (wall seconds) a worker looks at its storage's dead rows.
VACUUM_CHECK_EVERY = 5.0
#: How often (wall seconds) a worker prunes its queues' dead jobs past their retention.
PRUNE_EVERY = 60.0
#: Batches of ``BATCH`` jobs one prune pass deletes per queue at most (the rest waits for the next).
PRUNE_BATCHES = 10
#: A table the server's autovacuum does not cover is due for a vacuum once it holds this many dead
#: rows, plus this fraction of its live ones (the shape of autovacuum's own trigger, so a deep queue
#: is not vacuumed for a trickle of churn): a thousand claimed jobs' worth, a few milliseconds of
#: vacuum on a flat table.
VACUUM_DEAD_ROWS = 2_000
VACUUM_DEAD_FRACTION = 0.1
#: Where autovacuum covers the table, a worker steps in only once it is this far behind: ten times
#: the jobs table's own autovacuum trigger (migration 5), which autovacuum meets between its naps.
BEHIND_DEAD_ROWS = 50_000
#: How long (wall seconds) a table a vacuum could not bring below the threshold is left alone: its
#: dead rows are younger than the oldest open transaction, and vacuuming again would find the same.
HELD_BACK_PAUSE = 60.0


def vacuum_due(stats: Sequence[TableStats]) -> list[TableStats]:
    """The tables whose dead rows call for a worker's vacuum now: soon where the server's autovacuum
    does not cover them, and only once it has fallen far behind where it does."""
    return [
        table
        for table in stats
        if table.dead_rows
        >= (BEHIND_DEAD_ROWS if table.autovacuum else VACUUM_DEAD_ROWS) + VACUUM_DEAD_FRACTION * table.live_rows
    ]


class Maintenance:
    """One worker's storage duty over ``queues``: vacuum when ``vacuum_due`` says so, prune dead jobs.

    ``dead_retention`` is how long a dead job of ``queues`` is kept (``None``: forever). ``label``
    names the worker in log lines. Every call is best effort: a failure is logged, never raised.
    """

    def __init__(self, store: Store, queues: Sequence[str], *, dead_retention: timedelta | None, label: str) -> None:
        self._store = store
        self._queues = list(queues)
        self._retention = dead_retention
        self._label = label
        self._may_vacuum = True  # until the storage refuses this role once
        self._paused: dict[str, float] = {}  # tables held back, until (monotonic seconds)

    def vacuum(self) -> list[str]:
        """Vacuum the tables that are due; the ones vacuumed (none once this role was found unable to)."""
        if not self._may_vacuum:
            return []
        try:
            engine = self._store._live()
            now = time.monotonic()
            due = [table for table in vacuum_due(engine.table_stats()) if self._paused.get(table.table, 0) <= now]
            if not due:
                return []
            refused = [table for table in due if not table.vacuumable]
            if refused:
                self._refused(refused)
                return []
            done = engine.vacuum([table.table for table in due])
            if done:
                self._pause_held_back(done, engine.table_stats(), now)
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

    def _pause_held_back(self, vacuumed: Sequence[str], after: Sequence[TableStats], now: float) -> None:
        """Leave alone for a while the vacuumed tables still due: an open transaction keeps their dead rows."""
        for table in vacuum_due([table for table in after if table.table in vacuumed]):
            self._paused[table.table] = now + HELD_BACK_PAUSE
            log.warning(
                "worker %s: table %s still holds %d dead rows after a vacuum: an open transaction started before "
                "they died keeps them (see pg_stat_activity); trying again in %g s",
                self._label,
                table.table,
                table.dead_rows,
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

    def prune(self) -> int:
        """Purge dead jobs of the queues that died more than the retention ago, a bounded pass; how many."""
        if self._retention is None:
            return 0
        pruned = 0
        try:
            engine = self._store._live()
            before = self._store.clock.now() - self._retention
            for queue in self._queues:
                for _ in range(PRUNE_BATCHES):
                    count = engine.purge_dead(queue, before, BATCH)
                    pruned += count
                    if count < BATCH:
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
        return pruned

    def run(self, stop: StopToken) -> None:
        """Until ``stop``: prune now and every ``PRUNE_EVERY`` seconds, look at the dead rows every
        ``VACUUM_CHECK_EVERY`` (wall seconds: the storage counts in wall time)."""
        checks = max(1, round(PRUNE_EVERY / VACUUM_CHECK_EVERY))
        check = 0
        while not stop.is_cancelled():
            if check % checks == 0:
                self.prune()
            self.vacuum()
            check += 1
            stop.wait(VACUUM_CHECK_EVERY)
