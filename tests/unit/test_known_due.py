"""When an idle worker may wait on its last read of the soonest due instant instead of a new one (ADR 066)."""

from __future__ import annotations

from datetime import timedelta

from alkstore.worker._parts import KnownDue, WorkerStats, put_back
from tests.support import MIDNIGHT

RECHECK = 5.0


def test_a_read_holds_while_young_its_instant_ahead_and_nothing_put_back() -> None:
    read = KnownDue(MIDNIGHT + timedelta(seconds=10), read=100.0, put_back=2)
    assert read.holds(MIDNIGHT, 104.9, 2, RECHECK)
    assert not read.holds(MIDNIGHT, 105.0, 2, RECHECK), "older than the recheck"
    assert not read.holds(MIDNIGHT + timedelta(seconds=10), 101.0, 2, RECHECK), "its instant has come"
    assert not read.holds(MIDNIGHT, 101.0, 3, RECHECK), "the worker put a job back since"


def test_a_read_that_found_nothing_holds_until_the_recheck() -> None:
    read = KnownDue(None, read=0.0, put_back=0)
    assert read.holds(MIDNIGHT + timedelta(days=1), 4.0, 0, RECHECK)
    assert not read.holds(MIDNIGHT, 5.0, 0, RECHECK)


def test_what_counts_as_put_back_is_what_leaves_a_job_to_wait() -> None:
    stats = WorkerStats(succeeded=7, retried=1, buried=4, timed_out=2, lost=5, released=3, cancelled=6, slept=8)
    assert put_back(stats) == 1 + 2 + 3 + 8  # acked, buried, lost and cancelled jobs leave nothing to claim
