"""alkstore in the peer harness (``../shared/bench-peers``): both runtimes, their batch API and worker.

This file replaces the harness's ``bench_alkstore.py`` (which predates both) in a scratch copy
of the harness; ``bench/peers/run.sh`` makes that copy, installs the peers and this checkout,
and runs the whole table, with three rows from this one module:

- ``alkstore`` (the sync runtime): A is ``Queue.enqueue`` (one job, one transaction); B is
  ``Queue.enqueue_many`` of 100 payloads (one statement, one transaction). C and D run
  ``alkstore.Worker`` with ``concurrency`` = 1 or 4 and a plain handler for the bench queue, on
  a store of its own (pool: the worker's threads plus its spares), opened by ``start_worker``
  (counted in C, as the other libraries' connects are) and stopped by ``stop_worker`` (a
  graceful stop, then the store closed). The worker claims up to its free threads per statement
  and writes acks with its next claim (ADRs 021, 022). The producer has its own store (a pool of
  one connection); its sync calls run inline on the event-loop thread, where nothing else runs
  meanwhile (the worker is threads), and the handler records into ``asyncjobs.STATE`` under a
  lock, touching the event loop only to set the events the harness waits on.
- ``alkstore_async`` (``--runtime=async``): the same on the harness's event loop, as the async
  libraries run: ``await queue.enqueue``, ``AsyncWorker`` with an ``async def`` handler (awaited
  on the loop, like the other libraries' async jobs).
- ``alkstore_prefetch`` (``--batch=10``, C only): the sync worker claiming up to 10 jobs a
  statement whatever its concurrency (``prefetch = 10 - concurrency``, ADR 022), the counterpart
  of pgqueuer's out-of-the-box consumer (``batch_size=10``, no in-flight bound).

Every row's drain clock stops only when the table shows every job gone, as the harness checks
for every system.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
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


class _Row:
    """What every alkstore row shares: the tables the harness resets and counts, and the drain's count."""

    system: str
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
        self.stop = alkstore.StopToken()

    def drain_from(self, row: Any) -> None:
        """Count the drain from the jobs there are now (``row``: the result of ``count_all_sql``)."""
        preloaded = int(row[0]) if row else 0
        self.completed_sql = f"SELECT {preloaded} - ({self._live}) - ({self._dead})"

    def config(self) -> dict[str, str]:
        raise NotImplementedError


class AlkstoreAdapter(_Row):
    """The sync runtime: ``Store`` and ``Worker`` (a thread), optionally claiming ``batch`` jobs a statement."""

    def __init__(self, dsn: str, batch: int = 0) -> None:
        super().__init__(dsn)
        self.batch = batch
        self.system = "alkstore (prefetch)" if batch else "alkstore"
        self.producer: alkstore.Store | None = None
        self.queue: alkstore.Queue | None = None
        self.admin: psycopg.Connection[Any] | None = None
        self.worker_store: alkstore.Store | None = None
        self.worker_thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def config(self) -> dict[str, str]:
        worker = "alkstore.Worker(concurrency=N, handlers={queue: no-op}"
        worker += ", prefetch=10-N)" if self.batch else ")"
        return {
            "enqueue": "A: Queue.enqueue(payload); B: Queue.enqueue_many(100 payloads)",
            "worker": f"{worker}; own Store, pool N+3, opened by start_worker; stop_worker stops it gracefully"
            " and closes the store",
            "producer": "own Store, pool min_size=max_size=1; sync calls inline on the event-loop thread",
            "schema": f"{SCHEMA} (migrate=True at setup)",
        }

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
        _check_batch(self.queue.enqueue_many([{"i": i} for i in items]), items)

    async def start_worker(self, concurrency: int) -> None:
        assert self.admin is not None
        self.drain_from(self.admin.execute(self.count_all_sql).fetchone())
        recorder = ThreadRecorder(asyncio.get_running_loop())
        size = concurrency + SPARE_CONNECTIONS
        store = alkstore.open(self.url, schema=SCHEMA, min_size=size, max_size=size)
        self.worker_store = store
        self.stop = alkstore.StopToken()
        self.errors = []

        def handle(payload: Any, job: alkstore.Job) -> None:
            recorder.handle(payload["i"])

        prefetch = max(0, self.batch - concurrency)
        worker = alkstore.Worker(
            store, handlers={QUEUE: handle}, concurrency=concurrency, prefetch=prefetch, worker_id="bench"
        )

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


