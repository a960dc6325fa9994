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

``--statements`` (PostgreSQL) counts the drain's traffic per job instead: the protocol messages every
pooled connection sent (libpq's trace: an ``Execute`` is a statement, a ``Sync`` a round trip), the
engine's calls by name with the sizes of its claims (jobs asked for, jobs returned, acks carried) and
of its acks, the client's CPU and context switches (``getrusage``), and the server CPU of the pool's
backends (their ``/proc/<pid>/schedstat``: this machine's server only). ``floor`` drains the same jobs
by the peer harness's batched floor instead (its ``CLAIM_MANY`` and ``COMPLETE_MANY``, ``--claim-batch``
rows a statement, ``--concurrency`` threads with a connection each, on a table of its own in the scratch
schema; ``PEERS_HARNESS`` names the harness, default ``../shared/bench-peers``): the same counts, and
under callgrind its instructions.

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
import ctypes
import os
import pstats
import resource
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average, server_cpu_ns, trace_messages
from psycopg import sql

import alkstore

QUEUE = "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=("memory", "sqlite", "postgres", "floor"))
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
    parser.add_argument("--statements", action="store_true", help="postgres, floor: count the drain's traffic a job")
    parser.add_argument("--claim-batch", type=int, default=10, help="floor: rows a claim takes")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--self-time", action="store_true", help="with --profile: sorted by own time")
    args = parser.parse_args()
    if args.engine in ("postgres", "floor"):
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
    """The PostgreSQL runs: load a scratch schema, or drain one (by the worker of the peer table's C rows, or by
    the harness's batched floor)."""
    schema = args.schema or f"per_job_{uuid.uuid4().hex[:8]}"
    if args.schema is None:
        if args.engine == "floor":
            floor_load(args.dsn, schema, args.jobs)
        else:
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
        if args.engine == "floor":
            floor_drain(args, schema)
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
            elif args.statements:
                with traffic(args.jobs, _pooled(store), store.engine):
                    worker.run(stop)
            else:
                began = time.perf_counter()
                measured(args, lambda: worker.run(stop))
                print(f"{args.jobs / (time.perf_counter() - began):.0f} jobs/s", file=sys.stderr)
            store.close()
        else:

            async def drain() -> None:
                store = await alkstore.open_async(args.dsn, schema=schema, min_size=size, max_size=size)

                async def handle(payload: Any, job: Any) -> None:
                    counted()

                worker = alkstore.AsyncWorker(
                    store, handlers={QUEUE: handle}, concurrency=args.concurrency, prefetch=args.prefetch
                )
                if args.statements:
                    await store.engine.pool.wait()  # type: ignore[attr-defined]
                    with traffic(args.jobs, list(store.engine.pool._pool), store.engine):  # type: ignore[attr-defined]
                        await worker.run(stop)
                else:
                    await worker.run(stop)
                await store.close()

            measured(args, lambda: asyncio.run(drain()))
        assert args.api or done[0] == args.jobs, done[0]
    finally:
        if not (args.load_only and args.keep):
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def _pooled(store: Any) -> list[Any]:
    """The connections of ``store``'s main pool, every one of them open."""
    pool = store.engine.pool
    pool.wait()
    return list(pool._pool)


def _floor() -> Any:
    """The peer harness's floor module (``bench_floor.py``), for its statements."""
    harness = os.environ.get("PEERS_HARNESS") or str(Path(__file__).resolve().parents[1].parent / "shared/bench-peers")
    sys.path.insert(0, harness)
    import bench_floor  # type: ignore[import-not-found]

    return bench_floor


def _floor_connect(dsn: str, schema: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True, options=f"-c search_path={schema}")


def floor_load(dsn: str, schema: str, jobs: int) -> None:
    """The floor's table in ``schema``, ``jobs`` rows in it (as the harness preloads them)."""
    floor = _floor()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    with _floor_connect(dsn, schema) as conn:
        conn.execute(floor.SCHEMA)
    floor.preload(f"{dsn}?options=-csearch_path%3D{schema}", jobs)


def floor_drain(args: argparse.Namespace, schema: str) -> None:
    """Drain the floor's table as the harness's batched floor does: ``--concurrency`` threads, each with its own
    connection (opened before), claiming up to ``--claim-batch`` rows a statement and deleting them in one."""
    floor = _floor()
    conns = [_floor_connect(args.dsn, schema) for _ in range(args.concurrency)]
    handled = [0]
    lock = threading.Lock()

    def loop(conn: psycopg.Connection[Any]) -> None:
        while rows := conn.execute(floor.CLAIM_MANY, (floor.QUEUE, args.claim_batch)).fetchall():
            for row in rows:
                with lock:  # the harness's handler records each job under a lock
                    handled[0] += 1 if row[1] is not None else 0
            conn.execute(floor.COMPLETE_MANY, ([row[0] for row in rows],))

    def drain() -> None:
        threads = [threading.Thread(target=loop, args=(conn,)) for conn in conns]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    if args.statements:
        with traffic(args.jobs, conns, None):
            drain()
    else:
        measured(args, drain)
    for conn in conns:
        conn.close()
    assert handled[0] == args.jobs, handled[0]


#: The engine's calls whose sizes ``traffic`` records: claims and acks.
_SIZED = ("claim", "ack_and_claim", "ack")


@contextmanager
def traffic(jobs: int, conns: list[Any], engine: Any) -> Iterator[None]:
    """Count what the body sends through ``conns`` (libpq's trace, a file each) and their backends' CPU, and,
    with ``engine``, its calls by name and the sizes of its claims and acks; print them per job after."""
    calls: Counter[str] = Counter()
    sizes: dict[str, Counter[tuple[int, ...]]] = {name: Counter() for name in _SIZED}
    lock = threading.Lock()
    wrapped = []
    for name in dir(engine) if engine is not None else ():
        method = getattr(engine, name)
        if name.startswith("_") or not callable(method) or isinstance(method, type):
            continue
        setattr(engine, name, _counting(name, method, calls, sizes, lock))
        wrapped.append(name)
    pids = [conn.info.backend_pid for conn in conns]
    with tempfile.TemporaryDirectory() as directory:
        fds = [os.open(Path(directory) / f"{n}.trace", os.O_WRONLY | os.O_CREAT) for n in range(len(conns))]
        for conn, fd in zip(conns, fds, strict=True):
            conn.pgconn.trace(fd)
        cpu = [server_cpu_ns(pid) for pid in pids]
        usage = resource.getrusage(resource.RUSAGE_SELF)
        began = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - began
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu = [server_cpu_ns(pid) - before for pid, before in zip(pids, cpu, strict=True)]
            ctypes.CDLL(None).fflush(None)  # libpq's trace streams are stdio's, buffered
            sent: Counter[str] = Counter()
            for n in range(len(conns)):
                sent += trace_messages(Path(directory) / f"{n}.trace")
            for name in wrapped:
                delattr(engine, name)
    print(f"per job ({jobs} jobs, {len(conns)} connections traced; traced, {jobs / seconds:,.0f} jobs/s)")
    print(f"  load {load_average()}")
    client = (after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime) / jobs * 1e6
    switches = (after.ru_nvcsw - usage.ru_nvcsw) / jobs, (after.ru_nivcsw - usage.ru_nivcsw) / jobs
    print(f"  client CPU {client:.1f} µs, context switches {switches[0]:.2f} voluntary, {switches[1]:.2f} not")
    print(f"  server CPU {sum(cpu) / jobs / 1000:.1f} µs (backends: {', '.join(f'{ns / 1e6:.0f}' for ns in cpu)} ms)")
    print("  sent: " + ", ".join(f"{kind} {count / jobs:.3f}" for kind, count in sent.most_common()))
    for name, count in calls.most_common():
        print(f"  engine.{name}: {count / jobs:.3f}")
    for name in _SIZED:
        if sizes[name]:
            described = "acks, asked, got" if name == "ack_and_claim" else "asked, got" if name == "claim" else "acks"
            shown = ", ".join(f"{size}: {count}" for size, count in sorted(sizes[name].items()))
            print(f"  {name} ({described}): {shown}")


def _counting(
    name: str, method: Callable[..., Any], calls: Counter[str], sizes: dict[str, Counter[tuple[int, ...]]], lock: Any
) -> Callable[..., Any]:
    """``method`` counted by ``name``, with the sizes of a claim (asked, got), an ack and claim (acks too)
    or an ack (acks); an async one awaited."""

    def size(args: tuple[Any, ...], result: Any) -> tuple[int, ...] | None:
        if name == "claim":
            return (args[0].limit, len(result))
        if name == "ack_and_claim":
            return (len(args[0]), args[1].limit, len(result[1]))
        if name == "ack":
            return (len(args[0]),)
        return None

    def record(args: tuple[Any, ...], result: Any) -> None:
        sized = size(args, result)
        with lock:
            calls[name] += 1
            if sized is not None:
                sizes[name][sized] += 1

    if asyncio.iscoroutinefunction(method):

        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            record(args, result)
            return result

        return counted_async

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        record(args, result)
        return result

    return counted


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
