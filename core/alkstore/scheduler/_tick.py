"""Planning a tick: the one owner of how due boundaries become fires, within a bounded transaction.

A tick at ``now`` fires each due schedule's elapsed boundaries, oldest first, at most
``CATCH_UP_CAP`` per schedule per tick, skipping forward past the rest (ADR 003). One
transaction writes at most a ``TickBudget`` of fires (rows, and bytes of payload, which the
engine copies inside storage): a tick that needs more takes several transactions, each
counting the fires already made, so the cap, the order and the skip-forward are those of one
tick (ADR 017); the leader plans each at the time it begins, so what falls due meanwhile is in
the next one. Due schedules are taken cheapest fire first (payload size, then next boundary,
then name), so a schedule with huge payloads never holds up a small one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from alkstore.port._records import DueSchedule, Fire, PlannedFire, QueueConfig, TickBudget, TickResult
from alkstore.rules._boundary import CATCH_UP_CAP, catch_up
from alkstore.rules._options import resolve_schedule

__all__ = ["DEFAULT_BUDGET", "ROW_BYTES", "TickPlan", "plan_key", "plan_tick"]

#: The default bound of one tick transaction: 2,048 fires and 32 MiB of their payloads.
DEFAULT_BUDGET = TickBudget(rows=2048, bytes=32 * 2**20)
#: What a fire costs the byte budget beyond its payload: the rest of its row, roughly.
ROW_BYTES = 256


def plan_key(schedule: DueSchedule) -> tuple[int, datetime, str]:
    """The order a tick takes due schedules in (and locks them in): cheapest fire first."""
    return (schedule.payload_size, schedule.next_boundary, schedule.name)


@dataclass(frozen=True, slots=True)
class TickPlan:
    """What one tick transaction does.

    ``fires`` in ``(boundary, schedule)`` order; ``advanced`` gives each touched schedule's new
    next boundary and the last boundary this transaction fired for it (``None`` if it fired
    none: a pure skip-forward); ``skipped`` the boundaries skipped past the cap; ``more`` that
    the budget left due boundaries for another transaction of the same tick.
    """

    fires: tuple[PlannedFire, ...]
    advanced: tuple[tuple[str, datetime, datetime | None], ...]
    skipped: tuple[tuple[str, int], ...]
    more: bool

    def result(self, ids: Sequence[int], soonest: datetime | None) -> TickResult:
        """The ``TickResult``, given the ids the engine stored the fires under (same order)."""
        fires = tuple(
            Fire(fire.schedule, fire.boundary, fire.queue, job_id) for job_id, fire in zip(ids, self.fires, strict=True)
        )
        return TickResult(fires, self.skipped, soonest, self.more)


def plan_tick(
    due: Iterable[DueSchedule],
    configs: Mapping[str, QueueConfig | None],
    now: datetime,
    budget: TickBudget,
    fired: Mapping[str, int],
) -> TickPlan:
    """Plan one tick transaction at ``now`` over the due schedules.

    ``configs`` holds the stored config of each due schedule's queue (stamps resolve over it),
    ``fired`` the fires earlier transactions of this tick made per schedule. Schedules not yet
    due, and those that reached the cap earlier in this tick, are left out. At least one fire is
    planned when any is due, however large.
    """
    fires: list[PlannedFire] = []
    advanced: list[tuple[str, datetime, datetime | None]] = []
    skipped: list[tuple[str, int]] = []
    rows, space = budget.rows, budget.bytes
    more = False
    for schedule in sorted(due, key=plan_key):
        if schedule.next_boundary > now:
            continue
        if fired.get(schedule.name, 0) >= CATCH_UP_CAP:
            # Capped earlier in this tick, and due again at a later transaction's instant: what fell
            # due since waits for the next tick (and its own cap), neither fired nor skipped here.
            continue
        if rows <= 0:
            more = True
            break
        step = catch_up(
            schedule.next_boundary, schedule.interval_s, now, max(0, CATCH_UP_CAP - fired.get(schedule.name, 0))
        )
        cost = schedule.payload_size + ROW_BYTES
        fit = min(len(step.fired), rows, space // cost)
        if fit == 0 and step.fired:
            if fires:
                more = True
                break
            fit = 1  # progress: a fire larger than the whole budget goes alone
        stamps = resolve_schedule(schedule, schedule.queue, now, configs.get(schedule.queue))
        taken = step.fired[:fit]
        fires.extend(
            PlannedFire(
                schedule.name,
                boundary,
                schedule.queue,
                stamps.priority,
                stamps.run_at,
                stamps.expires_at,
                stamps.max_attempts,
            )
            for boundary in taken
        )
        rows -= fit
        space -= fit * cost
        last = taken[-1] if taken else None
        if fit < len(step.fired):
            advanced.append((schedule.name, step.fired[fit], last))
            more = True
            break
        advanced.append((schedule.name, step.next_boundary, last))
        if step.skipped:
            skipped.append((schedule.name, step.skipped))
    fires.sort(key=lambda fire: (fire.boundary, fire.schedule))
    return TickPlan(tuple(fires), tuple(advanced), tuple(skipped), more)
