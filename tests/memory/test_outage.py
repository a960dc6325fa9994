"""The scheduler's loops through an outage (ADR 018), over a memory engine that fails on demand.

While ``down``, every call the loops make raises ``DatabaseUnavailable``, as the Postgres engine
does when its server is unreachable. A short outage is ridden out under the same lease; a long
one ends in ``LeadershipLost`` and standing by, and the standby loop leads again once the
storage is back and the old lease has lapsed; a permanent error is raised. Each boundary is
fired exactly once through all of it.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

import pytest

from alkstore import ManualClock, SchemaOutOfDate, Store
from alkstore.adapters.memory import MemoryEngine
from alkstore.engine import LockRecord, TickBudget, TickResult
from alkstore.errors import DatabaseUnavailable
from alkstore.rules._names import SCHEDULER_LOCK
from alkstore.scheduler._leader import LEASE_TTL, RETRY_EVERY
from tests._outage import SECOND, STOOD_DOWN, Serving, rode_out, step, step_until, wait_for
from tests.support import T0


class Flaky(MemoryEngine):
    """A memory engine whose scheduler calls fail while ``down`` (or with ``permanent``, for good)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.permanent: Exception | None = None
        self.failing_ticks = 0  # ticks still to fail, alone, while the rest works
        self.refused: Counter[str] = Counter()

    def _gate(self, call: str) -> None:
        if self.permanent is not None:
            raise self.permanent
        if self.down:
            self.refused[call] += 1
            raise DatabaseUnavailable(f"{call}: the database cannot be reached (a simulated outage)")

    def lease(self) -> LockRecord:
        """The scheduler lease as stored (read behind the outage's back)."""
        lease = super().read_lock(SCHEDULER_LOCK)
        assert lease is not None
        return lease

    def read_lock(self, name: str) -> LockRecord | None:
        self._gate("read_lock")
        return super().read_lock(name)

    def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> LockRecord | None:
        self._gate("try_lock")
        return super().try_lock(name, owner, now, expires_at)

    def renew_lock(self, lock: LockRecord, now: datetime, expires_at: datetime) -> LockRecord:
        self._gate("renew_lock")
        return super().renew_lock(lock, now, expires_at)

    def release_lock(self, lock: LockRecord) -> bool:
        self._gate("release_lock")
        return super().release_lock(lock)

    def tick(self, now: datetime, budget: TickBudget, fired: dict[str, int]) -> TickResult:
        self._gate("tick")
        if self.failing_ticks:
            self.failing_ticks -= 1
            self.refused["tick"] += 1
            raise DatabaseUnavailable("tick: the connection was lost mid-transaction (simulated)")
        return super().tick(now, budget, fired)

    def soonest_boundary(self) -> datetime | None:
        self._gate("soonest_boundary")
        return super().soonest_boundary()


@pytest.fixture(autouse=True)
def _info_log(caplog: pytest.LogCaptureFixture) -> None:
    """Every test here reads what the loop logged at INFO."""
    caplog.set_level(logging.INFO, logger="alkstore")


@pytest.fixture
def flaky() -> Flaky:
    return Flaky()


@pytest.fixture
def clock(flaky: Flaky) -> ManualClock:
    clock = ManualClock(T0)
    Store(flaky, clock=clock).schedule("beat", "@every 2s", "jobs")
    return clock


def every_2s(*ns: int) -> list[datetime]:
    return [T0 + 2 * n * SECOND for n in ns]


def test_a_short_outage_is_ridden_out_under_the_same_lease_and_the_backlog_fires_once(
    flaky: Flaky, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with Serving(flaky, clock) as leader:
        step(clock, 2)
        assert leader.boundaries == every_2s(1)
        before = flaky.lease()
        flaky.down = True
        step(clock, 5)  # T0 + 7 s: 5 s without the database, 2 boundaries due meanwhile
        assert leader.boundaries == every_2s(1)
        assert flaky.refused["renew_lock"] >= 4  # one retry a second of the clock
        flaky.down = False
        step(clock)
        assert leader.boundaries == every_2s(1, 2, 3, 4)
        assert (flaky.lease().owner, flaky.lease().token) == (before.owner, before.token)
    rode_out(leader, caplog.text)


def test_a_tick_that_fails_transiently_is_retried_under_a_renewed_lease(
    flaky: Flaky, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with Serving(flaky, clock) as leader:
        before = flaky.lease()
        flaky.failing_ticks = 1
        step(clock, 2)  # the tick at T0 + 2 s fails; the leader waits a second of the clock
        assert (leader.boundaries, flaky.refused["tick"]) == ([], 1)
        step(clock)
        assert leader.boundaries == every_2s(1)
        assert flaky.lease().token == before.token
    rode_out(leader, caplog.text, "scheduler tick failed")


def test_an_outage_longer_than_the_lease_ends_in_standing_by_and_the_loop_leads_again_once_it_is_over(
    flaky: Flaky, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with Serving(flaky, clock) as serving:
        step(clock, 2)
        first = flaky.lease()
        renewed_at = clock.now()
        flaky.down = True
        lost_at = step_until(clock, lambda: STOOD_DOWN in caplog.text)
        # It kept the lease while it could be valid, and gave it up before it lapsed.
        assert lost_at == renewed_at + LEASE_TTL - RETRY_EVERY
        assert first.expires_at == renewed_at + LEASE_TTL
        refused = flaky.refused["try_lock"]
        wait_for(lambda: flaky.refused["try_lock"] >= refused + 2, "the standby loop to ask again, twice")
        assert serving.boundaries == every_2s(1)
        flaky.down = False
        clock.set(first.expires_at)  # the old lease lapses; the standby loop takes it at its next try
        wait_for(lambda: clock.parked() >= 1 and flaky.lease().token != first.token, "the loop to lead again")
        assert serving.boundaries == every_2s(1, 2, 3, 4, 5, 6)
        step(clock, 2)
        assert serving.boundaries == every_2s(1, 2, 3, 4, 5, 6, 7)
    assert serving.error is None
    assert "standing by" in caplog.text
    jobs = list(iter(lambda: Store(flaky, clock=clock).queue("jobs").claim("probe"), None))
    assert sorted(job.boundary for job in jobs if job.boundary is not None) == every_2s(1, 2, 3, 4, 5, 6, 7)


def test_a_permanent_error_is_raised_by_the_standby_loop_not_ridden_out(flaky: Flaky, clock: ManualClock) -> None:
    with Serving(flaky, clock) as serving:
        flaky.permanent = SchemaOutOfDate("the schema was dropped")
        clock.advance(2)
        wait_for(lambda: serving.error is not None, "the loop to raise")
    assert isinstance(serving.error, SchemaOutOfDate)
