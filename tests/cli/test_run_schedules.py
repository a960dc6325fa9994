"""``alkstore run-schedules``: lead, or stand by and take over; stop cleanly on SIGINT/SIGTERM."""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest

import alkstore
from alkstore.adapters.cli import _operate
from tests._proc import ALKSTORE, LiveProcess

ACQUIRED = re.compile(r"scheduler leadership acquired by (\S+)")
RELEASED = re.compile(r"scheduler leadership released by (\S+)")


def wait_for_record(
    caplog: pytest.LogCaptureFixture, predicate: Callable[[logging.LogRecord], bool], timeout: float = 30.0
) -> logging.LogRecord:
    """Wait (wall time, generously) for a thread to log a record matching ``predicate``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for record in list(caplog.records):
            if predicate(record):
                return record
        time.sleep(0.01)
    raise AssertionError(f"no such record after {timeout} s: {[r.getMessage() for r in caplog.records]}")


def acquisitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [m.group(1) for r in list(caplog.records) if (m := ACQUIRED.search(r.getMessage()))]


class Runner:
    """``_operate._lead`` in a thread, with its own stop token."""

    def __init__(self, store: alkstore.Store) -> None:
        self.stop = alkstore.StopToken()
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=_operate._lead, args=(store, self.stop, self.failures), daemon=True)
        self.thread.start()

    def halt(self) -> None:
        self.stop.cancel()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive()
        assert self.failures == []


@pytest.fixture
def store() -> Iterator[alkstore.Store]:
    with alkstore.open("memory://") as opened:
        yield opened


def test_a_standby_logs_once_and_takes_over_when_the_leader_stops(
    store: alkstore.Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore")
    leader = Runner(store)
    wait_for_record(caplog, lambda r: bool(ACQUIRED.search(r.getMessage())))
    standby = Runner(store)
    try:
        wait_for_record(caplog, lambda r: r.name == "alkstore.scheduler" and "standing by" in r.getMessage())
        time.sleep(2.5)  # the standby asks again every second; it must not log every refusal
        standing_by = [r for r in caplog.records if "standing by" in r.getMessage()]
        assert len(standing_by) == 1
        assert standing_by[0].levelno == logging.INFO
        assert "another runner holds the scheduler lease" in standing_by[0].getMessage()
        assert len(acquisitions(caplog)) == 1

        leader.halt()
        wait_for_record(caplog, lambda r: len(acquisitions(caplog)) == 2)
        first, second = acquisitions(caplog)
        assert first != second
        released = [m.group(1) for r in caplog.records if (m := RELEASED.search(r.getMessage()))]
        assert released == [first]
    finally:
        leader.halt()
        standby.halt()


def test_a_leader_that_loses_its_lease_logs_a_warning_stands_by_and_leads_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore")
    clock = alkstore.ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    with alkstore.open("memory://", clock=clock) as store:
        runner = Runner(store)
        try:
            wait_for_record(caplog, lambda r: bool(ACQUIRED.search(r.getMessage())))
            clock.wait_for_sleepers(1)
            clock.advance(11)  # past the 10 s lease, with no renewal in between: the lease lapses
            lost = wait_for_record(caplog, lambda r: r.name == "alkstore.scheduler" and "standing by" in r.getMessage())
            assert lost.levelno == logging.WARNING
            assert "was lost" in lost.getMessage()
            wait_for_record(caplog, lambda r: len(acquisitions(caplog)) == 2)
            first, second = acquisitions(caplog)
            assert first != second
        finally:
            runner.halt()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda signum: signum.name)
def test_run_schedules_stops_cleanly_on_a_signal_and_releases_its_lease(signum: signal.Signals) -> None:
    with LiveProcess([ALKSTORE, "run-schedules", "--url", "memory://"]) as runner:
        line = runner.wait_for(lambda stream, text: bool(ACQUIRED.search(text)), timeout=60)
        runner.proc.send_signal(signum)
        code = runner.finish(timeout=60)

    assert code == 0, runner.stderr
    owner = ACQUIRED.search(line)
    assert owner is not None
    log = "".join(runner.stderr)
    assert f"stopping on {signum.name}" in log
    assert f"scheduler leadership released by {owner.group(1)}" in log
    assert log.rstrip().endswith("alkstore.cli: stopped")
    assert runner.stdout == []
    assert all(" INFO " in text or " WARNING " in text for text in runner.stderr)  # one line per event
