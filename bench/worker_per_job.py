"""Instructions (or calls) per job of an ``alkstore.Worker`` draining no-op jobs: core's per-job path.

A store (``memory://`` or a fresh SQLite file) is loaded with ``--jobs`` jobs of a no-op task in
batches of 100, then a sync ``Worker`` (``concurrency=1``, ``--prefetch`` as given) drains them in
this thread; the task stops the worker at the last one. With ``--load-only`` the drain is skipped:
run both under ``valgrind --tool=callgrind`` and the difference over ``--jobs`` is the drain's
instructions per job, whatever the machine's load::

    valgrind --tool=callgrind --callgrind-out-file=d.out .venv/bin/python bench/worker_per_job.py sqlite
    valgrind --tool=callgrind --callgrind-out-file=l.out .venv/bin/python bench/worker_per_job.py sqlite --load-only

On PostgreSQL (``postgres --dsn URL``) the jobs go to a scratch schema; ``--load-only --keep`` loads
one and prints its name, and ``--schema NAME`` drains it (then drops it), so the load runs outside
callgrind and two drains of different sizes, less each other, give a job's instructions. The
worker is the one the peer table's C rows run: a plain handler for the queue, ``--concurrency``
slots, ``--runtime async`` an ``AsyncWorker`` with an ``async def`` handler on ``asyncio.run``::

    S=$(.venv/bin/python bench/worker_per_job.py postgres --load-only --keep --jobs 1400)
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=d.out .venv/bin/python \\
        bench/worker_per_job.py postgres --schema $S --jobs 1400 --concurrency 4 --runtime async

(a fixed hash seed: the string hashes otherwise move a run by some 20 M instructions.)

``--calls`` counts the Python function calls of the drain instead (``sys.setprofile`` on every thread,
Python functions and the C functions they call), per job. ``--api`` drains the same jobs by
``Queue.claim`` and ``Job.ack``, one at a time, with no worker (sync only).
``--profile`` instead runs the drain under ``cProfile`` (every thread's) and prints the top functions by
inclusive time with their calls per job.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
from _bench import DEFAULT_DSN
from psycopg import sql

import alkstore

QUEUE = "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=("memory", "sqlite", "postgres"))
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--prefetch", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--runtime", choices=("sync", "async"), default="sync")
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="postgres: the server")
    parser.add_argument("--schema", help="postgres: drain this schema loaded by --load-only --keep (then drop it)")
    parser.add_argument("--keep", action="store_true", help="postgres, with --load-only: keep the schema, print it")
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--api", action="store_true", help="drain by Queue.claim and Job.ack instead of a Worker")
    parser.add_argument("--calls", action="store_true", help="count the drain's Python calls a job")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--self-time", action="store_true", help="with --profile: sorted by own time")
    args = parser.parse_args()
    if args.engine == "postgres":
        postgres(args)
        return
    with tempfile.TemporaryDirectory() as directory:
        url = "memory://" if args.engine == "memory" else f"sqlite:///{Path(directory) / 'bench.db'}"
        store = alkstore.open(url)
        tasks = alkstore.Tasks()
        stop = alkstore.StopToken()
        done = [0]

        @tasks.task("noop", queue=QUEUE)
        def noop(n: int) -> None:
            done[0] += 1
            if done[0] == args.jobs:
                stop.cancel()

        for first in range(0, args.jobs, 100):
            noop.enqueue_many(store, [{"n": n} for n in range(first, min(first + 100, args.jobs))])
        worker = alkstore.Worker(store, tasks, concurrency=args.concurrency, prefetch=args.prefetch, poll_interval=0.05)
        if args.api and not args.load_only:  # the same jobs through the API, no worker: what the worker adds
            queue = store.queue(QUEUE)
            while (job := queue.claim("w")) is not None:
                noop.func(**job.payload)
                job.ack()
        elif not args.load_only:
            measured(args, lambda: worker.run(stop))
            assert done[0] == args.jobs, done[0]
        store.close()


def postgres(args: argparse.Namespace) -> None:
    """The PostgreSQL runs: load a scratch schema, or drain one (by the worker of the peer table's C rows)."""
    schema = args.schema or f"per_job_{uuid.uuid4().hex[:8]}"
    if args.schema is None:
        producer = alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=1)
        queue = producer.queue(QUEUE)
        for first in range(0, args.jobs, 100):
            queue.enqueue_many([{"n": n} for n in range(first, min(first + 100, args.jobs))])
        producer.close()
    try:
        if args.load_only:
            if args.keep:
                print(schema)
            return
        size = args.concurrency + 3  # the peer table's pool: a connection a slot and three spare
        stop = alkstore.StopToken()
        done = [0]

        def counted() -> None:
            done[0] += 1
            if done[0] == args.jobs:
                stop.cancel()

        if args.runtime == "sync":
            store = alkstore.open(args.dsn, schema=schema, min_size=size, max_size=size)

            def handle(payload: Any, job: Any) -> None:
                counted()

            worker = alkstore.Worker(
                store, handlers={QUEUE: handle}, concurrency=args.concurrency, prefetch=args.prefetch
            )
            if args.api:
                claims = store.queue(QUEUE)
                measured(args, lambda: _api(claims, args.jobs))
            else:
                measured(args, lambda: worker.run(stop))
            store.close()
        else:

            async def drain() -> None:
                store = await alkstore.open_async(args.dsn, schema=schema, min_size=size, max_size=size)

                async def handle(payload: Any, job: Any) -> None:
                    counted()

                worker = alkstore.AsyncWorker(
                    store, handlers={QUEUE: handle}, concurrency=args.concurrency, prefetch=args.prefetch
                )
                await worker.run(stop)
                await store.close()

            measured(args, lambda: asyncio.run(drain()))
        assert args.api or done[0] == args.jobs, done[0]
    finally:
        if not (args.load_only and args.keep):
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _api(queue: Any, jobs: int) -> None:
    while (job := queue.claim("w")) is not None:
        job.ack()


def measured(args: argparse.Namespace, drain: Callable[[], object]) -> None:
    """Run ``drain``: as it is (for callgrind), counting its Python calls, or under cProfile."""
    width = max(args.jobs, 1)
    if args.calls:
        calls = [0]

        def profile(frame: FrameType, event: str, arg: object) -> None:
            if event == "call" or event == "c_call":
                calls[0] += 1

        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            drain()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        print(f"Python calls per job ({args.jobs} jobs): {calls[0] / width:.1f}")
    elif args.profile:
        profiles = [cProfile.Profile()]
        thread_run = threading.Thread.run

        def profiled(thread: threading.Thread) -> None:
            profiles.append(cProfile.Profile())
            profiles[-1].runcall(thread_run, thread)

        threading.Thread.run = profiled  # type: ignore[method-assign,assignment]
        profiles[0].runcall(drain)
        threading.Thread.run = thread_run  # type: ignore[method-assign]
        stats = pstats.Stats(profiles[0])
        for other in profiles[1:]:
            stats.add(other)
        stats.sort_stats("cumulative")
        column = 2 if args.self_time else 3
        table = stats.stats.items()  # type: ignore[attr-defined]
        rows = sorted(table, key=lambda item: -item[1][column])[: args.top]
        for (file, line, name), (_, calls_, own, total, _) in rows:
            print(
                f"{total * 1e6 / width:8.2f} µs {own * 1e6 / width:7.2f} µs {calls_ / width:6.2f}/job "
                f"{Path(file).name}:{line} {name}"
            )
    else:
        drain()


if __name__ == "__main__":
    main()
