"""Server instructions per idle wake of the peer table's D on PostgreSQL (callgrind), statement by statement.

Run by hand, never from the test suite, against a server of its own started under callgrind, as
``bench/peer_server_instructions.py`` describes (every backend writes its counts to a file named by its pid)::

    .venv/bin/python bench/wake_server_instructions.py --dsn postgresql://postgres@127.0.0.1:5499/main \\
        --out /tmp/pg-cg/cg.%p [--claim-only]

Another checkout's code runs the same script with ``PYTHONPATH=<checkout>/core:<checkout>/adapters``, on a
database of its own. A wake, as the peer harness's D: the producer's ``Queue.enqueue`` of one job (a store of
its own), then the worker's claim of it from the cursor (``engine.claim``, one job ready, the queue claimed
from before) and the ack carried by its next claim, which finds nothing (``ack_and_claim``); with
``--claim-only`` the claim alone (the part of a wake before the handler starts). The producer's clock and the
claims' move 150 ms a wake (the harness's pause), so the claims meet the cursor's wide claim as the
harness's do, whatever the time a run takes under callgrind. Each figure is the difference of two runs'
backends (10 and 60 wakes) over 50: connecting, the catalogue caches and the first plans cancel.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import callgrind_instructions, drop_schemas

import alkstore
from alkstore.engine import ClaimRequest, Held

#: Wakes of the fewer and the more run.
SIZES = (10, 60)
#: The harness's pause between two wakes, on the producer's and the claims' clock.
STEP = timedelta(milliseconds=150)
LEASE = timedelta(seconds=300)


def backend(dsn: str, schema: str, clock: alkstore.Clock | None = None) -> tuple[alkstore.Store, int]:
    """A store of one pooled connection on ``schema`` and the pid of its backend (by a name of its own)."""
    name = f"wake-{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in dsn else "?"
    url = f"{dsn}{separator}application_name={name}"
    store = alkstore.open(url, schema=schema, min_size=1, max_size=1, clock=clock)
    with psycopg.connect(dsn, autocommit=True) as admin:
        for _ in range(300):
            row = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
            if row is not None:
                return store, int(row[0])
            time.sleep(0.1)
    raise RuntimeError("the store's backend was not found")


def run(dsn: str, schema: str, wakes: int, pattern: str, claim_only: bool) -> tuple[int, int]:
    """The instructions of the producer's backend and the worker's over ``wakes`` wakes on the emptied table."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("TRUNCATE {}.jobs RESTART IDENTITY").format(sql.Identifier(schema)))
    start = alkstore.SystemClock().now()
    clock = alkstore.ManualClock(start)
    producer, producer_pid = backend(dsn, schema, clock)
    worker, worker_pid = backend(dsn, schema)
    for pid in (producer_pid, worker_pid):
        Path(pattern.replace("%p", str(pid))).unlink(missing_ok=True)  # an exited backend's of the same pid
    engine = worker.engine
    queue = producer.queue("q")
    for n in range(wakes):
        now = start + n * STEP
        if n:
            clock.set(now)
        queue.enqueue({"i": n})
        now += timedelta(milliseconds=1)
        held = engine.claim(ClaimRequest(queue="q", worker_id="w", now=now, lease=LEASE))
        assert len(held) == 1, held
        if claim_only:
            continue
        after = ClaimRequest(queue="q", worker_id="w", now=now + timedelta(milliseconds=1), lease=LEASE)
        stale, more = engine.ack_and_claim([Held(job.id, job.fence) for job in held], after)
        assert stale == [], stale
        assert more == [], more
    producer.close()
    worker.close()
    return callgrind_instructions(pattern, producer_pid), callgrind_instructions(pattern, worker_pid)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--out", required=True, help="the server's --callgrind-out-file, with %%p")
    parser.add_argument("--claim-only", action="store_true", help="the claim of the job alone, no ack after")
    args = parser.parse_args()
    schema = f"wake_instr_{uuid.uuid4().hex[:8]}"
    owner = alkstore.open(args.dsn, schema=schema, migrate=True, max_size=1)
    try:
        fewer, more = SIZES
        low = run(args.dsn, schema, fewer, args.out, args.claim_only)
        high = run(args.dsn, schema, more, args.out, args.claim_only)
        enqueue, worker = ((h - lo) / (more - fewer) for h, lo in zip(high, low, strict=True))
        what = "claim" if args.claim_only else "claim and ack_and_claim"
        print(f"per wake: enqueue {enqueue:,.0f}, {what} {worker:,.0f} server instructions")
    finally:
        owner.close()
        drop_schemas(args.dsn, schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
