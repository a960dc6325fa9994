"""A queue's (or every queue's) throughput over a chosen range (ADR 068): points summed from the counts the
workers stored, the current minute left out, drawn server-side as SVG."""

from __future__ import annotations

import re
from datetime import timedelta

from alkstore import ThroughputInfo
from alkstore.adapters.web._throughput import RANGES, per_minute
from alkstore.adapters.web._views import instant
from alkstore.engine import TaskFiguresRecord, ThroughputRecord, WorkerRecord
from tests.web.conftest import Served
from tests.web.test_throughput import NOW, T0, charted, drawn, minutes_ago

__all__ = ["charted"]  # the fixture, of every engine


def test_a_days_points_are_quarter_hours_of_one_queue_ending_at_the_current_minute() -> None:
    minutes, bucket = RANGES["24h"]
    counts = [
        ThroughputInfo("a", minutes_ago(minutes + 1), 100, 100),  # before the range: not drawn
        ThroughputInfo("a", minutes_ago(minutes), 1, 0),  # the first point's first minute
        ThroughputInfo("a", minutes_ago(16), 2, 1),  # the second-to-last point
        ThroughputInfo("a", minutes_ago(15), 3, 0),  # the last point's first minute
        ThroughputInfo("a", minutes_ago(1), 4, 2),  # the last point's last minute
        ThroughputInfo("b", minutes_ago(1), 50, 50),  # another queue
        ThroughputInfo("a", NOW, 9, 9),  # still filling: never drawn
    ]
    points = per_minute(counts, T0, minutes, "a", bucket)
    assert len(points) == minutes // bucket == 95
    assert (points[0].start, points[0].done) == (minutes_ago(minutes), 1)
    assert (points[-2].done, points[-2].failed, points[-1].done, points[-1].failed) == (2, 1, 7, 2)
    assert points[-1].start + points[-1].length == NOW
    assert sum(point.done for point in points) == 10
    everything = per_minute(counts, T0, minutes, None, bucket)
    assert everything[-1].done == 57


def test_a_queues_chart_over_a_day_and_an_hour_and_no_range_it_cannot_draw(charted: Served) -> None:
    store = charted.store
    worker = WorkerRecord("w", "host", 1, ("mail",), 4, T0, T0)
    counts = [
        ThroughputRecord("mail", minutes_ago(600), 7, 2),
        ThroughputRecord("mail", minutes_ago(1), 3, 0),
        ThroughputRecord("<script>x</script>", minutes_ago(1), 5, 5),
        ThroughputRecord("mail", NOW, 1, 1),
    ]
    charted.call(store.engine.record_worker, worker, counts)
    client = charted.client()
    day = client.get("/charts", params={"queue": "mail", "range": "24h"}).text
    points = drawn(day)
    assert len(points) == 95
    assert sum(done for done, _ in points.values()) == 10
    assert points[instant(minutes_ago(15))] == (3, 0)
    text = re.sub(r"<[^>]+>", "", day)
    assert "10 done · 2 failed" in text
    hour = drawn(client.get("/charts", params={"queue": "mail"}).text)
    assert (len(hour), hour[instant(minutes_ago(1))]) == (60, (3, 0))
    assert instant(minutes_ago(600)) not in hour
    every = client.get("/charts", params={"range": "24h"}).text
    assert "15 done · 7 failed" in re.sub(r"<[^>]+>", "", every)
    hostile = client.get("/charts", params={"queue": "<script>x</script>"}).text
    assert "<script>x" not in hostile
    assert drawn(hostile)[instant(minutes_ago(1))] == (5, 5)
    assert client.get("/charts", params={"range": "30d"}).status_code == 404
    assert 'href="/charts?queue=mail"' in client.get("/queues/mail").text


_POINT = re.compile(r'data-point="([^"]+)" data-value="([^"]*)"')


