"""Batch paths of alkstore on PostgreSQL beside the batched floor: bulk enqueue and batched drain.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/batch_throughput.py [--dsn URL] [--repeats 5] [--quick]

- bulk enqueue: ``Queue.enqueue_many`` of 100 payloads per call (one transaction each) against
  the floor's array insert (``INSERT … SELECT unnest(%b::bytea[])``, one autocommit statement);
- batched drain, one thread: ``Queue.claim_many(worker, 10)`` then ``Store.ack_many`` against
  the floor claiming ten per ``UPDATE … = ANY(ARRAY(… LIMIT 10 FOR UPDATE SKIP LOCKED))`` and
  deleting them with one ``DELETE … = ANY``. Both decode every payload.

Blocks alternate between the two subjects, so load that comes and goes hits both alike; each
ratio is the median of the per-run ratios. Targets (issue 11): bulk enqueue at least 0.8x the
floor's array insert; batched drain at least 0.6x the batched floor.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import load_average
from queue_throughput import QUEUE, BatchedFloor, Floor, bench_arguments, bench_schemas, encode, payload

import alkstore

PER_CALL = 100
CLAIM = 10


@dataclass(frozen=True, slots=True)
class Config:
    calls: int = 20  # enqueue calls per block
    drain: int = 2000  # jobs per drain block
    blocks: int = 6
    repeats: int = 5


QUICK = Config(calls=5, drain=300, blocks=2, repeats=1)


def enqueue_block(subject: str, floor: BatchedFloor, queue: alkstore.Queue, calls: int) -> float:
    """Seconds for ``calls`` batches of ``PER_CALL`` jobs."""
    started = time.perf_counter()
    for call in range(calls):
        first = call * PER_CALL
        if subject == "floor":
            floor.enqueue_many([encode(n) for n in range(first, first + PER_CALL)])
        else:
            queue.enqueue_many([payload(n) for n in range(first, first + PER_CALL)])
    return time.perf_counter() - started


def drain_block(subject: str, floor: BatchedFloor, store: alkstore.Store, count: int) -> float:
    """Load ``count`` jobs (untimed), then the seconds to drain them ``CLAIM`` per claim."""
    if subject == "floor":
        floor.floor.clear()
        floor.floor.load(count)
        started = time.perf_counter()
        done = floor.drain(1)
    else:
        queue = store.queue(QUEUE)
        for first in range(0, count, 1000):
            queue.enqueue_many([payload(n) for n in range(first, min(count, first + 1000))])
        started = time.perf_counter()
        done = 0
        while jobs := queue.claim_many("w0", CLAIM):
            for job in jobs:
                _ = job.payload
            store.ack_many(jobs)
            done += len(jobs)
    elapsed = time.perf_counter() - started
    assert done == count, (subject, done, count)
    return elapsed


def one_run(
    floor: BatchedFloor,
    store: alkstore.Store,
    clear: psycopg.Connection[tuple[object, ...]],
    schema: str,
    config: Config,
) -> dict[str, dict[str, float]]:
    """Rates (jobs/s) per measure and subject, blocks alternating."""
    seconds: dict[str, dict[str, float]] = {"enqueue": {}, "drain": {}}
    jobs = {"enqueue": config.calls * PER_CALL, "drain": config.drain}
    truncate = sql.SQL("TRUNCATE {}.jobs").format(sql.Identifier(schema))
    for block in range(config.blocks):
        order = ["floor", "alkstore"] if block % 2 == 0 else ["alkstore", "floor"]
        for subject in order:
            floor.floor.clear()
            clear.execute(truncate)
            took = enqueue_block(subject, floor, store.queue(QUEUE), config.calls)
            seconds["enqueue"][subject] = seconds["enqueue"].get(subject, 0.0) + took
        for subject in order:
            clear.execute(truncate)
            took = drain_block(subject, floor, store, config.drain)
            seconds["drain"][subject] = seconds["drain"].get(subject, 0.0) + took
    return {
        measure: {subject: jobs[measure] * config.blocks / spent for subject, spent in by.items()}
        for measure, by in seconds.items()
    }


def main() -> int:
    args, config = bench_arguments(__doc__.split("\n")[0], Config(), QUICK)
    admin = psycopg.connect(args.dsn, autocommit=True)
    floor_schema, schema = bench_schemas("batch")
    floor = BatchedFloor(Floor(args.dsn, floor_schema, admin))
    store = alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    try:
        for _ in range(5):  # warm-up: prepared statements, the queue's cached configuration
            store.queue(QUEUE).enqueue_many([payload(n) for n in range(PER_CALL)])
        runs: list[dict[str, dict[str, float]]] = []
        for repeat in range(config.repeats):
            print(f"load {load_average().split()[:3]}", flush=True)
            rates = one_run(floor, store, admin, schema, config)
            runs.append(rates)
            print(
                f"run {repeat + 1}: "
                + "  ".join(
                    f"{measure} floor {by['floor']:,.0f}/s alkstore {by['alkstore']:,.0f}/s"
                    f" ({by['alkstore'] / by['floor']:.2f}x)"
                    for measure, by in rates.items()
                ),
                flush=True,
            )
        print()
        print("measure                               alkstore     floor   ratio (median of runs)")
        for measure, label in (
            ("enqueue", "bulk enqueue, 100 per call (jobs/s)"),
            ("drain", "batched drain, 10 per claim"),
        ):
            ratio = statistics.median(run[measure]["alkstore"] / run[measure]["floor"] for run in runs)
            best_alk = max(run[measure]["alkstore"] for run in runs)
            best_floor = max(run[measure]["floor"] for run in runs)
            print(f"{label:<37} {best_alk:>8,.0f} {best_floor:>9,.0f}   {ratio:.2f}x")
    finally:
        store.close()
        floor.floor.close()
        for name in (floor_schema, schema):
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
