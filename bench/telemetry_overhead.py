"""What OpenTelemetry instrumentation costs on the per-job paths on PostgreSQL (ADR 024).

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/telemetry_overhead.py [--dsn URL] [--rounds 30] [--block 200] [--quick]

Three stores share one engine (one pool, one schema): ``off`` has no telemetry; ``metrics`` reports
to ``alkstore.adapters.otel.Telemetry`` with the SDK's ``MeterProvider`` (an in-memory reader,
never collected while timed) and no tracing (the API's no-op tracer); ``on`` adds the SDK's
``TracerProvider``, every span recorded and sent through a ``BatchSpanProcessor`` to an in-memory
exporter (as production exports them, in the background). Per round and per operation, a block
of ``--block`` operations runs on each store, in an order that rotates and reverses between
rounds:

- enqueue: ``Queue.enqueue`` of one small payload (its own transaction);
- claim + ack: ``Queue.claim`` then ``Job.ack`` of jobs loaded (untimed) just before;
- worker drain: a ``Worker`` (one thread, handler doing nothing) running ``--block`` jobs loaded
  before it starts, timed from its start to the last ack.

A round's ratio is a store's block's wall time over off's; the figure is the median of the
rounds' ratios. Beside it, this process's CPU time per operation (all its threads: the span
processor's and the worker's too), which is where instrumentation spends and which the machine's
load disturbs less than wall time. Target (issue 12): on costs at most 5 % on each path.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from psycopg import sql

import alkstore
from alkstore import Job, StopToken, Store, Worker
from alkstore.adapters.otel import Telemetry

SUBJECTS = ("off", "metrics", "on")


class _Started:
    """When a timed part began, in wall time and in this process's CPU time."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def spent(self) -> tuple[float, float]:
        """Wall and CPU seconds since."""
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def enqueue_block(store: Store, count: int) -> tuple[float, float]:
    queue = store.queue("enqueue")
    started = _Started()
    for n in range(count):
        queue.enqueue({"n": n})
    return started.spent()


def claim_ack_block(store: Store, count: int) -> tuple[float, float]:
    queue = store.queue("claim")
    queue.enqueue_many([{"n": n} for n in range(count)])
    started = _Started()
    for _ in range(count):
        job = queue.claim("bench")
        assert job is not None
        job.ack()
    return started.spent()


def drain_block(store: Store, count: int) -> tuple[float, float]:
    store.queue("drain").enqueue_many([{"n": n} for n in range(count)])
    seen = [0]

    def handler(payload: Any, job: Job) -> None:
        seen[0] += 1

    worker = Worker(store, handlers={"drain": handler}, poll_interval=0.05, grace=5)
    stop = StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    started = _Started()
    thread.start()
    while worker.stats.succeeded < count:
        time.sleep(0.002)
    elapsed = started.spent()
    stop.cancel()
    thread.join(30)
    assert seen[0] == count, seen
    return elapsed


OPERATIONS: dict[str, Callable[[Store, int], tuple[float, float]]] = {
    "enqueue": enqueue_block,
    "claim + ack": claim_ack_block,
    "worker drain": drain_block,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="3 rounds of 50: does it run")
    args = parser.parse_args()
    rounds, block = (3, 50) if args.quick else (args.rounds, args.block)
    logging.getLogger("alkstore").setLevel(logging.WARNING)

    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = Telemetry(meter_provider=meter_provider, tracer_provider=tracer_provider)
    metrics_only = Telemetry(meter_provider=meter_provider, tracer_provider=NoOpTracerProvider(), queue_depth=False)

    schema = f"bench_otel_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(args.dsn, autocommit=True)
    plain = alkstore.open(args.dsn, schema=schema, migrate=True, min_size=2, max_size=4)
    stores = {
        "off": plain,
        "metrics": Store(plain.engine, clock=plain.clock, telemetry=metrics_only),
        "on": Store(plain.engine, clock=plain.clock, telemetry=telemetry),
    }
    truncate = sql.SQL("TRUNCATE {}.jobs").format(sql.Identifier(schema))
    seconds: dict[str, dict[str, list[float]]] = {op: {s: [] for s in SUBJECTS} for op in OPERATIONS}
    cpu: dict[str, dict[str, list[float]]] = {op: {s: [] for s in SUBJECTS} for op in OPERATIONS}
    try:
        print(f"load before: {load_average()}", flush=True)
        for store in stores.values():  # warm-up: prepared statements, cached queue configs, the SDK's instruments
            for operation in OPERATIONS.values():
                operation(store, 50)
        for index in range(rounds):
            turned = SUBJECTS[index % 3 :] + SUBJECTS[: index % 3]
            order = turned if (index // 3) % 2 == 0 else turned[::-1]
            admin.execute(truncate)
            exporter.clear()
            for name, operation in OPERATIONS.items():
                for subject in order:
                    wall, used = operation(stores[subject], block)
                    seconds[name][subject].append(wall)
                    cpu[name][subject].append(used)
            if (index + 1) % 10 == 0:
                print(f"round {index + 1}/{rounds}: load {load_average()}", flush=True)
        print(f"load after: {load_average()}", flush=True)
        tracer_provider.force_flush()
        print(
            f"{rounds} rounds of {block} operations per store; spans exported in the last round: "
            f"{len(exporter.get_finished_spans())}"
        )
        print()
        print(f"{'path':<13} {'store':<8} {'wall us/op':>10} {'/ off (median, IQR)':>24} {'CPU us/op':>10} {'+us':>6}")
        for name, by in seconds.items():
            cpu_off = statistics.median(cpu[name]["off"]) / block * 1e6
            for subject in SUBJECTS:
                wall = statistics.median(by[subject]) / block * 1e6
                ratios = [b / a for a, b in zip(by["off"], by[subject], strict=True)]
                q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else (ratios[0],) * 3
                used = statistics.median(cpu[name][subject]) / block * 1e6
                print(
                    f"{name:<13} {subject:<8} {wall:>10.1f} {statistics.median(ratios):>8.3f}x ({q1:.3f}-{q3:.3f})"
                    f" {used:>10.1f} {used - cpu_off:>6.1f}"
                )
    finally:
        stores["on"].close()
        plain.close()
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()
        tracer_provider.shutdown()
        meter_provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
