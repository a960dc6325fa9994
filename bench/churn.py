"""Churn through one queue on PostgreSQL: what dead rows cost the claim, and what keeps the tables flat.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/churn.py [--dsn URL] [--jobs 500000] [--arms none,alkstore]

Each arm gets a fresh schema (dropped afterwards) and pushes ``--jobs`` no-op jobs (SIGUSR1 ends the
churn sooner, and the rest is measured as usual) through one
queue with claim+ack as a worker does it (``Queue._ack_and_claim``: the ack of one job rides on the
claim of the next, one statement each, ADR 022) on one thread, the backlog kept between
``--depth`` and twice that by ``enqueue_many`` between timed blocks. Arms:

- ``none``: nothing reclaims dead rows but what the server does itself (on a server with
  ``autovacuum = off``, nothing);
- ``alkstore``: a thread runs the worker's storage duty (``alkstore.worker._maintenance``) as a
  worker does (``Maintenance.run``, counting this process's claimed and acked jobs as its runs).

The machine may be shared, so every rate is a ratio against **the reference**: the same queue
at the same depth in a schema of its own, vacuumed (untimed) after each of its blocks, so it
stays as a fresh table is; its blocks of ``REF_BLOCK`` jobs alternate with the arm's, and load
that comes and goes hits both alike. Reported per arm: claim+ack against the reference before
the churn (on the fresh table), during it (each tenth), after it (same depth) and for fresh
batches into the emptied queue, and each of these over "before" (the load-free form of "the rate
after against the rate before"); an idle worker's empty-queue poll (``EXPLAIN (ANALYZE,
BUFFERS)`` of the engine's own claim statement, and of its lease probe alone) on the fresh
table and after the churn; the jobs table's heap and index sizes, live and dead tuples and
vacuum counts after it; then the same after one ``VACUUM``. The issue's targets: claim+ack after
/ before >= 0.8 with no autovacuum, and an idle poll under 100 buffers. Results are recorded in
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average
from psycopg import sql

import alkstore
from alkstore.adapters.postgres._cursors import full_params
from alkstore.engine import Held
from alkstore.store._kernel import kernel_of
from alkstore.worker import _maintenance

QUEUE = "churn"
WORKER = "bench"
#: A short lease, so acked jobs' lease ends pass within the run (the probe then reads them).
VISIBILITY_S = 5.0
#: Jobs per timed block (and per refill).
BLOCK = 1000
#: Blocks measured on the fresh table ("before") and after the churn ("after").
SAMPLE_BLOCKS = 5
#: Set by SIGUSR1: end the churn now and measure the rest.
ENOUGH = threading.Event()
#: Jobs claimed and acked by this process so far: the ended runs the duty counts (``Duty``).
RUNS = [0]
#: Jobs per block of the reference (the same queue on a table vacuumed after every block).
REF_BLOCK = 250


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
    jobs: int = 0


def claim_ack(store: alkstore.Store, count: int) -> float:
    """Claim and ack ``count`` jobs as a worker does (each ack rides on the next claim, ADR 022); their rate."""
    kernel = kernel_of(store)
    queue = store.queue(QUEUE)
    started = time.perf_counter()
    held: list[tuple[alkstore.Job, Held]] = []
    job = None
    for _ in range(count):
        stale, jobs = kernel.claim(queue.name, WORKER, 1, held)
        if stale or not jobs:
            raise RuntimeError("the queue ran dry under a timed block, or an ack went stale")
        job = jobs[0]
        held = [(job, kernel.held_of(job))]
        RUNS[0] += 1
    if job is not None:
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
    """An idle worker's poll of the (empty) queue, as the engine runs it in full (its first claim and
    the backstop's; ADR 061): the claim, then its probe alone."""
    statements = store.engine._sql  # type: ignore[attr-defined]
    now = store.clock.now()
    params = {
        **full_params(),
        "probe": True,
        "queue": QUEUE,
        "worker": WORKER,
        "now": now,
        "lease_us": int(VISIBILITY_S * 1e6),
        "limit": 1,
        "limited": False,
        "lease_expired_error": "lease expired",
        "job_expired_error": "expired",
    }
    # Warm: the first look marks dead index entries (later polls skip their heap rows).
    for _ in range(3):
        explain(conn, statements.claim_full, params)
    claim = explain(conn, statements.claim_full, params)
    probe = explain(conn, statements.lease_probe, {"queue": QUEUE, "now": now, "probed_after": params["probed_after"]})
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


class Counted(_maintenance.Maintenance):
    """The worker's storage duty, counting the tables it vacuumed."""

    vacuums = 0

    def vacuum(self) -> list[str]:
        done = super().vacuum()
        self.vacuums += len(done)
        return done


class Duty(threading.Thread):
    """The worker's storage duty on its own thread, as a worker runs it (``Maintenance.run``), counting
    the jobs this process claimed and acked as the worker counts its ended runs."""

    def __init__(self, store: alkstore.Store) -> None:
        super().__init__(name="churn-duty", daemon=True)
        self.duty = Counted(kernel_of(store), [QUEUE], dead_retention=None, label="bench", churn=lambda: RUNS[0])
        self.stop = alkstore.StopToken()

    @property
    def vacuums(self) -> int:
        return self.duty.vacuums

    def run(self) -> None:
        self.duty.run(self.stop)


