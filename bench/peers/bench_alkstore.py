"""alkstore in the peer harness (``../shared/bench-peers``): its own batch API and its own worker.

This file replaces the harness's ``bench_alkstore.py`` (which predates both) in a scratch copy
of the harness; ``bench/peers/run.sh`` makes that copy, installs the peers and this checkout,
and runs the whole table. The mapping:

- A is ``Queue.enqueue`` (one job, one transaction); B is ``Queue.enqueue_many`` of 100 payloads
  (one statement, one transaction).
- C and D run ``alkstore.Worker`` with ``concurrency`` = 1 or 4 and a plain handler for the
  bench queue, on a store of its own (pool: the worker's threads plus its spares), opened by
  ``start_worker`` (counted in C, as the other libraries' connects are) and stopped by
  ``stop_worker`` (a graceful stop, then the store closed). The worker claims up to its free
  threads per statement and writes acks with its next claim (ADRs 021, 022): the drain clock
  stops only when the table shows every job gone, as the harness checks for every system.
- The producer has its own store (a pool of one connection); its sync calls run inline on the
  event-loop thread, where nothing else runs meanwhile (the worker is threads).

The handler runs on the worker's threads, so it records into ``asyncjobs.STATE`` under a lock
and touches the event loop only to set the events the harness waits on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any, ClassVar
from urllib.parse import urlencode

import asyncjobs
import common as c
import harness
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import alkstore

QUEUE = "bench"
SCHEMA = "alkstore"
#: Threads a worker needs beyond one connection per job thread: claims, heartbeats, spare.
SPARE_CONNECTIONS = 3


def as_url(dsn: str) -> str:
    """The harness's libpq DSN as a ``postgresql://`` URL carrying every parameter."""
    return "postgresql:///?" + urlencode(conninfo_to_dict(dsn))


class ThreadRecorder:
    """``asyncjobs.Handled``'s bookkeeping for handlers running on threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()

    def handle(self, i: int) -> None:
        now = time.perf_counter()
        with self.lock:
            state = asyncjobs.STATE
            state.at[i] = now
            state.calls += 1
            state.seen.add(i)
            event = state.events.get(i)
            finished = state.target is not None and state.calls == state.target
        if event is not None:
            self.loop.call_soon_threadsafe(event.set)
        if finished:
            self.loop.call_soon_threadsafe(state.all_done.set)


def _count(what: str) -> str:
    return (
        sql.SQL("SELECT count(*) FROM {s}.{t} WHERE queue = {q}")
        .format(s=sql.Identifier(SCHEMA), t=sql.Identifier(what), q=sql.Literal(QUEUE))
        .as_string()
    )


class AlkstoreAdapter:
    system = "alkstore"
    reset_sql: ClassVar[list[str]] = [
        sql.SQL("TRUNCATE {s}.jobs, {s}.dead_jobs RESTART IDENTITY").format(s=sql.Identifier(SCHEMA)).as_string()
    ]
    analyze_sql: ClassVar[list[str]] = [sql.SQL("ANALYZE {s}.jobs").format(s=sql.Identifier(SCHEMA)).as_string()]
    _live = _count("jobs")
    _dead = _count("dead_jobs")
    count_all_sql = f"SELECT ({_live}) + ({_dead})"
    pending_sql = _live  # acked jobs are deleted: what is left is not done
    completed_sql = "SELECT 0"  # set by start_worker: preloaded - live - dead

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.url = as_url(dsn)
        self.producer: alkstore.Store | None = None
        self.queue: alkstore.Queue | None = None
        self.admin: psycopg.Connection[Any] | None = None
        self.worker_store: alkstore.Store | None = None
        self.worker_thread: threading.Thread | None = None
        self.stop = alkstore.StopToken()
        self.errors: list[BaseException] = []

    async def setup(self) -> None:
        alkstore.open(self.url, schema=SCHEMA, migrate=True, min_size=1, max_size=1).close()

    async def open_producer(self) -> None:
        self.producer = alkstore.open(self.url, schema=SCHEMA, min_size=1, max_size=1)
        self.queue = self.producer.queue(QUEUE)
        self.admin = psycopg.connect(self.dsn, autocommit=True)

    async def close_producer(self) -> None:
        if self.producer is not None:
            self.producer.close()
        if self.admin is not None:
            self.admin.close()

    async def enqueue_one(self, i: int) -> None:
        assert self.queue is not None
        self.queue.enqueue({"i": i})

    async def enqueue_batch(self, items: list[int]) -> None:
        assert self.queue is not None
        ids = self.queue.enqueue_many([{"i": i} for i in items])
        if len(ids) != len(items):
            raise c.MeasurementFailed(f"enqueue_many gave {len(ids)} ids for {len(items)} jobs")

    async def start_worker(self, concurrency: int) -> None:
        assert self.admin is not None
        row = self.admin.execute(self.count_all_sql).fetchone()
        preloaded = int(row[0]) if row else 0
        self.completed_sql = f"SELECT {preloaded} - ({self._live}) - ({self._dead})"
        recorder = ThreadRecorder(asyncio.get_running_loop())
        size = concurrency + SPARE_CONNECTIONS
        store = alkstore.open(self.url, schema=SCHEMA, min_size=size, max_size=size)
        self.worker_store = store
        self.stop = alkstore.StopToken()
        self.errors = []

        def handle(payload: Any, job: alkstore.Job) -> None:
            recorder.handle(payload["i"])

        worker = alkstore.Worker(store, handlers={QUEUE: handle}, concurrency=concurrency, worker_id="bench")

        def run() -> None:
            try:
                worker.run(self.stop)
            except BaseException as exc:
                self.errors.append(exc)
                c.log(f"  alkstore worker died: {exc!r}")

        self.worker_thread = threading.Thread(target=run, name="alkstore-worker", daemon=True)
        self.worker_thread.start()

    async def stop_worker(self) -> None:
        self.stop.cancel()
        thread, self.worker_thread = self.worker_thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join, 30)
        if self.worker_store is not None:
            self.worker_store.close()
            self.worker_store = None
        if thread is not None and thread.is_alive():
            raise c.MeasurementFailed("the worker did not stop")
        if self.errors:
            raise c.MeasurementFailed(f"worker error: {self.errors[0]!r}")


async def amain() -> None:
    args = c.parse_args("alkstore")
    logging.basicConfig(level=logging.WARNING)
    dsn = c.recreate_database("peers_alkstore")
    adapter = AlkstoreAdapter(dsn)
    versions = {
        "alkstore": c.package_version("alkstore"),
        "psycopg": c.package_version("psycopg"),
        "psycopg-pool": c.package_version("psycopg-pool"),
        "postgres": c.server_version(dsn),
    }
    if os.environ.get("ALKSTORE_REV"):
        versions["alkstore commit"] = os.environ["ALKSTORE_REV"]
    report = c.Report(
        system=adapter.system,
        versions=versions,
        config={
            "enqueue": "A: Queue.enqueue(payload); B: Queue.enqueue_many(100 payloads)",
            "worker": "alkstore.Worker(concurrency=N, handlers={queue: no-op}); own Store, pool N+3, opened by "
            "start_worker; stop_worker stops it gracefully and closes the store",
            "producer": "own Store, pool min_size=max_size=1; sync calls inline on the event-loop thread",
            "schema": f"{SCHEMA} (migrate=True at setup)",
        },
    )
    c.log(f"{adapter.system}: start")
    await harness.run(adapter, args, report)
    report.write(args.out)
    c.log(f"{adapter.system}: done -> {args.out}")


if __name__ == "__main__":
    asyncio.run(amain())
