"""The SQLite engine against its floor: a hand-written ``sqlite3`` queue on the same machine, in the same run.

The floor: one table, an enqueue is an ``INSERT`` (one per transaction, or 100 in one), a claim is
``UPDATE … RETURNING`` of the first due rows inside ``BEGIN IMMEDIATE``, an ack a ``DELETE``: what a
queue on SQLite cannot do with less. Both sides carry JSON payloads (the floor encodes and decodes
them itself). alkstore does the same through its public API, ``synchronous=NORMAL`` both, each
measure in a fresh file:

- enqueue one per transaction, and in batches of 100;
- drain (claim + ack) one at a time at 1 and at 4 threads (the floor: a connection per thread;
  alkstore: one store shared), and with prefetch (claims of 10, their acks in one call);
- in both runtimes: the async floor runs each of its transactions on one thread of its own
  (``run_in_executor``, as an asyncio program on ``sqlite3`` must), alkstore through ``open_async``;
- cross-process idle wake: a parked claim in this process, an enqueue committed by another
  process; the floor polls ``PRAGMA data_version`` at alkstore's ``poll_interval`` (5 ms), then
  claims. The latency is from the enqueuer's commit to the claimed job in hand; the waiter's CPU
  while it waits is the idle cost.

Subjects alternate measure by measure (floor first in even rounds, alkstore first in odd ones),
so load that comes and goes hits both alike; each ratio is alkstore's rate over the floor's in the
same round (for the wake, the floor's latency over alkstore's), the median and the spread of the
rounds printed with the load. ``--statements`` instead counts the SQL statements (``BEGIN`` and
``COMMIT`` included) each side runs per operation, and the CPU per job (SQLite traces a ``DELETE`` again
for each row whose delete starts a trigger: alkstore's ack shows one entry more per job than it runs).

    .venv/bin/python bench/sqlite_floor.py [--jobs 2000] [--rounds 3] [--wakes 20] [--statements]
    .venv/bin/python bench/sqlite_floor.py --one sync alkstore "drain, 1 thread" [--jobs 2000]

``--one RUNTIME SIDE MEASURE`` runs one measure by one side in this process and prints its CPU per
job and its rate: run in fresh processes by two checkouts' virtualenvs in turn (this script with
each one's code), it compares two versions of the engine by CPU per job, which load moves less.
The side ``port`` (sync only) is alkstore's engine driven directly (``claim``, ``ack``, ``enqueue`` of
encoded payloads), without core. With ``--load-only`` the measure's file is opened and loaded but the
measure not run: under ``valgrind --tool=callgrind``, the run less its ``--load-only`` twin, over
``--jobs``, is the measure's instructions per job, whatever the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _bench import load_average

import alkstore
from alkstore import engine as port
from alkstore.store import _kernel

FLOOR_SCHEMA = (
    "CREATE TABLE q (id INTEGER PRIMARY KEY, payload BLOB NOT NULL, run_at REAL NOT NULL, state INTEGER NOT NULL,"
    " lease REAL)",
    "CREATE INDEX q_ready ON q (state, run_at, id)",
)
FLOOR_INSERT = "INSERT INTO q (payload, run_at, state) VALUES (?, ?, 0)"
FLOOR_CLAIM = (
    "UPDATE q SET state = 1, lease = ? WHERE id IN (SELECT id FROM q WHERE state = 0 AND run_at <= ?"
    " ORDER BY run_at, id LIMIT ?) RETURNING id, payload"
)
FLOOR_ACK = "DELETE FROM q WHERE id = ?"
QUEUE = "bench"
BATCH = 100
PREFETCH = 10
POLL = 0.005
MEASURES = (
    "enqueue, one per transaction",
    "enqueue, batches of 100",
    "drain, 1 thread",
    "drain, 4 threads",
    "drain, prefetch 10",
)


#: ``None`` for ``None``, called in C, as the engine's (``_rows._null``).
_null = dict[None, None]().get


def bind_as_they_are() -> None:
    """The floor binds ``bytes`` and ``None`` through identity adapters, as the engine does (``_tables``): the
    ``sqlite3`` module's miss of its adapters' lookup costs more than such a bind. Registered by each side, so
    that neither's figure depends on whether the other ran first in the process."""
    if (bytes, sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(bytes, bytes)
    if (type(None), sqlite3.PrepareProtocol) not in sqlite3.adapters:
        sqlite3.register_adapter(type(None), _null)


def connect(path: Path) -> sqlite3.Connection:
    bind_as_they_are()
    db = sqlite3.connect(path, isolation_level=None, timeout=5, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


class Floor:
    """The hand-written queue: a connection per thread, every write one ``BEGIN IMMEDIATE`` transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self.connections: list[sqlite3.Connection] = []
        db = self.db()
        if not db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'q'").fetchone()[0]:
            for statement in FLOOR_SCHEMA:
                db.execute(statement)

    def db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = connect(self.path)
            self.connections.append(db)
        return db

    def close(self) -> None:
        for db in self.connections:
            db.close()

    def enqueue(self, payloads: list[Any]) -> None:
        db = self.db()
        db.execute("BEGIN IMMEDIATE")
        if len(payloads) == 1:
            db.execute(FLOOR_INSERT, (json.dumps(payloads[0]).encode(), time.time()))
        else:
            at = time.time()
            db.executemany(FLOOR_INSERT, [(json.dumps(payload).encode(), at) for payload in payloads])
        db.execute("COMMIT")

    def claim(self, limit: int) -> list[tuple[int, Any]]:
        db = self.db()
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        rows = db.execute(FLOOR_CLAIM, (now + 30, now, limit)).fetchall()
        db.execute("COMMIT")
        return [(row[0], json.loads(row[1])) for row in rows]

    def ack(self, ids: list[int]) -> None:
        db = self.db()
        db.execute("BEGIN IMMEDIATE")
        db.executemany(FLOOR_ACK, [(job_id,) for job_id in ids]) if len(ids) > 1 else db.execute(FLOOR_ACK, ids)
        db.execute("COMMIT")

    def drain(self, limit: int) -> int:
        done = 0
        while jobs := self.claim(limit):
            self.ack([job_id for job_id, _ in jobs])
            done += len(jobs)
        return done


def payloads(count: int) -> list[Any]:
    return [{"n": n} for n in range(count)]


# -- the sync runtime ------------------------------------------------------------------------------


class SyncSubject:
    """A side (``floor`` or ``alkstore``; or ``port``: alkstore's engine driven directly, no core) in the sync
    runtime, on a fresh file."""

    def __init__(self, side: str, path: Path) -> None:
        self.side = side
        self.floor = Floor(path) if side == "floor" else None
        self.store = alkstore.open(f"sqlite:///{path}") if side in ("alkstore", "port") else None

    def close(self) -> None:
        if self.floor is not None:
            self.floor.close()
        if self.store is not None:
            self.store.close()

    def enqueue(self, items: list[Any], per_call: int, measured: bool = False) -> None:
        for first in range(0, len(items), per_call):
            chunk = items[first : first + per_call]
            if self.floor is not None:
                self.floor.enqueue(chunk)
            elif measured and self.side == "port":  # the payloads encoded here, as the floor does
                now = datetime.now(UTC)
                jobs = [port.NewJob(QUEUE, json.dumps(item).encode(), 0, now, None, 25) for item in chunk]
                _kernel.kernel_of(self.store).engine.enqueue(jobs, now)
            elif per_call == 1:
                self.queue().enqueue(chunk[0])
            else:
                self.queue().enqueue_many(chunk)

    def queue(self) -> alkstore.Queue:
        assert self.store is not None
        return self.store.queue(QUEUE)

    def drain(self, limit: int) -> int:
        if self.floor is not None:
            return self.floor.drain(limit)
        assert self.store is not None
        done = 0
        if self.side == "port":  # claims and acks of the engine's port; the payloads decoded here
            engine = _kernel.kernel_of(self.store).engine
            lease = timedelta(seconds=30)
            while claimed := engine.claim(port.ClaimRequest(QUEUE, "w", datetime.now(UTC), lease, limit)):
                for record in claimed:
                    json.loads(record.payload)
                engine.ack([port.Held(record.id, record.fence) for record in claimed])
                done += len(claimed)
            return done
        queue = self.queue()
        if limit == 1:
            while (job := queue.claim("w")) is not None:
                _ = job.payload
                job.ack()
                done += 1
        else:
            while jobs := queue.claim_many("w", limit):
                for job in jobs:
                    _ = job.payload
                self.store.ack_many(jobs)
                done += len(jobs)
        return done


def sync_measure(side: str, path: Path, measure: str, count: int, load_only: bool = False) -> tuple[float, float]:
    """Jobs per second and CPU seconds per job of ``measure`` by ``side`` on a fresh file at ``path``
    (``load_only``: the file opened and loaded for it, the measure itself skipped)."""
    subject = SyncSubject(side, path)
    try:
        items = payloads(count)
        if measure.startswith("drain"):
            subject.enqueue(items, BATCH)
        threads = 4 if measure == "drain, 4 threads" else 1
        limit = PREFETCH if measure == "drain, prefetch 10" else 1
        wall, cpu = time.perf_counter(), time.process_time()
        if load_only:
            pass
        elif measure == "enqueue, one per transaction":
            subject.enqueue(items, 1, measured=True)
        elif measure == "enqueue, batches of 100":
            subject.enqueue(items, BATCH, measured=True)
        elif threads == 1:
            assert subject.drain(limit) == count
        else:
            with ThreadPoolExecutor(threads) as pool:
                assert sum(pool.map(lambda _: subject.drain(limit), range(threads))) == count
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        subject.close()
    return count / wall, cpu / count


# -- the async runtime -----------------------------------------------------------------------------


class AsyncSubject:
    """A side in the async runtime: the floor's transactions on one thread of their own, or ``open_async``."""

    def __init__(self, side: str, path: Path) -> None:
        self.side = side
        self.path = path
        self.floor: Floor | None = None
        self.store: alkstore.AsyncStore | None = None
        self.thread = ThreadPoolExecutor(1)

    async def open(self) -> None:
        if self.side == "floor":
            self.floor = await self.run(Floor, self.path)
        else:
            self.store = await alkstore.open_async(f"sqlite:///{self.path}")

    async def close(self) -> None:
        if self.floor is not None:
            await self.run(self.floor.close)
        if self.store is not None:
            await self.store.close()
        self.thread.shutdown()

    def run(self, call: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return asyncio.get_running_loop().run_in_executor(self.thread, call, *args)

    async def enqueue(self, items: list[Any], per_call: int) -> None:
        for first in range(0, len(items), per_call):
            chunk = items[first : first + per_call]
            if self.floor is not None:
                await self.run(self.floor.enqueue, chunk)
            elif per_call == 1:
                await self.queue().enqueue(chunk[0])
            else:
                await self.queue().enqueue_many(chunk)

    def queue(self) -> alkstore.AsyncQueue:
        assert self.store is not None
        return self.store.queue(QUEUE)

    async def drain(self, limit: int) -> int:
        done = 0
        if self.floor is not None:
            while jobs := await self.run(self.floor.claim, limit):
                await self.run(self.floor.ack, [job_id for job_id, _ in jobs])
                done += len(jobs)
            return done
        assert self.store is not None
        queue = self.queue()
        if limit == 1:
            while (job := await queue.claim("w")) is not None:
                _ = job.payload
                await job.ack()
                done += 1
        else:
            while jobs := await queue.claim_many("w", limit):
                for job in jobs:
                    _ = job.payload
                await self.store.ack_many(jobs)
                done += len(jobs)
        return done


async def async_measure(side: str, path: Path, measure: str, count: int) -> tuple[float, float]:
    """``sync_measure`` in the async runtime (4 threads are 4 tasks)."""
    subject = AsyncSubject(side, path)
    await subject.open()
    try:
        items = payloads(count)
        if measure.startswith("drain"):
            await subject.enqueue(items, BATCH)
        tasks = 4 if measure == "drain, 4 threads" else 1
        limit = PREFETCH if measure == "drain, prefetch 10" else 1
        wall, cpu = time.perf_counter(), time.process_time()
        if measure == "enqueue, one per transaction":
            await subject.enqueue(items, 1)
        elif measure == "enqueue, batches of 100":
            await subject.enqueue(items, BATCH)
        else:
            assert sum(await asyncio.gather(*(subject.drain(limit) for _ in range(tasks)))) == count
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        await subject.close()
    return count / wall, cpu / count


# -- cross-process wake ----------------------------------------------------------------------------


def enqueuer(side: str, path: str, samples: int) -> None:
    """The other process: ``samples`` enqueues, 20-40 ms apart, each carrying the monotonic instant before it."""
    floor = Floor(Path(path)) if side == "floor" else None
    store = alkstore.open(f"sqlite:///{path}") if side == "alkstore" else None
    try:
        for n in range(samples):
            time.sleep(0.02 + 0.02 * (n % 5) / 5)
            if floor is not None:
                floor.enqueue([{"t": time.monotonic()}])
            else:
                assert store is not None
                store.queue(QUEUE).enqueue({"t": time.monotonic()})
    finally:
        if floor is not None:
            floor.close()
        if store is not None:
            store.close()


def wake(side: str, path: Path, samples: int) -> tuple[list[float], float]:
    """Wake latencies (seconds) of ``samples`` jobs enqueued by another process, and the waiter's CPU share."""
    floor = Floor(path) if side == "floor" else None
    store = alkstore.open(f"sqlite:///{path}", poll_interval=POLL) if side == "alkstore" else None
    child = multiprocessing.get_context("spawn").Process(target=enqueuer, args=(side, str(path), samples))
    latencies: list[float] = []
    try:
        watch = floor.db() if floor is not None else None
        wall, cpu = time.perf_counter(), time.process_time()
        child.start()
        if floor is not None and watch is not None:
            seen = watch.execute("PRAGMA data_version").fetchone()[0]
            while len(latencies) < samples:
                if jobs := floor.claim(1):
                    latencies.append(time.monotonic() - jobs[0][1]["t"])
                    floor.ack([jobs[0][0]])
                    continue
                while (version := watch.execute("PRAGMA data_version").fetchone()[0]) == seen:
                    time.sleep(POLL)
                seen = version
        else:
            assert store is not None
            queue = store.queue(QUEUE)
            while len(latencies) < samples:
                job = queue.claim("w", wait=10)
                assert job is not None
                latencies.append(time.monotonic() - job.payload["t"])
                job.ack()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        child.join()
        if floor is not None:
            floor.close()
        if store is not None:
            store.close()
    return latencies, cpu / wall


# -- statements per operation ----------------------------------------------------------------------


def count_statements(directory: Path) -> None:
    """Statements per operation of each side (sync runtime), read through ``set_trace_callback``."""
    statements: list[str] = []
    floor = Floor(directory / "count-floor.db")
    store = alkstore.open(f"sqlite:///{directory / 'count-alkstore.db'}")
    traced = [floor.db(), _kernel.kernel_of(store).engine._tables._db]  # type: ignore[attr-defined]
    for db in traced:
        db.set_trace_callback(statements.append)
    queue = store.queue(QUEUE)

    def counted(what: str, call: Callable[[], object]) -> None:
        statements.clear()
        call()
        runs: list[list[Any]] = []
        for statement in statements:
            head = " ".join(statement.split()[:3])
            if runs and runs[-1][0] == head:
                runs[-1][1] += 1
            else:
                runs.append([head, 1])
        shown = " | ".join(head if times == 1 else f"{head} x{times}" for head, times in runs)
        print(f"  {what:24} {len(statements):3}  {shown}")

    print("floor:")
    counted("enqueue one", lambda: floor.enqueue([{"n": 1}]))
    counted("enqueue 100", lambda: floor.enqueue(payloads(100)))
    counted("claim one", lambda: floor.claim(1))
    counted("ack one", lambda: floor.ack([1]))
    counted("claim 10", lambda: floor.claim(10))
    counted("ack 10", lambda: floor.ack(list(range(3, 13))))
    print("alkstore:")
    # the first reads the queue's settings and takes a block of 64 ids beyond its own (ADR 063); the next 64 do not
    counted("enqueue one, first", lambda: queue.enqueue({"n": 0}))
    counted("enqueue one", lambda: queue.enqueue({"n": 1}))
    counted("enqueue 100", lambda: queue.enqueue_many(payloads(100)))
    job = queue.claim("w")
    statements.clear()
    counted("claim one", lambda: queue.claim("w"))
    assert job is not None
    counted("ack one", job.ack)
    jobs = queue.claim_many("w", 10)
    counted("claim 10", lambda: queue.claim_many("w", 10))
    counted("ack 10", lambda: store.ack_many(jobs))
    counted("claim of an empty queue", lambda: store.queue("empty").claim("w"))
    for db in traced:
        db.set_trace_callback(None)
    floor.close()
    store.close()


# -- the run ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--wakes", type=int, default=20)
    parser.add_argument("--statements", action="store_true")
    parser.add_argument("--one", nargs=3, metavar=("RUNTIME", "SIDE", "MEASURE"))
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    if args.one:
        runtime, side, measure = args.one
        with tempfile.TemporaryDirectory() as name:
            path = Path(name) / "one.db"
            if runtime == "sync":
                rate, cpu = sync_measure(side, path, measure, args.jobs, args.load_only)
            else:
                rate, cpu = asyncio.run(async_measure(side, path, measure, args.jobs))
        print(f"{runtime}: {measure}, {side}: {cpu * 1e6:.1f} µs CPU/job, {rate:,.1f}/s (load {load_average()})")
        return
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        if args.statements:
            count_statements(directory)
            return
        print(f"load before: {load_average()}", flush=True)
        ratios: dict[str, list[float]] = {}
        rates: dict[str, dict[str, list[float]]] = {}
        cpus: dict[str, dict[str, list[float]]] = {}
        files = 0

        def record(label: str, side: str, rate: float, cpu: float) -> None:
            rates.setdefault(label, {}).setdefault(side, []).append(rate)
            cpus.setdefault(label, {}).setdefault(side, []).append(cpu)

        for round_ in range(args.rounds):
            order = ("floor", "alkstore") if round_ % 2 == 0 else ("alkstore", "floor")
            for runtime in ("sync", "async"):
                for measure in MEASURES:
                    label = f"{runtime}: {measure}"
                    got = {}
                    for side in order:
                        files += 1
                        path = directory / f"{files}.db"
                        if runtime == "sync":
                            got[side] = sync_measure(side, path, measure, args.jobs)
                        else:
                            got[side] = asyncio.run(async_measure(side, path, measure, args.jobs))
                        record(label, side, *got[side])
                    ratios.setdefault(label, []).append(got["alkstore"][0] / got["floor"][0])
            latencies: dict[str, list[float]] = {}
            for side in order:
                files += 1
                latencies[side], share = wake(side, directory / f"{files}.db", args.wakes)
                median = statistics.median(latencies[side])
                record("wake, median ms", side, median * 1000, share)
            label = "wake, median ms"
            ratios.setdefault(label, []).append(rates[label]["floor"][-1] / rates[label]["alkstore"][-1])
            print(f"round {round_ + 1} done, load {load_average()}", flush=True)
        print(f"load after: {load_average()}; {os.cpu_count()} CPUs; {args.jobs} jobs, {args.rounds} rounds")
        print()
        print("| measure | floor | alkstore | ratio (median; rounds) | CPU/job floor | alkstore |")
        print("|---|---:|---:|---|---:|---:|")
        for label, by in rates.items():
            each = "/".join(f"{ratio:.2f}" for ratio in ratios[label])
            unit = "%" if label.startswith("wake") else "µs"
            scale = 100 if label.startswith("wake") else 1e6
            print(
                f"| {label} | {statistics.median(by['floor']):,.1f} | {statistics.median(by['alkstore']):,.1f}"
                f" | {statistics.median(ratios[label]):.2f}x ({each})"
                f" | {statistics.median(cpus[label]['floor']) * scale:.1f} {unit}"
                f" | {statistics.median(cpus[label]['alkstore']) * scale:.1f} {unit} |"
            )


if __name__ == "__main__":
    main()
