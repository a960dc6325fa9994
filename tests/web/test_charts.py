"""A queue's (or every queue's) throughput over a chosen range (ADR 068): points summed from the counts the
workers stored, the current minute left out, drawn server-side as SVG."""

from __future__ import annotations

import re

from alkstore import ThroughputInfo
from alkstore.adapters.web._throughput import RANGES, per_minute
from alkstore.adapters.web._views import instant
from alkstore.engine import ThroughputRecord, WorkerRecord
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
    assert client.get("/charts", params={"range": "7d"}).status_code == 404
    assert 'href="/charts?queue=mail"' in client.get("/queues/mail").text
