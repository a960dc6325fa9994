"""The leader loop's own guards, over an engine that misbehaves in ways no real engine should."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from alkstore import ManualClock, StopToken, Store
from alkstore.adapters.memory import MemoryEngine
from alkstore.engine import LockRecord, TickBudget, TickResult
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL
from tests.support import MIDNIGHT, PATIENCE, wait_until

T0 = MIDNIGHT


class _StuckSoonest(MemoryEngine):
    """Reports a soonest boundary that is never after the tick: a storage fault."""

    def __init__(self) -> None:
        super().__init__()
        self.ticks = 0

    def tick(self, now: datetime, budget: TickBudget, fired: dict[str, int]) -> TickResult:
        self.ticks += 1
        return TickResult((), (), now)

    def soonest_boundary(self) -> datetime | None:
        return T0


def test_a_soonest_boundary_that_is_not_after_the_tick_costs_a_slice_not_a_spin() -> None:
    clock = ManualClock(T0)
    engine = _StuckSoonest()
    store = Store(engine, clock=clock)
    stop = StopToken()
    runner = threading.Thread(target=store.run_schedules, args=(stop,), daemon=True)
    runner.start()
    try:
        clock.wait_for_sleepers(1)  # parked on the clock: not spinning
        assert engine.ticks == 1
        for expected in (2, 3):
            clock.advance(1)
            clock.wait_for_sleepers(1)
            assert engine.ticks == expected  # one tick per slice of the clock
    finally:
        stop.cancel()
        runner.join(10)
    assert not runner.is_alive()


class _CountedLocks(MemoryEngine):
    """Counts the asks for a lock and the reads of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asks = 0
        self.reads = 0

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        self.asks += 1
        return super().try_lock(name, owner, now, expires_at)

    def read_lock(self, name: str) -> LockRecord | None:
        self.reads += 1
        return super().read_lock(name)


def test_a_standby_reads_the_leaders_lease_and_asks_again_only_once_it_has_lapsed() -> None:
    clock = ManualClock(T0)
    engine = _CountedLocks()
    held = engine.try_lock(SCHEDULER_LOCK, "another-process", T0, T0 + LEASE_TTL)
    assert held is not None
    store = Store(engine, clock=clock)
    stop = StopToken()
    standby = threading.Thread(target=store.run_schedules, args=(stop,), kwargs={"standby": True}, daemon=True)
    standby.start()
    try:
        time.sleep(2.5)  # wall seconds: a standby that asked every second would have asked three times
        assert (engine.asks, engine.reads) == (2, 1)  # the lease's holder's ask and the standby's one
        clock.advance(LEASE_TTL)  # the holder's lease lapses (it never renewed): the standby leads
        wait_until(
            lambda: (lock := engine.read_lock(SCHEDULER_LOCK)) is not None and lock.owner != held.owner,
            "the standby leading",
        )
    finally:
        stop.cancel()
        standby.join(PATIENCE)
    assert not standby.is_alive()
