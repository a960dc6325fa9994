"""Server instructions per job of the peer table's columns A, B, C1 and C4 on PostgreSQL (callgrind).

Run by hand, never from the test suite, against a PostgreSQL server of its own started under callgrind,
every backend writing its counts to a file named by its pid when it exits, e.g. (as the server's user)::

    initdb -D /tmp/pg-cg -A trust -U postgres
    valgrind --tool=callgrind --trace-children=yes --vgdb=no --callgrind-out-file=/tmp/pg-cg/cg.%p \\
        postgres -D /tmp/pg-cg -p 5499 -c autovacuum=off
    createdb -h 127.0.0.1 -p 5499 -U postgres main
    .venv/bin/python bench/peer_server_instructions.py --dsn postgresql://postgres@127.0.0.1:5499/main \\
        --out /tmp/pg-cg/cg.%p [--subjects A B C1 C4] [--keep]

Another checkout's code runs the same script with ``PYTHONPATH=<checkout>/core:<checkout>/adapters``,
on a database of its own (each version migrates its own schema, afresh at every run).

Instructions do not depend on the machine's load. Each subject runs twice, each time on a backend of
its own (a store with one pooled connection, so one backend): the fewer and the more calls, then the
store closed; the figure per job is the difference of the two backends' totals over the difference of
their jobs, so connecting, the catalogue caches, the first plans and psycopg's preparing cancel out.
The subjects, as the peer harness (``bench/peers/bench_alkstore.py``) runs them:

- ``A``: ``Queue.enqueue`` of one small payload (one call, one transaction);
- ``B``: ``Queue.enqueue_many`` of 100 small payloads;
- ``C1``: a 1-thread worker's path: a claim of one job, then per job the ack carried by the next claim
  (``ack_and_claim``), on a queue with a backlog of ``--backlog`` ready jobs stored and analysed
  (``VACUUM ANALYZE``, as the harness analyses its preloaded table) before; the claims' clock moves
  ``STEP`` a claim, so no run meets the cursor's backstop (its wide and full claims, a count of its own);
- ``C4``: the same with claims of up to 4 and the 4 acks carried by the next claim.

``--keep`` prints each subject's two callgrind files; ``callgrind_annotate --inclusive=yes`` of them
says where the instructions go (the difference of two versions' files, per statement, plan node,
trigger and function).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import callgrind_instructions, drop_schemas

import alkstore
from alkstore.engine import ClaimRequest, Held

SUBJECTS = ("A", "B", "C1", "C4")
#: The harness's queue.
QUEUE = "bench"
#: Calls (enqueues, or claims after the first) of the fewer and the more run of each subject.
SIZES = {"A": (40, 240), "B": (4, 24), "C1": (20, 220), "C4": (10, 60)}
#: How far the claims' clock moves per claim: the claims read from the cursor as they do between two of its
#: backstops (ADR 061: a wide claim every second, a full one every minute, by the claims' clock), whatever the
#: time a run takes under callgrind (by the wall clock, each run would meet a number of them of its own).
STEP = timedelta(milliseconds=1)
#: Jobs per call of each subject.
PER_CALL = {"A": 1, "B": 100, "C1": 1, "C4": 4}


def backend(dsn: str, schema: str) -> tuple[alkstore.Store, int]:
    """A store of one pooled connection on ``schema`` (the engine's own clock, as the harness opens it) and
    the pid of its backend, found by a name of its own in ``pg_stat_activity``."""
    name = f"peer-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in dsn else "?"
    store = alkstore.open(f"{dsn}{separator}application_name={name}", schema=schema, min_size=1, max_size=1)
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(300):
            row = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
            if row is not None:
                return store, int(row[0])
            time.sleep(0.1)
    raise RuntimeError("the store's backend was not found")


def enqueues(store: alkstore.Store, queue: str, calls: int, per_call: int) -> None:
    """``calls`` calls of ``Queue.enqueue`` (``per_call`` 1) or ``Queue.enqueue_many``."""
    target = store.queue(queue)
    for i in range(calls):
        if per_call == 1:
            target.enqueue({"i": i})
        else:
            target.enqueue_many([{"i": i * per_call + n} for n in range(per_call)])


def drain(store: alkstore.Store, queue: str, claims: int, limit: int) -> None:
    """A worker's path: one claim of up to ``limit``, then ``claims`` claims each carrying the acks of the
    jobs the one before took."""
    engine: Any = store.engine
    start = alkstore.SystemClock().now()

    def request(n: int) -> ClaimRequest:
        now = start + n * STEP
        return ClaimRequest(queue=queue, worker_id="bench", now=now, lease=timedelta(seconds=300), limit=limit)

    held = engine.claim(request(0))
    for n in range(1, claims + 1):
        assert len(held) == limit, (queue, len(held))
        stale, held = engine.ack_and_claim([Held(job.id, job.fence) for job in held], request(n))
        assert stale == [], queue


def run(
    dsn: str, schema: str, owner: alkstore.Store, subject: str, calls: int, backlog: int, pattern: str
) -> tuple[int, int]:
    """The instructions of a backend that ran ``calls`` calls of ``subject`` on the emptied table, and its pid.

    The table is emptied first, as the harness does (its ids started again): a scan's count depends on where
    in the index's pages the queue's entries fall, so each run finds them where the others did."""
    queue = QUEUE
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("TRUNCATE {}.jobs RESTART IDENTITY").format(sql.Identifier(schema)))
    work: Callable[[alkstore.Store], None]
    if subject in ("A", "B"):

        def work(store: alkstore.Store) -> None:
            enqueues(store, queue, calls, PER_CALL[subject])
    else:
        owner.queue(queue).enqueue_many([{"i": i} for i in range(backlog)])
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("VACUUM ANALYZE {}.jobs").format(sql.Identifier(schema)))

        def work(store: alkstore.Store) -> None:
            drain(store, queue, calls, PER_CALL[subject])

    store, pid = backend(dsn, schema)
    Path(pattern.replace("%p", str(pid))).unlink(missing_ok=True)  # an exited backend's of the same pid, before
    work(store)
    store.close()
    return callgrind_instructions(pattern, pid), pid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--out", required=True, help="the server's --callgrind-out-file, with %%p")
    parser.add_argument("--subjects", nargs="+", choices=SUBJECTS, default=list(SUBJECTS))
    parser.add_argument("--backlog", type=int, default=3000, help="ready jobs before a worker's run")
    parser.add_argument("--keep", action="store_true", help="print each run's callgrind file")
    args = parser.parse_args()
    schema = f"peer_instr_{uuid.uuid4().hex[:8]}"
    owner = alkstore.open(args.dsn, schema=schema, migrate=True, clock=alkstore.SystemClock(), max_size=1)
    try:
        for subject in args.subjects:
            fewer, more = SIZES[subject]
            low, low_pid = run(args.dsn, schema, owner, subject, fewer, args.backlog, args.out)
            high, high_pid = run(args.dsn, schema, owner, subject, more, args.backlog, args.out)
            per_job = (high - low) / ((more - fewer) * PER_CALL[subject])
            print(f"{subject:<3} {per_job:>12,.0f} instructions per job", flush=True)
            if args.keep:
                print(f"    {args.out.replace('%p', str(low_pid))} {args.out.replace('%p', str(high_pid))}")
    finally:
        owner.close()
        drop_schemas(args.dsn, schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
