"""Two ``alkstore run-schedules`` processes on one SQLite file: the leader SIGSTOPped past its lease, the
standby takes over, and the leader, continued, fires no boundary the other fired.

Wall-clock by nature (real processes, the system clock, a 10 s lease): the test asserts what must
hold however slow the machine is (no boundary fired twice, none lost between the first and the last)
and bounds its waits only generously.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import alkstore
from tests._proc import ALKSTORE, LiveProcess

pytestmark = [pytest.mark.slow]

ACQUIRED = re.compile(r"scheduler leadership acquired by (\S+)")
STANDING_BY = re.compile(r"standing by")
FIRED = re.compile(r"fired 'pulse' boundary (.+?) as job (\d+) on 'pulses'")
INTERVAL = timedelta(seconds=1)


class Runner(LiveProcess):
    def __init__(self, url: str) -> None:
        super().__init__([ALKSTORE, "run-schedules", "--url", url])

    def wait_for_log(self, predicate: Callable[[str], object], timeout: float = 90.0) -> str:
        return self.wait_log(predicate, timeout)

    def fired(self) -> set[datetime]:
        return {datetime.fromisoformat(m.group(1)) for m in map(FIRED.search, list(self.stderr)) if m}


def test_a_leader_stopped_past_its_lease_is_replaced_and_no_boundary_is_fired_twice_or_lost(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with alkstore.open(url) as store:
        store.schedule("pulse", "@every 1s", "pulses", {"beat": True})
    first = Runner(url)
    second: Runner | None = None
    try:
        first.wait_for_log(ACQUIRED.search)
        second = Runner(url)
        second.wait_for_log(STANDING_BY.search)
        for _ in range(3):
            first.wait_for_log(FIRED.search)
        first.proc.send_signal(signal.SIGSTOP)
        second.wait_for_log(ACQUIRED.search)
        resumed = datetime.now(UTC)

        def live(line: str) -> bool:
            return bool((m := FIRED.search(line)) and datetime.fromisoformat(m.group(1)) > resumed)

        second.wait_for_log(live)
        first.proc.send_signal(signal.SIGCONT)
        for _ in range(4):
            second.wait_for_log(live)
        for runner in (first, second):
            runner.proc.terminate()
            assert runner.proc.wait(timeout=60) == 0, "".join(runner.stderr)[-2000:]
    finally:
        first.proc.send_signal(signal.SIGCONT)
        first.close()
        if second is not None:
            second.close()

    with alkstore.open(url) as store:
        jobs = []
        pulses = store.queue("pulses")
        while (job := pulses.claim("checker")) is not None:
            jobs.append(job)
            job.ack()
    boundaries = sorted(job.boundary for job in jobs if job.boundary is not None)
    assert len(boundaries) == len(jobs)
    assert len(set(boundaries)) == len(boundaries), "a boundary was fired twice"
    assert boundaries == [boundaries[0] + k * INTERVAL for k in range(len(boundaries))], "a boundary was lost"
    by_first, by_second = first.fired(), second.fired()
    assert by_first
    assert by_second
    assert not by_first & by_second
