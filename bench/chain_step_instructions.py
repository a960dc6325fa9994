"""Server instructions of a chain's step on PostgreSQL beside an independent job's (callgrind; ADR 073).

Run by hand, never from the test suite, against a PostgreSQL server of its own started under callgrind,
every backend writing its counts to a file named by its pid when it exits, e.g.::

    initdb -D /srv/pg-cg -A trust -U postgres
    valgrind --tool=callgrind --trace-children=yes --vgdb=no --callgrind-out-file=/srv/pg-cg/cg.%p \\
        postgres -D /srv/pg-cg -p 5499 -c autovacuum=off
    .venv/bin/python bench/chain_step_instructions.py --dsn postgresql://postgres@127.0.0.1:5499/postgres \\
        --out /srv/pg-cg/cg.%p [--steps 20 220] [--ballast 5000] [--handed]

Instructions do not depend on the machine's load. Each subject runs twice, each time on a store of its
own (one connection, so one backend): the same enqueue, the same first claim, then the fewer or the
more steps (a worker's ack carried by its next claim, ``ack_and_claim``), and the store closed; the
figure per step is the difference of the two backends' totals over the difference of their steps, so
connecting, the catalogue caches and the first plans cancel out. ``--ballast`` stores jobs of another
queue and analyses the table first: a table in use, whose plans are those of production (on a small
table never analysed the planner chooses otherwise). ``callgrind_annotate --inclusive=yes`` of the two
files of a subject tells where the difference goes. Another checkout's code runs the same script with
``PYTHONPATH=<checkout>/core:<checkout>/adapters``.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import callgrind_instructions, drop_schemas, enqueue_block
from chain_step_counts import on_connection

import alkstore
from alkstore import Store
from alkstore.engine import ClaimRequest, Handed, Held


def run(dsn: str, schema: str, owner: Store, chained: bool, steps: int, handed: bool, pattern: str) -> int:
    """The instructions of a backend that claimed once, then ran ``steps`` steps of a fresh queue."""
    queue = f"steps-{uuid.uuid4().hex[:8]}"
    enqueue_block(owner, queue, steps + 2, chained)
    clock = alkstore.SystemClock()
    store = alkstore.open(dsn, schema=schema, migrate=False, clock=clock, min_size=1, max_size=1)
    engine: Any = store.engine
    pid = int(on_connection(store, "SELECT pg_backend_pid()"))

    def request() -> ClaimRequest:
        return ClaimRequest(queue=queue, worker_id="bench", now=clock.now(), lease=timedelta(seconds=300), limit=1)

    (held,) = engine.claim(request())
    for _ in range(steps):
        ack = Held(held.id, held.fence)
        if handed and held.dependents:
            ack = Handed(held.id, held.fence, b"\x80N.")  # a pickled None
        stale, (held,) = engine.ack_and_claim([ack], request())
        assert stale == [], queue
    store.close()
    return callgrind_instructions(pattern, pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--out", required=True, help="the server's --callgrind-out-file, with %%p")
    parser.add_argument("--steps", type=int, nargs=2, default=(20, 220))
    parser.add_argument("--ballast", type=int, default=5000)
    parser.add_argument("--handed", action="store_true", help="a chain's acks hand a result over")
    args = parser.parse_args()
    fewer, more = args.steps
    schema = f"bench_instr_{uuid.uuid4().hex[:8]}"
    owner = alkstore.open(args.dsn, schema=schema, migrate=True, clock=alkstore.SystemClock(), max_size=1)
    try:
        if args.ballast:
            owner.queue("ballast").enqueue_many(range(args.ballast))
            with psycopg.connect(args.dsn, autocommit=True) as admin:
                admin.execute(sql.SQL("ANALYZE {}.jobs").format(sql.Identifier(schema)))
        for subject in ("chain", "independent"):
            chained = subject == "chain"
            low = run(args.dsn, schema, owner, chained, fewer, args.handed, args.out)
            high = run(args.dsn, schema, owner, chained, more, args.handed, args.out)
            print(f"{subject:<12} {(high - low) / (more - fewer):>12,.0f} instructions per step")
    finally:
        owner.close()
        drop_schemas(args.dsn, schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
