"""Two ``alkstore run-schedules`` processes on one schema: SIGKILL the leader, the standby takes over.

This test is wall-clock by nature (real processes, the system clock, a 10 s lease), so it
asserts what must hold however slow the machine is — no boundary fired twice, none lost
between the first and the last fired, the standby leads after the kill — and bounds the
takeover only generously.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

import alkstore
from tests._proc import ALKSTORE, LiveProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE_TTL_S = 10.0  # the scheduler lease (docs/design.md, ADR 006)
SLICE_S = 1.0  # the runner's sleep slice
STANDBY_RETRY_S = 1.0  # how often a standby asks for the lease
MARGIN_S = 8.0  # generous: process start-up, a loaded machine
INTERVAL = timedelta(seconds=1)

ACQUIRED = re.compile(r"scheduler leadership acquired by (\S+)")
STANDING_BY = re.compile(r"standing by")
FIRED = re.compile(r"fired 'pulse' boundary (.+?) as job (\d+) on 'pulses'")


class Runner(LiveProcess):
    """One ``alkstore run-schedules`` process; its stderr (the log) is collected line by line."""

    def __init__(self, name: str, dsn: str, schema: str) -> None:
        self.name = name
        super().__init__([ALKSTORE, "run-schedules", "--url", dsn, "--schema", schema])

    def wait_for_log(self, predicate: Callable[[str], object], timeout: float = 60.0) -> str:
        """The next log line satisfying ``predicate`` (waiting, generously, for the process)."""
        return self.wait_log(predicate, timeout)

    def fired(self) -> dict[datetime, int]:
        """The boundaries this process logged as fired, with their job ids."""
        return {datetime.fromisoformat(m.group(1)): int(m.group(2)) for m in map(FIRED.search, list(self.stderr)) if m}


@pytest.fixture
def store(pg_dsn: str, pg_schema: str) -> Iterator[alkstore.Store]:
    with alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=2) as opened:
        yield opened


def owner_pid(owner: str) -> int:
    """The pid in a runner's owner token (``host:pid:nanoseconds:random``)."""
    return int(owner.split(":")[-3])


def test_the_standby_process_takes_over_a_killed_leader_and_no_boundary_is_fired_twice_or_lost(
    store: alkstore.Store, pg_dsn: str, pg_schema: str
) -> None:
    store.schedule("pulse", "@every 1s", "pulses", {"beat": True})
    first = Runner("first", pg_dsn, pg_schema)
    second: Runner | None = None
    try:
        owner = ACQUIRED.search(first.wait_for_log(ACQUIRED.search))
        assert owner is not None
        assert owner_pid(owner.group(1)) == first.proc.pid  # the lock's owner names the leader's process
        second = Runner("second", pg_dsn, pg_schema)
        second.wait_for_log(STANDING_BY.search)
        for _ in range(3):
            first.wait_for_log(FIRED.search)

        first.proc.kill()  # SIGKILL: no release, no goodbye; the lease must lapse
        killed = time.monotonic()
        assert first.proc.wait(timeout=30) == -9
        taken = ACQUIRED.search(second.wait_for_log(ACQUIRED.search, timeout=60))
        takeover_s = time.monotonic() - killed
        assert taken is not None
        assert owner_pid(taken.group(1)) == second.proc.pid
        assert taken.group(1) != owner.group(1)
        assert takeover_s <= LEASE_TTL_S + SLICE_S + STANDBY_RETRY_S + MARGIN_S, takeover_s

        # Let the new leader run live ticks past its catch-up, then stop it cleanly.
        resumed = datetime.now(UTC)
        second.wait_for_log(
            lambda line: bool((m := FIRED.search(line)) and datetime.fromisoformat(m.group(1)) > resumed)
        )
        second.wait_for_log(
            lambda line: bool((m := FIRED.search(line)) and datetime.fromisoformat(m.group(1)) > resumed)
        )
        second.proc.terminate()
        assert second.proc.wait(timeout=60) == 0, "".join(second.stderr)
    finally:
        first.close()
        if second is not None:
            second.close()

    jobs = []
    pulses = store.queue("pulses")
    while (job := pulses.claim("checker")) is not None:
        jobs.append(job)
        job.ack()
    boundaries = sorted(job.boundary for job in jobs if job.boundary is not None)
    assert all(job.schedule == "pulse" for job in jobs)
    assert len(boundaries) == len(jobs)
    assert len(set(boundaries)) == len(boundaries), "a boundary was fired twice"
    expected = [boundaries[0] + k * INTERVAL for k in range(len(boundaries))]
    assert boundaries == expected, "a boundary between the first and the last fired was lost"

    by_first, by_second = first.fired(), second.fired()
    assert by_first
    assert by_second
    assert not set(by_first) & set(by_second)
    assert max(by_first) < min(by_second)  # the standby caught up exactly where the leader stopped
    assert set(by_first) | set(by_second) <= set(boundaries)
    assert max(by_second) == boundaries[-1]
