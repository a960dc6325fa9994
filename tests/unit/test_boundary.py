"""Boundary math: first fire, catch-up with the 64 cap and skip-forward, re-registration, soonest."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore import CATCH_UP_CAP
from alkstore.rules._boundary import CatchUp, catch_up, registration_boundary, soonest
from tests.support import MIDNIGHT

T0 = MIDNIGHT
SECOND = timedelta(seconds=1)
HOUR = timedelta(hours=1)
MICROSECOND = timedelta(microseconds=1)


def test_the_cap_is_64() -> None:
    assert CATCH_UP_CAP == 64


@pytest.mark.parametrize("interval_s", [1, 59, 60, 3600, 86400, 3650 * 86400])
def test_a_schedule_registered_at_t_first_fires_at_t_plus_its_interval(interval_s: int) -> None:
    interval = timedelta(seconds=interval_s)
    boundary = registration_boundary(None, interval_s, T0)
    assert boundary == T0 + interval
    assert catch_up(boundary, interval_s, T0) == CatchUp((), 0, boundary)
    assert catch_up(boundary, interval_s, boundary - MICROSECOND).fired == ()
    assert catch_up(boundary, interval_s, boundary) == CatchUp((boundary,), 0, boundary + interval)


def test_an_every_second_schedule_1000_s_behind_fires_the_64_oldest_boundaries_and_skips_the_rest() -> None:
    now = T0
    behind = now - 1000 * SECOND  # boundaries behind, behind+1s, ..., now: 1001 are elapsed
    result = catch_up(behind, 1, now)
    assert result.fired == tuple(behind + i * SECOND for i in range(64))
    assert result.skipped == 1001 - 64
    assert result.next_boundary == now + SECOND


def test_with_now_between_boundaries_1000_elapsed_boundaries_fire_64_and_skip_936() -> None:
    behind = T0 + 250_000 * MICROSECOND
    now = behind + timedelta(seconds=999, microseconds=500_000)  # behind .. behind+999s are elapsed
    result = catch_up(behind, 1, now)
    assert len(result.fired) == 64
    assert result.fired[0] == behind
    assert result.fired[-1] == behind + 63 * SECOND
    assert result.skipped == 936
    assert result.next_boundary == behind + 1000 * SECOND


def test_fires_are_oldest_first_and_one_interval_apart() -> None:
    result = catch_up(T0, 7, T0 + timedelta(seconds=7 * 30))
    assert list(result.fired) == sorted(result.fired)
    assert all(later - earlier == 7 * SECOND for earlier, later in zip(result.fired, result.fired[1:], strict=False))


def test_when_now_is_exactly_on_a_boundary_it_fires_and_the_next_boundary_is_one_interval_later() -> None:
    interval = timedelta(minutes=1)
    now = T0 + 100 * interval
    result = catch_up(T0, 60, now)
    assert result.next_boundary == now + interval
    assert result.skipped == 101 - 64
    assert catch_up(now, 60, now) == CatchUp((now,), 0, now + interval)


@pytest.mark.parametrize("phase_us", [1, 123_457, 999_999])
def test_skip_forward_keeps_a_microsecond_phase(phase_us: int) -> None:
    behind = T0 + phase_us * MICROSECOND
    now = T0 + 5000 * SECOND  # behind .. behind+4999s are elapsed
    result = catch_up(behind, 1, now)
    assert result.skipped == 5000 - 64
    assert result.next_boundary == behind + 5000 * SECOND
    assert result.next_boundary - SECOND <= now < result.next_boundary
    assert (result.next_boundary - behind) % SECOND == timedelta(0)


def test_an_hourly_schedule_four_hours_behind_fires_five_times() -> None:
    now = T0
    behind = now - 4 * HOUR
    result = catch_up(behind, 3600, now)
    assert result.fired == (behind, behind + HOUR, behind + 2 * HOUR, behind + 3 * HOUR, now)
    assert result.skipped == 0
    assert result.next_boundary == now + HOUR


def test_a_second_catch_up_at_the_same_instant_fires_nothing() -> None:
    now = T0
    first = catch_up(now - 1000 * SECOND, 1, now)
    second = catch_up(first.next_boundary, 1, now)
    assert second == CatchUp((), 0, first.next_boundary)


def test_exactly_64_elapsed_boundaries_all_fire_and_65_skip_one() -> None:
    assert catch_up(T0, 1, T0 + 63 * SECOND) == CatchUp(tuple(T0 + i * SECOND for i in range(64)), 0, T0 + 64 * SECOND)
    result = catch_up(T0, 1, T0 + 64 * SECOND)
    assert (len(result.fired), result.skipped, result.next_boundary) == (64, 1, T0 + 65 * SECOND)


def test_the_cap_applies_per_call_so_each_schedule_gets_its_own_64() -> None:
    now = T0
    schedules = {"a": (now - 500 * SECOND, 1), "b": (now - 200 * timedelta(minutes=1), 60)}
    results = {name: catch_up(boundary, interval, now) for name, (boundary, interval) in schedules.items()}
    assert {name: len(result.fired) for name, result in results.items()} == {"a": 64, "b": 64}
    assert sum(len(result.fired) for result in results.values()) == 128


@pytest.mark.parametrize("cap", [1, 2, 10])
def test_an_explicit_cap_limits_the_fires_and_the_skip_count_takes_the_rest(cap: int) -> None:
    result = catch_up(T0, 1, T0 + 99 * SECOND)
    capped = catch_up(T0, 1, T0 + 99 * SECOND, cap=cap)
    assert capped.fired == result.fired[:cap]
    assert capped.skipped == 100 - cap
    assert capped.next_boundary == result.next_boundary


@pytest.mark.parametrize("ahead", [MICROSECOND, SECOND, 10 * HOUR])
def test_a_boundary_in_the_future_fires_nothing_and_stays(ahead: timedelta) -> None:
    assert catch_up(T0 + ahead, 1, T0) == CatchUp((), 0, T0 + ahead)


def test_re_registering_with_the_same_interval_keeps_the_stored_boundary_and_its_backlog() -> None:
    now = T0
    stored = now - timedelta(days=10)
    assert registration_boundary((60, stored, None), 60, now) == stored
    future = now + timedelta(seconds=17)
    assert registration_boundary((60, future, None), 60, now) == future


def test_re_registering_with_a_changed_interval_restarts_the_phase_one_new_interval_from_now() -> None:
    now = T0 + 123 * MICROSECOND
    assert registration_boundary((60, now - timedelta(days=10), None), 3600, now) == now + HOUR
    assert registration_boundary((3600, now + 5 * SECOND, None), 60, now) == now + timedelta(minutes=1)


def test_soonest_is_the_earliest_boundary_or_none() -> None:
    assert soonest([]) is None
    assert soonest(iter(())) is None
    boundaries = [T0 + 5 * SECOND, T0 - HOUR, T0 + MICROSECOND]
    assert soonest(boundaries) == T0 - HOUR
    assert soonest(b for b in boundaries) == T0 - HOUR


# -- property: catch_up agrees with a boundary-by-boundary model --------------------------------

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Keep every instant inside datetime's range: at most about 6000 years from T0.
_HORIZON_LIMIT_S = 6000 * 365 * 86400


def naive_catch_up(boundary: datetime, interval_s: int, now: datetime, cap: int) -> CatchUp:
    """Walk the boundaries one at a time: fire the first ``cap`` elapsed, count the rest."""
    interval = timedelta(seconds=interval_s)
    fired: list[datetime] = []
    skipped = 0
    while boundary <= now:
        if len(fired) < cap:
            fired.append(boundary)
        else:
            skipped += 1
        boundary += interval
    return CatchUp(tuple(fired), skipped, boundary)


@st.composite
def catch_up_cases(draw: st.DrawFn) -> tuple[datetime, int, datetime, int]:
    unit = draw(st.sampled_from(sorted(UNIT_SECONDS)))
    count = draw(st.integers(1, 3650 * 86400 // UNIT_SECONDS[unit]) | st.integers(1, 90))
    interval_s = count * UNIT_SECONDS[unit]
    boundary = T0 + draw(st.integers(0, 86_400_000_000)) * MICROSECOND
    most = min(4000, _HORIZON_LIMIT_S // interval_s)
    elapsed = draw(st.integers(0, most) | st.integers(max(0, most - 100), most) | st.sampled_from([0, 63, 64, 65]))
    last_us = interval_s * 1_000_000 - 1  # offsets at the edges catch rounding in the arithmetic
    offset_us = draw(st.integers(0, last_us) | st.sampled_from([0, 1, last_us - 1, last_us]))
    if elapsed == 0:  # now before the boundary
        now = boundary - (offset_us + 1) * MICROSECOND
    else:  # now somewhere between the elapsed-th boundary (inclusive) and the next (exclusive)
        now = boundary + (elapsed - 1) * timedelta(seconds=interval_s) + offset_us * MICROSECOND
    cap = draw(st.just(CATCH_UP_CAP) | st.integers(1, 100))
    return boundary, interval_s, now, cap


@settings(max_examples=150, deadline=None)
@given(catch_up_cases())
def test_catch_up_agrees_with_a_boundary_by_boundary_model(case: tuple[datetime, int, datetime, int]) -> None:
    boundary, interval_s, now, cap = case
    assert catch_up(boundary, interval_s, now, cap) == naive_catch_up(boundary, interval_s, now, cap)


@settings(max_examples=150, deadline=None)
@given(catch_up_cases())
def test_catch_up_keeps_the_phase_and_leaves_nothing_due(case: tuple[datetime, int, datetime, int]) -> None:
    boundary, interval_s, now, cap = case
    interval = timedelta(seconds=interval_s)
    result = catch_up(boundary, interval_s, now, cap)
    if boundary <= now:
        assert result.next_boundary - interval <= now < result.next_boundary
    else:
        assert result.next_boundary == boundary
    assert (result.next_boundary - boundary) % interval == timedelta(0)
    assert len(result.fired) + result.skipped == (result.next_boundary - boundary) // interval
    assert catch_up(result.next_boundary, interval_s, now, cap) == CatchUp((), 0, result.next_boundary)