class Reference:
    """The floor: the same queue at the same depth in a schema of its own, vacuumed (untimed) after
    every block so it stays as a fresh table is; its blocks alternate with the arm's, so load that
    comes and goes on a shared machine hits both alike."""

    def __init__(self, dsn: str, admin: psycopg.Connection[Any], depth: int) -> None:
        self.schema = f"bench_churn_ref_{uuid.uuid4().hex[:8]}"
        self.admin = admin
        self.store = alkstore.open(dsn, schema=self.schema, migrate=True, min_size=1, max_size=2)
        self.queue = self.store.queue(QUEUE)
        self.queue.configure(visibility_timeout=VISIBILITY_S)
        refill(self.queue, depth + REF_BLOCK)

    def block(self) -> float:
        rate = claim_ack(self.store, REF_BLOCK)
        refill(self.queue, REF_BLOCK)
        self.admin.execute(sql.SQL("VACUUM {}.jobs").format(sql.Identifier(self.schema)))
        return rate

    def close(self) -> None:
        self.store.close()
        self.admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.schema)))


def sample(store: alkstore.Store, reference: Reference, blocks: int) -> float:
    """Blocks of the arm's claim+ack alternating with the reference's: the median ratio of their rates.

    Each block enqueues ``BLOCK`` jobs and claims as many: into an emptied queue, each is a fresh batch.
    """
    ratios = []
    for _ in range(blocks):
        refill(store.queue(QUEUE), BLOCK)
        rate = claim_ack(store, BLOCK)
        ratios.append(rate / reference.block())
    return statistics.median(ratios)


def run_arm(name: str, dsn: str, jobs: int, depth: int, admin: psycopg.Connection[Any]) -> Arm:
    schema = f"bench_churn_{uuid.uuid4().hex[:8]}"
    arm = Arm(name)
    reference = Reference(dsn, admin, depth)
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
        arm.before = sample(store, reference, SAMPLE_BLOCKS)
        done, tenth, ratios = SAMPLE_BLOCKS * BLOCK, max(BLOCK, jobs // 10), []
        started = time.perf_counter()
        while done < jobs:
            if ENOUGH.is_set():
                print(f"  {name}: churn ended by SIGUSR1 after {done:,} jobs", file=sys.stderr, flush=True)
                break
            refill(queue, BLOCK)
            rate = claim_ack(store, BLOCK)
            done += BLOCK
            if done % (4 * BLOCK) == 0 or done % tenth < BLOCK:  # the reference every fourth block
                ratios.append(rate / reference.block())
            if done % tenth < BLOCK:
                arm.during.append(statistics.median(ratios))
                ratios = []
                print(f"  {name}: {done:,} jobs, {arm.during[-1]:.2f}x the reference", file=sys.stderr, flush=True)
        arm.churn_s = time.perf_counter() - started
        arm.jobs = done
        arm.after = sample(store, reference, SAMPLE_BLOCKS)
        if duty is not None:
            duty.stop.cancel()
            duty.join()
            arm.vacuums = duty.vacuums
        drain(queue)
        time.sleep(VISIBILITY_S)  # every acked job's lease end is now in the probe's range
        arm.poll_after = poll(store, admin)
        arm.sizes_after = sizes(admin, schema)
        arm.fresh = sample(store, reference, SAMPLE_BLOCKS)  # the queue is empty: fresh batches
        admin.execute(sql.SQL("VACUUM {}.jobs").format(sql.Identifier(schema)))
        arm.poll_vacuumed = poll(store, admin)
        arm.sizes_vacuumed = sizes(admin, schema)
        refill(queue, depth)
        arm.after_vacuum = sample(store, reference, SAMPLE_BLOCKS)
    finally:
        if duty is not None:
            duty.stop.cancel()
        store.close()
        admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        reference.close()
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
        print(f"\narm {arm.name}: {arm.jobs:,} jobs in {arm.churn_s:.0f} s of churn, {arm.vacuums} vacuums by alkstore")
        print(
            "  claim+ack against the reference: before {:.2f}x, during (tenths) {}, after {:.2f}x; "
            "after / before = {:.2f}".format(
                arm.before, " ".join(f"{r:.2f}" for r in arm.during), arm.after, arm.after / arm.before
            )
        )
        fresh = arm.fresh / arm.before
        print(f"  fresh claim+ack after, into the emptied queue: {arm.fresh:.2f}x; / before = {fresh:.2f}")
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
        print(f"  claim+ack after one VACUUM: {arm.after_vacuum:.2f}x; / before = {arm.after_vacuum / arm.before:.2f}")
    print(f"\n/proc/loadavg at the end: {load_average()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=500_000, help="jobs pushed through the queue per arm")
    parser.add_argument("--depth", type=int, default=1000, help="the backlog kept (between this and twice it)")
    parser.add_argument("--arms", default="none,alkstore", help="comma-separated: none, alkstore")
    args = parser.parse_args()
    signal.signal(signal.SIGUSR1, lambda *_: ENOUGH.set())
    arms = [arm for arm in args.arms.split(",") if arm]
    if not set(arms) <= {"none", "alkstore"}:
        parser.error(f"unknown arm in {args.arms!r}")
    print(f"/proc/loadavg at the start: {load_average()}")
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        results = [run_arm(name, args.dsn, args.jobs, args.depth, admin) for name in arms]
        report(results, admin, args.jobs, args.depth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
