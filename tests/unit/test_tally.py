"""A worker's ``Tally`` and reports: its stats, and the runs done and failed per queue its reports store (ADR 048)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from alkstore import ManualClock
from alkstore.engine import ThroughputRecord, WorkerRecord
from alkstore.errors import DatabaseUnavailable
from alkstore.worker._parts import AckBuffer, Tally, WorkerOptions
from alkstore.worker._reporting import Reporter
from tests.support import T0


def test_runs_count_per_queue_as_done_or_failed_until_taken_and_a_failed_store_puts_them_back() -> None:
    tally = Tally()
    tally.add("mail", succeeded=1)
    tally.add("mail", retried=1)
    tally.add("mail", buried=1)
    tally.add("reports", timed_out=1)
    tally.acked([(_job("mail"), 1.0), (_job("reports"), 1.0), (_job("mail"), 1.0)], lost=1)
    tally.add("mail", lost=1)  # neither done nor failed
    tally.add(cancelled=1)

    stats = tally.stats
    assert (stats.succeeded, stats.retried, stats.buried, stats.timed_out) == (4, 1, 1, 1)
    assert (stats.lost, stats.cancelled) == (2, 1)
    taken = tally.take_counts()
    assert taken == {"mail": (3, 2), "reports": (1, 1)}
    assert tally.take_counts() == {}, "taken once"

    tally.add("reports", succeeded=2)
    tally.put_back_counts(taken)  # a report that could not be stored
    assert tally.take_counts() == {"mail": (3, 2), "reports": (3, 1)}


def _job(queue: str, task: str | None = None, waited: float = 0.0) -> Any:
    """A claimed job as the tally reads it: claimed ``waited`` seconds after its ``run_at``."""
    return SimpleNamespace(queue=queue, task=task, run_at=T0, _claimed_at=T0 + timedelta(seconds=waited))


def test_runs_sum_per_queue_and_task_with_their_run_time_and_pickup_latency() -> None:
    tally = Tally()
    tally.add("mail", _job("mail", "send", 2.0), 30.0, succeeded=1)
    tally.add("mail", _job("mail", "send", 0.5), 10.0, retried=1)
    tally.acked([(_job("mail", None, 1.0), 5.0)], lost=0)
    tally.add("mail", _job("mail", "send", 9.0), 1.0, lost=1)  # neither done nor failed: no figure
    taken = tally.take_figures()
    assert taken == {("mail", "send"): [1, 1, 40.0, 2500.0], ("mail", ""): [1, 0, 5.0, 1000.0]}
    assert tally.take_figures() == {}, "taken once"
    tally.put_back_figures(taken)
    assert tally.take_figures() == taken


class _Failing:
    """An engine whose ``record_worker`` fails while ``down``, and keeps what it was given otherwise."""

    def __init__(self) -> None:
        self.down = True
        self.stored: list[tuple[str, datetime, int, int]] = []
        self.figures: list[Any] = []

    def record_worker(
        self, worker: WorkerRecord, throughput: Sequence[ThroughputRecord] = (), figures: Sequence[Any] = ()
    ) -> None:
        if self.down:
            raise DatabaseUnavailable("the database is away")
        self.stored += [(count.queue, count.minute, count.done, count.failed) for count in throughput]
        self.figures += [(f.queue, f.task, f.minute, f.done, f.failed, f.run_ms, f.latency_ms) for f in figures]

    def forget_workers(self, seen_before: datetime) -> int:
        return 0


def test_a_report_that_cannot_be_stored_keeps_its_counts_for_the_next() -> None:
    clock = ManualClock(T0)
    engine = _Failing()
    kernel = SimpleNamespace(clock=clock, offered=lambda: engine)
    runs = SimpleNamespace(running=lambda: 0)
    options = WorkerOptions.check(
        None,
        handlers={"mail": lambda payload, job: None},
        queues=None,
        concurrency=1,
        grace=1,
        schedules=False,
        worker_id="w",
        poll_interval=1,
        ack_delay=0,
        prefetch=0,
        dead_retention=None,
        runtime="sync",
    )
    tally = Tally()
    reporter = Reporter(cast(Any, kernel), options, cast(Any, runs), tally)
    tally.add("mail", _job("mail", "send", 1.0), 4.0, succeeded=2)
    reporter.report()  # logged, not raised
    assert (engine.stored, engine.figures) == ([], [])
    tally.add("mail", _job("mail", "send", 2.0), 6.0, retried=1)
    clock.advance(61)
    engine.down = False
    reporter.report()
    minute = T0.replace(second=0, microsecond=0) + timedelta(minutes=1)
    assert engine.stored == [("mail", minute, 2, 1)]
    assert engine.figures == [("mail", "send", minute, 2, 1, 10.0, 3000.0)], "the task's figures were put back too"


def test_a_closed_ack_buffer_hands_over_what_it_held_and_holds_no_more() -> None:
    acks = AckBuffer()
    assert acks.push("job 1", 1.0, "held 1")
    held = acks.close()
    assert held == [("job 1", 1.0, "held 1")]
    assert not acks.push("job 2", 2.0, "held 2"), "a stopping worker's run writes its own ack"
    assert (bool(acks), acks.take()) == (False, [])
