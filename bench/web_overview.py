"""What the dashboard's overview costs the server on a million PostgreSQL jobs.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/web_overview.py [--dsn URL] [--jobs 1000000] [--repeats 20]

It fills a fresh schema (dropped afterwards) with ``--jobs`` jobs across four queues in every
phase, as ``bench/operations.py`` does (the engine port's batch enqueue, claim and bury), plus
a leader and a few workers. After ``VACUUM (ANALYZE)`` it prints the plans
(``EXPLAIN (ANALYZE, BUFFERS)``) of the reads one overview makes (the capped queue counts, the
scheduler's lock, the recent workers) and of the action log's retention purge when nothing is old
(a walk of the whole log), then the server time of ``GET /`` and of the polled
``GET /fragments/overview``, the app served in process over an ``AsyncStore`` (no network):
median, p90 and best of ``--repeats`` requests. The default cap (10,000) is measured, and
``cap=None`` (exact counts) once, for comparison. Then the console's other pages (ADR 065, 068) the
same way: a queue's page with its settings form, its dead tab, the dead letters grouped, the workers,
locks and Actions pages (over ``--actions`` logged entries), the live fragments the queue, dead-letters,
workers and locks pages poll every 2 s, the throughput charts over a day (a day of stored counts for
every queue), and the confirmation of a bulk action, which counts what it would act on: the
queue's exact count of a state, or, under a task filter, one by one up to 100,000.
"""

from __future__ import annotations

import argparse
import re
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
from alkstore import DEFAULT_ACTION_RETENTION, STATS_CAP
from alkstore.adapters.postgres._sql import Statements
from alkstore.adapters.web import CSRF_FIELD, WORKERS_WITHIN, create_app
from alkstore.display import minute_of
from alkstore.engine import ThroughputRecord, WorkerRecord
from alkstore.rules._names import SCHEDULER_LOCK


def _explain(conn: psycopg.Connection[Any], title: str, statement: str, params: dict[str, Any]) -> None:
    rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).fetchall()
    print(f"\n  {title}:")
    print("\n".join(f"    {row[0]}" for row in rows))


def _timed(client: TestClient, path: str, repeats: int, form: dict[str, str] | None = None) -> str:
    """Server time of ``GET path``, or of ``POST path`` with ``form`` (a confirmation: it acts on nothing)."""

    def once() -> Any:
        return client.get(path) if form is None else client.post(path, data=form)

    assert once().status_code == 200  # warms the pool and the caches
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = once()
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
            client = TestClient(create_app(store), base_url="http://127.0.0.1", headers={"Origin": "http://127.0.0.1"})
            client.portal = portal
            print("\nthe console's other pages (cap=10,000):")
            for path in _PAGES:
                print(f"  GET {path:<34} {_timed(client, path, repeats)}")
            page = client.get("/queues/emails").text
            (token,) = set(re.findall(rf'name="{CSRF_FIELD}" value="([^"]+)"', page))
            for what, fields in _CONFIRMATIONS.items():
                form = {CSRF_FIELD: token, **fields}
                print(f"  POST /actions/filter, {what:<22} {_timed(client, '/actions/filter', repeats, form)}")
        finally:
            portal.call(store.close)


#: The console's pages timed besides the overview (``emails`` holds 500,000 ready and 30,000 dead jobs).
_PAGES = (
    "/queues/emails",
    "/queues/emails?state=dead",
    "/fragments/counts/emails",
    "/dead",
    "/fragments/dead",
    "/workers",
    "/fragments/workers",
    "/locks",
    "/fragments/locks",
    "/actions",
    "/charts?range=24h",
    "/charts?queue=emails&range=24h",
)
#: Bulk confirmations timed: each counts the jobs it would act on, and acts on none.
_CONFIRMATIONS = {
    "every ready of emails": {"action": "cancel", "queue": "emails", "state": "ready"},
    "ready of a task": {"action": "cancel", "queue": "emails", "state": "ready", "task": "nobody"},
}


def _history(store: alkstore.Store, actions: int) -> None:
    """A day of stored throughput for every queue, and ``actions`` logged actions."""
    now = store.clock.now()
    queues = ("emails", "reports", "webhooks", "thumbnails")
    day = [minute_of(now) - timedelta(minutes=back) for back in range(1440)]
    for start in range(0, len(day), 60):
        counts = [ThroughputRecord(q, minute, 100, 3) for minute in day[start : start + 60] for q in queues]
        store.engine.record_worker(WorkerRecord("bench-history", "bench", 1, queues, 1, now, now), counts)
    for n in range(actions):
        store.log_action("pause_queue", f"queue emails-{n}", "Paused.", role="full", address="10.0.0.1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--actions", type=int, default=10_000)
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
            _history(store, args.actions)
            print(f"  loaded in {time.perf_counter() - started:.0f} s")
            for table in ("jobs", "dead_jobs"):
                conn.execute(sql.SQL("VACUUM (ANALYZE) {}.{}").format(sql.Identifier(schema), sql.Identifier(table)))
            now = store.clock.now()
            print("\nthe overview's reads:")
            _explain(conn, "queue_stats(cap=10,000)", statements.queue_counts, {"now": now, "cap": STATS_CAP})
            _explain(conn, "leader()", statements.read_lock, {"name": SCHEDULER_LOCK})
            since = now - timedelta(seconds=WORKERS_WITHIN)
            _explain(conn, f"workers({WORKERS_WITHIN:g})", statements.workers, {"since": since})
            old = {"before": now - DEFAULT_ACTION_RETENTION, "limit": 1000}  # nothing is: it deletes none
            _explain(conn, f"purge_actions, {args.actions:,} entries, none old", statements.purge_actions, old)
        print("\nthe overview's server time (in process, no network):")
        _serve(args.dsn, schema, args.repeats)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"load average at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
