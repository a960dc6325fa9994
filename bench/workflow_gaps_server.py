"""Server time of what ADR 077 adds to PostgreSQL's hot paths, read by ``EXPLAIN ANALYZE``.

Run by hand, never from the test suite::

    .venv/bin/python bench/workflow_gaps_server.py [--dsn URL] [--jobs 200] [--waiting 10000]

Two figures, each a median: the ack of a job with a ``rate_key`` on a schema as migrated (no trigger
runs for it since version 18: a burial writes the key into the dead row itself) beside one with version
17's ``jobs_keep_on_death`` trigger put back (it runs a primary-key probe of ``dead_jobs`` that finds
nothing), subjects alternating job by job; and a full claim's look for waiting jobs
past their expiry (``sweep_needed``'s last probe) over a queue of ``--waiting`` waiting jobs, none
expired (the worst case: every one read).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import (
    DEFAULT_DSN,
    QUEUE,
    buffers,
    explained,
    explained_ack,
    load_average,
    print_acks,
    scratch_stores,
)
from chain_acks_server import AS_17

from alkstore import EnqueueOpts

#: The probe as the claim's sweep_needed runs it on a full claim (statements/claim.sql).
PROBE = (
    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT EXISTS (SELECT 1 FROM {}.jobs"
    " WHERE queue = (SELECT %s::text) AND state = 'waiting' AND expires_at <= now())"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--waiting", type=int, default=10_000)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    kept, old = f"bench_gaps_{tag}", f"bench_gaps17_{tag}"
    print(f"load before      {load_average()}")
    acks: dict[str, list[tuple[float, float, int]]] = {"keyed ack": [], "17's trigger": []}
    with scratch_stores(args.dsn, (kept, old)) as stores, psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL(AS_17[-1]).format(s=sql.Identifier(old)))
        for name in (kept, old):
            stores[name].queue(QUEUE).enqueue_many(range(args.jobs), EnqueueOpts(rate_key="customer:1"))
        for _ in range(args.jobs):
            for subject, name in (("keyed ack", kept), ("17's trigger", old)):
                job = stores[name].queue(QUEUE).claim("bench")
                assert job is not None, subject
                acks[subject].append(explained_ack(admin, name, int(job.id)))
        parent = stores[kept].queue("parents").enqueue("parent", EnqueueOpts(delay=3600))
        waiting = EnqueueOpts(after=[parent], expires=3600)
        for start in range(0, args.waiting, 1000):
            stores[kept].queue("fan").enqueue_many(range(start, min(start + 1000, args.waiting)), waiting)
        admin.execute(sql.SQL("ANALYZE {}.jobs").format(sql.Identifier(kept)))
        probe = sql.SQL(PROBE).format(sql.Identifier(kept))
        plans = [explained(admin, probe, ["fan"]) for _ in range(20)]
    print_acks(acks)
    times, touched = [plan["Execution Time"] for plan in plans], [buffers(plan) for plan in plans]
    print(
        f"probe        execution {statistics.median(times):.3f} ms, buffers {statistics.median(touched):.0f},"
        f" over {args.waiting} waiting jobs (median of {len(plans)})"
    )
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
