"""Claim+ack on PostgreSQL by queue depth and shape: a thousand ready jobs, a million, and delayed ones above.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/depth_shape.py [--dsn URL] [--deep 1000000] [--rounds 5] [--block 1000]

Four queues, each in a schema of its own, loaded untimed through ``Queue.enqueue_many`` and then
``VACUUM ANALYZE``:

- **shallow**: 1,000 ready jobs (refilled to 1,000 after each of its blocks, untimed);
- **deep**: ``--deep`` ready jobs;
- **shaped**: 90 % of ``--deep`` delayed an hour at priority 10 over 10 % ready at priority 0;
- **same priority**: the same split with every job at priority 0 (the control for **shaped**).

A round runs one block of ``--block`` claim+acks (``Queue.claim`` then ``Job.ack``, one thread)
on each queue, in an order that rotates; each figure is the median over rounds of a block's rate,
and the ratios are the medians of the per-round ratios. Targets (issue 11): deep at least 0.8x
shallow; shaped at least 0.8x same priority.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg
from _bench import DEFAULT_DSN, load_average
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts

QUEUE = "depth"
LOAD_CHUNK = 5000


def load(queue: alkstore.Queue, count: int, opts: EnqueueOpts | None = None) -> None:
    for start in range(0, count, LOAD_CHUNK):
        queue.enqueue_many([{"n": n} for n in range(start, min(count, start + LOAD_CHUNK))], opts)


def claim_ack(queue: alkstore.Queue, count: int) -> float:
    """Jobs per second over ``count`` claim+acks."""
    started = time.perf_counter()
    for _ in range(count):
        job = queue.claim("bench")
        assert job is not None, "the queue ran dry"
        job.ack()
    return count / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--deep", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--block", type=int, default=1000)
    args = parser.parse_args()
    print(f"/proc/loadavg at the start: {load_average()}", flush=True)
    tag = uuid.uuid4().hex[:8]
    names = ["shallow", "deep", "shaped", "same priority"]
    schemas = {name: f"bench_depth_{name.replace(' ', '_')}_{tag}" for name in names}
    admin: psycopg.Connection[tuple[object, ...]] = psycopg.connect(args.dsn, autocommit=True)
    stores = {
        name: alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=1)
        for name, schema in schemas.items()
    }
    queues = {name: store.queue(QUEUE) for name, store in stores.items()}
    delayed, ready = args.deep * 9 // 10, args.deep - args.deep * 9 // 10
    try:
        started = time.perf_counter()
        load(queues["shallow"], 1000)
        load(queues["deep"], args.deep)
        load(queues["shaped"], delayed, EnqueueOpts(delay=3600, priority=10))
        load(queues["shaped"], ready, EnqueueOpts(priority=0))
        load(queues["same priority"], delayed, EnqueueOpts(delay=3600, priority=0))
        load(queues["same priority"], ready, EnqueueOpts(priority=0))
        for schema in schemas.values():
            admin.execute(sql.SQL("VACUUM ANALYZE {}.jobs").format(sql.Identifier(schema)))
        print(
            f"loaded in {time.perf_counter() - started:.0f} s: deep {args.deep:,}; shaped and same priority "
            f"{delayed:,} delayed over {ready:,} ready",
            flush=True,
        )
        rates: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                rates[name].append(claim_ack(queues[name], args.block))
                if name == "shallow":
                    load(queues["shallow"], args.block)
            print(f"round {round_ + 1}: " + "  ".join(f"{n} {r[-1]:,.0f}/s" for n, r in rates.items()), flush=True)
    finally:
        for store in stores.values():
            store.close()
        for schema in schemas.values():
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()

    def ratio(mine: str, theirs: str) -> float:
        return statistics.median(a / b for a, b in zip(rates[mine], rates[theirs], strict=True))

    print(f"claim+ack, one thread, blocks of {args.block}, {args.rounds} rounds; median jobs/s")
    for name, runs in rates.items():
        print(f"  {name:<14} {statistics.median(runs):>7,.0f}/s")
    print(f"  deep / shallow          {ratio('deep', 'shallow'):.2f}x (target >= 0.80x)")
    print(f"  shaped / same priority  {ratio('shaped', 'same priority'):.2f}x (target >= 0.80x)")
    print(f"/proc/loadavg at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
