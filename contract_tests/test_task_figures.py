"""Runs, run time and pickup latency per queue, task and minute (ADR 075): stored with the workers' reports in
the statement that stores their throughput, read through the operations port, pruned after a week; the same on
every engine and runtime."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from alkstore import (
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    ManualClock,
    StopToken,
    Store,
    TaskFiguresInfo,
    Tasks,
    Worker,
)
from alkstore.engine import TaskFiguresRecord, ThroughputRecord, WorkerRecord
from alkstore.rules._operations import hour_of, minute_of, task_figures_roll_up_before
from tests.support import PATIENCE

from ._profiles import sized
from ._runners import wait_until
from ._runtimes import task_call, worker_of

MINUTE = timedelta(minutes=1)


def report(store: Store, worker_id: str, *figures: TaskFiguresRecord) -> None:
    """A report of worker ``worker_id`` at the store's now, with ``figures`` (and their queues' counts)."""
    now = store.clock.now()
    sums: dict[str, tuple[int, int]] = {}
    for f in figures:  # a report's counts are one per queue, as a worker's are
        done, failed = sums.get(f.queue, (0, 0))
        sums[f.queue] = (done + f.done, failed + f.failed)
    minute = minute_of(now)
    counts = [ThroughputRecord(queue, minute, *sums[queue]) for queue in sorted(sums)]
    store.engine.record_worker(WorkerRecord(worker_id, "web-1", 4242, ("emails",), 4, now, now), counts, figures)


def test_reports_add_up_per_queue_task_and_minute_and_a_week_old_minute_is_purged(
    store: Store, clock: ManualClock
) -> None:
    first = minute_of(clock.now())
    report(store, "w-1", TaskFiguresRecord("emails", "send", first, 3, 1, 120.5, 40.0))
    report(
        store,
        "w-2",
        TaskFiguresRecord("emails", "send", first, 2, 0, 10.0, 5.5),
        TaskFiguresRecord("emails", "", first, 1, 0, 1.0, 0.0),
        TaskFiguresRecord("reports", "<b>x</b>", first, 0, 4, 8.0, 2.0),
    )
    clock.advance(60)
    second = first + MINUTE
    report(store, "w-1", TaskFiguresRecord("emails", "send", second, 7, 0, 70.0, 7.0))

    assert store.engine.task_figures(first) == [
        TaskFiguresRecord("emails", "", first, 1, 0, 1.0, 0.0),
        TaskFiguresRecord("emails", "send", first, 5, 1, 130.5, 45.5),
        TaskFiguresRecord("reports", "<b>x</b>", first, 0, 4, 8.0, 2.0),
        TaskFiguresRecord("emails", "send", second, 7, 0, 70.0, 7.0),
    ]
    assert store.engine.task_figures(second) == [TaskFiguresRecord("emails", "send", second, 7, 0, 70.0, 7.0)]
    assert store.engine.task_figures(first, "reports") == [
        TaskFiguresRecord("reports", "<b>x</b>", first, 0, 4, 8.0, 2.0)
    ]
    assert store.throughput() != [], "the counts rode on the same reports"

    assert store.engine.purge_task_figures(second) == 3
    assert store.engine.task_figures(first) == [TaskFiguresRecord("emails", "send", second, 7, 0, 70.0, 7.0)]
    assert store.engine.purge_task_figures(second) == 0


def test_a_worker_stores_each_tasks_runs_with_their_pickup_latency(store: Store, clock: ManualClock) -> None:
    tasks = Tasks()
    quick = tasks.task("quick", queue="work")(lambda: None)
    failing = tasks.task("failing", queue="work", max_attempts=1)(lambda: 1 / 0)
    task_call(quick.enqueue, store)
    task_call(failing.enqueue, store)
    enqueued = clock.now()
    clock.advance(30)  # each job waits 30 s before a worker picks it up
    stop = StopToken()
    worker: Worker = worker_of(store, tasks, poll_interval=0.02, worker_id="figuring")
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: worker.stats.processed == 2, "the two runs")
    finally:
        stop.cancel()
        thread.join(PATIENCE)
    assert not thread.is_alive()
    figures = {f.task: f for f in store.engine.task_figures(minute_of(enqueued))}
    assert sorted(figures) == ["failing", "quick"]
    assert (figures["quick"].done, figures["quick"].failed) == (1, 0)
    assert (figures["failing"].done, figures["failing"].failed) == (0, 1)
    for figure in figures.values():
        assert figure.latency_ms == 30_000.0, "claimed 30 s after its run_at, by the store's clock"
        assert figure.run_ms >= 0.0


def test_minutes_older_than_a_day_roll_up_into_their_hours_first_minute(store: Store, clock: ManualClock) -> None:
    hour = hour_of(clock.now()) + timedelta(hours=1)
    clock.set(hour)
    report(store, "w", TaskFiguresRecord("emails", "send", hour, 1, 0, 10.0, 1.0))
    clock.set(hour + 5 * MINUTE)
    report(store, "w", TaskFiguresRecord("emails", "send", hour + 5 * MINUTE, 2, 1, 20.0, 2.0))
    clock.set(hour + 59 * MINUTE)
    report(
        store,
        "w",
        TaskFiguresRecord("emails", "send", hour + 59 * MINUTE, 0, 3, 30.0, 3.0),
        TaskFiguresRecord("emails", "other", hour + 59 * MINUTE, 4, 0, 40.0, 4.0),
    )
    clock.set(hour + 61 * MINUTE)
    later = TaskFiguresRecord("emails", "send", hour + 61 * MINUTE, 5, 0, 50.0, 5.0)
    report(store, "w", later)
    clock.set(hour + timedelta(days=1, hours=1, minutes=30))
    before = task_figures_roll_up_before(clock.now())
    assert before == hour + timedelta(hours=1), "a day's minutes stay whole, back to the start of their hour"

    assert store.engine.roll_up_task_figures(before) == 3
    assert store.engine.task_figures(hour) == [
        TaskFiguresRecord("emails", "other", hour, 4, 0, 40.0, 4.0),
        TaskFiguresRecord("emails", "send", hour, 3, 4, 60.0, 6.0),
        later,
    ]
    assert store.engine.roll_up_task_figures(before) == 0, "an hour's row is never folded again"


def test_the_store_reads_a_weeks_figures_of_every_queue_or_one(store: Store, clock: ManualClock) -> None:
    now = minute_of(clock.now())
    report(store, "w", TaskFiguresRecord("emails", "send", now, 1, 0, 10.0, 1.0))
    report(store, "w", TaskFiguresRecord("reports", "", now, 0, 1, 5.0, 0.5))
    clock.advance(7 * 24 * 3600 - 60)  # the minute is now the week's first
    assert [f.queue for f in store.task_figures(minutes=10_080)] == ["emails", "reports"]
    assert store.task_figures(minutes=10_080, queue="reports") == [TaskFiguresInfo("reports", "", now, 0, 1, 5.0, 0.5)]
    assert store.task_figures(minutes=10_079) == [], "the last minutes alone"
    for bad, error in ((0, InvalidOptions), (10_081, InvalidOptions), ("60", InvalidArgument)):
        with pytest.raises(error):
            store.task_figures(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        store.task_figures(queue="no such\x00queue")


@sized(0.3, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=6 * 60 - 1),  # minutes after the start
            st.sampled_from(["a", "b"]),
            st.sampled_from(["", "t", "<u>"]),
            st.integers(min_value=0, max_value=5),
            st.integers(min_value=0, max_value=5),
        ),
        max_size=12,
        unique_by=lambda row: row[:3],
    ),
    cut=st.integers(min_value=0, max_value=6),
)
def test_a_roll_up_keeps_every_sum_of_each_hour_and_leaves_the_later_minutes_alone(
    store: Store, clock: ManualClock, rows: list[tuple[int, str, str, int, int]], cut: int
) -> None:
    start = hour_of(clock.now())
    store.engine.purge_task_figures(start + timedelta(days=400))  # what earlier examples stored
    figures = [TaskFiguresRecord(q, t, start + m * MINUTE, d, f, float(d + f), float(m)) for m, q, t, d, f in rows]
    now = store.clock.now()
    store.engine.record_worker(WorkerRecord("w", "h", 1, ("a",), 1, now, now), (), figures)
    before = start + timedelta(hours=cut)

    def model(figure: TaskFiguresRecord) -> tuple[datetime, str, str]:
        return (hour_of(figure.minute) if figure.minute < before else figure.minute, figure.queue, figure.task)

    expected: dict[tuple[datetime, str, str], list[float]] = {}
    for figure in figures:
        sums = expected.setdefault(model(figure), [0, 0, 0.0, 0.0])
        for index, value in enumerate((figure.done, figure.failed, figure.run_ms, figure.latency_ms)):
            sums[index] += value
    folded = sum(1 for figure in figures if figure.minute < before and figure.minute != hour_of(figure.minute))

    assert store.engine.roll_up_task_figures(before) == folded
    assert store.engine.task_figures(start) == [
        TaskFiguresRecord(q, t, minute, int(sums[0]), int(sums[1]), sums[2], sums[3])
        for (minute, q, t), sums in sorted(expected.items())
    ]
