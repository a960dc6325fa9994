"""The scheduler leader loop: one leader, refusal, renewal across long sleeps, loss, clean stop, hand-over.

Runners run on threads; the test steps the manual clock and waits for them to park again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from alkstore import LeadershipLost, ManualClock, Store

from ._engines import T0
from ._runners import HoldingClock, Runner, Standby, cancelled, step, stop_all

SECOND = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _no_runner_outlives_its_test() -> Iterator[None]:
    """Stop every runner a test started, even when the test failed half-way."""
    yield
    hung = stop_all()
    assert not hung, f"runners that did not stop: {hung}"


@pytest.fixture
def clock() -> HoldingClock:
    """This module's stores run on a clock that can also freeze a runner mid-sleep."""
    return HoldingClock(T0)


def lead(store: Store, clock: ManualClock, name: str = "leader") -> Runner:
    runner = Runner(store, name).start()
    clock.wait_for_sleepers(1, timeout=30)
    return runner


def paused_past_its_lease(store: Store, clock: HoldingClock, name: str) -> Runner:
    """A leader of ``@every 11s`` frozen mid-sleep while the clock passes its 10 s lease and that boundary."""
    store.schedule("beat", "@every 11s", "jobs")
    runner = lead(store, clock, name)
    clock.hold(runner.thread)
    clock.advance(12)
    return runner


def test_a_second_runner_is_refused_with_leadership_lost_and_fires_nothing(store: Store, clock: HoldingClock) -> None:
    leader = lead(store, clock)
    store.schedule("beat", "@every 5s", "jobs")
    clock.hold(leader.thread)  # the leader is paused mid-sleep, its lease still valid
    clock.advance(5)  # a boundary is due that only a leader may fire
    contender = Runner(store, "contender").start()
    assert contender.ended(), "the contender should have been refused at once"
    assert isinstance(contender.error, LeadershipLost)
    assert contender.fires == []
    assert store.queue("jobs").claim("probe") is None
    clock.release(leader.thread)
    clock.wait_for_sleepers(1, timeout=30)
    assert leader.boundaries == [T0 + 5 * SECOND]
    assert leader.finish() is None


def test_a_stopped_runner_returns_cleanly_and_releases_leadership(store: Store, clock: ManualClock) -> None:
    first = lead(store, clock)
    with pytest.raises(LeadershipLost):
        store.run_schedules(cancelled())
    assert first.finish() is None
    store.schedule("beat", "@every 1s", "jobs")
    clock.advance(1)
    successor = lead(store, clock, "successor")  # no wait for a lease to lapse: it was released
    assert successor.boundaries == [T0 + SECOND]
    assert successor.finish() is None
    store.run_schedules(cancelled())  # free again: leads and returns


def test_lease_renewals_keep_leadership_across_a_boundary_40_s_out(store: Store, clock: ManualClock) -> None:
    store.schedule("slow", "@every 40s", "jobs")
    leader = lead(store, clock)
    for second in range(1, 41):
        step(clock, sleepers=1)
        with pytest.raises(LeadershipLost):
            store.run_schedules(cancelled())
        expected = [T0 + 40 * SECOND] if second == 40 else []
        assert leader.boundaries == expected, f"after {second} s"
    assert leader.finish() is None


def test_a_runner_that_lost_its_lease_raises_leadership_lost_before_any_further_tick(
    store: Store, clock: HoldingClock
) -> None:
    first = paused_past_its_lease(store, clock, "first")
    usurper = lead(store, clock, "usurper")
    assert usurper.boundaries == [T0 + 11 * SECOND]
    clock.release(first.thread)
    assert first.ended(), "the first runner should have noticed its loss"
    assert isinstance(first.error, LeadershipLost)
    assert first.fires == []
    assert usurper.finish() is None
    assert [job.boundary for job in iter(lambda: store.queue("jobs").claim("probe"), None)] == [T0 + 11 * SECOND]


def test_a_runner_paused_past_its_lease_loses_leadership_even_if_nobody_took_it(
    store: Store, clock: HoldingClock
) -> None:
    paused = paused_past_its_lease(store, clock, "paused")
    clock.release(paused.thread)
    assert paused.ended()
    assert isinstance(paused.error, LeadershipLost)
    assert paused.fires == []


def test_a_schedule_registered_while_the_runner_sleeps_fires_within_one_slice_of_its_first_boundary(
    store: Store, clock: ManualClock
) -> None:
    leader = lead(store, clock)  # nothing scheduled: it sleeps slice by slice
    step(clock, sleepers=1)
    registered = store.schedule("late", "@every 3s", "jobs")
    for _ in range(2):
        step(clock, sleepers=1)
        assert leader.fires == []
    assert clock.now() + SECOND == registered.next_boundary
    step(clock, sleepers=1)
    assert leader.boundaries == [registered.next_boundary]
    assert leader.finish() is None


def test_two_runners_with_a_retrying_standby_fire_each_boundary_exactly_once(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 2s", "jobs")
    leader = lead(store, clock)
    standby = Standby(store, clock, "standby").start()
    clock.wait_for_sleepers(2, timeout=30)
    for _ in range(8):
        step(clock, sleepers=2)
    assert leader.finish() is None  # hand-over: the standby takes over at its next try
    step(clock, sleepers=1)
    restarted = Standby(store, clock, "restarted").start()  # the old leader comes back as a standby
    clock.wait_for_sleepers(2, timeout=30)
    for _ in range(11):
        step(clock, sleepers=2)
    runners = (leader, standby, restarted)
    for runner in runners:
        assert runner.finish() is None
    boundaries = [T0 + n * 2 * SECOND for n in range(1, 11)]
    assert sorted(boundary for runner in runners for boundary in runner.boundaries) == boundaries
    assert leader.boundaries == boundaries[:4]
    assert standby.boundaries == boundaries[4:]
    assert (restarted.fires, standby.refusals > 0, restarted.refusals > 0) == ([], True, True)
    jobs = list(iter(lambda: store.queue("jobs").claim("probe"), None))
    assert sorted(job.boundary for job in jobs if job.boundary) == boundaries
