"""Queue throughput and wake latency of alkstore on PostgreSQL, side by side with a hand-written floor.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/queue_throughput.py [--dsn URL] [--repeats 3] [--quick]

One run measures, for alkstore and for "the floor" (the least a queue can do: minimal psycopg
SQL on a minimal table), with the same connections, threads, payloads and driver settings:

- enqueue/s: one job per autocommit transaction, N=2000, one thread;
- drain/s: claim + ack of 5,000 pre-enqueued no-op jobs until the queue is empty, with 1 and
  with 4 worker threads (one connection each);
- idle wake latency: a worker parked in a blocking claim, another thread enqueues; the time
  from just before the enqueue to the worker holding the job (median and p90 of 20).

The machine may be shared, so the subjects are measured interleaved: each measurement is cut
into blocks (100 enqueues, 250 claim+acks, one wake) that alternate between the subjects, and
a subject's figure sums its blocks; load that comes and goes then hits both sides alike. The
whole set runs ``--repeats`` times. The table shows each subject's best run (highest rate; for
wake, the run with the lowest median) and, as the ratio, the median of the per-run ratios.
A second table shows what an operation costs in CPU: this process's CPU time and, for a
server on this machine, its backends' (``/proc/<pid>/schedstat``). On a saturated machine
the rates follow those costs. Targets: alkstore enqueue and drain at least 0.8x the floor,
wake at most 2x the floor. Results are recorded in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import queue as stdqueue
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from typing import Any, Protocol, TypeVar

import psycopg
from _bench import DEFAULT_DSN
from psycopg import sql

import alkstore

QUEUE = "bench"
#: Worker threads (and connections) of the widest drain.
MAX_THREADS = 4
#: Blocks per subject and measurement (the unit of interleaving).
BLOCKS = 20
#: How long a wake sample waits before enqueuing, so the worker is parked (not re-claiming).
SETTLE_S = 0.1
#: Jobs enqueued and claimed per connection before anything is timed (statement preparation).
WARMUP = 30
#: Wake samples discarded before timing (they open listening connections).
WAKE_WARMUP = 6

Connection = psycopg.Connection[tuple[Any, ...]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Config:
    """Sizes of one benchmark run."""

    enqueue_n: int = 2000
    drain_n: int = 5000
    drain_threads: tuple[int, ...] = (1, 4)
    wake_n: int = 20
    repeats: int = 3


QUICK = Config(enqueue_n=200, drain_n=500, wake_n=5, repeats=1)


def payload(n: int) -> dict[str, Any]:
    """The no-op job every subject enqueues (JSON-encoded on both sides)."""
    return {"task": "noop", "n": n}


def encode(n: int) -> bytes:
    """``payload(n)`` as the floor stores it: JSON in UTF-8, as alkstore's default codec does."""
    return json.dumps(payload(n)).encode()


# -- subjects ----------------------------------------------------------------------------------


class Enqueuer(Protocol):
    """Something whose single-job enqueues are measured."""

    name: str

    def backend_pids(self) -> list[int]:
        """The server processes of every connection it measures with (for their CPU time)."""
        ...

    def enqueue(self, count: int) -> float:
        """Enqueue ``count`` jobs, one autocommit transaction each; return the elapsed seconds."""
        ...

    def clear(self) -> None:
        """Empty the subject's tables."""
        ...


class Subject(Enqueuer, Protocol):
    """A queue implementation under measurement: enqueue, drain and wake."""

    def load(self, count: int) -> None:
        """Pre-enqueue ``count`` jobs (untimed, one transaction) and vacuum-analyse the table."""
        ...

    def claim_ack(self, worker: int, threads: int) -> bool:
        """Claim one job as worker ``worker`` of ``threads``, decode it, ack it; ``False`` if the queue is empty."""
        ...

    def start_waiting(self) -> None:
        """Prepare for wake samples (the floor LISTENs; alkstore listens per parked claim)."""
        ...

    def receive(self) -> float:
        """Park until a job arrives; return ``perf_counter()`` at the moment it is held (acked after)."""
        ...

    def send(self, n: int) -> None:
        """Enqueue one job from a connection other than the receiver's, waking it."""
        ...

    def stop_waiting(self) -> None:
        """Undo ``start_waiting``."""
        ...

    def close(self) -> None:
        """Release the subject's connections."""
        ...


