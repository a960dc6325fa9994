"""Where an idle worker's wake-up goes (the peer table's D), phase by phase, on PostgreSQL.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/wake_phases.py [--dsn URL] [--samples 60] [--runtime async|sync]

As the peer harness measures D: an idle ``AsyncWorker`` (``Worker`` with ``--runtime sync``: one
slot, a handler that records when it starts), a pause of 0.15 s, then one job enqueued by another
store; timed from before the enqueue. The marks: the enqueue took its connection (what core did
before any I/O), the enqueue returned, the worker's claim round began (its wait woke), the claim
statement was sent and its result came back, the claim returned the job, the handler started.
Beside them (async only), each after the same pause on a connection of its own: ``SELECT 1``
(what any round trip costs after an idle pause on this machine), and the hand-written floor's two
statements (``INSERT … pg_notify`` and its ``SKIP LOCKED`` claim, on a table shaped as the peer
harness's floor makes it). Medians, in ms, after 5 samples thrown away.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average
from psycopg import sql
from psycopg.types.json import Jsonb

import alkstore
from alkstore.adapters.postgres import _connections, _connections_async
from alkstore.store import _kernel, _kernel_async
from alkstore.worker import _worker, _worker_async

PAUSE = 0.15
WARMUP = 5
FLOOR_TABLE = """
CREATE TABLE {}.floor_jobs (
    id bigserial PRIMARY KEY, queue text NOT NULL, payload jsonb NOT NULL, priority int NOT NULL DEFAULT 0,
    run_at timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0, locked_until timestamptz);
