"""Runs done and failed per queue and minute (ADR 048): stored with the workers' reports, read by
``Store.throughput``, pruned after a day; the same on every engine."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from alkstore import InvalidArgument, InvalidOptions, ManualClock, StopToken, Store, Tasks, ThroughputInfo, Worker
from alkstore.engine import ThroughputRecord, WorkerRecord
from alkstore.rules._operations import minute_of
from tests.support import PATIENCE

from ._engines import T0
from ._profiles import sized
from ._runners import step, wait_until
from ._runtimes import task_call, worker_of

MINUTE = timedelta(minutes=1)


def report(store: Store, worker_id: str, *counts: ThroughputRecord) -> None:
    """A report of worker ``worker_id`` at the store's now, with ``counts``."""
    now = store.clock.now()
    store.engine.record_worker(WorkerRecord(worker_id, "web-1", 4242, ("emails",), 4, now, now), counts)


def test_reports_add_up_per_queue_and_minute_and_the_store_reads_the_last_minutes(
    store: Store, clock: ManualClock
) -> None:
    first = minute_of(clock.now())
    report(store, "w-1", ThroughputRecord("emails", first, 3, 1))
    report(store, "w-2", ThroughputRecord("emails", first, 2, 0), ThroughputRecord("reports", first, 0, 4))
    report(store, "w-1")  # an idle report adds nothing
    clock.advance(60)
    second = first + MINUTE
    report(store, "w-1", ThroughputRecord("emails", second, 7, 0))

    assert store.throughput() == [
        ThroughputInfo("emails", first, 5, 1),
        ThroughputInfo("reports", first, 0, 4),
        ThroughputInfo("emails", second, 7, 0),
    ]
    assert store.throughput(minutes=1) == [ThroughputInfo("emails", second, 7, 0)], "the current minute alone"
    assert [info.id for info in store.workers()] == ["w-1", "w-2"], "the counts rode on the reports"

    clock.advance(59 * 60)  # the first minute is now the 61st last
    assert store.throughput() == [ThroughputInfo("emails", second, 7, 0)]
    assert store.throughput(minutes=61)[0] == ThroughputInfo("emails", first, 5, 1)

    assert store.engine.purge_throughput(second) == 2
    assert store.engine.throughput(first) == [ThroughputRecord("emails", second, 7, 0)]
    assert store.engine.purge_throughput(second) == 0
    for bad, error in ((0, InvalidOptions), (1441, InvalidOptions), ("60", InvalidArgument), (True, InvalidArgument)):
        with pytest.raises(error):
            store.throughput(bad)  # type: ignore[arg-type]


@sized(0.3, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reports=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=3 * 3600),  # seconds after the start
            st.sampled_from(["a", "b", "c"]),
            st.integers(min_value=0, max_value=5),
            st.integers(min_value=0, max_value=5),
        ),
        max_size=12,
    )
)
def test_what_the_workers_report_is_read_back_summed_per_queue_and_minute(
    store: Store, clock: ManualClock, reports: list[tuple[int, str, int, int]]
) -> None:
    start = clock.now()
    store.engine.purge_throughput(start + timedelta(days=400))  # what earlier examples stored
    model: Counter[tuple[datetime, str, str]] = Counter()
    for seconds, queue, done, failed in sorted(reports):
        clock.set(start + timedelta(seconds=seconds))
        minute = minute_of(clock.now())
        report(store, "w", ThroughputRecord(queue, minute, done, failed))
        model[(minute, queue, "done")] += done
        model[(minute, queue, "failed")] += failed
    clock.set(start + timedelta(hours=3))

    expected = [
        ThroughputInfo(queue, minute, model[(minute, queue, "done")], model[(minute, queue, "failed")])
        for minute, queue in sorted({(minute, queue) for minute, queue, _ in model})
    ]
    assert store.throughput(minutes=240) == expected
    last_hour = minute_of(clock.now()) - 59 * MINUTE
    assert store.throughput() == [info for info in expected if info.minute >= last_hour]


@pytest.fixture
def stop() -> Iterator[StopToken]:
    token = StopToken()
    yield token
    token.cancel()


def test_a_worker_stores_its_runs_done_and_failed_per_queue_with_its_reports(
    store: Store, clock: ManualClock, stop: StopToken
) -> None:
    tasks = Tasks()
    quick = tasks.task("quick", queue="work")(lambda: None)
    failing = tasks.task("failing", queue="other", max_attempts=1)(lambda: 1 / 0)
    task_call(quick.enqueue, store)
    task_call(quick.enqueue, store)
    task_call(failing.enqueue, store)
    worker: Worker = worker_of(store, tasks, poll_interval=0.02, worker_id="counting")
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    wait_until(lambda: worker.stats.processed == 3, "the three runs")
    clock.wait_for_sleepers(1, timeout=PATIENCE)  # the heartbeat thread
    minute = minute_of(clock.now())
    for _ in range(5):  # one report interval
        step(clock, sleepers=1)
    wait_until(lambda: store.throughput() != [], "the next report")
    assert store.throughput() == [ThroughputInfo("other", minute, 0, 1), ThroughputInfo("work", minute, 2, 0)]

    task_call(quick.enqueue, store)
    wait_until(lambda: worker.stats.processed == 4, "the fourth run")
    stop.cancel()
    thread.join(PATIENCE)
    assert not thread.is_alive()
    assert store.throughput() == [ThroughputInfo("other", minute, 0, 1), ThroughputInfo("work", minute, 3, 0)], (
        "a stopping worker stores the runs since its last report"
    )
    assert T0 <= clock.now() < T0 + MINUTE
