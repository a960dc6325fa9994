"""alkstore's async runtime in the peer harness (``../shared/bench-peers``): ``AsyncStore`` and ``AsyncWorker``.

The counterpart of ``bench_alkstore.py`` (the sync runtime) on the harness's event loop, as the
async libraries run: A is ``await queue.enqueue``, B ``await queue.enqueue_many`` of 100; C and D
run ``AsyncWorker`` with ``concurrency`` = 1 or 4 and an ``async def`` handler (awaited on the
loop, like the other libraries' async jobs), on a store of its own opened by ``start_worker``
(counted in C) and closed by ``stop_worker`` after a graceful stop. The drain clock stops only
when the table shows every job gone, as the harness checks for every system.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, ClassVar

import asyncjobs
import common as c
import harness
from bench_alkstore import QUEUE, SCHEMA, SPARE_CONNECTIONS, AlkstoreAdapter, as_url

import alkstore


class AsyncAlkstoreAdapter:
    system = "alkstore (async)"
    reset_sql: ClassVar[list[str]] = AlkstoreAdapter.reset_sql
    analyze_sql: ClassVar[list[str]] = AlkstoreAdapter.analyze_sql
    count_all_sql = AlkstoreAdapter.count_all_sql
    pending_sql = AlkstoreAdapter.pending_sql
    completed_sql = "SELECT 0"  # set by start_worker: preloaded - live - dead

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.url = as_url(dsn)
        self.producer: alkstore.AsyncStore | None = None
        self.queue: alkstore.AsyncQueue | None = None
        self.worker_store: alkstore.AsyncStore | None = None
        self.worker: asyncio.Task[alkstore.WorkerStats] | None = None
        self.stop = alkstore.StopToken()

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
        ids = await self.queue.enqueue_many([{"i": i} for i in items])
        if len(ids) != len(items):
            raise c.MeasurementFailed(f"enqueue_many gave {len(ids)} ids for {len(items)} jobs")

    async def start_worker(self, concurrency: int) -> None:
        assert self.producer is not None
        async with self.producer.transaction() as conn:
            row = await (await conn.execute(self.count_all_sql)).fetchone()
        preloaded = int(row[0]) if row else 0
        self.completed_sql = f"SELECT {preloaded} - ({AlkstoreAdapter._live}) - ({AlkstoreAdapter._dead})"
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


async def amain() -> None:
    args = c.parse_args("alkstore_async")
    logging.basicConfig(level=logging.WARNING)
    dsn = c.recreate_database("peers_alkstore_async")
    adapter = AsyncAlkstoreAdapter(dsn)
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
            "enqueue": "A: await AsyncQueue.enqueue(payload); B: await AsyncQueue.enqueue_many(100 payloads)",
            "worker": "alkstore.AsyncWorker(concurrency=N, handlers={queue: async no-op}); own AsyncStore, pool N+3,"
            " opened by start_worker; stop_worker stops it gracefully and closes the store",
            "producer": "own AsyncStore, pool min_size=max_size=1",
            "schema": f"{SCHEMA} (migrate=True at setup)",
        },
    )
    c.log(f"{adapter.system}: start")
    await harness.run(adapter, args, report)
    report.write(args.out)
    c.log(f"{adapter.system}: done -> {args.out}")


if __name__ == "__main__":
    asyncio.run(amain())