def lines(page: str) -> list[dict[str, float | None]]:
    """The two line charts' points (run time, then pickup latency): their instants, with their values."""
    charts = page.split('class="chart line"')[1:]
    return [{at: float(v) if v else None for at, v in _POINT.findall(chart)} for chart in charts]


HOSTILE = "<script>alert(1)</script>\u202eexe.txt" + "x" * 300


def test_a_tasks_charts_draw_its_runs_mean_run_time_and_pickup_latency_escaped(charted: Served) -> None:
    store = charted.store
    worker = WorkerRecord("w", "host", 1, ("mail",), 4, T0, T0)
    figures = [
        TaskFiguresRecord("mail", "send", minutes_ago(2), 3, 1, 400.0, 80.0),
        TaskFiguresRecord("mail", HOSTILE, minutes_ago(2), 1, 0, 9.0, 1.0),
        TaskFiguresRecord("mail", "", minutes_ago(1), 2, 0, 10.0, 0.0),
        TaskFiguresRecord("mail", "send", NOW, 50, 50, 1e6, 1e6),  # the minute under way: never drawn
    ]
    charted.call(store.engine.record_worker, worker, [], figures)
    client = charted.client()

    page = client.get("/charts", params={"queue": "mail", "task": "send"}).text
    assert drawn(page)[instant(minutes_ago(2))] == (3, 1)
    assert sum(done for done, _ in drawn(page).values()) == 3, "the task's runs alone, the current minute left out"
    run_time, latency = lines(page)
    assert (len(run_time), run_time[instant(minutes_ago(2))], latency[instant(minutes_ago(2))]) == (60, 100.0, 20.0)
    assert run_time[instant(minutes_ago(1))] is None, "no run: no point"
    assert instant(NOW) not in run_time

    every = client.get("/charts", params={"queue": "mail"}).text
    assert "<script>alert(1)" not in every
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;U+202E&gt;exe.txt" in every
    assert "\u202e" not in every
    assert "(no task)" in every
    untasked = lines(client.get("/charts", params={"queue": "mail", "task": ""}).text)[0]
    assert untasked[instant(minutes_ago(1))] == 5.0
    hostile = client.get("/charts", params={"queue": "mail", "task": HOSTILE}).text
    assert "<script>alert(1)" not in hostile
    assert lines(hostile)[0][instant(minutes_ago(2))] == 9.0


def test_a_weeks_range_draws_167_complete_hours_from_the_rolled_up_figures(charted: Served) -> None:
    store = charted.store
    hour = NOW.replace(minute=0)
    worker = WorkerRecord("w", "host", 1, ("mail",), 4, T0, T0)
    figures = [
        TaskFiguresRecord("mail", "send", hour - timedelta(days=3), 6, 0, 60.0, 600.0),  # an hour's rolled-up row
        TaskFiguresRecord("mail", "send", hour - timedelta(minutes=30), 2, 2, 40.0, 4.0),
        TaskFiguresRecord("mail", "send", hour - timedelta(minutes=1), 1, 0, 10.0, 1.0),
        TaskFiguresRecord("mail", "send", hour - timedelta(hours=168), 9, 9, 9.0, 9.0),  # before the range
        TaskFiguresRecord("mail", "send", hour, 7, 7, 7.0, 7.0),  # the hour under way: not drawn
    ]
    charted.call(store.engine.record_worker, worker, [], figures)
    page = charted.client().get("/charts", params={"queue": "mail", "range": "7d"}).text
    points = drawn(page)
    assert len(points) == 167
    assert points[instant(hour - timedelta(days=3))] == (6, 0)
    assert points[instant(hour - timedelta(hours=1))] == (3, 2)
    assert sum(done for done, _ in points.values()) == 9
    run_time, latency = lines(page)
    assert (run_time[instant(hour - timedelta(hours=1))], latency[instant(hour - timedelta(days=3))]) == (10.0, 100.0)
    assert "167 complete hours" in re.sub(r"<[^>]+>", "", page)
