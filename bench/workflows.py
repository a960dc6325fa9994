"""Job dependencies (ADR 073) on PostgreSQL beside the same work without them.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/workflows.py [--dsn URL] [--jobs 1000] [--repeats 3]

- chain: a chain of ``--jobs`` jobs (one graph, each waiting on the one before) run one at a time,
  claim then ack, against as many independent jobs run the same way. Only the runs are timed (the
  enqueue apart, printed). Target (issue 42): the chain at least 0.8x the independent jobs' rate.
- ack path: independent jobs run one at a time on a schema as migrated, against a schema whose
  dependency trigger (``jobs_settle``) is dropped: what the feature costs the ack of a job nobody
  waits on. Target: at most 10 % (a ratio of at least 0.91).

Blocks alternate between the subjects of a pair, so load that comes and goes hits both alike; each
ratio is the median of the per-run ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average

import alkstore

QUEUE = "bench"


CPU: list[float] = []


def run_all(store: alkstore.Store, count: int) -> float:
    """Seconds to claim and ack ``count`` jobs of ``QUEUE``, one at a time (this process's CPU per job in ``CPU``)."""
    queue = store.queue(QUEUE)
    cpu = time.process_time()
    started = time.perf_counter()
    done = 0
    while done < count:
        job = queue.claim("bench")
        if job is None:
            raise RuntimeError(f"nothing to claim after {done} of {count} jobs")
        job.ack()
        done += 1
    seconds = time.perf_counter() - started
    CPU.append((time.process_time() - cpu) / count)
    return seconds


def chain_block(store: alkstore.Store, count: int) -> tuple[float, float]:
    """(enqueue seconds, run seconds) of a chain of ``count`` jobs."""
    graph = store.graph()
    for n in range(count):
        graph.add(f"j{n}", QUEUE, n, after=[f"j{n - 1}"] if n else ())
    started = time.perf_counter()
    store.enqueue_graph(graph)
    enqueued = time.perf_counter() - started
    return enqueued, run_all(store, count)


def independent_block(store: alkstore.Store, count: int) -> tuple[float, float]:
    """(enqueue seconds, run seconds) of ``count`` independent jobs."""
    started = time.perf_counter()
    store.queue(QUEUE).enqueue_many(range(count))
    enqueued = time.perf_counter() - started
    return enqueued, run_all(store, count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    plain, bare = f"bench_deps_{tag}", f"bench_nodeps_{tag}"
    print(f"load before      {load_average()}")
    stores = {
        name: alkstore.open(args.dsn, schema=name, migrate=True, clock=alkstore.SystemClock()) for name in (plain, bare)
    }
    try:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP TRIGGER jobs_settle ON {}.jobs").format(sql.Identifier(bare)))
        chain_ratios, ack_ratios = [], []
        for repeat in range(args.repeats):
            chain_enqueue, chain_run = chain_block(stores[plain], args.jobs)
            _, plain_run = independent_block(stores[plain], args.jobs)
            _, bare_run = independent_block(stores[bare], args.jobs)
            chain_ratios.append(plain_run / chain_run)
            ack_ratios.append(bare_run / plain_run)
            chain_cpu, plain_cpu, bare_cpu = (f"{us * 1e6:.0f}" for us in CPU[-3:])
            print(
                f"run {repeat + 1}: chain {args.jobs / chain_run:,.0f} jobs/s (enqueued in {chain_enqueue:.2f} s),"
                f" independent {args.jobs / plain_run:,.0f} jobs/s,"
                f" without the trigger {args.jobs / bare_run:,.0f} jobs/s;"
                f" client CPU per job {chain_cpu} / {plain_cpu} / {bare_cpu} us"
            )
        print(f"chain / independent          {statistics.median(chain_ratios):.2f}x (target >= 0.80x)")
        print(f"ack path with / without      {statistics.median(ack_ratios):.2f}x (target >= 0.91x)")
    finally:
        for store in stores.values():
            store.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for name in (plain, bare):
                admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
