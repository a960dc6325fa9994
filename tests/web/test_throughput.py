"""The overview's throughput chart: the last hour per minute, from the counts the workers stored (ADR 048)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from anyio.from_thread import start_blocking_portal
from starlette.testclient import TestClient

from alkstore import ManualClock, ThroughputInfo
from alkstore.adapters.web import create_app
from alkstore.adapters.web._throughput import Minute, chart_of, per_minute
from alkstore.adapters.web._views import instant
from alkstore.engine import ThroughputRecord, WorkerRecord
from alkstore.testing import Scratch, open_scratch_async

from .conftest import Served

T0 = datetime(2026, 1, 5, 9, 0, 40, tzinfo=UTC)
NOW = T0.replace(second=0)  # the current minute's start
_MINUTE = re.compile(r'<rect class="minute"[^>]* data-minute="([^"]+)" data-done="(\d+)" data-failed="(\d+)">')


def minutes_ago(count: int) -> datetime:
    return NOW - timedelta(minutes=count)


def test_the_chart_sums_the_queues_of_each_minute_over_the_last_complete_hour_leaving_out_the_current() -> None:
    counts = [
        ThroughputInfo("a", minutes_ago(61), 100, 100),  # the 61st complete minute back: not drawn
        ThroughputInfo("a", minutes_ago(60), 3, 0),
        ThroughputInfo("a", minutes_ago(2), 4, 1),
        ThroughputInfo("b", minutes_ago(2), 6, 0),
        ThroughputInfo("b", minutes_ago(1), 2, 0),
        ThroughputInfo("b", NOW, 1, 0),  # still filling: not drawn, so the line never dips at its end
    ]
    minutes = per_minute(counts, T0)
    assert len(minutes) == 60
    assert minutes[0] == Minute(minutes_ago(60), 3, 0)
    assert minutes[-2:] == [Minute(minutes_ago(2), 10, 1), Minute(minutes_ago(1), 2, 0)]
    assert sum(minute.done for minute in minutes[1:-2]) == sum(minute.failed for minute in minutes[1:-2]) == 0

    chart = chart_of(minutes, width=590, height=100)
    assert (chart.top, chart.total_done, chart.total_failed, chart.latest) == (10, 15, 1, minutes[-1])
    assert chart.end == NOW
    done = chart.done.split()
    assert (done[0], done[-2], done[-1]) == ("0.0,70.0", "580.0,0.0", "590.0,80.0")  # 10 a minute at the top


def test_a_quiet_hour_is_a_flat_line_at_zero() -> None:
    chart = chart_of(per_minute([], T0), width=590, height=100)
    assert chart.top == 1
    assert chart.done.split() == [f"{x * 10}.0,100.0" for x in range(60)]
    assert chart.failed == chart.done


@pytest.fixture
def charted(scratch: Scratch) -> Iterator[Served]:
    """A dashboard over a fresh store of each engine on a manual clock at ``T0``."""
    with start_blocking_portal() as portal:
        store, cleanup = portal.call(open_scratch_async, scratch, ManualClock(T0))
        try:
            yield Served(store, portal, {})
        finally:
            portal.call(cleanup)


def drawn(page: str) -> dict[str, tuple[int, int]]:
    """The minutes the chart draws: their instants, with the done and failed each says."""
    return {minute: (int(done), int(failed)) for minute, done, failed in _MINUTE.findall(page)}


def test_a_freshly_opened_overview_charts_the_hour_the_workers_stored(charted: Served) -> None:
    store = charted.store
    worker = WorkerRecord("w", "host", 1, ("mail",), 4, T0, T0)
    counts = [
        ThroughputRecord("mail", minutes_ago(42), 7, 2),
        ThroughputRecord("reports", minutes_ago(42), 5, 0),
        ThroughputRecord("mail", minutes_ago(1), 3, 0),
        ThroughputRecord("mail", NOW, 1, 1),
    ]
    charted.call(store.engine.record_worker, worker, counts)

    page = charted.client().get("/").text  # no earlier request: nothing sampled, all stored
    minutes = drawn(page)
    assert len(minutes) == 60
    stored = charted.call(store.throughput, 61)
    expected = {instant(minutes_ago(back)): (0, 0) for back in range(1, 61)}
    for count in stored:
        if count.minute == NOW:
            continue  # the current minute, still filling, is left out
        done, failed = expected[instant(count.minute)]
        expected[instant(count.minute)] = (done + count.done, failed + count.failed)
    assert minutes == expected
    assert minutes[instant(minutes_ago(42))] == (12, 2)
    text = re.sub(r"<[^>]+>", "", page)
    assert "The last hour of complete minutes 15 done · 2 failed; the last full minute 3 done · 0 failed" in text
    assert instant(NOW) not in minutes
    assert f"{instant(minutes_ago(42))}: 12 done, 2 failed" in text, "each minute says its counts on hover"


def test_an_hour_without_runs_says_so(charted: Served) -> None:
    fragment = charted.client().get("/fragments/overview").text
    assert set(drawn(fragment).values()) == {(0, 0)}
    assert "No job ended in the last hour" in fragment


def test_the_served_app_reads_a_sync_store_too() -> None:
    import alkstore

    clock = ManualClock(T0)
    with alkstore.open("memory://", clock=clock) as store:
        store.engine.record_worker(
            WorkerRecord("w", "h", 1, ("q",), 1, T0, T0), [ThroughputRecord("q", minutes_ago(1), 9, 0)]
        )
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            assert drawn(client.get("/").text)[instant(minutes_ago(1))] == (9, 0)
