"""The Postgres engine's default clock (ADR 015), over a stand-in server and a stand-in monotonic clock:
the server's time plus the local monotonic progress, never the host's wall clock."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from alkstore.adapters.postgres import _clock
from alkstore.adapters.postgres._clock import DatabaseClock
from alkstore.errors import AlkstoreError, DatabaseUnavailable
from tests.support import T0


class Local:
    """A monotonic clock the test moves; each server round trip can take some of it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch) -> Local:
    clock = Local()
    monkeypatch.setattr(_clock, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


def server(local: Local, answers: Iterator[tuple[float, datetime, float]]) -> Callable[[], datetime]:
    """A server read that takes ``before`` s of the local clock, answers ``instant``, then ``after`` s."""

    def read() -> datetime:
        before, instant, after = next(answers)
        local.now += before
        try:
            return instant
        finally:
            local.now += after

    return read


def test_now_is_the_servers_sample_plus_the_local_monotonic_progress(local: Local) -> None:
    clock = DatabaseClock(server(local, iter([(0.001, T0, 0.001)] * 3)))
    clock.measure()  # three samples of 2 ms; the first is kept, anchored half-way through its trip
    local.now += 12.5
    assert (clock.now() - T0).total_seconds() == pytest.approx(local.now - 1000.001, abs=1e-6)
    assert clock.round_trip == pytest.approx(0.002)


def test_the_sample_with_the_shortest_round_trip_is_kept(local: Local) -> None:
    slow, quick = (0.2, T0, 0.2), (0.001, T0 + timedelta(seconds=5), 0.001)
    clock = DatabaseClock(server(local, iter([slow, quick, slow])))
    clock.measure()
    anchored_at = 1000.0 + 0.4 + 0.001  # the quick sample's midpoint
    assert clock.round_trip == pytest.approx(0.002)
    assert (clock.now() - T0).total_seconds() == pytest.approx(5 + local.now - anchored_at, abs=1e-6)


def test_the_hosts_wall_clock_never_enters(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoWallClock(datetime):
        @classmethod
        def now(cls, tz: object = None) -> NoWallClock:
            raise AssertionError("the database clock read the host's wall clock")

    monkeypatch.setattr(_clock, "datetime", NoWallClock)  # and ``local`` left ``time`` only its monotonic clock
    clock = DatabaseClock(server(local, iter([(0.0, T0, 0.0)] * 3)))
    with pytest.raises(AlkstoreError, match="before its first measurement"):
        clock.now()  # the engine measures as it starts, before anything reads the clock
    clock.measure()
    assert clock.now() == T0
    local.now += 3
    assert clock.now() == T0 + timedelta(seconds=3)


def test_a_new_measurement_a_little_behind_never_moves_now_backwards_and_a_large_one_is_taken(local: Local) -> None:
    samples = [(0.0, T0, 0.0)] * 3 + [(0.0, T0 + timedelta(seconds=9.6), 0.0)] * 3
    samples += [(0.0, T0 - timedelta(seconds=30), 0.0)] * 3
    clock = DatabaseClock(server(local, iter(samples)))
    clock.measure()
    local.now += 10
    assert clock.now() == T0 + timedelta(seconds=10)
    clock.measure()  # the server says 0.4 s less than the estimate: smoothed over
    assert clock.now() == T0 + timedelta(seconds=10)
    local.now += 1
    assert clock.now() == T0 + timedelta(seconds=10.6)  # and on from the new sample
    clock.measure()  # 40 s behind: a real change of the server's clock, taken
    assert clock.now() == T0 - timedelta(seconds=30)


def test_the_resync_thread_rides_out_an_outage_on_the_last_offset(
    local: Local, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_clock, "RESYNC_EVERY", 0.01)
    failures = threading.Semaphore(0)

    def unreachable() -> datetime:
        failures.release()
        raise DatabaseUnavailable("the server cannot be reached")

    clock = DatabaseClock(server(local, iter([(0.0, T0, 0.0)] * 3)))
    clock.measure()
    clock._read_server = unreachable
    clock.start()
    try:
        for _ in range(3):
            assert failures.acquire(timeout=10), "the resync thread stopped trying"
        local.now += 7
        assert clock.now() == T0 + timedelta(seconds=7)
    finally:
        clock.stop()
