"""A tick too large for one transaction (ADR 017), on every engine: several bounded transactions at
one instant fire exactly what one tick would — the 64-cap, oldest first, no boundary twice; and with
the leader's clock, each transaction of a long tick plans at the time it begins, so a schedule that
falls due meanwhile fires in the next transaction, while the backlog keeps its cap across the tick."""

from __future__ import annotations

from datetime import datetime, timedelta

from alkstore import CATCH_UP_CAP, ManualClock, Store
from alkstore.engine import TickBudget, TickResult
from alkstore.scheduler._runner import tick_all

SECOND = timedelta(seconds=1)


def test_a_tick_over_several_transactions_fires_each_boundary_once_within_the_cap(
    store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    store.schedule("busy", "@every 1s", "q", {"kind": "busy"})
    store.schedule("light", "@every 1m", "q", "light")
    clock.advance(timedelta(minutes=3))  # busy: 180 behind; light: 3
    transactions: list[TickResult] = []
    result = tick_all(store.engine, clock.now(), TickBudget(rows=10, bytes=2**30), transactions.append)
    assert len(transactions) == 7
    assert all(len(one.fires) <= 10 for one in transactions)
    assert [one.more for one in transactions] == [True] * 6 + [False]
    busy = [fire.boundary for fire in result.fires if fire.schedule == "busy"]
    light = [fire.boundary for fire in result.fires if fire.schedule == "light"]
    assert busy == [start + n * SECOND for n in range(1, CATCH_UP_CAP + 1)]
    assert light == [start + timedelta(minutes=m) for m in (1, 2, 3)]
    assert dict(result.skipped) == {"busy": 180 - CATCH_UP_CAP}
    ids = [fire.job_id for fire in result.fires]
    assert ids == sorted(ids)
    assert {s.name: s.next_boundary for s in store.schedules()} == {
        "busy": clock.now() + SECOND,
        "light": start + timedelta(minutes=4),
    }
    assert tick_all(store.engine, clock.now(), TickBudget(rows=10, bytes=2**30)).fires == ()
    jobs = list(iter(lambda: store.queue("q").claim("w"), None))
    assert sorted(job.id for job in jobs) == ids
    assert {job.payload == {"kind": "busy"} for job in jobs if job.schedule == "busy"} == {True}


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
