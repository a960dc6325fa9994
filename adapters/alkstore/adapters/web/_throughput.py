"""The overview's throughput chart: jobs done and failed per second, from the workers' own counters.

Each worker reports its totals since it started (``WorkerInfo.processed`` and ``failed``), and
the overview reads the workers anyway, so the chart costs no read of its own: the dashboard
keeps the last samples it saw and charts the rate between each two. It shows what happened
while this dashboard was watching (a fresh dashboard starts with an empty chart).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from alkstore import WorkerInfo

__all__ = ["Chart", "Rate", "Throughput"]


@dataclass(frozen=True, slots=True)
class Rate:
    """Jobs per second done and failed across all workers, between ``start`` and ``end``."""

    start: datetime
    end: datetime
    done: float
    failed: float


@dataclass(frozen=True, slots=True)
class _Sample:
    at: datetime
    totals: dict[tuple[str, datetime], tuple[int, int]]  # (worker id, its start) -> (processed, failed)


@dataclass(frozen=True, slots=True)
class Chart:
    """An SVG chart's geometry: a polyline's points per series, the top of its scale, its span."""

    width: int
    height: int
    done: str
    failed: str
    top: float
    latest: Rate | None
    span: timedelta


class Throughput:
    """The last ``keep`` samples of the workers' counters, at least ``every`` apart (several tabs polling
    add no more samples than one)."""

    def __init__(self, keep: int = 90, every: timedelta = timedelta(seconds=1)) -> None:
        self._samples: deque[_Sample] = deque(maxlen=keep)
        self._every = every

    def observe(self, at: datetime, workers: Iterable[WorkerInfo]) -> None:
        """Note the counters the workers reported as of ``at`` (ignored when too soon after the last)."""
        if self._samples and at - self._samples[-1].at < self._every:
            return
        totals = {(w.id, w.started_at): (w.processed, w.failed) for w in workers}
        self._samples.append(_Sample(at, totals))

    def rates(self) -> list[Rate]:
        """The rate between each two samples. A worker seen in both counts its increase; one that started
        since counts all it did; one gone since counts nothing (its last jobs were in the earlier rate)."""
        found: list[Rate] = []
        for before, after in zip(self._samples, list(self._samples)[1:], strict=False):
            seconds = (after.at - before.at).total_seconds()
            done = failed = 0
            for key, (processed, failures) in after.totals.items():
                was = before.totals.get(key)
                if was is None and key[1] < before.at:
                    continue  # seen for the first time, but started long before: its totals are not this interval's
                old_done, old_failed = was or (0, 0)
                done += max(processed - old_done, 0)
                failed += max(failures - old_failed, 0)
            found.append(Rate(before.at, after.at, done / seconds, failed / seconds))
        return found

    def chart(self, width: int = 600, height: int = 120) -> Chart:
        """The rates as the points of two polylines in a ``width`` x ``height`` box (time left to right)."""
        return chart_of(self.rates(), width, height)


def chart_of(rates: Sequence[Rate], width: int, height: int) -> Chart:
    """``rates`` scaled into the box: the oldest at the left edge, the newest at the right, 0 at the bottom."""
    if not rates:
        return Chart(width, height, "", "", 0.0, None, timedelta(0))
    first, last = rates[0].start, rates[-1].end
    span = (last - first).total_seconds() or 1.0
    top = max(max(rate.done for rate in rates), max(rate.failed for rate in rates), 1.0)

    def points(values: Sequence[float]) -> str:
        out = []
        for rate, value in zip(rates, values, strict=True):
            x = (rate.end - first).total_seconds() / span * width
            y = height - value / top * height
            out.append(f"{x:.1f},{y:.1f}")
        return " ".join(out)

    return Chart(
        width,
        height,
        points([rate.done for rate in rates]),
        points([rate.failed for rate in rates]),
        top,
        rates[-1],
        last - first,
    )
