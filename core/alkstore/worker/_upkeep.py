"""The rules of a worker's storage upkeep (ADR 023): when a table is due for a vacuum, how long dead jobs stay.

Every claimed and acked job leaves dead rows, and dead entries where the claim starts reading its
index; only a vacuum reclaims them. A server whose autovacuum is off, or behind, lets them pile
up until every claim, and every idle poll, walks them. So a worker checks the storage's counts
every ``VACUUM_CHECK_EVERY`` seconds while its runs end, at once after ``VACUUM_CHURN_RUNS`` of them
(``look_due``), and at each prune while it idles; it
vacuums the tables ``vacuum_due`` names (the rule is here, once); a role that may not vacuum
them is told once, at warning, and never asked again.
Dead jobs are kept ``dead_retention``, the action log's entries ``action_retention``, and then purged
a bounded batch at a time. The duty itself
(``_maintenance_async`` and its sync twin) carries these out.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from alkstore.port._records import TableStats

__all__ = [
    "BEHIND_DEAD_ROWS",
    "CHURN_POLL",
    "DEFAULT_ACTION_RETENTION",
    "DEFAULT_DEAD_RETENTION",
    "HELD_BACK_PAUSE",
    "PRUNE_BATCHES",
    "PRUNE_EVERY",
    "VACUUM_CHECK_EVERY",
    "VACUUM_CHURN_RUNS",
    "VACUUM_DEAD_FRACTION",
    "VACUUM_DEAD_ROWS",
    "held_back",
    "look_due",
    "retry_held_back",
    "vacuum_due",
]

#: How long a dead job is kept before a worker (or ``alkstore prune``) purges it, by default.
DEFAULT_DEAD_RETENTION = timedelta(days=7)
#: How long an entry of the action log (ADR 068) is kept before a worker's upkeep deletes it, by default.
DEFAULT_ACTION_RETENTION = timedelta(days=90)
#: How often (wall seconds) a worker looks at its storage's dead rows.
VACUUM_CHECK_EVERY = 5.0
#: Runs a worker ends before it looks at the dead rows at once, without waiting for ``VACUUM_CHECK_EVERY``:
#: each run leaves about two dead rows (the version the claim replaced and the row the ack deleted), so
#: this many reach ``VACUUM_DEAD_ROWS``. A fast worker (2,000 jobs/s) would otherwise leave 20,000
#: between two looks, and its claims slow down as they pile up (ADR 023).
VACUUM_CHURN_RUNS = 1_000
#: How often (wall seconds) a worker whose runs are ending counts them against ``VACUUM_CHURN_RUNS``
#: (in memory; no statement). An idle worker waits ``VACUUM_CHECK_EVERY`` instead.
CHURN_POLL = 0.2
#: How often (wall seconds) a worker prunes its queues' dead jobs past their retention: a dead job is kept
#: its retention (days, by default) and at most this longer; one pass costs a statement per queue (ADR 044).
PRUNE_EVERY = 600.0
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
#: How long (wall seconds) a table a vacuum could not bring below the threshold is left alone at
#: least: its dead rows are younger than the oldest open transaction, and vacuuming again would find
#: the same. Short enough that the rows a long transaction held are reclaimed within a minute of its
#: end (the next vacuum follows within this, and takes a few seconds at half a million dead rows;
#: ADR 066). Past it, the table is still left alone while the storage names the same horizon as
#: at that vacuum (``retry_held_back``): a futile vacuum reads the whole heap the transaction holds
#: (some 77,000 buffers at a million dead rows) and reclaims nothing (ADR 078).
HELD_BACK_PAUSE = 30.0


def look_due(runs: int, seconds: float) -> bool:
    """Whether a worker that has ended ``runs`` runs in the ``seconds`` since it last looked at its
    storage's dead rows looks now: at once after ``VACUUM_CHURN_RUNS``, after ``VACUUM_CHECK_EVERY``
    if it ended any, never while it idles (it then looks only at its prunes, ADR 044)."""
    return runs >= VACUUM_CHURN_RUNS or (runs > 0 and seconds >= VACUUM_CHECK_EVERY)


def held_back(before: TableStats, after: TableStats) -> bool:
    """Whether a vacuum of a table (``before`` and ``after`` it: its counts) was held back by an open
    transaction: the table is still due, and the horizon it named before the vacuum is the one it names
    after (or the engine cannot name it). A horizon that moved meanwhile means the transaction that held
    the rows ended or gave way during the vacuum, and the next look vacuums again."""
    return bool(vacuum_due([after])) and (before.horizon is None or after.horizon == before.horizon)


def retry_held_back(held: TableStats, now: TableStats, waited: float) -> bool:
    """Whether a table that a vacuum left due (``held``: its counts just before that vacuum) is
    vacuumed again now (``now``: its counts at this look), ``waited`` wall seconds later: once
    ``HELD_BACK_PAUSE`` has passed, and only if the horizon that held the rows back has moved. An
    engine that cannot name its horizon (``None`` at that vacuum) is tried again after the pause."""
    return waited >= HELD_BACK_PAUSE and (held.horizon is None or now.horizon != held.horizon)


def vacuum_due(stats: Sequence[TableStats]) -> list[TableStats]:
    """The tables whose dead rows call for a worker's vacuum now: soon where the server's autovacuum
    does not cover them, and only once it has fallen far behind where it does."""
    return [
        table
        for table in stats
        if table.dead_rows
        >= (BEHIND_DEAD_ROWS if table.autovacuum else VACUUM_DEAD_ROWS) + VACUUM_DEAD_FRACTION * table.live_rows
    ]
