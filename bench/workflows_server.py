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
import sys
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, QUEUE, drop_trigger, explained_ack, load_average, print_acks, scratch_stores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args()
    tag = uuid.uuid4().hex[:8]
    plain, bare, chain = f"bench_deps_{tag}", f"bench_nodeps_{tag}", f"bench_chain_{tag}"
    print(f"load before      {load_average()}")
    figures: dict[str, list[tuple[float, float, int]]] = {"independent": [], "no trigger": [], "chain step": []}
    with scratch_stores(args.dsn, (plain, bare, chain)) as stores, psycopg.connect(args.dsn, autocommit=True) as admin:
        drop_trigger(args.dsn, bare, "jobs_settle")
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
    print_acks(figures)
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
