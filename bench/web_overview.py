"""What the dashboard's overview costs the server on a million PostgreSQL jobs.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/web_overview.py [--dsn URL] [--jobs 1000000] [--repeats 20]

It fills a fresh schema (dropped afterwards) with ``--jobs`` jobs across four queues in every
phase, as ``bench/operations.py`` does (the engine port's batch enqueue, claim and bury), plus
a leader and a few workers. After ``VACUUM (ANALYZE)`` it prints the plans
(``EXPLAIN (ANALYZE, BUFFERS)``) of the reads one overview makes (the capped queue counts, the
scheduler's lock, the recent workers), then the server time of ``GET /`` and of the polled
``GET /fragments/overview``, the app served in process over an ``AsyncStore`` (no network):
median, p90 and best of ``--repeats`` requests. The default cap (10,000) is measured, and
``cap=None`` (exact counts) once, for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average
from anyio.from_thread import start_blocking_portal
from operations import _load
from psycopg import sql
from starlette.testclient import TestClient

import alkstore
from alkstore import STATS_CAP
from alkstore.adapters.postgres._sql import Statements
from alkstore.adapters.web import WORKERS_WITHIN, create_app
from alkstore.engine import WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK


def _explain(conn: psycopg.Connection[Any], title: str, statement: str, params: dict[str, Any]) -> None:
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).fetchall()
    print(f"\n  {title}:")
    print("\n".join(f"    {row[0]}" for row in rows))


def _timed(client: TestClient, path: str, repeats: int) -> str:
    assert client.get(path).status_code == 200  # warms the pool and the caches
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200
    samples.sort()
    p90 = samples[min(len(samples) - 1, int(len(samples) * 0.9))]
    return f"median {statistics.median(samples):7.1f} ms, p90 {p90:7.1f} ms, best {samples[0]:7.1f} ms"


def _serve(dsn: str, schema: str, repeats: int) -> None:
    """The app over an ``AsyncStore`` on one loop (a portal's), as ``alkstore web`` serves it, driven in process."""
    with start_blocking_portal() as portal:
        store = portal.call(lambda: alkstore.open_async(dsn, schema=schema, min_size=1, max_size=4))
        try:
            for cap in (STATS_CAP, None):
                client = TestClient(create_app(store, cap=cap), base_url="http://127.0.0.1")
                client.portal = portal  # every request on the store's loop
                label = "cap=None" if cap is None else f"cap={cap:,}"
                print(f"  GET /                   {label:<12} {_timed(client, '/', repeats)}")
                print(f"  GET /fragments/overview {label:<12} {_timed(client, '/fragments/overview', repeats)}")
        finally:
            portal.call(store.close)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    schema = f"bench_web_{uuid.uuid4().hex[:8]}"
    print(f"load average at the start: {load_average()}")
    statements = Statements.for_schema(schema)
    try:
        with (
            alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=2) as store,
            psycopg.connect(args.dsn, autocommit=True) as conn,
        ):
            started = time.perf_counter()
            print(f"loading {args.jobs:,} jobs into schema {schema!r}:")
            _load(store, args.jobs)
            now = store.clock.now()
            assert store.engine.try_lock(SCHEDULER_LOCK, "bench-leader", now, now + timedelta(hours=1))
            for n in range(8):
                worker = WorkerRecord(f"bench-{n}", "bench", 1000 + n, ("emails",), 8, now, now, processed=n * 100)
                store.engine.record_worker(worker)
            print(f"  loaded in {time.perf_counter() - started:.0f} s")
            for table in ("jobs", "dead_jobs"):
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))
            now = store.clock.now()
            print("\nthe overview's reads:")
            _explain(conn, "queue_stats(cap=10,000)", statements.queue_counts, {"now": now, "cap": STATS_CAP})
            _explain(conn, "leader()", statements.read_lock, {"name": SCHEDULER_LOCK})
            since = now - timedelta(seconds=WORKERS_WITHIN)
            _explain(conn, f"workers({WORKERS_WITHIN:g})", statements.workers, {"since": since})
        print("\nthe overview's server time (in process, no network):")
        _serve(args.dsn, schema, args.repeats)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"load average at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