class Floor:
    """The floor: hand-written minimal SQL on an equivalent minimal table in its own schema.

    enqueue = one INSERT per autocommit transaction; claim = one autocommit UPDATE of the best
    pending row picked with ``FOR UPDATE SKIP LOCKED``; ack = DELETE by id; wake = a connection
    that LISTENs, woken by an INSERT that NOTIFYs in the same statement.
    """

    name = "floor"

    def __init__(self, dsn: str, schema: str, admin: Connection) -> None:
        self._dsn = dsn
        self._admin = admin
        self._channel = f"{schema}_wake"
        table = sql.SQL("{}.jobs").format(sql.Identifier(schema))
        self._table = table
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        admin.execute(
            sql.SQL(
                "CREATE TABLE {} ("
                " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " queue text NOT NULL,"
                " payload bytea NOT NULL,"
                " state text NOT NULL DEFAULT 'pending',"
                " priority integer NOT NULL DEFAULT 0,"
                " run_at timestamptz NOT NULL DEFAULT now(),"
                " attempts integer NOT NULL DEFAULT 0,"
                " worker_id text,"
                " lease_until timestamptz)"
            ).format(table)
        )
        admin.execute(
            sql.SQL("CREATE INDEX ON {} (queue, priority DESC, run_at, id) WHERE state = 'pending'").format(table)
        )
        self._insert = _text(sql.SQL("INSERT INTO {} (queue, payload) VALUES (%s, %s) RETURNING id").format(table))
        self._insert_notify = _text(
            sql.SQL(
                "WITH job AS (INSERT INTO {} (queue, payload) VALUES (%s, %s) RETURNING id)"
                " SELECT id, pg_notify(%s, '') FROM job"
            ).format(table)
        )
        self._claim = _text(
            sql.SQL(
                "UPDATE {t} SET state = 'running', attempts = attempts + 1, worker_id = %s,"
                " lease_until = now() + interval '300 seconds'"
                " WHERE id = (SELECT id FROM {t} WHERE queue = %s AND state = 'pending' AND run_at <= now()"
                " ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " RETURNING id, payload, attempts"
            ).format(t=table)
        )
        self._ack = _text(sql.SQL("DELETE FROM {} WHERE id = %s").format(table))
        # Workers 0..3, the wake sender (a worker's connection: drains and wakes never overlap)
        # and the listener (its own connection, as alkstore's parked claims have their own pool).
        self._conns = [self._connect() for _ in range(MAX_THREADS)]
        self._listener = self._connect()
        for _ in range(WARMUP):
            for index in range(MAX_THREADS):
                self._enqueue_one(self._conns[index], 0)
                self.claim_ack(index, MAX_THREADS)
            self.send(0)
            self._claim_ack(self._listener, "waker")
            self.enqueue_notify(1)
        self.clear()

    def _connect(self) -> Connection:
        # The same driver settings as alkstore's pool: autocommit, UTC, and psycopg's default
        # prepare threshold (a statement is prepared server-side from its 6th execution).
        conn = psycopg.connect(self._dsn, autocommit=True)
        conn.execute("SET TIME ZONE 'UTC'")
        return conn

    def backend_pids(self) -> list[int]:
        return [conn.info.backend_pid for conn in [*self._conns, self._listener]]

    def _enqueue_one(self, conn: Connection, n: int) -> None:
        conn.execute(self._insert, (QUEUE, encode(n))).fetchone()

    def enqueue(self, count: int) -> float:
        conn = self._conns[0]
        started = time.perf_counter()
        for n in range(count):
            self._enqueue_one(conn, n)
        return time.perf_counter() - started

    def enqueue_notify(self, count: int) -> float:
        """``enqueue``, but every INSERT also NOTIFYs in the same statement, as a waking queue must."""
        conn = self._conns[0]
        started = time.perf_counter()
        for n in range(count):
            conn.execute(self._insert_notify, (QUEUE, encode(n), self._channel)).fetchone()
        return time.perf_counter() - started

    def load(self, count: int) -> None:
        conn = self._conns[0]
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(self._insert, [(QUEUE, encode(n)) for n in range(count)])
        self._admin.execute(sql.SQL("VACUUM ANALYZE {}").format(self._table))

    def claim_ack(self, worker: int, threads: int) -> bool:
        return self._claim_ack(self._conns[worker], f"w{worker}") is not None

    def _claim_ack(self, conn: Connection, worker: str) -> float | None:
        row = conn.execute(self._claim, (worker, QUEUE)).fetchone()
        if row is None:
            return None
        held = time.perf_counter()
        json.loads(row[1])
        conn.execute(self._ack, (row[0],))
        return held

    def start_waiting(self) -> None:
        self._listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))

    def receive(self) -> float:
        while True:
            held = self._claim_ack(self._listener, "waker")
            if held is not None:
                return held
            for _ in self._listener.notifies(timeout=1.0, stop_after=1):
                pass

    def send(self, n: int) -> None:
        self._conns[1].execute(self._insert_notify, (QUEUE, encode(n), self._channel)).fetchone()

    def stop_waiting(self) -> None:
        self._listener.execute("UNLISTEN *")

    def clear(self) -> None:
        self._admin.execute(sql.SQL("TRUNCATE {}").format(self._table))

    def close(self) -> None:
        for conn in [*self._conns, self._listener]:
            conn.close()


