"""The overview's throughput chart: rates from the workers' counters, and the chart the page draws."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from anyio.from_thread import start_blocking_portal
from starlette.testclient import TestClient

from alkstore import AsyncStore, ManualClock, WorkerInfo, open_async
from alkstore.adapters.web import create_app
from alkstore.adapters.web._throughput import Throughput
from alkstore.engine import WorkerRecord

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def worker(name: str, processed: int, failed: int = 0, started: datetime = T0 - timedelta(hours=1)) -> WorkerInfo:
    return WorkerRecord(name, "host", 1, ("q",), 4, started, T0, processed=processed, failed=failed)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_rates_count_each_workers_increase_a_restart_from_zero_and_nothing_for_one_gone() -> None:
    throughput = Throughput()
    throughput.observe(at(0), [worker("a", 100, 1), worker("b", 50)])
    throughput.observe(at(2), [worker("a", 120, 3), worker("b", 60)])  # +20 +10 done, +2 failed in 2 s
    throughput.observe(at(4), [worker("a", 4, started=at(3)), worker("c", 900)])  # a restarted: 4 since; c is old
    rates = throughput.rates()
    assert [(r.done, r.failed) for r in rates] == [(15.0, 1.0), (2.0, 0.0)]
    assert (rates[0].start, rates[1].end) == (at(0), at(4))


def test_samples_closer_than_the_spacing_are_one_sample() -> None:
    throughput = Throughput(every=timedelta(seconds=1))
    throughput.observe(at(0), [worker("a", 0)])
    throughput.observe(at(0.5), [worker("a", 1000)])  # a second tab's poll: ignored
    throughput.observe(at(1), [worker("a", 10)])
    assert [r.done for r in throughput.rates()] == [10.0]
    chart = throughput.chart(width=100, height=50)
    assert chart.done == "100.0,0.0"  # the only rate, at the right edge and the top of the scale
    assert chart.top == 10.0


@pytest.fixture
def manual() -> Iterator[tuple[AsyncStore, ManualClock, TestClient]]:
    clock = ManualClock(T0)
    with start_blocking_portal() as portal:
        store = portal.call(lambda: open_async("memory://", clock=clock))
        client = TestClient(create_app(store), base_url="http://127.0.0.1")
        client.portal = portal
        try:
            yield store, clock, client
        finally:
            portal.call(store.close)


def test_the_overview_charts_what_the_workers_did_between_two_refreshes(
    manual: tuple[AsyncStore, ManualClock, TestClient],
) -> None:
    store, clock, client = manual
    record = store.engine.record_worker
    client.portal.call(record, worker("w", 100))  # type: ignore[union-attr]
    first = client.get("/fragments/overview").text
    assert "<svg" not in first
    assert "appear here as this page refreshes" in first
    clock.advance(timedelta(seconds=2))
    seen = WorkerRecord("w", "host", 1, ("q",), 4, T0 - timedelta(hours=1), clock.now(), processed=110, failed=1)
    client.portal.call(record, seen)  # type: ignore[union-attr]
    page = client.get("/").text
    assert "Now 5.0 done/s · 0.5 failed/s" in re.sub(r"<[^>]+>", "", page)
    (done,) = re.findall(r'<polyline class="done" fill="none" points="([^"]+)"/>', page)
    assert done == "600.0,0.0"
