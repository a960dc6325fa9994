"""Anchored schedules (ADR 034): boundaries on an anchor's phase, whenever the schedule was registered.

``@every 1d`` anchored at 02:00 fires at 02:00 every day; ``@every 15m`` anchored on the hour at
:00, :15, :30, :45. The seed's rules hold unchanged: the first fire strictly after registration,
at most 64 caught up oldest first, skip-forward on the phase, and re-registration keeps the phase
and backlog while spec and anchor are unchanged (a changed anchor restarts on the new phase).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from alkstore import CATCH_UP_CAP, ManualClock, ScheduleOpts, Store

from ._engines import EngineTarget
from ._profiles import sized

HOUR = timedelta(hours=1)
START = datetime(2030, 3, 4, 17, 23, 45, 678901, tzinfo=UTC)
TWO_AM = datetime(2000, 1, 1, 2, tzinfo=UTC)


def at(store: Store, name: str) -> datetime:
    (schedule,) = [each for each in store.schedules() if each.name == name]
    return schedule.next_boundary


def test_a_daily_schedule_anchored_at_two_fires_at_two_whenever_it_was_registered(
    store: Store, clock: ManualClock
) -> None:
    clock.set(START)
    schedule = store.schedule("nightly", "@every 1d", "reports", opts=ScheduleOpts(anchor=TWO_AM))
    assert schedule.next_boundary == datetime(2030, 3, 5, 2, tzinfo=UTC)
    assert schedule.opts.anchor == TWO_AM
    clock.set(datetime(2030, 3, 7, 3, tzinfo=UTC))
    assert [fire.boundary for fire in store.tick()] == [datetime(2030, 3, d, 2, tzinfo=UTC) for d in (5, 6, 7)]
    assert at(store, "nightly") == datetime(2030, 3, 8, 2, tzinfo=UTC)


def test_a_quarter_hourly_schedule_anchored_on_the_hour_fires_at_each_quarter(store: Store, clock: ManualClock) -> None:
    clock.set(START)  # 17:23:45
    on_the_hour = datetime(2030, 1, 1, tzinfo=UTC)
    store.schedule("quarters", "@every 15m", "beats", opts=ScheduleOpts(anchor=on_the_hour))
    clock.set(datetime(2030, 3, 4, 18, 1, tzinfo=UTC))
    minutes = [(fire.boundary.hour, fire.boundary.minute) for fire in store.tick()]
    assert minutes == [(17, 30), (17, 45), (18, 0)]


def test_a_boundary_on_the_registration_instant_is_not_fired_the_first_fire_is_strictly_after(
    store: Store, clock: ManualClock
) -> None:
    clock.set(datetime(2030, 1, 1, 2, tzinfo=UTC))
    assert store.schedule("n", "@every 1d", "q", opts=ScheduleOpts(anchor=TWO_AM)).next_boundary == datetime(
        2030, 1, 2, 2, tzinfo=UTC
    )
    future_anchor = datetime(2031, 1, 1, 5, tzinfo=UTC)  # an anchor ahead of now fixes the phase too
    assert store.schedule("f", "@every 1h", "q", opts=ScheduleOpts(anchor=future_anchor)).next_boundary == datetime(
        2030, 1, 1, 3, tzinfo=UTC
    )


def test_re_registering_keeps_phase_and_backlog_and_a_changed_anchor_restarts_on_its_phase(
    store: Store, clock: ManualClock
) -> None:
    clock.set(START)
    store.schedule("h", "@every 1h", "q", opts=ScheduleOpts(anchor=TWO_AM))
    first = at(store, "h")
    assert (first.minute, first.second) == (0, 0)
    clock.advance(3 * HOUR)
    store.schedule("h", "@every 1h", "q", opts=ScheduleOpts(anchor=TWO_AM))  # a restart re-registers it
    assert at(store, "h") == first  # the backlog stands
    half_past = TWO_AM + timedelta(minutes=30)
    store.schedule("h", "@every 1h", "q", opts=ScheduleOpts(anchor=half_past))
    moved = at(store, "h")
    assert moved > clock.now()
    assert (moved - half_past) % HOUR == timedelta(0)
    store.schedule("h", "@every 1h", "q")  # no anchor: the registration's phase, from now
    assert at(store, "h") == clock.now() + HOUR


def test_a_far_out_horizon_catches_up_at_most_64_and_skips_forward_on_the_anchors_phase(
    store: Store, clock: ManualClock
) -> None:
    clock.set(START)
    store.schedule("q", "@every 15m", "beats", opts=ScheduleOpts(anchor=TWO_AM))
    clock.advance(timedelta(days=30))
    fires = store.tick()
    assert len(fires) == CATCH_UP_CAP
    assert [fire.boundary for fire in fires] == sorted(fire.boundary for fire in fires)
    after = at(store, "q")
    assert after > clock.now()
    assert (after - TWO_AM) % timedelta(minutes=15) == timedelta(0)


@sized(0.25)
@given(
    interval=st.sampled_from([1, 7, 60, 900, 3600, 86400]),
    anchor_offset=st.integers(min_value=-(10**9), max_value=10**9),
    now_offset=st.integers(min_value=0, max_value=10**11),
    later=st.integers(min_value=0, max_value=10**12),
)
def test_every_engine_fires_an_anchored_schedule_on_its_phase_and_agrees_with_the_others(
    all_engines: tuple[list[EngineTarget], list[str]],
    interval: int,
    anchor_offset: int,
    now_offset: int,
    later: int,
) -> None:
    """The boundary math property: each fire is on the anchor's phase, strictly after registration,
    oldest first, capped; the next boundary is the first on the phase after the tick; and every engine
    and runtime shows the same outcome."""
    anchor = START + timedelta(microseconds=anchor_offset)
    registered_at = START + timedelta(microseconds=now_offset)
    ticked_at = registered_at + timedelta(microseconds=later)
    step = timedelta(seconds=interval)
    outcomes = []
    for target in all_engines[0]:
        clock = ManualClock(registered_at)
        with target.store(clock) as store:
            first = store.schedule("p", f"@every {interval}s", "q", opts=ScheduleOpts(anchor=anchor)).next_boundary
            clock.set(ticked_at)
            fires = [fire.boundary for fire in store.tick()]
            outcomes.append((first, fires, at(store, "p")))
    first, fires, after = outcomes[0]
    assert all(outcome == outcomes[0] for outcome in outcomes), "the engines and runtimes disagree"
    assert first > registered_at
    assert first - step <= registered_at
    assert (first - anchor) % step == timedelta(0)
    assert fires == sorted(fires)
    assert len(fires) <= CATCH_UP_CAP
    assert all(
        (boundary - anchor) % step == timedelta(0) and registered_at < boundary <= ticked_at for boundary in fires
    )
    assert after > ticked_at
    assert after - step <= ticked_at
    assert (after - anchor) % step == timedelta(0)