CREATE INDEX ON {}.floor_jobs (queue, priority DESC, run_at, id)
"""
FLOOR_INSERT = (
    "WITH ins AS (INSERT INTO {}.floor_jobs (queue, payload) VALUES (%s, %s) RETURNING id) "
    "SELECT id, pg_notify('floor_wake', %s) FROM ins"
)
FLOOR_CLAIM = (
    "UPDATE {0}.floor_jobs SET attempts = attempts + 1, locked_until = now() + interval '30 seconds' "
    "WHERE id = (SELECT id FROM {0}.floor_jobs WHERE queue = %s AND run_at <= now() "
    "AND (locked_until IS NULL OR locked_until < now()) ORDER BY priority DESC, run_at, id "
    "FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, payload, attempts"
)

marks: dict[str, float] = {}


def mark(name: str) -> None:
    marks.setdefault(name, time.perf_counter())


def _marking(
    cls: Any,
    name: str,
    *,
    before: str | None = None,
    after: str | None = None,
    when: Any = None,
    only: Any = None,
) -> None:
    """Wrap ``cls.name`` (sync or async) to mark ``before`` as it is called and ``after`` as it returns
    (if ``when(result)``); with ``only(*args)``, only the calls it accepts."""
    original = getattr(cls, name)

    def marks_call(args: tuple[Any, ...]) -> bool:
        return only is None or bool(only(*args))

    def mark_after(result: Any) -> None:
        if after is not None and (when is None or when(result)):
            mark(after)

    if asyncio.iscoroutinefunction(original):

        async def wrapped_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            marked = marks_call(args)
            if marked and before is not None:
                mark(before)
            result = await original(self, *args, **kwargs)
            if marked:
                mark_after(result)
            return result

        setattr(cls, name, wrapped_async)
        return

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        marked = marks_call(args)
        if marked and before is not None:
            mark(before)
        result = original(self, *args, **kwargs)
        if marked:
            mark_after(result)
        return result

    setattr(cls, name, wrapped)


def _is_claim(statement: str, *_: Any) -> bool:
    return statement.lstrip().startswith("WITH sweep AS")


def instrument() -> None:
    """Mark the phases in both runtimes (the rest is the worker's own)."""
    for worker, kernel, connections, pooled in (
        (_worker_async.AsyncWorker, _kernel_async.AsyncKernel, _connections_async.AsyncConnections,
         _connections_async.AsyncPooledConnection),
        (_worker.Worker, _kernel.Kernel, _connections.Connections, _connections.PooledConnection),
    ):  # fmt: skip
        _marking(connections, "_getconn", before="enqueue took its connection")  # the producer's, first
        _marking(worker, "_round", before="round began")
        _marking(kernel, "claim", after="claimed", when=lambda result: bool(result[1]))
        _marking(pooled, "run", before="claim sent", after="claim's result back", only=_is_claim)


def run_sync(dsn: str, samples: int) -> dict[str, list[float]]:
    """The sync runtime's marks: a ``Worker`` on its threads, the producer on this one."""
    schema = "wake_" + uuid.uuid4().hex[:8]
    producer = alkstore.open(dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    store = alkstore.open(dsn, schema=schema, min_size=3, max_size=3)
    started: dict[int, threading.Event] = {}

    def handle(payload: Any, job: alkstore.Job) -> None:
        mark("handler started")
        started[payload["i"]].set()

    worker = alkstore.Worker(store, handlers={"q": handle}, concurrency=1, worker_id="wake")
    stop = alkstore.StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    time.sleep(0.5)
    out: dict[str, list[float]] = {}
    queue = producer.queue("q")
    try:
        for i in range(WARMUP + samples):
            started[i] = threading.Event()
            time.sleep(PAUSE)
            marks.clear()
            t0 = time.perf_counter()
            queue.enqueue({"i": i})
            mark("enqueue returned")
            if not started[i].wait(10):
                raise RuntimeError(f"job {i} not started within 10 s")
            if i >= WARMUP:
                for key, at in marks.items():
                    out.setdefault(key, []).append(at - t0)
    finally:
        stop.cancel()
        thread.join(30)
        store.close()
        with psycopg.connect(dsn, autocommit=True) as raw:
            raw.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        producer.close()
    return out


async def run(dsn: str, samples: int) -> dict[str, list[float]]:
    schema = "wake_" + uuid.uuid4().hex[:8]
    producer = await alkstore.open_async(dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    store = await alkstore.open_async(dsn, schema=schema, min_size=3, max_size=3)
    raw = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    name = sql.Identifier(schema)
    await raw.execute(sql.SQL(FLOOR_TABLE).format(name, name))
    insert, claim = sql.SQL(FLOOR_INSERT).format(name), sql.SQL(FLOOR_CLAIM).format(name)
    started: dict[int, asyncio.Event] = {}

    async def handle(payload: Any, job: alkstore.AsyncJob) -> None:
        mark("handler started")
        started[payload["i"]].set()

    worker = alkstore.AsyncWorker(store, handlers={"q": handle}, concurrency=1, worker_id="wake")
    stop = alkstore.StopToken()
    task = asyncio.create_task(worker.run(stop))
    await asyncio.sleep(0.5)
    out: dict[str, list[float]] = {}
    queue = producer.queue("q")
    try:
        for i in range(WARMUP + samples):
            started[i] = asyncio.Event()
            await asyncio.sleep(PAUSE)
            marks.clear()
            t0 = time.perf_counter()
            await queue.enqueue({"i": i})
            mark("enqueue returned")
            await asyncio.wait_for(started[i].wait(), 10)
            timed = {key: at - t0 for key, at in marks.items()}
            for key, statement, params in (
                ("SELECT 1", sql.SQL("SELECT 1"), ()),
                ("floor insert+notify", insert, ("q", Jsonb({"i": i}), "q")),
                ("floor claim", claim, ("q",)),
            ):
                await asyncio.sleep(PAUSE)
                t1 = time.perf_counter()
                await (await raw.execute(statement, params)).fetchall()
                timed[key] = time.perf_counter() - t1
            if i >= WARMUP:
                for key, value in timed.items():
                    out.setdefault(key, []).append(value)
    finally:
        stop.cancel()
        await task
        await store.close()
        await producer.close()
        await raw.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(name))
        await raw.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--runtime", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    print("load before:", load_average())
    instrument()
    out = run_sync(args.dsn, args.samples) if args.runtime == "sync" else asyncio.run(run(args.dsn, args.samples))
    print("load after:", load_average())
    print(f"{args.samples} samples after {PAUSE} s idle each; medians (p90), ms, in order")
    for key, values in sorted(out.items(), key=lambda item: statistics.median(item[1])):
        where = "alone" if key in _ALONE else f"{args.runtime} worker"
        print(f"  {where}, {key:28s} {_median_p90(values)}")
    return 0


_ALONE = ("SELECT 1", "floor insert+notify", "floor claim")


def _median_p90(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"{1000 * statistics.median(ordered):6.2f} ({1000 * ordered[len(ordered) * 9 // 10]:.2f})"


if __name__ == "__main__":
    raise SystemExit(main())
