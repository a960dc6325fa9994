"""A tick that lasts longer than the leader's lease (ADR 017), over a memory engine whose tick
transactions each take half a second of the clock: the issue's twenty ``@every 1s`` schedules with
1 MB payloads, 70 s behind, and a small schedule beside them.

The leader renews its lease between the transactions, so the lease was valid as every one of
them began, under one token; the small schedule fires each boundary in the transaction that
begins when it falls due; each big schedule fires 64 of its backlog, skips the rest once, and
fires every later boundary.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import pytest

from alkstore import CATCH_UP_CAP, Fire, ManualClock, StopToken, Store
from alkstore.adapters.memory import MemoryEngine
from alkstore.engine import LockRecord, TickBudget, TickResult
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL
from tests.support import PATIENCE, T0

SECOND = timedelta(seconds=1)
BIG, MB, BEHIND = 20, 1_000_000, 70
#: How long one tick transaction of 33 MB takes (about what PostgreSQL takes to write it here).
TRANSACTION = SECOND / 2


class SlowTicks(MemoryEngine):
    """Every tick transaction takes ``TRANSACTION`` of ``clock``; records, as each one begins, its instant,
    the lease, and whether it is the first of a tick (no fires counted yet)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.began: list[tuple[datetime, LockRecord | None, bool]] = []

    def tick(self, now: datetime, budget: TickBudget, fired: dict[str, int]) -> TickResult:
        self.began.append((now, self.read_lock(SCHEDULER_LOCK), not fired))
        result = super().tick(now, budget, fired)
        self.clock.advance(TRANSACTION)
        return result


@pytest.fixture
def leading(caplog: pytest.LogCaptureFixture) -> tuple[SlowTicks, ManualClock, list[tuple[Fire, datetime]]]:
    """The schedules registered, a leader run through its catch-up tick and 5 s of live ticks."""
    caplog.set_level(logging.WARNING, logger="alkstore.scheduler")
    clock = ManualClock(T0)
    engine = SlowTicks(clock)
    past = Store(engine, clock=ManualClock(T0 - BEHIND * SECOND))
    for index in range(BIG):
        past.schedule(f"big-{index:02}", "@every 1s", "big", bytes([index]) * MB)
    store = Store(engine, clock=clock)
    store.schedule("small", "@every 1s", "small", {"small": True})
    fires: list[tuple[Fire, datetime]] = []
    stop = StopToken()
    leader = threading.Thread(
        target=store.run_schedules, args=(stop, lambda fire: fires.append((fire, clock.now()))), daemon=True
    )
    leader.start()
    try:
        clock.wait_for_sleepers(1, timeout=PATIENCE)  # the catch-up tick is over: the leader sleeps
        caught_up = clock.now()
        while clock.now() < caught_up + 5 * SECOND:
            clock.advance(1)
            clock.wait_for_sleepers(1, timeout=PATIENCE)
    finally:
        stop.cancel()
        leader.join(PATIENCE)
    assert not leader.is_alive()
    return engine, clock, fires


def test_the_catch_up_tick_outlasts_the_lease_and_every_transaction_begins_under_a_valid_one(
    leading: tuple[SlowTicks, ManualClock, list[tuple[Fire, datetime]]],
) -> None:
    engine, _, fires = leading
    starts = [index for index, (_, _, first) in enumerate(engine.began) if first]
    catch_up = engine.began[: starts[1]]
    assert len(catch_up) * TRANSACTION > LEASE_TTL  # the first tick took longer than the lease
    assert sum(1 for fire, _ in fires if fire.boundary <= T0) == BIG * CATCH_UP_CAP
    tokens = {lease.token for _, lease, _ in engine.began if lease is not None}
    assert len(tokens) == 1  # one leader, one lease, from the first transaction to the last
    for now, lease, _ in engine.began:
        assert lease is not None
        assert lease.expires_at > now, f"the transaction at {now} began on a lapsed lease"


def test_the_small_schedule_fires_each_boundary_in_the_transaction_that_begins_when_it_is_due(
    leading: tuple[SlowTicks, ManualClock, list[tuple[Fire, datetime]]],
) -> None:
    _, _, fires = leading
    small = [(fire.boundary, reported) for fire, reported in fires if fire.schedule == "small"]
    boundaries = [boundary for boundary, _ in small]
    assert boundaries == [T0 + n * SECOND for n in range(1, len(small) + 1)]  # every one, once, in order
    assert len(small) > LEASE_TTL // SECOND  # through the whole catch-up tick and after
    # Due during one transaction, fired by the next, reported when that one ends.
    assert all(reported - boundary <= 2 * TRANSACTION for boundary, reported in small)


def test_each_big_schedule_fires_64_of_its_backlog_skips_the_rest_once_and_every_boundary_after(
    leading: tuple[SlowTicks, ManualClock, list[tuple[Fire, datetime]]], caplog: pytest.LogCaptureFixture
) -> None:
    _, clock, fires = leading
    logged = "\n".join(record.getMessage() for record in caplog.get_records("setup"))
    skips = Counter(re.findall(r"schedule '(big-\d+)' was more than 64 boundaries behind", logged))
    assert skips == dict.fromkeys((f"big-{index:02}" for index in range(BIG)), 1)
    by_schedule: dict[str, list[datetime]] = defaultdict(list)
    for fire, _ in fires:
        if fire.schedule.startswith("big-"):
            by_schedule[fire.schedule].append(fire.boundary)
    assert len(by_schedule) == BIG
    first = T0 - (BEHIND - 1) * SECOND
    for name, boundaries in by_schedule.items():
        assert boundaries == sorted(set(boundaries)), name
        backlog, later = boundaries[:CATCH_UP_CAP], boundaries[CATCH_UP_CAP:]
        assert backlog == [first + n * SECOND for n in range(CATCH_UP_CAP)], name
        assert later, f"{name} never fired live"
        assert later == [later[0] + n * SECOND for n in range(len(later))], f"{name} lost a boundary after its skip"
        assert later[-1] >= clock.now() - 2 * SECOND, name
