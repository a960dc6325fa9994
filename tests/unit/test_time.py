"""The clock port: ManualClock (set, advance, sleeping in lockstep), SystemClock, StopToken, as_utc.

Threads that sleep on a ManualClock are released by moving the clock, never by wall time; the
test waits for them with generous wall-clock timeouts only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from alkstore import Clock, InvalidOptions, ManualClock, StopToken, SystemClock
from alkstore.port._time import as_utc
from tests.support import MIDNIGHT, PATIENCE

T0 = MIDNIGHT


class Sleeper:
    """A thread sleeping ``seconds`` on ``clock``; records when (in clock time) it woke."""

    def __init__(self, clock: ManualClock, seconds: float, stop: StopToken | None = None) -> None:
        self.woke_at: datetime | None = None
        self._thread = threading.Thread(target=self._run, args=(clock, seconds, stop), daemon=True)
        self._thread.start()

    def _run(self, clock: ManualClock, seconds: float, stop: StopToken | None) -> None:
        clock.sleep(seconds, stop)
        self.woke_at = clock.now()

    def finished(self, timeout: float = PATIENCE) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


@pytest.fixture
def clock() -> Iterator[ManualClock]:
    clock = ManualClock(T0)
    yield clock
    clock.set(datetime.max.replace(tzinfo=UTC))  # release any sleeper a failed test left behind


def test_a_manual_clock_starts_where_told_and_only_moves_when_told(clock: ManualClock) -> None:
    assert isinstance(clock, Clock)
    assert clock.now() == T0
    assert clock.now() == T0


def test_a_manual_clock_needs_an_aware_start_and_keeps_it_in_utc() -> None:
    with pytest.raises(ValueError, match="naive"):
        ManualClock(datetime(2030, 1, 1))
    clock = ManualClock(datetime(2030, 1, 1, 3, tzinfo=timezone(timedelta(hours=3))))
    assert clock.now() == T0
    assert clock.now().tzinfo is UTC


def test_advance_moves_forward_by_seconds_or_a_timedelta_and_returns_the_new_instant(clock: ManualClock) -> None:
    assert clock.advance(1.5) == T0 + timedelta(seconds=1.5)
    assert clock.advance(timedelta(hours=1)) == T0 + timedelta(hours=1, seconds=1.5)
    assert clock.advance(0) == T0 + timedelta(hours=1, seconds=1.5)
    assert clock.now() == T0 + timedelta(hours=1, seconds=1.5)


def test_advance_refuses_to_go_backwards(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="set"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="set"):
        clock.advance(timedelta(microseconds=-1))
    assert clock.now() == T0


def test_set_jumps_forwards_and_backwards(clock: ManualClock) -> None:
    clock.set(T0 + timedelta(days=2))
    assert clock.now() == T0 + timedelta(days=2)
    clock.set(T0 - timedelta(days=2))
    assert clock.now() == T0 - timedelta(days=2)
    with pytest.raises(ValueError, match="naive"):
        clock.set(datetime(2030, 1, 1))


def test_sleep_blocks_until_the_clock_reaches_the_deadline(clock: ManualClock) -> None:
    sleeper = Sleeper(clock, 10)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(9.999999)
    assert not sleeper.finished(timeout=0.05)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.advance(0.000001)
    assert sleeper.finished()
    assert sleeper.woke_at == T0 + timedelta(seconds=10)


def test_setting_the_clock_past_the_deadline_wakes_a_sleeper(clock: ManualClock) -> None:
    sleeper = Sleeper(clock, 60)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.set(T0 + timedelta(days=1))
    assert sleeper.finished()


def test_setting_the_clock_backwards_does_not_wake_a_sleeper(clock: ManualClock) -> None:
    sleeper = Sleeper(clock, 60)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    clock.set(T0 - timedelta(days=1))
    assert not sleeper.finished(timeout=0.05)
    assert clock.parked() == 1
    clock.set(T0 + timedelta(seconds=60))
    assert sleeper.finished()


@pytest.mark.parametrize("seconds", [0, -5])
def test_a_sleep_of_zero_or_less_returns_at_once(clock: ManualClock, seconds: float) -> None:
    assert Sleeper(clock, seconds).finished()
    assert clock.now() == T0


def test_a_cancelled_stop_token_ends_a_sleep_without_moving_the_clock(clock: ManualClock) -> None:
    stop = StopToken()
    sleeper = Sleeper(clock, 3600, stop)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    stop.cancel()
    assert sleeper.finished()
    assert sleeper.woke_at == T0
    assert clock.parked() == 0


def test_a_sleep_with_an_already_cancelled_token_returns_at_once(clock: ManualClock) -> None:
    stop = StopToken()
    stop.cancel()
    assert Sleeper(clock, 3600, stop).finished()


def test_parked_counts_sleepers_whose_deadline_is_still_ahead(clock: ManualClock) -> None:
    assert clock.parked() == 0
    short, long = Sleeper(clock, 5), Sleeper(clock, 50)
    clock.wait_for_sleepers(2, timeout=PATIENCE)
    assert clock.parked() == 2
    clock.advance(5)
    assert short.finished()
    assert clock.parked() == 1
    clock.advance(45)
    assert long.finished()
    assert clock.parked() == 0


def test_wait_for_sleepers_times_out_when_too_few_threads_sleep(clock: ManualClock) -> None:
    with pytest.raises(TimeoutError):
        clock.wait_for_sleepers(1, timeout=0.05)
    Sleeper(clock, 5)
    clock.wait_for_sleepers(1, timeout=PATIENCE)
    with pytest.raises(TimeoutError):
        clock.wait_for_sleepers(2, timeout=0.05)


def test_the_manual_clock_repr_shows_the_public_path_and_the_time(clock: ManualClock) -> None:
    assert repr(clock) == f"<alkstore.ManualClock now={T0.isoformat()}>"


# -- StopToken -------------------------------------------------------------------------------------


def test_a_stop_token_starts_uncancelled_and_cancels_once_and_for_all() -> None:
    stop = StopToken()
    assert not stop.is_cancelled()
    assert stop.wait(0) is False
    assert repr(stop) == "<alkstore.StopToken cancelled=False>"
    stop.cancel()
    stop.cancel()
    assert stop.is_cancelled()
    assert stop.wait(0) is True
    assert stop.wait(None) is True
    assert repr(stop) == "<alkstore.StopToken cancelled=True>"


def test_cancelling_from_another_thread_wakes_a_waiter() -> None:
    stop = StopToken()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(stop.wait(None)), daemon=True)
    waiter.start()
    stop.cancel()
    waiter.join(PATIENCE)
    assert result == [True]


# -- SystemClock -----------------------------------------------------------------------------------


def test_the_system_clock_reads_aware_utc_time() -> None:
    clock = SystemClock()
    before = datetime.now(UTC)
    now = clock.now()
    assert now.tzinfo is UTC
    assert before <= now <= datetime.now(UTC)
    assert repr(clock) == "<alkstore.SystemClock>"


def _runs_within(action: Callable[[], None], timeout: float = PATIENCE) -> bool:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive()


def test_a_system_clock_sleep_returns_once_its_stop_token_is_cancelled() -> None:
    stop = StopToken()
    stop.cancel()
    assert _runs_within(lambda: SystemClock().sleep(3600, stop))
    assert _runs_within(lambda: SystemClock().sleep(-1))


# -- as_utc ----------------------------------------------------------------------------------------


def test_as_utc_converts_aware_instants_and_rejects_the_rest_with_the_given_error() -> None:
    assert as_utc(datetime(2030, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), "x", ValueError) == T0
    with pytest.raises(InvalidOptions, match="run_at"):
        as_utc(datetime(2030, 1, 1), "run_at", InvalidOptions)
    with pytest.raises(InvalidOptions):
        as_utc(date(2030, 1, 1), "run_at", InvalidOptions)
    with pytest.raises(TypeError):
        as_utc("2030-01-01T00:00:00Z", "run_at", TypeError)
