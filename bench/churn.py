"""Churn through one queue on PostgreSQL: what dead rows cost the claim, and what keeps the tables flat.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/churn.py [--dsn URL] [--jobs 500000] [--arms none,alkstore]

Each arm gets a fresh schema (dropped afterwards) and pushes ``--jobs`` no-op jobs through one
queue with ``queue.claim(worker)`` + ``job.ack()`` on one thread, the backlog kept between
``--depth`` and twice that by ``enqueue_many`` between timed blocks. Arms:

- ``none``: nothing reclaims dead rows but what the server does itself (on a server with
  ``autovacuum = off``, nothing);
- ``alkstore``: a thread runs the worker's storage duty (``alkstore._maintenance``) as a
  worker does, every ``VACUUM_CHECK_EVERY`` seconds.

Reported per arm, all in the same run: claim+ack/s before the churn (the first blocks on a
fresh table), during it (each tenth, and overall), after it (same depth), and a fresh claim
after it (a new batch into the emptied queue); an idle worker's empty-queue poll (``EXPLAIN
(ANALYZE, BUFFERS)`` of the engine's own claim statement, and of its lease probe alone) on the
fresh table and after the churn; table and index sizes and dead tuples after it; then the same
after one ``VACUUM``. The ratios the issue sets targets for: claim+ack after / before >= 0.8,
and an idle poll under 100 buffers. Results are recorded in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

import alkstore
from alkstore import _maintenance

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
QUEUE = "churn"
WORKER = "bench"
#: A short lease, so acked jobs' lease ends pass within the run (the probe then reads them).
VISIBILITY_S = 5.0
#: Jobs per timed block (and per refill).
BLOCK = 1000
#: Blocks measured on the fresh table ("before") and after the churn ("after").
SAMPLE_BLOCKS = 5


@dataclass
class Poll:
    """An empty-queue poll: buffers and milliseconds of the claim, and of its lease probe alone."""

    claim_buffers: int
    claim_ms: float
    probe_buffers: int
    probe_ms: float


@dataclass
class Arm:
    name: str
    before: float = 0.0
    during: list[float] = field(default_factory=list)
    overall: float = 0.0
    after: float = 0.0
    fresh: float = 0.0
    after_vacuum: float = 0.0
    poll_before: Poll | None = None
    poll_after: Poll | None = None
    poll_vacuumed: Poll | None = None
    sizes_after: dict[str, int] = field(default_factory=dict)
    sizes_vacuumed: dict[str, int] = field(default_factory=dict)
    vacuums: int = 0
    churn_s: float = 0.0


def claim_ack(queue: alkstore.Queue, count: int) -> float:
    """Claim and ack ``count`` jobs; their rate per second."""
    started = time.perf_counter()
    for _ in range(count):
        job = queue.claim(WORKER)
        if job is None:
            raise RuntimeError("the queue ran dry under a timed block")
        job.ack()
    return count / (time.perf_counter() - started)


def refill(queue: alkstore.Queue, count: int) -> None:
    for start in range(0, count, BLOCK):
        queue.enqueue_many([{"task": "noop", "n": n} for n in range(start, min(count, start + BLOCK))])


def drain(queue: alkstore.Queue) -> None:
    while (job := queue.claim(WORKER)) is not None:
        job.ack()


def explain(conn: psycopg.Connection[Any], statement: str, params: dict[str, Any]) -> tuple[int, float]:
    """Shared buffers (hit + read) and execution ms of one run of ``statement``, parameters inlined."""
    cursor = psycopg.ClientCursor(conn)
    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
    row = cursor.fetchone()
    assert row is not None
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]
    top = plan["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"]), float(plan["Execution Time"])


def poll(store: alkstore.Store, conn: psycopg.Connection[Any]) -> Poll:
    """An idle worker's poll of the (empty) queue, as the engine runs it: the claim, then its probe alone."""
    statements = store.engine._sql  # type: ignore[attr-defined]
    now = store.clock.now()
    params = {
        "probe": True,
        "queue": QUEUE,
        "worker": WORKER,
        "now": now,
        "lease_us": int(VISIBILITY_S * 1e6),
        "limit": 1,
        "lease_expired_error": "lease expired",
        "job_expired_error": "expired",
    }
    # Warm: the first look marks dead index entries (later polls skip their heap rows).
    for _ in range(3):
        explain(conn, statements.claim, params)
    claim = explain(conn, statements.claim, params)
    probe = explain(conn, statements.lease_probe, {"queue": QUEUE, "now": now})
    return Poll(claim[0], claim[1], probe[0], probe[1])


