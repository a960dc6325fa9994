"""A tick too large for one transaction (ADR 017): on every engine, several bounded transactions at
one instant fire exactly what one tick would — the 64-cap, oldest first, no boundary twice."""

from __future__ import annotations

from datetime import timedelta

from alkstore import CATCH_UP_CAP, ManualClock, Store
from alkstore._runner import tick_all
from alkstore.engine import TickBudget, TickResult

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
