"""The standby loop through an outage (ADR 018), as the memory and Postgres outage tests drive it.

``Serving`` runs core's ``serve_schedules`` — the loop ``alkstore run-schedules`` runs — on a
thread over a manual clock. The tests cut the storage off, step the clock, and watch the loop
ride the outage out while its lease may still be valid, give leadership up once it cannot be,
stand by, and lead again when the storage is back. Nothing waits on wall time for a boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Self

from alkstore import Fire, ManualClock, StopToken
from alkstore.engine import Engine
from alkstore.scheduler._runner import serve_schedules
from tests.support import PATIENCE

__all__ = ["RENEW_FAILED", "SECOND", "STOOD_DOWN", "Serving", "step", "step_until", "wait_for"]

SECOND = timedelta(seconds=1)
#: Logged by a leader riding out a failed renewal.
RENEW_FAILED = "could not renew the scheduler lease"
#: Logged when a leader gives up a lease it could no longer renew.
STOOD_DOWN = "could not be renewed before it lapsed"


class Serving:
    """``serve_schedules`` on its own thread, recording the fires and what it raised; entered once it sleeps."""

    def __init__(self, engine: Engine, clock: ManualClock) -> None:
        self._clock = clock
        self.stop = StopToken()
        self.fires: list[Fire] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(engine, clock), name="serving", daemon=True)

    def _main(self, engine: Engine, clock: ManualClock) -> None:
        try:
            serve_schedules(engine, clock, self.stop, on_fire=self.fires.append)
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> Self:
        self._thread.start()
        self._clock.wait_for_sleepers(1)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.cancel()
        self._thread.join(PATIENCE)
        assert not self._thread.is_alive(), "serve_schedules did not stop"

    @property
    def boundaries(self) -> list[datetime]:
        return [fire.boundary for fire in self.fires]


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Wait (wall time, generously) until ``predicate`` holds."""
    end = time.monotonic() + PATIENCE
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def step(clock: ManualClock, seconds: int = 1) -> datetime:
    """Advance one second at a time, each time waiting for the leader to park on the clock again."""
    for _ in range(seconds):
        clock.advance(1)
        clock.wait_for_sleepers(1, timeout=PATIENCE)
    return clock.now()


def step_until(clock: ManualClock, done: Callable[[], bool], limit: int = 30) -> datetime:
    """Advance one second at a time until ``done()`` holds (after each step the loop either parks on
    the clock again or is ``done``); return the instant it held at."""
    for _ in range(limit):
        clock.advance(1)
        wait_for(lambda: done() or clock.parked() >= 1, "the loop to park on the clock or to be done")
        if done():
            return clock.now()
    raise AssertionError(f"not done after {limit} steps of the clock")


def rode_out(serving: Serving, log: str, failure: str = RENEW_FAILED) -> None:
    """The loop logged ``failure`` and carried on leading: no error, never stood down or by."""
    assert serving.error is None
    assert failure in log
    assert STOOD_DOWN not in log
    assert "standing by" not in log