def sizes(conn: psycopg.Connection[Any], schema: str) -> dict[str, int]:
    """The jobs table's heap and index bytes, its live and dead tuples, and its vacuum counts."""
    time.sleep(1.5)  # backends report their counts at most once a second
    row = conn.execute(
        "SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid), s.n_live_tup, s.n_dead_tup,"
        "       s.vacuum_count, s.autovacuum_count"
        " FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
        " JOIN pg_stat_user_tables AS s ON s.relid = c.oid"
        " WHERE n.nspname = %s AND c.relname = 'jobs'",
        [schema],
    ).fetchone()
    assert row is not None
    keys = ("heap", "indexes", "live", "dead", "vacuums", "autovacuums")
    return dict(zip(keys, (int(value) for value in row), strict=True))


class Duty(threading.Thread):
    """The worker's storage duty on its own thread, as a worker runs it."""

    def __init__(self, store: alkstore.Store) -> None:
        super().__init__(name="churn-duty", daemon=True)
        self.every = _maintenance.VACUUM_CHECK_EVERY
        self.duty = _maintenance.Maintenance(store, [QUEUE], dead_retention=None, label="bench")
        self.stop = alkstore.StopToken()
        self.vacuums = 0

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.vacuums += len(self.duty.vacuum())


def run_arm(name: str, dsn: str, jobs: int, depth: int, admin: psycopg.Connection[Any]) -> Arm:
    schema = f"bench_churn_{uuid.uuid4().hex[:8]}"
    arm = Arm(name)
    store = alkstore.open(dsn, schema=schema, migrate=True, min_size=1, max_size=2)
    duty: Duty | None = None
    try:
        queue = store.queue(QUEUE)
        queue.configure(visibility_timeout=VISIBILITY_S)
        arm.poll_before = poll(store, admin)
        refill(queue, depth)
        if name == "alkstore":
            duty = Duty(store)
            duty.start()
        before = []
        for _ in range(SAMPLE_BLOCKS):
            refill(queue, BLOCK)
            before.append(claim_ack(queue, BLOCK))
        arm.before = statistics.median(before)
        done, tenth, block_rates = SAMPLE_BLOCKS * BLOCK, max(BLOCK, jobs // 10), []
        started = time.perf_counter()
        timed = 0.0
        while done < jobs:
            refill(queue, BLOCK)
            block_started = time.perf_counter()
            claim_ack(queue, BLOCK)
            timed += time.perf_counter() - block_started
            done += BLOCK
            block_rates.append(BLOCK / (time.perf_counter() - block_started))
            if done % tenth < BLOCK:
                arm.during.append(statistics.median(block_rates))
                block_rates = []
                print(f"  {name}: {done:,} jobs, {arm.during[-1]:,.0f}/s", file=sys.stderr, flush=True)
        arm.churn_s = time.perf_counter() - started
        arm.overall = (done - SAMPLE_BLOCKS * BLOCK) / timed if timed else 0.0
        after = []
        for _ in range(SAMPLE_BLOCKS):
            refill(queue, BLOCK)
            after.append(claim_ack(queue, BLOCK))
        arm.after = statistics.median(after)
        if duty is not None:
            duty.stop.cancel()
            duty.join()
            arm.vacuums = duty.vacuums
        drain(queue)
        time.sleep(VISIBILITY_S)  # every acked job's lease end is now in the probe's range
        arm.poll_after = poll(store, admin)
        arm.sizes_after = sizes(admin, schema)
        refill(queue, SAMPLE_BLOCKS * BLOCK)
        arm.fresh = claim_ack(queue, SAMPLE_BLOCKS * BLOCK)
        admin.execute(sql.SQL("VACUUM {}.jobs").format(sql.Identifier(schema)))
        arm.poll_vacuumed = poll(store, admin)
        arm.sizes_vacuumed = sizes(admin, schema)
        refill(queue, depth)
        vacuumed = []
        for _ in range(SAMPLE_BLOCKS):
            refill(queue, BLOCK)
            vacuumed.append(claim_ack(queue, BLOCK))
        arm.after_vacuum = statistics.median(vacuumed)
    finally:
        if duty is not None:
            duty.stop.cancel()
        store.close()
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return arm


def report(arms: list[Arm], admin: psycopg.Connection[Any], jobs: int, depth: int) -> None:
    settings = dict(
        admin.execute("SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'server_version')")
    )
    print(
        f"jobs {jobs:,}, depth {depth:,}-{2 * depth:,}, one thread; server {settings['server_version']}, "
        f"autovacuum={settings['autovacuum']}; alkstore schema version "
        f"{__import__('alkstore.adapters.postgres._migrate', fromlist=['x']).current_version()}"
    )
    for arm in arms:
        assert arm.poll_before
        assert arm.poll_after
        assert arm.poll_vacuumed
        mb = 1024 * 1024
        print(f"\narm {arm.name} ({arm.churn_s:.0f} s of churn, {arm.vacuums} vacuums by alkstore)")
        print(
            "  claim+ack/s: before {:,.0f}, during {:,.0f} (tenths: {}), after {:,.0f} = {:.2f}x before".format(
                arm.before, arm.overall, " ".join(f"{r:,.0f}" for r in arm.during), arm.after, arm.after / arm.before
            )
        )
        print(f"  fresh claim+ack/s after: {arm.fresh:,.0f} = {arm.fresh / arm.before:.2f}x before")
        for label, p in (
            ("fresh table", arm.poll_before),
            ("after churn", arm.poll_after),
            ("after VACUUM", arm.poll_vacuumed),
        ):
            print(
                f"  idle poll, {label}: claim {p.claim_buffers:,} buffers {p.claim_ms:.2f} ms;"
                f" lease probe {p.probe_buffers:,} buffers {p.probe_ms:.2f} ms"
            )
        for label, s in (("after churn", arm.sizes_after), ("after VACUUM", arm.sizes_vacuumed)):
            print(
                f"  jobs {label}: heap {s['heap'] / mb:.1f} MB, indexes {s['indexes'] / mb:.1f} MB, "
                f"live {s['live']:,}, dead {s['dead']:,}, vacuums {s['vacuums']}, autovacuums {s['autovacuums']}"
            )
        print(f"  claim+ack/s after VACUUM: {arm.after_vacuum:,.0f} = {arm.after_vacuum / arm.before:.2f}x before")
    with open("/proc/loadavg") as loadavg:
        print(f"\n/proc/loadavg at the end: {loadavg.read().strip()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=500_000, help="jobs pushed through the queue per arm")
    parser.add_argument("--depth", type=int, default=1000, help="the backlog kept (between this and twice it)")
    parser.add_argument("--arms", default="none,alkstore", help="comma-separated: none, alkstore")
    args = parser.parse_args()
    arms = [arm for arm in args.arms.split(",") if arm]
    if not set(arms) <= {"none", "alkstore"}:
        parser.error(f"unknown arm in {args.arms!r}")
    with open("/proc/loadavg") as loadavg:
        print(f"/proc/loadavg at the start: {loadavg.read().strip()}")
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        results = [run_arm(name, args.dsn, args.jobs, args.depth, admin) for name in arms]
        report(results, admin, args.jobs, args.depth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
