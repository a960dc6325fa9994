"""The leader loop's own guards, over an engine that misbehaves in ways no real engine should."""

from __future__ import annotations

import threading
from datetime import datetime

from alkstore import ManualClock, StopToken, Store
from alkstore.adapters.memory import MemoryEngine
from alkstore.engine import TickBudget, TickResult
from tests.support import MIDNIGHT

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
