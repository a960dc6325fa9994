"""Metrics and traces through OpenTelemetry (``pip install 'alkstore[otel]'``; ADR 024).

``alkstore.open(url, telemetry=Telemetry())`` reports the store's jobs: counters of jobs
enqueued, claimed, acked, retried and buried and of schedule fires; histograms of queue wait and
run duration; gauges of each queue's depth by state and its lag; a producer span per enqueue and
a consumer span per worker run, linked to the enqueue's span through the trace context the job
carries. Only this module imports OpenTelemetry; nothing else in alkstore does.
"""

from __future__ import annotations

from ._telemetry import (
    ACKED,
    BURIED,
    CLAIMED,
    DEPTH,
    ENQUEUED,
    FIRED,
    INSTRUMENTATION,
    LAG,
    QUEUE_WAIT,
    RETRIED,
    RUN_DURATION,
    SECONDS_BUCKETS,
    Telemetry,
)

__all__ = [
    "ACKED",
    "BURIED",
    "CLAIMED",
    "DEPTH",
    "ENQUEUED",
    "FIRED",
    "INSTRUMENTATION",
    "LAG",
    "QUEUE_WAIT",
    "RETRIED",
    "RUN_DURATION",
    "SECONDS_BUCKETS",
    "Telemetry",
]