class FloorNotify:
    """The floor's enqueue with a NOTIFY in the same statement (for the enqueue comparison only)."""

    name = "floor+notify"

    def __init__(self, floor: Floor) -> None:
        self._floor = floor

    def backend_pids(self) -> list[int]:
        return self._floor.backend_pids()

    def enqueue(self, count: int) -> float:
        return self._floor.enqueue_notify(count)

    def clear(self) -> None:
        self._floor.clear()


#: Jobs per statement of the batched floor's claims.
BATCH = 10


class BatchedFloor:
    """The floor, claiming up to ten rows per statement and deleting them with one statement."""

    def __init__(self, floor: Floor) -> None:
        self.floor = floor
        table = floor._table
        self._insert_many = _text(
            sql.SQL("INSERT INTO {} (queue, payload) SELECT %s, unnest(%b::bytea[]) RETURNING id").format(table)
        )
        self._claim = (
            sql.SQL(
                "UPDATE {t} SET state = 'running', attempts = attempts + 1, worker_id = %s,"
                " lease_until = now() + interval '300 seconds'"
                " WHERE id = ANY(ARRAY(SELECT id FROM {t} WHERE queue = %s AND state = 'pending' AND run_at <= now()"
                " ORDER BY priority DESC, run_at, id LIMIT %s FOR UPDATE SKIP LOCKED))"
                " RETURNING id, payload, attempts"
            )
            .format(t=table)
            .as_string()
        )
        self._delete = _text(sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(table))

    def enqueue_many(self, payloads: list[bytes]) -> list[int]:
        """Insert a batch in one autocommit statement (an array insert); the ids."""
        return [row[0] for row in self.floor._conns[0].execute(self._insert_many, (QUEUE, payloads)).fetchall()]

    def drain(self, threads: int) -> int:
        """Drain the queue on ``threads`` threads, ``BATCH`` per claim; how many jobs."""

        def work(index: int) -> int:
            conn = self.floor._conns[index]
            done = 0
            while rows := conn.execute(self._claim, (f"w{index}", QUEUE, BATCH)).fetchall():
                for row in rows:
                    json.loads(row[1])
                conn.execute(self._delete, ([row[0] for row in rows],))
                done += len(rows)
            return done

        return run_threads(threads, work)[1]


