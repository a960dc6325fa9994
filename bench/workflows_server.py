"""Server time of the ack's ``DELETE`` with job dependencies (ADR 073), read by ``EXPLAIN ANALYZE``.

Run by hand, never from the test suite::

    .venv/bin/python bench/workflows_server.py [--dsn URL] [--jobs 200]

Load-independent beside bench/workflows.py: the server's own account of each statement (its execution
time, the trigger's share of it, the buffers it touched), for the ack of a job nobody waits on (on a
schema as migrated and on one whose ``jobs_settle`` is dropped) and for the ack of a chain's step
(which promotes the next; on a schema of its own, so the first two schemas' tables hold alike).
Subjects alternate job by job; each figure is the median. What runs after the statement (its commit,
and the commit's delivery of a NOTIFY) is not in these figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average

import alkstore

QUEUE = "bench"


def explained_ack(admin: psycopg.Connection[Any], schema: str, job_id: int) -> tuple[float, float, int]:
    """(execution ms, trigger ms, shared buffers hit or read) of the ack of the running job ``job_id``."""
    query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) DELETE FROM {}.jobs WHERE id = %s AND state = 'running'")
    row = admin.execute(query.format(sql.Identifier(schema)), [job_id]).fetchone()
    assert row is not None
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]
    trigger_ms = sum(trigger["Time"] for trigger in plan.get("Triggers", []))
    top = plan["Plan"]
    return plan["Execution Time"], trigger_ms, top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    plain, bare, chain = f"bench_deps_{tag}", f"bench_nodeps_{tag}", f"bench_chain_{tag}"
    print(f"load before      {load_average()}")
    clock = alkstore.SystemClock()
    stores = {name: alkstore.open(args.dsn, schema=name, migrate=True, clock=clock) for name in (plain, bare, chain)}
    figures: dict[str, list[tuple[float, float, int]]] = {"independent": [], "no trigger": [], "chain step": []}
    try:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP TRIGGER jobs_settle ON {}.jobs").format(sql.Identifier(bare)))
            graph = stores[chain].graph()
            for n in range(args.jobs + 1):
                graph.add(f"j{n}", "chain", n, after=[f"j{n - 1}"] if n else ())
            stores[chain].enqueue_graph(graph)
            for name in (plain, bare):
                stores[name].queue(QUEUE).enqueue_many(range(args.jobs))
            for _ in range(args.jobs):
                for subject, name, queue in (
                    ("independent", plain, QUEUE),
                    ("no trigger", bare, QUEUE),
                    ("chain step", chain, "chain"),
                ):
                    job = stores[name].queue(queue).claim("bench")
                    assert job is not None, subject
                    figures[subject].append(explained_ack(admin, name, int(job.id)))
        for subject, rows in figures.items():
            total, trigger, buffers = zip(*rows, strict=True)
            print(
                f"{subject:<12} execution {statistics.median(total):.3f} ms"
                f" (trigger {statistics.median(trigger):.3f} ms),"
                f" buffers {statistics.median(buffers):.0f}, over {len(rows)} acks"
            )
    finally:
        for store in stores.values():
            store.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            for name in stores:
                admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