class AsyncAlkstoreAdapter(_Row):
    """The async runtime on the harness's event loop: ``AsyncStore`` and ``AsyncWorker`` (a task)."""

    system = "alkstore (async)"

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        self.producer: alkstore.AsyncStore | None = None
        self.queue: alkstore.AsyncQueue | None = None
        self.worker_store: alkstore.AsyncStore | None = None
        self.worker: asyncio.Task[alkstore.WorkerStats] | None = None

    def config(self) -> dict[str, str]:
        return {
            "enqueue": "A: await AsyncQueue.enqueue(payload); B: await AsyncQueue.enqueue_many(100 payloads)",
            "worker": "alkstore.AsyncWorker(concurrency=N, handlers={queue: async no-op}); own AsyncStore, pool N+3,"
            " opened by start_worker; stop_worker stops it gracefully and closes the store",
            "producer": "own AsyncStore, pool min_size=max_size=1",
            "schema": f"{SCHEMA} (migrate=True at setup)",
        }

    async def setup(self) -> None:
        await (await alkstore.open_async(self.url, schema=SCHEMA, migrate=True, min_size=1, max_size=1)).close()

    async def open_producer(self) -> None:
        self.producer = await alkstore.open_async(self.url, schema=SCHEMA, min_size=1, max_size=1)
        self.queue = self.producer.queue(QUEUE)

    async def close_producer(self) -> None:
        if self.producer is not None:
            await self.producer.close()

    async def enqueue_one(self, i: int) -> None:
        assert self.queue is not None
        await self.queue.enqueue({"i": i})

    async def enqueue_batch(self, items: list[int]) -> None:
        assert self.queue is not None
        _check_batch(await self.queue.enqueue_many([{"i": i} for i in items]), items)

    async def start_worker(self, concurrency: int) -> None:
        assert self.producer is not None
        async with self.producer.transaction() as conn:
            self.drain_from(await (await conn.execute(self.count_all_sql)).fetchone())
        size = concurrency + SPARE_CONNECTIONS
        store = await alkstore.open_async(self.url, schema=SCHEMA, min_size=size, max_size=size)
        self.worker_store = store
        self.stop = alkstore.StopToken()

        async def handle(payload: Any, job: alkstore.AsyncJob) -> None:
            asyncjobs.STATE.handle(payload["i"])

        worker = alkstore.AsyncWorker(store, handlers={QUEUE: handle}, concurrency=concurrency, worker_id="bench")
        self.worker = asyncio.create_task(worker.run(self.stop))

    async def stop_worker(self) -> None:
        self.stop.cancel()
        task, self.worker = self.worker, None
        try:
            if task is not None:
                await asyncio.wait_for(task, 30)
        except TimeoutError:
            raise c.MeasurementFailed("the worker did not stop") from None
        except Exception as exc:
            raise c.MeasurementFailed(f"worker error: {exc!r}") from exc
        finally:
            if self.worker_store is not None:
                await self.worker_store.close()
                self.worker_store = None


def _check_batch(ids: list[Any], items: list[int]) -> None:
    if len(ids) != len(items):
        raise c.MeasurementFailed(f"enqueue_many gave {len(ids)} ids for {len(items)} jobs")


def _flag(name: str, default: str) -> str:
    """The value of ``--name=value`` in the command line (taken out of it, for the harness's parser)."""
    for arg in list(sys.argv[1:]):
        if arg.startswith(f"--{name}="):
            sys.argv.remove(arg)
            return arg.split("=", 1)[1]
    return default


async def amain() -> None:
    runtime = _flag("runtime", "sync")
    batch = int(_flag("batch", "0"))
    slug = "alkstore" + ("_async" if runtime == "async" else "") + ("_prefetch" if batch else "")
    args = c.parse_args(slug)
    logging.basicConfig(level=logging.WARNING)
    dsn = c.recreate_database(f"peers_{slug}")
    if runtime == "async":
        if batch:
            raise SystemExit("--batch is a row of the sync runtime")
        adapter: _Row = AsyncAlkstoreAdapter(dsn)
    else:
        adapter = AlkstoreAdapter(dsn, batch)
    versions = {
        "alkstore": c.package_version("alkstore"),
        "psycopg": c.package_version("psycopg"),
        "psycopg-pool": c.package_version("psycopg-pool"),
        "postgres": c.server_version(dsn),
    }
    if os.environ.get("ALKSTORE_REV"):
        versions["alkstore commit"] = os.environ["ALKSTORE_REV"]
    report = c.Report(system=adapter.system, versions=versions, config=adapter.config())
    c.log(f"{adapter.system}: start")
    await harness.run(adapter, args, report)
    report.write(args.out)
    c.log(f"{adapter.system}: done -> {args.out}")


if __name__ == "__main__":
    asyncio.run(amain())