class Alkstore:
    """alkstore through its public API: ``Queue.enqueue``, ``Queue.claim``, ``Job.ack``.

    Like the floor, it uses as many connections as the measurement has threads: one store
    (one schema) per pool size, each pool filled before timing. A larger pool than threads
    would hand its connections out in turn (psycopg_pool is FIFO), which costs more than
    reusing one; a default pool (``min_size=1``) grows only under concurrent demand anyway.
    """

    name = "alkstore"

    def __init__(self, dsn: str, schema: str, admin: Connection) -> None:
        self._admin = admin
        self._schema = sql.Identifier(schema)
        self._stores: dict[int, alkstore.Store] = {}
        self._queues: dict[int, alkstore.Queue] = {}
        # 1: enqueue and the single-thread drain; 2: wake (the parked claimer and the sender,
        # whose parked claim also holds a listening connection of its own pool); 4: wide drain.
        for size in sorted({1, 2, MAX_THREADS}):
            store = alkstore.open(dsn, schema=schema, migrate=not self._stores, min_size=size, max_size=size)
            self._stores[size] = store
            self._queues[size] = store.queue(QUEUE)
            pool = getattr(store.engine, "pool", None)
            if pool is not None:
                pool.wait(timeout=30.0)
            for _ in range(WARMUP * size):  # the pool hands connections out in turn: warm each
                self._queues[size].enqueue(payload(0))
                self.claim_ack(0, size)
        self.clear()
        self._pids = [pid for size, store in self._stores.items() for pid in _pool_pids(store, size)]

    def backend_pids(self) -> list[int]:
        return self._pids

    def enqueue(self, count: int) -> float:
        enqueue = self._queues[1].enqueue
        started = time.perf_counter()
        for n in range(count):
            enqueue(payload(n))
        return time.perf_counter() - started

    def load(self, count: int) -> None:
        store = self._stores[1]
        with store.transaction() as tx:
            for n in range(count):
                store.enqueue_tx(tx, QUEUE, payload(n))
        self._admin.execute(sql.SQL("VACUUM ANALYZE {}.jobs").format(self._schema))

    def claim_ack(self, worker: int, threads: int) -> bool:
        job = self._queues[threads].claim(f"w{worker}")
        if job is None:
            return False
        job.ack()
        return True

    def start_waiting(self) -> None:
        pass

    def receive(self) -> float:
        job = self._queues[2].claim("waker", wait=60.0)
        if job is None:
            raise RuntimeError("a parked claim waited 60 s without a job")
        held = time.perf_counter()
        job.ack()
        return held

    def send(self, n: int) -> None:
        self._queues[2].enqueue(payload(n))

    def stop_waiting(self) -> None:
        pass

    def clear(self) -> None:
        self._admin.execute(sql.SQL("TRUNCATE {s}.jobs, {s}.dead_jobs").format(s=self._schema))

    def close(self) -> None:
        for store in self._stores.values():
            store.close()


def _pool_pids(store: alkstore.Store, size: int) -> list[int]:
    """The server pids of the ``size`` connections of a store's (full) pool."""
    pool = getattr(store.engine, "pool", None)
    if pool is None:
        return []
    conns = [pool.getconn() for _ in range(size)]
    try:
        return [conn.info.backend_pid for conn in conns]
    finally:
        for conn in conns:
            pool.putconn(conn)


def _text(statement: sql.Composed) -> str:
    """Render a composed statement to plain text once, as alkstore does with its own statements."""
    return statement.as_string()


# -- measurements ----------------------------------------------------------------------------


def rotations(subjects: Sequence[T], blocks: int) -> Iterator[list[T]]:
    """``blocks`` orders of ``subjects``: each block starts with the next subject in turn."""
    for block in range(blocks):
        shift = block % len(subjects)
        yield [*subjects[shift:], *subjects[:shift]]


