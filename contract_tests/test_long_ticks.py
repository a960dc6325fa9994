"""A long tick (ADR 017), on every engine: with the leader's clock, each transaction of a tick plans at
the time it begins, so a schedule that falls due meanwhile fires in the next transaction, while
the backlog keeps its catch-up cap across the whole tick."""

from __future__ import annotations

from datetime import datetime, timedelta

from alkstore import CATCH_UP_CAP, ManualClock, Store
from alkstore._runner import tick_all
from alkstore.engine import TickBudget, TickResult

SECOND = timedelta(seconds=1)


def test_a_schedule_that_falls_due_during_a_long_tick_fires_in_the_next_transaction(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    store.schedule("busy", "@every 1s", "q", {"kind": "busy"})
    clock.advance(180)  # busy is 180 boundaries behind
    began = clock.now()
    store.schedule("light", "@every 1s", "q", "light")  # on time: due 1 s from now
    transactions: list[tuple[datetime, TickResult]] = []

    def a_second_per_transaction(result: TickResult) -> None:
        transactions.append((instants[-1], result))
        instants.append(clock.advance(1))

    instants = [began]
    result = tick_all(store.engine, began, TickBudget(rows=10, bytes=2**30), a_second_per_transaction, clock)

    assert len(transactions) == 7
    assert [one.more for _, one in transactions] == [True] * 6 + [False]
    for at, one in transactions:  # light's boundary fires in the transaction that began when it was due
        light = [fire.boundary for fire in one.fires if fire.schedule == "light"]
        assert light == ([at] if at > began else []), at
    busy = [fire.boundary for fire in result.fires if fire.schedule == "busy"]
    assert busy == [start + n * SECOND for n in range(1, CATCH_UP_CAP + 1)]  # the cap holds for the whole tick
    last = transactions[-1][0]
    assert dict(result.skipped) == {"busy": (last - start) // SECOND - CATCH_UP_CAP}
    fired = [(fire.schedule, fire.boundary) for fire in result.fires]
    assert len(fired) == len(set(fired)) == CATCH_UP_CAP + 6
    assert {s.name: s.next_boundary for s in store.schedules()} == {"busy": last + SECOND, "light": last + SECOND}


def test_without_a_clock_every_transaction_of_a_tick_plans_at_its_first_instant(
    store: Store, clock: ManualClock
) -> None:
    store.schedule("busy", "@every 1s", "q")
    clock.advance(180)
    began = clock.now()
    store.schedule("light", "@every 1s", "q")

    def a_second_per_transaction(_: TickResult) -> None:
        clock.advance(1)

    result = tick_all(store.engine, began, TickBudget(rows=10, bytes=2**30), a_second_per_transaction)
    assert [fire.schedule for fire in result.fires] == ["busy"] * CATCH_UP_CAP
    assert dict(result.skipped) == {"busy": 180 - CATCH_UP_CAP}
