"""Counts, not times, of a ``Worker`` draining a backlog on PostgreSQL: its commits, engine calls and WAL a job.

Run by hand, never from the test suite::

    .venv/bin/python bench/overload_counts.py --dsn postgresql://postgres@127.0.0.1:5432/overload_db
        [--backlog 40000] [--seconds 20] [--threads 4] [--handler-ms 1] [--producer-rate 0] [--runtime async]

A fresh schema is loaded with ``--backlog`` jobs of ``--payload`` bytes (``enqueue_many``, 1,000 a
transaction); then the same worker as ``bench/pressure.py``'s (``Worker``, ``--threads`` threads, a
handler sleeping ``--handler-ms``, or with ``--uniform`` between none and twice that; with ``--runtime
async`` an ``AsyncWorker`` of as many tasks on an event loop of its own thread, its handler an
``asyncio.sleep``) drains it for
``--seconds``, while with ``--producer-rate`` a child process enqueues that many jobs a second, one a
transaction (as an application would). Counted over the drain, per job completed: the worker's engine
calls by name (each a statement and, outside a transaction, a commit), the jobs and acks each claim
carried, the database's commits (``pg_stat_database``, the producer's included, less this script's
own), and the WAL of this database's transactions (``pg_walinspect`` over the drain's LSN range:
records, bytes and the commit records of transactions that touched this database's relations). The
server-wide ``pg_stat_wal`` deltas are printed too; on a shared server they include other databases' WAL.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, cast

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import load_average

import alkstore
from alkstore.store._kernel import kernel_of
from alkstore.store._kernel_async import kernel_of as async_kernel_of

QUEUE = "overload"
SCHEMA = "overload_counts"


class Counted:
    """The engine, its calls counted by name, and per claim the jobs it returned and the acks it carried."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.calls: Counter[str] = Counter()
        self.claimed: Counter[int] = Counter()  # jobs a claim returned -> claims
        self.acked: Counter[int] = Counter()  # acks a claim carried -> claims
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._engine, name)
        if not callable(value) or name.startswith("_"):
            return value
        if inspect.iscoroutinefunction(value):

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                result = await value(*args, **kwargs)
                self.count(name, args, result)
                return result

            return call_async

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            self.count(name, args, result)
            return result

        return call

    def count(self, name: str, args: tuple[Any, ...], result: Any) -> None:
        """Count one call of ``name`` that returned ``result``."""
        with self._lock:
            self.calls[name] += 1
            if name == "claim":
                self.claimed[len(result)] += 1
                self.acked[0] += 1
            elif name == "ack_and_claim":
                self.claimed[len(result[1])] += 1
                self.acked[len(args[0])] += 1


def produce(dsn: str, rate: float, payload: int) -> None:
    """The child: one job a transaction at ``rate`` a second until killed."""
    store = alkstore.open(dsn, schema=SCHEMA)
    queue = store.queue(QUEUE)
    body = b"x" * payload
    began = time.perf_counter()
    sent = 0
    while True:
        owed = int((time.perf_counter() - began) * rate) - sent
        if owed <= 0:
            time.sleep(1 / rate)
            continue
        for _ in range(min(owed, 100)):
            queue.enqueue(body)
            sent += 1


def snapshot(admin: psycopg.Connection[Any]) -> dict[str, Any]:
    admin.execute("SELECT pg_stat_clear_snapshot()")
    commits = admin.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone()
    wal = admin.execute("SELECT wal_records, wal_bytes, wal_write, wal_sync FROM pg_stat_wal").fetchone()
    lsn = admin.execute("SELECT pg_current_wal_lsn()").fetchone()
    assert commits is not None
    assert wal is not None
    assert lsn is not None
    return {"commits": int(commits[0]), "wal": tuple(int(value) for value in wal), "lsn": str(lsn[0])}


