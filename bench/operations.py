"""What inspection costs on a large PostgreSQL jobs table: ``Store.queue_stats`` and ``Store.jobs``.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/operations.py [--dsn URL] [--jobs 1000000] [--repeats 20]

It fills a fresh schema (dropped afterwards) with ``--jobs`` jobs across five queues, in every
phase (ready, delayed: some of them already due, running, dead), through the engine port's
batch enqueue, claim and bury. Then, twice — once right after the load and ``ANALYZE`` (the
visibility map not yet set, so index-only scans still visit the heap), once after ``VACUUM`` —
it prints the plan of the counting statement (``EXPLAIN (ANALYZE, BUFFERS)``) and the wall time
of ``queue_stats()`` for every queue and for one, and of a first and a deep page of
``jobs()``: the median, p90 and best of ``--repeats`` calls. Results are recorded in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from _bench import DEFAULT_DSN
from psycopg import sql

import alkstore
from alkstore import JobPhase, Store
from alkstore.adapters.postgres._sql import Statements
from alkstore.engine import Burial, ClaimRequest, NewJob

BATCH = 10_000
LEASE = timedelta(minutes=30)


def _load(store: Store, total: int) -> dict[str, int]:
    """Fill the store with ``total`` jobs: per queue, how many of each phase were made."""
    engine = store.engine
    now = store.clock.now()
    scale = total / 1_000_000
    plan = {  # queue: (ready, delayed, running, dead), for a million jobs
        "emails": (500_000, 0, 0, 30_000),
        "reports": (150_000, 150_000, 0, 0),
        "webhooks": (100_000, 0, 1_000, 20_000),
        "thumbnails": (49_000, 0, 0, 0),
    }
    made: dict[str, int] = {}
    for queue, (ready, delayed, running, dead) in plan.items():
        ready, delayed, running, dead = (round(n * scale) for n in (ready, delayed, running, dead))
        fresh = ready + running + dead
        for start in range(0, fresh, BATCH):
            count = min(BATCH, fresh - start)
            jobs = [NewJob(queue, b'{"n":%d}' % (start + i), 0, now, None, 3) for i in range(count)]
            engine.enqueue(jobs, now)
        for start in range(0, delayed, BATCH):
            count = min(BATCH, delayed - start)
            # Spread over the next hour: a tenth is due by the time the measurement starts.
            jobs = [
                NewJob(queue, b'{"later":%d}' % (start + i), 0, now + timedelta(seconds=(start + i) % 3600), None, 3)
                for i in range(count)
            ]
            engine.enqueue(jobs, now)
        for taken in range(0, running + dead, 1000):
            limit = min(1000, running + dead - taken)
            claimed = engine.claim(ClaimRequest(queue, "bench", store.clock.now(), LEASE, limit))
            doomed = claimed if taken >= running else claimed[max(0, running - taken) :]
            if doomed:
                engine.bury([Burial(job.id, job.fence, "benchmark") for job in doomed], store.clock.now())
        made[queue] = ready + delayed + running + dead
        print(f"  {queue}: {ready:,} ready, {delayed:,} delayed, {running:,} running, {dead:,} dead", flush=True)
    return made


def _timed(call: Callable[[], Any], repeats: int) -> str:
    call()  # the first call prepares nothing here, but warms the caches
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    return f"median {statistics.median(samples):7.1f} ms, p90 {p90:7.1f} ms, best {samples[0]:7.1f} ms"


def _explain(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> str:
    """The plan of ``statement`` and, through auto_explain, of the last statement run inside its functions."""
    notices: list[str] = []

    def collect(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    conn.add_notice_handler(collect)
    conn.execute("LOAD 'auto_explain'")
    for setting in ("log_nested_statements = on", "log_analyze = on", "log_buffers = on", "log_level = notice"):
        conn.execute(f"SET auto_explain.{setting}")
    conn.execute("SET auto_explain.log_min_duration = 0")
    try:
        rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).fetchall()
    finally:
        conn.execute("SET auto_explain.log_min_duration = -1")
        conn.remove_notice_handler(collect)
    plan = "\n".join(f"    {row[0]}" for row in rows)
    inner = [text for text in notices if "Query Text:" in text and "WITH RECURSIVE bands" in text]
    body = "\n".join("    " + line for line in inner[-1].splitlines()) if inner else "    (no nested plan logged)"
    return f"{plan}\n  inside queue_counts_4, for the last queue:\n{body}"


def _measure(store: Store, conn: psycopg.Connection[Any], statements: Statements, repeats: int) -> None:
    now = store.clock.now()
    print(_explain(conn, statements.queue_counts, {"now": now, "cap": 10_000}))
    print(f"  queue_stats()                   {_timed(store.queue_stats, repeats)}")
    print(f"  queue_stats('emails')           {_timed(lambda: store.queue_stats('emails'), repeats)}")
    print(f"  queue_stats(cap=None)           {_timed(lambda: store.queue_stats(cap=None), repeats)}")
    print(f"  queue_stats('emails', cap=None) {_timed(lambda: store.queue_stats('emails', cap=None), repeats)}")
    print(f"  jobs('emails') page 1           {_timed(lambda: store.jobs('emails'), repeats)}")
    cursor = store.jobs("emails", limit=1000).cursor
    for _ in range(99):  # 100,000 jobs in
        cursor = store.jobs("emails", limit=1000, cursor=cursor).cursor
    print(f"  jobs('emails') @100k            {_timed(lambda: store.jobs('emails', cursor=cursor), repeats)}")
    print(f"  jobs(dead) page 1               {_timed(lambda: store.jobs('emails', JobPhase.DEAD), repeats)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("ALKSTORE_BENCH_DSN", DEFAULT_DSN))
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    schema = f"bench_ops_{uuid.uuid4().hex[:8]}"
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    statements = Statements.for_schema(schema)
    try:
        with (
            alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=2) as store,
            psycopg.connect(args.dsn, autocommit=True) as conn,
        ):
            started = time.perf_counter()
            print(f"loading {args.jobs:,} jobs into schema {schema!r}:")
            _load(store, args.jobs)
            print(f"  loaded in {time.perf_counter() - started:.0f} s")
            tables = [sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(t)) for t in ("jobs", "dead_jobs")]
            for table in tables:
                conn.execute(sql.SQL("ANALYZE {}").format(table))
            print("\nafter ANALYZE, before VACUUM:")
            _measure(store, conn, statements, args.repeats)
            for table in tables:
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
            print("\nafter VACUUM:")
            _measure(store, conn, statements, args.repeats)
            size = conn.execute(
                "SELECT pg_size_pretty(pg_total_relation_size(%s::regclass))", [f"{schema}.jobs"]
            ).fetchone()
            print(f"\njobs table with its indexes: {size[0] if size else '?'}")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