@dataclass(slots=True)
class Tally:
    """One subject's share of one measurement: operations, seconds and CPU time spent."""

    ops: int = 0
    seconds: float = 0.0
    client_ns: int = 0
    server_ns: int | None = 0

    @property
    def rate(self) -> float:
        """Operations per second."""
        return self.ops / self.seconds

    @property
    def client_us(self) -> float:
        """Client (this process) CPU microseconds per operation."""
        return self.client_ns / self.ops / 1e3

    @property
    def server_us(self) -> float | None:
        """Server (the subject's backends) CPU microseconds per operation; ``None`` if not measurable."""
        return None if self.server_ns is None else self.server_ns / self.ops / 1e3

    def add(self, ops: int, seconds: float, before: tuple[int, int | None], after: tuple[int, int | None]) -> None:
        """Account for one block."""
        self.ops += ops
        self.seconds += seconds
        self.client_ns += after[0] - before[0]
        if self.server_ns is not None and before[1] is not None and after[1] is not None:
            self.server_ns += after[1] - before[1]
        else:
            self.server_ns = None


def cpu(pids: Sequence[int]) -> tuple[int, int | None]:
    """(CPU ns of this process, CPU ns of the server processes ``pids``, or ``None`` if unreadable).

    Server CPU is read from ``/proc/<pid>/schedstat``, so only for a server on this machine.
    """
    client = time.process_time_ns()
    server = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
                server += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            return client, None
    return client, server