def database_wal(admin: psycopg.Connection[Any], start: str, end: str) -> tuple[int, int, int, int]:
    """This database's WAL between two LSNs: records, bytes, transactions and their commit records."""
    row = admin.execute(
        """
        WITH records AS (
            SELECT xid, resource_manager, record_type, record_length, block_ref
            FROM pg_get_wal_records_info(%(start)s::pg_lsn, %(end)s::pg_lsn)
        ), mine AS (
            SELECT DISTINCT xid FROM records
            WHERE block_ref LIKE '%%/' || (SELECT oid FROM pg_database WHERE datname = current_database()) || '/%%'
              AND xid <> '0'
        )
        SELECT count(*), coalesce(sum(record_length), 0),
               (SELECT count(*) FROM mine),
               count(*) FILTER (WHERE resource_manager = 'Transaction' AND record_type = 'COMMIT')
        FROM records WHERE xid IN (SELECT xid FROM mine)
        """,
        {"start": start, "end": end},
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True, help="a scratch database of your own (pg_walinspect is created in it)")
    parser.add_argument("--backlog", type=int, default=40_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--handler-ms", type=float, default=1.0)
    parser.add_argument("--uniform", action="store_true", help="handlers sleep 0 to twice --handler-ms, uniformly")
    parser.add_argument("--payload", type=int, default=256)
    parser.add_argument("--producer-rate", type=float, default=0.0)
    parser.add_argument("--runtime", choices=("sync", "async"), default="sync")
    parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        produce(args.dsn, args.producer_rate, args.payload)
        return 0
    admin = psycopg.connect(args.dsn, autocommit=True)
    admin.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    store = alkstore.open(args.dsn, schema=SCHEMA, migrate=True, min_size=args.threads + 2, max_size=args.threads + 3)
    queue = store.queue(QUEUE)
    body = b"x" * args.payload
    for first in range(0, args.backlog, 1000):
        queue.enqueue_many([body] * min(1000, args.backlog - first))
    done = [0]
    lock = threading.Lock()
    pause = args.handler_ms / 1000
    stop = alkstore.StopToken()
    producer = None
    if args.producer_rate:
        producer = subprocess.Popen(
            [sys.executable, __file__, "--dsn", args.dsn, "--producer-rate", str(args.producer_rate), "--produce"]
        )
    print(f"load before {load_average()}")
    if args.runtime == "async":
        counted, thread = async_worker(args, stop, done, lock)
    else:
        kernel = kernel_of(store)
        counted = Counted(kernel.engine)
        kernel.engine = cast("Any", counted)
        kernel.operations = cast("Any", counted)

        def handle(payload: bytes, job: alkstore.Job) -> None:
            time.sleep(random.uniform(0, 2 * pause) if args.uniform else pause)
            with lock:
                done[0] += 1

        worker = alkstore.Worker(store, handlers={QUEUE: handle}, concurrency=args.threads)
        thread = threading.Thread(target=worker.run, args=(stop,))
        thread.start()
    time.sleep(2)  # past the worker's start (its report, its first claims) and the producer's
    with lock:
        done_before = done[0]
    calls_before = Counter(counted.calls)
    claimed_before, acked_before = Counter(counted.claimed), Counter(counted.acked)
    before = snapshot(admin)
    produced_before = queue_jobs(admin)
    time.sleep(args.seconds)
    after = snapshot(admin)
    with lock:
        jobs = done[0] - done_before
    produced = queue_jobs(admin) - produced_before + jobs  # enqueued = in the table now - before + removed
    calls = counted.calls - calls_before
    claimed, acked = counted.claimed - claimed_before, counted.acked - acked_before
    stop.cancel()
    thread.join()
    if producer is not None:
        producer.terminate()
        producer.wait()
    print(f"load after {load_average()}")
    commits = after["commits"] - before["commits"] - 4  # this script's own reads between the two snapshots
    records, size, transactions, commit_records = database_wal(admin, before["lsn"], after["lsn"])
    wal = [b - a for a, b in zip(before["wal"], after["wal"], strict=True)]
    claims = sum(claimed.values())
    print(f"jobs completed {jobs} in {args.seconds:g} s ({jobs / args.seconds:,.0f}/s); producer enqueued ~{produced}")
    print(f"engine calls per job: {', '.join(f'{name} {count / jobs:.3f}' for name, count in calls.most_common())}")
    print(
        f"claims {claims}: jobs a claim {sum(k * v for k, v in claimed.items()) / claims:.2f},"
        f" acks a claim {sum(k * v for k, v in acked.items()) / claims:.2f}; by jobs returned {sorted(claimed.items())}"
    )
    print(
        f"database commits {commits} ({commits / jobs:.3f} a job);"
        f" the worker's statements {sum(calls.values()) / jobs:.3f} a job"
    )
    print(
        f"this database's WAL: {records / jobs:.2f} records, {size / jobs:.0f} bytes, {transactions / jobs:.3f}"
        f" transactions, {commit_records / jobs:.3f} commit records a job"
    )
    print(
        f"server-wide pg_stat_wal (every database): {wal[0] / jobs:.2f} records, {wal[1] / jobs:.0f} bytes,"
        f" {wal[2] / jobs:.3f} writes, {wal[3] / jobs:.3f} flushes a job; {wal[3] / args.seconds:,.0f} flushes/s"
    )
    store.close()
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    return 0


def async_worker(
    args: argparse.Namespace, stop: alkstore.StopToken, done: list[int], lock: threading.Lock
) -> tuple[Counted, threading.Thread]:
    """An ``AsyncWorker`` of ``--threads`` tasks on a store of its own, in a thread of its own, its engine counted."""
    pause = args.handler_ms / 1000
    opened = threading.Event()
    counted: list[Counted] = []

    async def handle(payload: bytes, job: alkstore.AsyncJob) -> None:
        await asyncio.sleep(random.uniform(0, 2 * pause) if args.uniform else pause)
        with lock:
            done[0] += 1

    async def run() -> None:
        store = await alkstore.open_async(args.dsn, schema=SCHEMA, min_size=args.threads + 2, max_size=args.threads + 3)
        kernel = async_kernel_of(store)
        counted.append(Counted(kernel.engine))
        kernel.engine = cast("Any", counted[0])
        kernel.operations = cast("Any", counted[0])
        opened.set()
        try:
            await alkstore.AsyncWorker(store, handlers={QUEUE: handle}, concurrency=args.threads).run(stop)
        finally:
            await store.close()

    thread = threading.Thread(target=asyncio.run, args=(run(),))
    thread.start()
    opened.wait(60)
    return counted[0], thread


def queue_jobs(admin: psycopg.Connection[Any]) -> int:
    row = admin.execute(sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(SCHEMA))).fetchone()
    return int(row[0]) if row else 0


if __name__ == "__main__":
    raise SystemExit(main())
