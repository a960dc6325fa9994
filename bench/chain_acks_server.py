"""Server CPU of a chain's step on PostgreSQL: version 17's ack path beside today's (ADR 073).

Run by hand, never from the test suite, on the machine that runs the server (it reads the server
process's ``/proc/<pid>/schedstat``)::

    .venv/bin/python bench/chain_acks_server.py [--dsn URL] [--jobs 300] [--rounds 4]

Load-independent: each store has one pooled connection, and the CPU time its server process ran
(``schedstat``'s first field) is read before and after each step, so other work on the machine is
not counted. Two schemas, both migrated by this code: ``now`` as migrated, and ``17`` with its ack
path put back as version 17 had it (``jobs_settle`` on ``settle_15``, whose ``promote_15`` notifies
at once; ``jobs_keep_on_death`` on ``keep_on_death_17``; no deferred wake). Per schema, four
subjects, each a step of a job run one at a time: a chain's step and an independent job through a
worker's call (the ack carried by the next claim, ``ack_and_claim``), and the same through the
store's calls (``Job.ack()``, then ``claim``). Also the server's execution time (``EXPLAIN ANALYZE``)
of the ack of a job with a ``rate_key``. Rounds alternate the schemas; each figure is a median over
the rounds of the per-round mean.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, backend_pid, enqueue_block, explained_ack, load_average, server_cpu_ns

import alkstore
from alkstore import EnqueueOpts, Store
from alkstore.engine import ClaimRequest, Held

#: Version 17's ack path, put back on a schema migrated as today (its functions are still there).
AS_17 = (
    "DROP TRIGGER IF EXISTS job_dependencies_wake ON {s}.job_dependencies",  # gone since schema 20
    "DROP TRIGGER jobs_settle ON {s}.jobs",
    "CREATE TRIGGER jobs_settle AFTER DELETE ON {s}.jobs"
    " FOR EACH ROW WHEN (OLD.dependents > 0 OR OLD.on_parent_failure IS NOT NULL) EXECUTE FUNCTION {s}.settle_15()",
    "CREATE TRIGGER jobs_keep_on_death AFTER DELETE ON {s}.jobs"
    " FOR EACH ROW WHEN (OLD.rate_key IS NOT NULL OR OLD.on_parent_failure IS NOT NULL)"
    " EXECUTE FUNCTION {s}.keep_on_death_17()",
)
SUBJECTS = ("chain, worker", "independent, worker", "chain, store calls", "independent, store calls")


def through_worker(store: Store, queue: str, jobs: int, pid: int) -> float:
    """Mean server CPU (ms) of one step: the ack of a job carried by the claim of the next."""
    engine: Any = store.engine
    clock = alkstore.SystemClock()

    def request() -> ClaimRequest:
        return ClaimRequest(queue=queue, worker_id="bench", now=clock.now(), lease=timedelta(seconds=300), limit=1)

    held = engine.claim(request())
    spent = 0
    for _ in range(jobs - 1):
        before = server_cpu_ns(pid)
        stale, held = engine.ack_and_claim([Held(held[0].id, held[0].fence)], request())
        spent += server_cpu_ns(pid) - before
        assert stale == [], queue
        assert len(held) == 1, queue
    assert engine.ack([Held(held[0].id, held[0].fence)]) == []
    return spent / (jobs - 1) / 1e6


def through_store(store: Store, queue: str, jobs: int, pid: int) -> float:
    """Mean server CPU (ms) of one step: ``Job.ack()``, then the claim of the next job."""
    job = store.queue(queue).claim("bench")
    spent = 0
    for _ in range(jobs - 1):
        assert job is not None, queue
        before = server_cpu_ns(pid)
        job.ack()
        job = store.queue(queue).claim("bench")
        spent += server_cpu_ns(pid) - before
    assert job is not None
    job.ack()
    return spent / (jobs - 1) / 1e6


def keyed_ack(store: Store, admin: psycopg.Connection[Any], schema: str, jobs: int) -> float:
    """Median server execution time (ms) of the ack of a job with a rate_key."""
    queue = store.queue("keyed")
    queue.enqueue_many(range(jobs), EnqueueOpts(rate_key="customer:1"))
    times = []
    for _ in range(jobs):
        job = queue.claim("bench")
        assert job is not None
        times.append(explained_ack(admin, schema, int(job.id))[0])
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    schemas = {"17": f"bench_acks17_{tag}", "now": f"bench_acksnow_{tag}"}
    print(f"load before      {load_average()}")
    clock = alkstore.SystemClock()
    stores = {
        version: alkstore.open(args.dsn, schema=name, migrate=True, clock=clock, min_size=1, max_size=1)
        for version, name in schemas.items()
    }
    runs: dict[str, Callable[[Store, str, int, int], float]] = {
        "chain, worker": through_worker,
        "independent, worker": through_worker,
        "chain, store calls": through_store,
        "independent, store calls": through_store,
    }
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for statement in AS_17:
                admin.execute(sql.SQL(statement).format(s=sql.Identifier(schemas["17"])))
            pids = {version: backend_pid(store) for version, store in stores.items()}
            for number in range(args.rounds):
                order = ("17", "now") if number % 2 == 0 else ("now", "17")
                for subject, run in runs.items():
                    for version in order:
                        queue = f"{subject.replace(', ', '-').replace(' ', '-')}-{number}"
                        enqueue_block(stores[version], queue, args.jobs, subject.startswith("chain"))
                        ms = run(stores[version], queue, args.jobs, pids[version])
                        figures.setdefault((subject, version), []).append(ms)
                for version in order:
                    ms = keyed_ack(stores[version], admin, schemas[version], args.jobs // 3)
                    figures.setdefault(("keyed ack (EXPLAIN)", version), []).append(ms)
            assert pids == {version: backend_pid(store) for version, store in stores.items()}, "a connection changed"
        for subject in (*SUBJECTS, "keyed ack (EXPLAIN)"):
            old, new = (statistics.median(figures[subject, version]) for version in ("17", "now"))
            print(f"{subject:<26} 17: {old:.3f} ms   now: {new:.3f} ms   ({new / old:.2f}x)")
        for version in ("17", "now"):
            chain = statistics.median(figures["chain, worker", version])
            alone = statistics.median(figures["independent, worker", version])
            print(f"chain step / independent job, worker, {version}: {chain / alone:.2f}")
    finally:
        for store in stores.values():
            store.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for name in schemas.values():
                admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