def measure_enqueue(subjects: Sequence[Enqueuer], count: int) -> dict[str, Tally]:
    """Enqueue ``count`` jobs per subject in interleaved blocks."""
    tallies = {s.name: Tally() for s in subjects}
    for subject in subjects:
        subject.clear()
    block = max(1, count // BLOCKS)
    for order in rotations(subjects, -(-count // block)):
        for subject in order:
            pids = subject.backend_pids()
            before = cpu(pids)
            seconds = subject.enqueue(block)
            tallies[subject.name].add(block, seconds, before, cpu(pids))
    return tallies


def measure_drain(subjects: Sequence[Subject], count: int, threads: int) -> dict[str, Tally]:
    """Drain ``count`` jobs per subject with ``threads`` workers (claim, decode, ack).

    Every subject is loaded first; then blocks of ``count / BLOCKS`` claims alternate between
    them until a block finds the queue empty (so the last block times the empty claims too).
    """
    tallies = {s.name: Tally() for s in subjects}
    for subject in subjects:
        subject.clear()
        subject.load(count)
    budget = max(1, count // BLOCKS)
    active = list(subjects)
    for order in rotations(subjects, sys.maxsize):
        for subject in [s for s in order if s in active]:
            pids = subject.backend_pids()
            before = cpu(pids)
            seconds, done = drain_block(subject, threads, budget)
            tallies[subject.name].add(done, seconds, before, cpu(pids))
            if done < budget:  # a worker found the queue empty
                active.remove(subject)
        if not active:
            break
    for name, tally in tallies.items():
        if tally.ops != count:
            raise RuntimeError(f"{name} handled {tally.ops} jobs, expected {count}")
    return tallies


def drain_block(subject: Subject, threads: int, budget: int) -> tuple[float, int]:
    """Start ``threads`` workers together, claiming and acking until ``budget`` jobs or an empty queue.

    Returns the seconds until the last worker finished and the jobs handled.
    """
    lock = threading.Lock()
    left = [budget]

    def take() -> bool:
        with lock:
            if left[0] <= 0:
                return False
            left[0] -= 1
            return True

    def work(worker: int) -> int:
        done = 0
        while take() and subject.claim_ack(worker, threads):
            done += 1
        return done

    return run_threads(threads, work)


def run_threads(threads: int, work: Callable[[int], int]) -> tuple[float, int]:
    """Run ``work(i)`` on ``threads`` threads started together; return (seconds, sum of results)."""
    gate = threading.Barrier(threads + 1)
    counts = [0] * threads
    errors: list[BaseException] = []

    def body(index: int) -> None:
        gate.wait()
        try:
            counts[index] = work(index)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=body, args=(i,), name=f"bench-worker-{i}") for i in range(threads)]
    for worker in workers:
        worker.start()
    gate.wait()
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed, sum(counts)


def measure_wake(subjects: Sequence[Subject], samples: int) -> dict[str, list[float]]:
    """Idle wake latencies (seconds) of each subject, samples alternating between subjects.

    Each subject has a worker thread parked in ``receive``; this thread waits ``SETTLE_S`` (so
    the worker is parked, not re-polling), notes the time, and calls ``send``.
    """
    inboxes: dict[str, stdqueue.Queue[float | BaseException]] = {s.name: stdqueue.Queue() for s in subjects}
    latencies: dict[str, list[float]] = {s.name: [] for s in subjects}
    total = WAKE_WARMUP + samples

    def worker(subject: Subject) -> None:
        inbox = inboxes[subject.name]
        try:
            for _ in range(total):
                inbox.put(subject.receive())
        except BaseException as exc:
            inbox.put(exc)

    for subject in subjects:
        subject.clear()
        subject.start_waiting()
    threads = [threading.Thread(target=worker, args=(s,), name=f"bench-waker-{s.name}") for s in subjects]
    for thread in threads:
        thread.start()
    try:
        for n, order in enumerate(rotations(subjects, total)):
            for subject in order:
                time.sleep(SETTLE_S)
                sent = time.perf_counter()
                subject.send(n)
                held = inboxes[subject.name].get(timeout=120.0)
                if isinstance(held, BaseException):
                    raise held
                if n >= WAKE_WARMUP:
                    latencies[subject.name].append(held - sent)
    finally:
        for thread in threads:
            thread.join(timeout=120.0)
        for subject in subjects:
            subject.stop_waiting()
    return latencies


# -- running and reporting ---------------------------------------------------------------------


@dataclass(slots=True)
class Results:
    """Every run's figures: a tally per (measure, subject) and run, wake latencies per subject and run."""

    tallies: dict[tuple[str, str], list[Tally]] = field(default_factory=dict)
    wakes: dict[str, list[list[float]]] = field(default_factory=dict)

    def add(self, measure: str, tallies: dict[str, Tally]) -> None:
        """Record one run of ``measure``."""
        for name, tally in tallies.items():
            self.tallies.setdefault((measure, name), []).append(tally)

    def best(self, measure: str, name: str) -> float:
        """The subject's highest rate over the runs."""
        return max(tally.rate for tally in self.tallies[(measure, name)])

    def ratio(self, measure: str, name: str, reference: str) -> float:
        """The median over the runs of ``name``'s rate over ``reference``'s in the same run."""
        pairs = zip(self.tallies[(measure, name)], self.tallies[(measure, reference)], strict=True)
        return statistics.median(mine.rate / theirs.rate for mine, theirs in pairs)

    def cpu_us(self, measure: str, name: str) -> tuple[float, float | None]:
        """Median over the runs of the client and server CPU microseconds per operation."""
        tallies = self.tallies[(measure, name)]
        servers = [tally.server_us for tally in tallies]
        server = None if None in servers else statistics.median(s for s in servers if s is not None)
        return statistics.median(tally.client_us for tally in tallies), server

    def wake_ratio(self, name: str, reference: str) -> float:
        """The median over the runs of ``name``'s median wake latency over ``reference``'s in the same run."""
        pairs = zip(self.wakes[name], self.wakes[reference], strict=True)
        return statistics.median(statistics.median(mine) / statistics.median(theirs) for mine, theirs in pairs)


def run(floor: Floor, floor_notify: FloorNotify, alk: Alkstore, config: Config, log: Callable[[str], None]) -> Results:
    """Run every measurement ``config.repeats`` times, logging each run's figures as it goes."""
    results = Results()
    pair: list[Subject] = [floor, alk]
    for rep in range(config.repeats):
        log(f"run {rep + 1}/{config.repeats}")
        tallies = measure_enqueue([floor, floor_notify, alk], config.enqueue_n)
        results.add("enqueue", tallies)
        log("  enqueue      " + _line(tallies))
        for threads in config.drain_threads:
            tallies = measure_drain(pair, config.drain_n, threads)
            results.add(f"drain x{threads}", tallies)
            log(f"  drain x{threads}     " + _line(tallies))
        wakes = measure_wake(pair, config.wake_n)
        for name, latencies in wakes.items():
            results.wakes.setdefault(name, []).append(latencies)
        medians = {name: statistics.median(values) * 1e3 for name, values in wakes.items()}
        shown = "  ".join(f"{name} {value:.2f} ms" for name, value in medians.items())
        log(f"  wake         {shown}  ratio {medians['alkstore'] / medians['floor']:.2f}x")
    return results


def _line(tallies: dict[str, Tally]) -> str:
    """One run's figures per subject: rate, and CPU per operation (client + server)."""
    parts = []
    for name, tally in tallies.items():
        server = "?" if tally.server_us is None else f"{tally.server_us:.0f}"
        parts.append(f"{name} {tally.rate:,.0f}/s ({tally.client_us:.0f}+{server} us cpu)")
    ratio = tallies["alkstore"].rate / tallies["floor"].rate
    return "  ".join(parts) + f"  ratio {ratio:.2f}x"


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values``, interpolating linearly between closest ranks."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def best_wake(runs: list[list[float]]) -> tuple[float, float]:
    """(median, p90) in seconds of the run with the lowest median."""
    best = min(runs, key=statistics.median)
    return statistics.median(best), percentile(best, 0.9)


Row = tuple[str, str, str, str, str, str]


def _labels(config: Config) -> list[tuple[str, str]]:
    labels = [("enqueue", "enqueue/s (1 thread)")]
    labels += [(f"drain x{t}", f"claim+ack/s ({t} thread{'s' if t > 1 else ''})") for t in config.drain_threads]
    return labels


def table(results: Results, config: Config) -> list[Row]:
    """The side-by-side rows: measure, alkstore, floor, ratio, target, met.

    Figures are each subject's best run; the ratio is the median of the per-run ratios (each
    run measures both subjects interleaved, so its ratio is the one load cannot skew).
    """
    rows: list[Row] = []
    for key, label in _labels(config):
        alk, flo = results.best(key, "alkstore"), results.best(key, "floor")
        ratio = results.ratio(key, "alkstore", "floor")
        rows.append((label, f"{alk:,.0f}", f"{flo:,.0f}", _shown(ratio, down=True), ">= 0.80x", _met(ratio >= 0.8)))
    alk_median, alk_p90 = best_wake(results.wakes["alkstore"])
    flo_median, flo_p90 = best_wake(results.wakes["floor"])
    ratio = results.wake_ratio("alkstore", "floor")
    rows.append(
        (
            "wake median (ms)",
            f"{alk_median * 1e3:.2f}",
            f"{flo_median * 1e3:.2f}",
            _shown(ratio, down=False),
            "<= 2.00x",
            _met(ratio <= 2),
        )
    )
    rows.append(("wake p90 (ms)", f"{alk_p90 * 1e3:.2f}", f"{flo_p90 * 1e3:.2f}", f"{alk_p90 / flo_p90:.2f}x", "", ""))
    alk, notify = results.best("enqueue", "alkstore"), results.best("enqueue", "floor+notify")
    ratio = results.ratio("enqueue", "alkstore", "floor+notify")
    rows.append(("enqueue/s, floor with NOTIFY", f"{alk:,.0f}", f"{notify:,.0f}", f"{ratio:.2f}x", "", ""))
    return rows


def cpu_table(results: Results, config: Config) -> list[tuple[str, str, str, str]]:
    """CPU microseconds per operation, client + server (median over runs): what the rates cost."""
    rows = []
    for key, label in _labels(config):
        label = label.replace("/s", " CPU us/op")
        cells = []
        totals = []
        for name in ("alkstore", "floor"):
            client, server = results.cpu_us(key, name)
            if server is None:
                cells.append(f"{client:.0f} + ?")
            else:
                cells.append(f"{client:.0f} + {server:.0f} = {client + server:.0f}")
                totals.append(client + server)
        ratio = f"{totals[0] / totals[1]:.2f}x" if len(totals) == 2 else ""
        rows.append((label, cells[0], cells[1], ratio))
    return rows


def _shown(ratio: float, *, down: bool) -> str:
    """A ratio to two decimals, rounded towards missing its target so the text never contradicts "met"."""
    hundredths = math.floor(ratio * 100) if down else math.ceil(ratio * 100)
    return f"{hundredths / 100:.2f}x"


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print ``rows`` under ``header`` as aligned columns (first column left, the rest right)."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        cells = [
            line[0].ljust(widths[0]),
            *(cell.rjust(width) for cell, width in zip(line[1:], widths[1:], strict=True)),
        ]
        print("  ".join(cells).rstrip())


def machine_info(admin: Connection) -> list[tuple[str, str]]:
    """CPU, operating system, server version and durability settings, Python and driver versions."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), model)
    except OSError:
        pass

    def show(setting: str) -> str:
        row = admin.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
        return "?" if row is None else str(row[0])

    settings = ("fsync", "synchronous_commit", "wal_sync_method", "shared_buffers", "max_connections")
    return [
        ("cpu", f"{os.cpu_count()} x {model}"),
        ("os", platform.platform()),
        ("postgresql", show("server_version")),
        ("server settings", ", ".join(f"{name}={show(name)}" for name in settings)),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        (
            "psycopg",
            f"{psycopg.__version__} ({psycopg.pq.__impl__}, libpq {psycopg.pq.version()}), "
            f"psycopg-pool {metadata.version('psycopg-pool')}",
        ),
        ("alkstore", alkstore.__version__),
    ]


C = TypeVar("C")


def bench_arguments(
    description: str,
    full: C,
    quick: C,
    argv: Sequence[str] | None = None,
    extend: Callable[[argparse.ArgumentParser], object] | None = None,
) -> tuple[argparse.Namespace, C]:
    """The ``--dsn``, ``--quick`` and ``--repeats`` every throughput benchmark takes (and what ``extend``
    adds), and its sizes."""
    parser = argparse.ArgumentParser(description=description)
    if extend is not None:
        extend(parser)
    parser.add_argument("--dsn", default=DEFAULT_DSN, help=f"PostgreSQL URL (default {DEFAULT_DSN})")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, one repeat")
    parser.add_argument("--repeats", type=int, help="runs of the whole set (default 3; --quick 1)")
    args = parser.parse_args(argv)
    config = quick if args.quick else full
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        config = replace(config, repeats=args.repeats)  # type: ignore[type-var]
    logging.getLogger("alkstore").setLevel(logging.WARNING)
    return args, config


def bench_schemas(subject: str) -> tuple[str, str]:
    """Fresh names for a run's floor schema and its subject's (dropped at the end of the run)."""
    tag = uuid.uuid4().hex[:8]
    return f"bench_floor_{tag}", f"bench_{subject}_{tag}"


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, measure, print the table; the benchmark's schemas are dropped at the end."""
    args, config = bench_arguments(
        "alkstore queue throughput and wake latency vs a minimal-SQL floor", Config(), QUICK, argv
    )

    suffix = f"{os.getpid()}_{time.time_ns() % 10**9}"
    floor_schema, alk_schema = f"bench_floor_{suffix}", f"bench_alkstore_{suffix}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        for key, value in machine_info(admin):
            print(f"{key:<16} {value}")
        threads = "/".join(map(str, config.drain_threads))
        print(
            f"sizes            enqueue {config.enqueue_n}, drain {config.drain_n} with {threads} threads, "
            f"wake {config.wake_n} samples; {config.repeats} run(s), interleaved in blocks"
        )
        subjects: list[Subject] = []
        try:
            floor = Floor(args.dsn, floor_schema, admin)
            subjects.append(floor)
            alk = Alkstore(args.dsn, alk_schema, admin)
            subjects.append(alk)
            log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
            results = run(floor, FloorNotify(floor), alk, config, log)
        finally:
            for subject in subjects:
                subject.close()
            for schema in (floor_schema, alk_schema):
                admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print()
    print(
        f"figures: best of {config.repeats} run(s) (highest rate; for wake, the run with the lowest median); "
        "ratio: median of the per-run ratios"
    )
    print_table(("measure", "alkstore", "floor", "ratio", "target", "met"), table(results, config))
    print()
    print("CPU per operation in microseconds, client (this process) + server (its backends), median of the runs")
    print_table(("measure", "alkstore", "floor", "ratio"), cpu_table(results, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
