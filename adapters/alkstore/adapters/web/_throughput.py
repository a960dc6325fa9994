"""The overview's throughput chart: jobs done and failed per minute over the last hour, from the store.

The workers store their counts per queue and minute with their reports (ADR 048), and
``throughput()`` reads them, so a freshly opened dashboard shows the hour past and every
dashboard shows the same. The chart sums the queues of each minute and draws the last
``MINUTES`` complete minutes, zeros where nothing ran. The current minute is left out: still
filling, it would always draw a dip at the right edge that is no drop in throughput (ADR 065).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from alkstore import ThroughputInfo
from alkstore.display import minute_of

__all__ = ["MINUTES", "RANGES", "Chart", "Minute", "chart_of", "per_minute"]

#: The complete minutes the chart shows (the current one is left out).
MINUTES = 60
#: The ranges a queue's charts are drawn over: their complete minutes, and the minutes summed per point
#: (ADR 068). The counts are kept a day (ADR 048) and ``throughput`` reads at most 1,440 minutes, the
#: current one among them: the day's range is its last 95 complete quarter hours.
RANGES = {"1h": (60, 1), "24h": (1425, 15)}


@dataclass(frozen=True, slots=True)
class Minute:
    """The runs of every queue that ended in the minute starting at ``start``: ``done`` and ``failed``."""

    start: datetime
    done: int
    failed: int
    length: timedelta = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG chart's geometry: a polyline's points per series, the top of its scale; the minutes drawn."""

    width: int
    height: int
    done: str
    failed: str
    top: int
    minutes: tuple[Minute, ...]

    @property
    def step(self) -> float:
        """The width of a minute."""
        return self.width / (len(self.minutes) - 1)

    def x(self, index: int) -> float:
        """Where the ``index``-th minute is drawn."""
        return index * self.step

    @property
    def total_done(self) -> int:
        return sum(minute.done for minute in self.minutes)

    @property
    def total_failed(self) -> int:
        return sum(minute.failed for minute in self.minutes)

    @property
    def latest(self) -> Minute:
        """The last complete minute (the one before the current), drawn at the right edge."""
        return self.minutes[-1]

    @property
    def end(self) -> datetime:
        """When the last minute drawn ended: the start of the current one."""
        return self.minutes[-1].start + self.minutes[-1].length


def per_minute(
    counts: Iterable[ThroughputInfo], now: datetime, minutes: int = MINUTES, queue: str | None = None, bucket: int = 1
) -> list[Minute]:
    """The ``minutes`` complete minutes before the one holding ``now``, oldest first, each with every queue's
    counts (``queue``'s alone, when given), summed ``bucket`` minutes a point."""
    end = minute_of(now)
    length = timedelta(minutes=bucket)
    points = minutes // bucket
    first = end - points * length
    sums = [[0, 0] for _ in range(points)]
    for count in counts:
        if first <= count.minute < end and (queue is None or count.queue == queue):
            tally = sums[(count.minute - first) // length]
            tally[0] += count.done
            tally[1] += count.failed
    return [Minute(first + index * length, sums[index][0], sums[index][1], length) for index in range(points)]


def chart_of(minutes: Sequence[Minute], width: int = 600, height: int = 120) -> Chart:
    """``minutes`` (at least two) scaled into the box: the oldest at the left edge, the latest at the right,
    0 at the bottom, the busiest minute (at least 1) at the top."""
    top = max(1, *(minute.done for minute in minutes), *(minute.failed for minute in minutes))
    step = width / (len(minutes) - 1)

    def points(values: Sequence[int]) -> str:
        return " ".join(f"{index * step:.1f},{height - value / top * height:.1f}" for index, value in enumerate(values))

    done = points([minute.done for minute in minutes])
    failed = points([minute.failed for minute in minutes])
    return Chart(width, height, done, failed, top, tuple(minutes))
