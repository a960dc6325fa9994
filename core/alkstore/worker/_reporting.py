# GENERATED FILE, DO NOT EDIT: made from core/alkstore/worker/_reporting_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""How a worker reports itself for operators (``workers()``, ``alkstore status``; ADR 020), and stores its
runs done and failed per queue and minute with each report (``throughput()``, ADR 048).

Best effort throughout: a failure is logged and the next report tries again; it never stops
the worker.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from alkstore.errors import AlkstoreError, DatabaseUnavailable
from alkstore.port._records import TaskFiguresRecord, ThroughputRecord, WorkerRecord
from alkstore.rules._operations import minute_of

from ._parts import FORGET_AFTER, IDLE_REPORT_EVERY, REPORT_EVERY, Tally, WorkerOptions
from ._runs import Runs

if TYPE_CHECKING:
    from alkstore.store._kernel import Kernel

__all__ = ["Reporter"]

log = logging.getLogger("alkstore.worker")


class Reporter:
    """Stores what one worker is and has done; now and then forgets workers long gone."""

    def __init__(self, kernel: Kernel, options: WorkerOptions, runs: Runs, tally: Tally) -> None:
        self._kernel = kernel
        self._options = options
        self._runs = runs
        self._tally = tally
        self.started_at: datetime | None = None
        self.reported_at: datetime | None = None
        self._forgot_at: datetime | None = None
        self._reported: tuple[int, int, int] | None = None  # the figures of the last report

    def _figures(self) -> tuple[int, int, int]:
        stats = self._tally.stats
        return self._runs.running(), stats.processed + stats.timed_out, stats.retried + stats.buried + stats.timed_out

    def due(self, now: datetime) -> bool:
        """Whether to report at ``now``: every ``REPORT_EVERY`` while the figures change, every
        ``IDLE_REPORT_EVERY`` while they stay the same (an idle worker, ADR 044)."""
        if self.reported_at is None:
            return True
        every = REPORT_EVERY if self._figures() != self._reported else IDLE_REPORT_EVERY
        return now - self.reported_at >= timedelta(seconds=every)

    def report(self) -> None:
        """Store the worker's record now."""
        kernel = self._kernel
        now = kernel.clock.now()
        options = self._options
        if self.started_at is None:
            self.started_at = now
        figures = self._figures()
        record = WorkerRecord(
            options.worker_id,
            socket.gethostname(),
            os.getpid(),
            options.queues,
            options.concurrency,
            self.started_at,
            now,
            *figures,
        )
        try:
            engine = kernel.offered()
            if engine is None:
                return  # an engine without the operations port keeps no workers' reports (ADR 062)
            counts = self._tally.take_counts()
            minute = minute_of(now)  # the runs since the last report (seconds ago) count in the minute of this one
            throughput = [ThroughputRecord(queue, minute, *counts[queue]) for queue in sorted(counts)]
            sums = self._tally.take_figures()
            per_task = [
                TaskFiguresRecord(queue, task, minute, int(done), int(failed), run_ms, latency_ms)
                for (queue, task), (done, failed, run_ms, latency_ms) in sorted(sums.items())
            ]
            try:
                engine.record_worker(record, throughput, per_task)
            except BaseException:
                self._tally.put_back_counts(counts)  # counted again with the next report
                self._tally.put_back_figures(sums)
                raise
            self.reported_at = now
            self._reported = figures
            if self._forgot_at is None or now - self._forgot_at >= FORGET_AFTER / 60:
                engine.forget_workers(now - FORGET_AFTER)
                self._forgot_at = now
        except DatabaseUnavailable as exc:
            log.warning("worker %s: could not report itself (%s); trying again later", options.worker_id, exc)
        except AlkstoreError as exc:
            log.error("worker %s: could not report itself: %s", options.worker_id, exc)

    def unreport(self) -> None:
        """A clean stop: the worker is no longer one of ``workers()``."""
        label = self._options.worker_id
        if self._figures() != self._reported:
            self.report()  # the runs since the last report count too
        try:
            engine = self._kernel.offered()
            if engine is not None:
                engine.remove_worker(label)
        except AlkstoreError as exc:
            log.warning("worker %s: could not remove its report (%s); it is forgotten later", label, exc)

    def summary(self) -> None:
        """Log what the worker did so far (every ``SUMMARY_EVERY`` while it runs)."""
        stats = self._tally.stats
        log.info(
            "worker %s: %d processed (%d ok, %d retried, %d dead), %d running",
            self._options.worker_id,
            stats.processed,
            stats.succeeded,
            stats.retried,
            stats.buried,
            self._runs.running(),
        )
