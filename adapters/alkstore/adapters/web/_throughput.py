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

from alkstore import TaskFiguresInfo, ThroughputInfo
from alkstore.display import hour_of, minute_of

__all__ = [
    "MINUTES",
    "RANGES",
    "Chart",
    "Figures",
    "Line",
    "Minute",
    "chart_of",
    "figures_of",
    "line_of",
    "per_minute",
    "tasks_in",
]

#: The complete minutes the chart shows (the current one is left out).
MINUTES = 60
#: The ranges a queue's charts are drawn over: their complete minutes, and the minutes summed per point
#: (ADR 068). The counts are kept a day (ADR 048) and ``throughput`` reads at most 1,440 minutes, the
#: current one among them: the day's range is its last 95 complete quarter hours.
#: The week's range reads the task figures (ADR 075, kept 7 days, per hour past a day): its last 167 complete
#: hours, the hour under way left out as the minute is.
RANGES = {"1h": (60, 1), "24h": (1425, 15), "7d": (167 * 60, 60)}


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
    end = _end(now, bucket)
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


def _end(now: datetime, bucket: int) -> datetime:
    """Where a range of ``bucket``-minute points ends: the start of the minute under way, or of the hour under way
    for hour-long points (past a day the figures are stored per hour)."""
    return hour_of(now) if bucket >= 60 else minute_of(now)


@dataclass(frozen=True, slots=True)
class Figures:
    """The runs of a point (``length`` from ``start``): done, failed, and their summed run time and pickup latency."""

    start: datetime
    done: int
    failed: int
    run_ms: float
    latency_ms: float
    length: timedelta

    @property
    def runs(self) -> int:
        return self.done + self.failed

    @property
    def mean_run_ms(self) -> float | None:
        """The point's mean run time, ``None`` with no run."""
        return self.run_ms / self.runs if self.runs else None

    @property
    def mean_latency_ms(self) -> float | None:
        """The point's mean pickup latency (claim minus ``run_at``), ``None`` with no run."""
        return self.latency_ms / self.runs if self.runs else None


def figures_of(
    figures: Iterable[TaskFiguresInfo],
    now: datetime,
    minutes: int,
    bucket: int,
    queue: str | None = None,
    task: str | None = None,
) -> list[Figures]:
    """The ``minutes // bucket`` complete points before the one under way, oldest first, each summing the figures
    of ``queue`` and ``task`` (every one's, when not given) in it."""
    end = _end(now, bucket)
    length = timedelta(minutes=bucket)
    points = minutes // bucket
    first = end - points * length
    sums: list[list[float]] = [[0, 0, 0.0, 0.0] for _ in range(points)]
    for f in figures:
        if first <= f.minute < end and queue in (None, f.queue) and task in (None, f.task):
            tally = sums[(f.minute - first) // length]
            tally[0] += f.done
            tally[1] += f.failed
            tally[2] += f.run_ms
            tally[3] += f.latency_ms
    return [
        Figures(first + index * length, int(done), int(failed), run_ms, latency_ms, length)
        for index, (done, failed, run_ms, latency_ms) in enumerate(sums)
    ]


def tasks_in(figures: Iterable[TaskFiguresInfo], queue: str | None = None) -> list[str]:
    """The tasks with figures (of ``queue``'s, when given), sorted: the choices a chart offers."""
    return sorted({f.task for f in figures if queue in (None, f.queue)})


@dataclass(frozen=True, slots=True)
class Line:
    """An SVG chart of one series: its polyline's points (the points with no value left out), the top of its
    scale, and each point's start and value (``None``: no run in it)."""

    width: int
    height: int
    points: str
    top: float
    values: tuple[tuple[datetime, float | None], ...]
    end: datetime

    @property
    def step(self) -> float:
        return self.width / (len(self.values) - 1)

    def x(self, index: int) -> float:
        return index * self.step

    def y(self, value: float) -> float:
        """Where ``value`` is drawn: each point with a run is marked, the line alone would join across gaps."""
        return self.height - value / self.top * self.height


def line_of(
    values: Sequence[tuple[datetime, float | None]], end: datetime, width: int = 600, height: int = 120
) -> Line:
    """``values`` (at least two) scaled into the box, 0 at the bottom, the largest (at least 1) at the top."""
    top = max([1.0, *(value for _, value in values if value is not None)])
    step = width / (len(values) - 1)
    points = " ".join(
        f"{index * step:.1f},{height - value / top * height:.1f}"
        for index, (_, value) in enumerate(values)
        if value is not None
    )
    return Line(width, height, points, top, tuple(values), end)
