"""A worker fed at a fixed rate through a clean phase, a phase under pressure and a recovery, beside the floor.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/pressure.py [--scenario pinned] [--rate 800] [--threads 4]
        [--clean 60] [--pressure 600] [--recovery 120] [--runtime sync|async] [--subjects alkstore,floor]

    # a shakedown: short phases
    .venv/bin/python bench/pressure.py --clean 10 --pinned 30 --recovery 15

Per subject, back to back (``--subjects`` sets the order): a fresh schema; a worker in a child
process (alkstore's ``Worker``, or ``AsyncWorker`` with ``--runtime async``; the floor: threads
each claiming one job with ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED)`` and deleting
it, sleeping 5 ms when there is nothing), ``--threads`` handlers that sleep ``--handler-ms``; a
producer in this process enqueueing ``--payload``-byte payloads, one per transaction, at
``--rate`` a second (when it falls behind, what is owed goes in one ``enqueue_many``). Each
payload carries its sequence number and enqueue time; the child reports each job's start and
end, so pickup latency is enqueue-to-start, and backlog at a phase's end is what was enqueued and
not started. The phases:

- ``clean``: nothing else happens;
- ``pressure`` (``--pinned`` is the same option): the scenario's pressure (below);
- ``recovery``: the pressure lifted.

Scenarios (``--scenario``):

- ``pinned``: a connection runs ``BEGIN; SELECT txid_current()`` and stays idle in its
  transaction, so vacuum keeps every finished job's dead rows;
- ``rr-readers``: four ``REPEATABLE READ`` transactions, started a quarter of ``--reader-span``
  apart, each scanning the subject's jobs tables every second for ``--reader-span`` seconds and
  then beginning again, so one of them always holds the horizon back;
- ``overload``: before the clean phase, the worker's clean maximum is measured (a block of jobs
  drained), and the pressure phase offers 1.5 times it;
- ``terminate``: ``pg_terminate_backend`` of every connection of the worker once a second;
- ``exhaust``: idle connections opened until the server refuses one (at most
  ``--exhaust-max``), held through the phase. It denies connections to everyone on the server,
  so it runs only with ``--allow-exhaust``;
- ``sigkill``: the worker process killed with SIGKILL every ``--kill-every`` seconds and started
  again (the queue's visibility timeout is ``--visibility``, so the killed worker's jobs come
  back; the floor has no leases: its killed jobs stay running, and are counted).

After the recovery the producer stops and the worker gets ``--drain`` seconds to finish every job;
then a ledger per subject: jobs enqueued, with no finish reported (a SIGKILL loses the reports the
child had not sent yet), still in the jobs table (the truth of what is unfinished), finished more
than once, and the
shortest time between two starts of one job (a job run again sooner than its lease lets is a
broken fence; a kill or a terminated connection may lose an ack, and the job then runs again once
its lease lapses). After the table, a series per subject (``--window`` seconds a row): completed/s, pickup p99 and
the machine's highest one-minute load in each window, to tell a rate held throughout a phase
from an average, and what the worker's backends waited on when sampled active (ten times a second:
the share on a commit's WAL flush tells a slow disk from a slow read). Per phase and subject, also
the cores the machine was busy and the worker's share (its process and its backends, from ``/proc``),
its CPU a completed job, and the server's WAL flushes a second (``pg_stat_wal``, every database's);
``overload``'s note says the same of the clean maximum's block. Per phase and subject:
offered/s (enqueued), completed/s (handlers finished), pickup p50/p99 of the jobs started in the
phase, backlog and the oldest waiting job's age at its end, the jobs table's ``n_dead_tup``, and per
job completed, each index's scans and entries read (dead ones included: ``pg_stat_user_indexes``, as
the backends have reported them, so a second or so late). A job whose report a SIGKILL lost counts
as never started. Only a server on 127.0.0.1 is measured; a subject's run lasts its phases, plus its
set-up and its worker's stop (a SIGTERM, then SIGKILL after 15 s).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average

import alkstore

QUEUE = "pressure"
SCENARIOS = ("pinned", "rr-readers", "overload", "terminate", "exhaust", "sigkill")
#: A payload's head: the job's sequence number and its enqueue time (``time.time()``).
HEAD = struct.Struct("<Qd")
#: How often the child sends what its handlers did.
REPORT_EVERY = 0.2
#: A backend waiting on these waits on its commit's WAL flush (the disk), not on a read or a lock.
WAL_FLUSH = frozenset({"IO:WALSync", "IO:WALWrite", "LWLock:WALWrite", "IO:WALInitSync"})


# -- the worker (a child process) -------------------------------------------------------------


class Reporter:
    """The child's side: each job's sequence number, start and end, sent to the parent in batches on stdout."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: list[str] = []
        threading.Thread(target=self._send, daemon=True).start()

    def record(self, payload: bytes, started: float) -> None:
        seq, _ = HEAD.unpack_from(payload)
        line = f"{seq} {started:.6f} {time.time():.6f}\n"
        with self.lock:
            self.lines.append(line)

    def _send(self) -> None:
        while True:
            time.sleep(REPORT_EVERY)
            self.flush()

    def flush(self) -> None:
        with self.lock:
            lines, self.lines = self.lines, []
            if lines:
                sys.stdout.write("".join(lines))
                sys.stdout.flush()


def child_alkstore(args: argparse.Namespace) -> None:
    # the worker's own log lines (its vacuums, held-back tables) on stderr, timed, to set beside the windows
    # (not each job's line: writing 800 a second would be a load of its own)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s worker %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda record: record.levelno >= logging.WARNING or "vacuum" in record.getMessage())
    reporter = Reporter()
    pause = args.handler_ms / 1000
    url = with_app(args.dsn, args.app)
    size = {"min_size": args.threads + 2, "max_size": args.threads + 3}
    if args.runtime == "async":

        async def handle_async(payload: bytes, job: alkstore.AsyncJob) -> None:
            started = time.time()
            await asyncio.sleep(pause)
            reporter.record(payload, started)

        async def main() -> None:
            store = await alkstore.open_async(url, schema=args.schema, **size)
            stop = alkstore.StopToken()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.cancel)
            worker = alkstore.AsyncWorker(store, handlers={QUEUE: handle_async}, concurrency=args.threads)
            await worker.run(stop)
            await store.close()

        asyncio.run(main())
        reporter.flush()
        return

    def handle(payload: bytes, job: alkstore.Job) -> None:
        started = time.time()
        time.sleep(pause)
        reporter.record(payload, started)

    store = alkstore.open(url, schema=args.schema, **size)
    stop = alkstore.StopToken()
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
    alkstore.Worker(store, handlers={QUEUE: handle}, concurrency=args.threads).run(stop)
    store.close()
    reporter.flush()


def child_floor(args: argparse.Namespace) -> None:
    reporter = Reporter()
    pause = args.handler_ms / 1000
    floor = FloorSql(args.schema)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())

    def work(index: int) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not stopping.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(with_app(args.dsn, args.app), autocommit=True)
                row = conn.execute(floor.claim, {"worker": f"w{index}", "queue": QUEUE}).fetchone()
                if row is None:
                    time.sleep(0.005)
                    continue
                started = time.time()
                time.sleep(pause)
                conn.execute(floor.delete, {"id": row[0]})
                reporter.record(bytes(row[1]), started)
            except psycopg.OperationalError:
                conn = None  # terminated or refused: connect again
                time.sleep(0.05)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reporter.flush()


# -- the floor's table and statements -----------------------------------------------------------


class FloorSql:
    """The floor: a minimal jobs table and its statements (as ``bench/queue_throughput.py``'s floor)."""

    def __init__(self, schema: str) -> None:
        t = sql.SQL("{}.jobs").format(sql.Identifier(schema))
        self.schema = schema
        self.create = [
            sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)),
            sql.SQL(
                "CREATE TABLE {} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, queue text NOT NULL,"
                " payload bytea NOT NULL, state text NOT NULL DEFAULT 'pending', priority integer NOT NULL DEFAULT 0,"
                " run_at timestamptz NOT NULL DEFAULT now(), attempts integer NOT NULL DEFAULT 0, worker_id text,"
                " lease_until timestamptz)"
            ).format(t),
            sql.SQL("CREATE INDEX jobs_ready ON {} (queue, priority DESC, run_at, id) WHERE state = 'pending'").format(
                t
            ),
        ]
        self.insert = sql.SQL("INSERT INTO {} (queue, payload) VALUES (%s, %s)").format(t)
        self.insert_many = sql.SQL("INSERT INTO {} (queue, payload) SELECT %s, p FROM unnest(%s::bytea[]) AS p").format(
            t
        )
        self.claim = sql.SQL(
            "UPDATE {t} SET state = 'running', attempts = attempts + 1, worker_id = %(worker)s,"
            " lease_until = now() + interval '300 seconds'"
            " WHERE id = (SELECT id FROM {t} WHERE queue = %(queue)s AND state = 'pending' AND run_at <= now()"
            " ORDER BY priority DESC, run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING id, payload"
        ).format(t=t)
        self.delete = sql.SQL("DELETE FROM {} WHERE id = %(id)s").format(t)
        self.stuck = sql.SQL("SELECT count(*) FROM {} WHERE state = 'running'").format(t)


# -- the parent -------------------------------------------------------------------------------


def with_app(dsn: str, app: str) -> str:
    """``dsn`` with an ``application_name``, so the scenario can find the connections by it."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={app}"


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far: the machine's busy time (every core), the worker's process, and each of its
    backends by pid (``/proc``; the server runs on this machine)."""

    machine: float
    worker: float
    backends: dict[int, float]
    wal_syncs: int  # the server's WAL flushes so far (every database's: pg_stat_wal)

    def since(self, before: Cpu) -> tuple[float, float]:
        """The machine's busy seconds and the worker's (process and backends) between ``before`` and this."""
        backends = sum(at - before.backends.get(pid, 0.0) for pid, at in self.backends.items())
        return self.machine - before.machine, self.worker - before.worker + backends


def _machine_busy() -> float:
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def _process_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _backend_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e9
    except OSError:
        return 0.0


@dataclass
class Phase:
    name: str
    start: float
    end: float
    rate: float
    produced_at_end: int = 0
    started_at_end: int = 0
    oldest_wait: float = 0.0
    dead_tuples: int | None = None
    #: Per index of the subject's jobs table at the phase's end: scans and entries read (statistics, cumulative).
    index_reads: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cpu: tuple[Cpu, Cpu] | None = None  # at the phase's start and end


class Run:
    """One subject through the phases: its producer, its worker child and what the child reports."""

    def __init__(self, args: argparse.Namespace, subject: str, admin: psycopg.Connection[Any]) -> None:
        self.args = args
        self.subject = subject
        self.admin = admin
        self.schema = f"pressure_{subject}_{os.getpid()}"
        self.app = f"pressure_worker_{os.getpid()}"
        self.enqueued: list[float] = []  # enqueue time by sequence number
        self.lock = threading.Lock()
        self.records: list[tuple[int, float, float]] = []
        self.started: set[int] = set()
        self.lowest_waiting = 0
        self.children: list[subprocess.Popen[str]] = []
        self.child: subprocess.Popen[str] | None = None
        self.child_lock = threading.Lock()
        self.restarts = 0
        self.drained: float | None = None
        self.left = 0
        self.loads: list[tuple[float, float]] = []
        self.waits: list[tuple[float, str]] = []  # (when, what) per active worker backend, sampled
        self.done = threading.Event()
        self.rate = args.rate
        self.floor = FloorSql(self.schema)
        if subject == "alkstore":
            self.store = alkstore.open(args.dsn, schema=self.schema, migrate=True, min_size=1, max_size=2)
            if args.scenario == "sigkill":
                self.store.queue(QUEUE).configure(visibility_timeout=args.visibility)
            self.queue = self.store.queue(QUEUE)
        else:
            for statement in self.floor.create:
                admin.execute(statement)
            self.conn = psycopg.connect(args.dsn, autocommit=True)

    # the worker child

    def start_child(self) -> None:
        command = [
            sys.executable, __file__, "--child", self.subject, "--schema", self.schema, "--dsn", self.args.dsn,
            "--threads", str(self.args.threads), "--handler-ms", str(self.args.handler_ms),
            "--runtime", self.args.runtime, "--app", self.app,
        ]  # fmt: skip
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.child = child
        self.children.append(child)
        threading.Thread(target=self._read, args=(child,), daemon=True).start()

    def _read(self, child: subprocess.Popen[str]) -> None:
        assert child.stdout is not None
        for line in child.stdout:
            seq, started, ended = line.split()
            with self.lock:
                self.records.append((int(seq), float(started), float(ended)))
                self.started.add(int(seq))

    def sample_load(self) -> None:
        """The machine's one-minute load every 5 s until the run is done, for the series."""
        while not self.done.wait(5.0):
            self.loads.append((time.time(), os.getloadavg()[0]))

    def sample_waits(self) -> None:
        """Ten times a second until the run is done, what each active backend of the worker waits on
        (``CPU`` when it waits on nothing), for the series: a slow window whose worker waited on its
        commits' WAL flush is the disk's, not a read's."""
        with psycopg.connect(self.args.dsn, autocommit=True) as conn:
            while not self.done.wait(0.1):
                conn.execute("SELECT pg_stat_clear_snapshot()")
                rows = conn.execute(
                    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity"
                    " WHERE application_name = %s AND state = 'active'",
                    (self.app,),
                ).fetchall()
                at = time.time()
                self.waits.extend((at, what) for (what,) in rows)

    def cpu_now(self) -> Cpu:
        """The machine's and the worker's CPU so far (the worker: its running child and its backends)."""
        self.admin.execute("SELECT pg_stat_clear_snapshot()")
        pids = [pid for (pid,) in self.admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (self.app,)
        ).fetchall()]  # fmt: skip
        child = self.child.pid if self.child is not None else 0
        row = self.admin.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        syncs = int(row[0]) if row else 0
        return Cpu(_machine_busy(), _process_cpu(child), {pid: _backend_cpu(pid) for pid in pids}, syncs)

    def kill_and_restart(self) -> None:
        """SIGKILL the worker and start another (under the lock, so ``supervise`` never sees the gap)."""
        with self.child_lock:
            if self.child is not None and self.child.poll() is None:
                self.child.send_signal(signal.SIGKILL)
                self.child.wait()
            self.start_child()

    def supervise(self, until: float) -> None:
        """Start the child again if it exited on its own (counted); returns at ``until``."""
        while time.time() < until:
            with self.child_lock:
                if self.child is not None and self.child.poll() is not None:
                    self.restarts += 1
                    self.start_child()
            time.sleep(0.2)

    def stop_child(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self.children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    # the producer

    def _payload(self, seq: int, at: float) -> bytes:
        return HEAD.pack(seq, at).ljust(self.args.payload, b"x")

    def enqueue(self, count: int) -> None:
        at = time.time()
        first = len(self.enqueued)
        payloads = [self._payload(first + n, at) for n in range(count)]
        self.enqueued.extend([at] * count)
        if self.subject == "alkstore":
            if count == 1:
                self.queue.enqueue(payloads[0])
            else:
                self.queue.enqueue_many(payloads)
        elif count == 1:
            self.conn.execute(self.floor.insert, (QUEUE, payloads[0]))
        else:
            self.conn.execute(self.floor.insert_many, (QUEUE, payloads))

    def produce(self) -> None:
        """Enqueue at ``self.rate`` a second until ``done``; what is owed after a stall goes in one batch."""
        credit = 0.0
        last = time.perf_counter()
        while not self.done.is_set():
            now = time.perf_counter()
            credit += (now - last) * self.rate
            last = now
            owed = int(credit)
            if owed >= 1:
                count = min(owed, 1000)
                self.enqueue(count)
                credit -= count
            else:
                time.sleep((1 - credit) / self.rate)

    # measures

    def advance_waiting(self) -> tuple[int, int, float]:
        """Enqueued, started as reported so far (up to ``REPORT_EVERY`` late), the oldest job not started's age."""
        with self.lock:
            while self.lowest_waiting in self.started:
                self.lowest_waiting += 1
            produced, started = len(self.enqueued), len(self.started)
        oldest = time.time() - self.enqueued[self.lowest_waiting] if self.lowest_waiting < produced else 0.0
        return produced, started, oldest

    def wait_started(self, count: int, timeout: float) -> bool:
        """Whether ``count`` jobs were reported started within ``timeout`` seconds."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.started) >= count:
                    return True
            time.sleep(0.05)
        return False

    def wait_finished(self, count: int, timeout: float) -> float | None:
        """Seconds until jobs ``0..count-1`` were each reported finished (the ledger's drain), None past ``timeout``."""
        began = time.time()
        while time.time() < began + timeout:
            with self.lock:
                if len({seq for seq, _, _ in self.records}) >= count:
                    return time.time() - began
            time.sleep(0.2)
        return None

    def index_reads(self) -> dict[str, tuple[int, int]]:
        """Per index of the jobs table: scans and entries read so far (dead entries included), as reported."""
        self.admin.execute("SELECT pg_stat_clear_snapshot()")
        rows = self.admin.execute(
            "SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes"
            " WHERE schemaname = %s AND relname = 'jobs'",
            (self.schema,),
        ).fetchall()
        return {name: (int(scans), int(read)) for name, scans, read in rows}

    def left_in_table(self) -> int:
        """Jobs still in the subject's jobs table (not finished, or held by a killed floor worker for ever)."""
        row = self.admin.execute(sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(self.schema))).fetchone()
        return int(row[0]) if row else 0

    def dead_tuples(self) -> int | None:
        self.admin.execute("SELECT pg_stat_clear_snapshot()")
        row = self.admin.execute(
            "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'jobs'", (self.schema,)
        ).fetchone()
        return int(row[0]) if row else None

    def measure_max(self) -> float:
        """The worker's clean maximum: a block enqueued at once and drained; jobs a second, first to last start."""
        before = len(self.enqueued)
        block = self.args.probe_jobs
        self.enqueue(block)
        self.wait_started(before + block, 120)
        with self.lock:
            starts = sorted(started for seq, started, _ in self.records if seq >= before)
        if len(starts) < 2:
            return 0.0
        return (len(starts) - 1) / (starts[-1] - starts[0])

    def close(self) -> None:
        if self.subject == "alkstore":
            self.store.close()
        else:
            self.conn.close()
        self.admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema)))


# -- the pressures ----------------------------------------------------------------------------


class Pressure:
    """What the pressure phase does; ``start`` at its beginning, ``stop`` at its end."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.args = run.args
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.notes: list[str] = []

    def spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self.threads.append(thread)

    def start(self) -> None:
        scenario = self.args.scenario
        if scenario == "pinned":
            self.pin = psycopg.connect(self.args.dsn)
            (xid,) = self.pin.execute("SELECT txid_current()").fetchone() or (None,)
            self.notes.append(f"horizon pinned at xid {xid}")
        elif scenario == "rr-readers":
            for n in range(4):
                self.spawn(self._reader, n)
        elif scenario == "terminate":
            self.spawn(self._terminator)
        elif scenario == "exhaust":
            self._exhaust()
        elif scenario == "sigkill":
            self.spawn(self._killer)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)
        if self.args.scenario == "pinned":
            self.pin.close()
        if self.args.scenario == "exhaust":
            for conn in self.held:
                conn.close()

    def _reader(self, n: int) -> None:
        span = self.args.reader_span
        tables = ["jobs", "dead_jobs", "results"] if self.run.subject == "alkstore" else ["jobs"]
        scans = [
            sql.SQL("SELECT count(*), sum(length(payload)) FROM {}.{}").format(
                sql.Identifier(self.run.schema), sql.Identifier(table)
            )
            for table in tables
        ]
        if self.stopping.wait(n * span / 4):
            return
        with psycopg.connect(self.args.dsn) as conn:
            scanned = 0
            while not self.stopping.is_set():
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                began = time.time()
                while time.time() - began < span and not self.stopping.is_set():
                    for scan in scans:
                        conn.execute(scan).fetchone()
                    scanned += 1
                    self.stopping.wait(1.0)
                conn.rollback()
            self.notes.append(f"reader {n}: {scanned} scans")

    def _terminator(self) -> None:
        with psycopg.connect(self.args.dsn, autocommit=True) as conn:
            killed = 0
            while not self.stopping.wait(1.0):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE application_name = %s",
                    (self.run.app,),
                ).fetchone()
                killed += int(row[0]) if row else 0
            self.notes.append(f"{killed} backends terminated")

    def _exhaust(self) -> None:
        self.held: list[psycopg.Connection[Any]] = []
        refused = ""
        while len(self.held) < self.args.exhaust_max:
            try:
                self.held.append(psycopg.connect(self.args.dsn, autocommit=True, connect_timeout=5))
            except psycopg.OperationalError as exc:
                refused = str(exc).strip().splitlines()[-1]
                break
        self.notes.append(f"{len(self.held)} idle connections held" + (f"; then refused: {refused}" if refused else ""))

    def _killer(self) -> None:
        kills = 0
        while not self.stopping.wait(self.args.kill_every):
            self.run.kill_and_restart()
            kills += 1
        self.notes.append(f"{kills} SIGKILLs")


# -- a subject's run --------------------------------------------------------------------------


def run_subject(args: argparse.Namespace, subject: str, admin: psycopg.Connection[Any]) -> tuple[list[Phase], Run]:
    run = Run(args, subject, admin)
    try:
        run.start_child()
        run.enqueue(1)  # the clock starts once the worker runs jobs
        if not run.wait_started(1, 60):
            raise RuntimeError("the worker did not start a job within 60 s")
        pressure_rate = args.rate
        notes: list[str] = []
        if args.scenario == "overload":
            before, began = run.cpu_now(), time.time()
            maximum = run.measure_max()
            after = run.cpu_now()
            machine, worker = after.since(before)
            took = time.time() - began
            syncs = (after.wal_syncs - before.wal_syncs) / took
            pressure_rate = 1.5 * maximum
            notes.append(
                f"clean maximum {maximum:,.0f}/s (cores busy {machine / took:.2f}, the worker's"
                f" {worker / took:.2f}, {worker / args.probe_jobs * 1e6:,.0f} us a job, {syncs:,.0f} WAL flushes/s):"
                f" offered {pressure_rate:,.0f}/s"
            )
        time.sleep(2 * REPORT_EVERY)  # what ran so far is reported; the clock starts now
        t = time.time()
        phases = [
            Phase("clean", t, t + args.clean, args.rate),
            Phase(args.scenario, t + args.clean, t + args.clean + args.pressure, pressure_rate),
            Phase(
                "recovery", t + args.clean + args.pressure, t + args.clean + args.pressure + args.recovery, args.rate
            ),
        ]
        phases[1].notes.extend(notes)
        first = len(run.enqueued)
        producer = threading.Thread(target=run.produce, daemon=True)
        producer.start()
        threading.Thread(target=run.sample_load, daemon=True).start()
        threading.Thread(target=run.sample_waits, daemon=True).start()
        for index, phase in enumerate(phases):
            run.rate = phase.rate
            at_start = run.cpu_now()
            pressure = Pressure(run) if index == 1 else None
            if pressure:
                pressure.start()
            run.supervise(phase.end)
            if pressure:
                pressure.stop()
                phase.notes.extend(pressure.notes)
            phase.produced_at_end, phase.started_at_end, phase.oldest_wait = run.advance_waiting()
            phase.dead_tuples = run.dead_tuples()
            phase.index_reads = run.index_reads()
            phase.cpu = (at_start, run.cpu_now())
            print(
                f"  {subject} {phase.name}: enqueued {phase.produced_at_end - first:,},"
                f" started {phase.started_at_end:,}, oldest waiting {phase.oldest_wait:.1f} s",
                flush=True,
            )
        run.done.set()
        producer.join()
        run.drained = run.wait_finished(len(run.enqueued), args.drain)
        run.left = run.left_in_table()
        if run.restarts:
            phases[1].notes.append(f"worker exited {run.restarts} times on its own and was restarted")
        if subject == "floor" and args.scenario == "sigkill":
            row = run.conn.execute(run.floor.stuck).fetchone()
            phases[2].notes.append(f"{row[0] if row else 0} floor jobs left running by the kills")
        return phases, run
    finally:
        run.done.set()
        run.stop_child()
        run.close()


def summarise(subject: str, phases: list[Phase], run: Run) -> list[str]:
    """One table row per phase, from the jobs' enqueue times and the child's reports (a job's first start counts)."""
    with run.lock:
        records = list(run.records)
    first_start: dict[int, float] = {}
    for seq, started, _ in records:
        if seq not in first_start or started < first_start[seq]:
            first_start[seq] = started
    rows = []
    previous: dict[str, tuple[int, int]] = {}
    for phase in phases:
        length = phase.end - phase.start
        finished = sum(1 for _, _, ended in records if phase.start <= ended < phase.end)
        pickups = sorted(
            started - run.enqueued[seq] for seq, started in first_start.items() if phase.start <= started < phase.end
        )
        offered = sum(1 for at in run.enqueued if phase.start <= at < phase.end)
        waiting = [
            at for seq, at in enumerate(run.enqueued) if at < phase.end and first_start.get(seq, phase.end) >= phase.end
        ]
        oldest = phase.end - min(waiting) if waiting else 0.0
        p50 = f"{statistics.median(pickups) * 1000:,.0f}" if pickups else "-"
        p99 = f"{pickups[int(0.99 * (len(pickups) - 1))] * 1000:,.0f}" if pickups else "-"
        dead = "-" if phase.dead_tuples is None else f"{phase.dead_tuples:,}"
        reads = {
            name: (scans - previous.get(name, (0, 0))[0], read - previous.get(name, (0, 0))[1])
            for name, (scans, read) in phase.index_reads.items()
        }
        previous = phase.index_reads
        per_job = "; ".join(
            f"{name} {scans / max(finished, 1):.1f} scans, {read / max(finished, 1):,.0f} entries"
            for name, (scans, read) in sorted(reads.items())
            if read
        )
        cpu = "- | -"
        if phase.cpu:
            machine, worker = phase.cpu[1].since(phase.cpu[0])
            syncs = (phase.cpu[1].wal_syncs - phase.cpu[0].wal_syncs) / length
            cpu = (
                f"{machine / length:.2f} / {worker / length:.2f} / {worker / max(finished, 1) * 1e6:,.0f}"
                f" | {syncs:,.0f}"
            )
        rows.append(
            f"| {subject} | {phase.name} ({length:.0f} s) | {offered / length:,.0f} | {finished / length:,.0f}"
            f" | {finished / max(offered, 1):.2f} | {p50} | {p99} | {len(waiting):,} | {oldest:.1f} | {dead}"
            f" | {cpu} | {per_job} | {'; '.join(phase.notes)} |"
        )
    return rows


def ledger(subject: str, run: Run) -> str:
    """After the drain: jobs enqueued, never finished (lost), finished more than once, and of those run again, the
    shortest time between a job's two starts (a second run sooner than the lease is a broken fence)."""
    with run.lock:
        records = list(run.records)
    runs: dict[int, list[float]] = {}
    for seq, started, _ in records:
        runs.setdefault(seq, []).append(started)
    enqueued = len(run.enqueued)
    lost = sum(1 for seq in range(enqueued) if seq not in runs)
    again = {seq: sorted(starts) for seq, starts in runs.items() if len(starts) > 1}
    gaps = [b - a for starts in again.values() for a, b in itertools.pairwise(starts)]
    drained = "not drained" if run.drained is None else f"drained in {run.drained:.0f} s"
    shortest = f", shortest gap between two starts {min(gaps):.1f} s" if gaps else ""
    return (
        f"| {subject} | {enqueued:,} | {drained} | {lost:,} | {run.left:,} | {len(again):,}"
        f" ({sum(len(s) - 1 for s in again.values()):,} extra runs{shortest}) |"
    )


def series(subject: str, phases: list[Phase], run: Run, window: float) -> list[str]:
    """Per ``window`` seconds from the clean phase's start: completed/s, pickup p99 of the jobs started in
    it, and the machine's highest one-minute load seen in it: whether a rate held *throughout* a phase;
    then the worker's backends sampled active in it, the share of them waiting on a commit's WAL flush,
    and the other waits most seen (``CPU``: running)."""
    with run.lock:
        records = list(run.records)
    rows = []
    start, end = phases[0].start, phases[-1].end
    at = start
    while at < end:
        until = min(at + window, end)
        finished = sum(1 for _, _, ended in records if at <= ended < until)
        pickups = sorted(started - run.enqueued[seq] for seq, started, _ in records if at <= started < until)
        p99 = f"{pickups[int(0.99 * (len(pickups) - 1))] * 1000:,.0f}" if pickups else "-"
        loads = [load for when, load in run.loads if at <= when < until]
        phase = next((phase.name for phase in phases if phase.start <= at < phase.end), "-")
        load = f"{max(loads):.2f}" if loads else "-"
        waits = Counter(what for when, what in run.waits if at <= when < until)
        active = sum(waits.values())
        flush = sum(n for what, n in waits.items() if what in WAL_FLUSH)
        other = ", ".join(f"{what} {n / active:.0%}" for what, n in waits.most_common(3) if what not in WAL_FLUSH)
        waited = f"{active:,} | {flush / active:.0%} | {other or '-'}" if active else "0 | - | -"
        rows.append(
            f"| {subject} | {phase} | {at - start:.0f}-{until - start:.0f} s"
            f" | {finished / (until - at):,.0f} | {p99} | {load} | {waited} |"
        )
        at = until
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--scenario", choices=SCENARIOS, default="pinned")
    parser.add_argument("--subjects", default="alkstore,floor", help="comma-separated, run back to back in this order")
    parser.add_argument("--rate", type=float, default=800.0, help="offered jobs a second (clean and recovery)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--handler-ms", type=float, default=1.0)
    parser.add_argument("--payload", type=int, default=256, help="bytes per payload")
    parser.add_argument("--runtime", choices=("sync", "async"), default="sync")
    parser.add_argument("--clean", type=float, default=60.0, help="seconds")
    parser.add_argument("--pressure", "--pinned", dest="pressure", type=float, default=600.0, help="seconds")
    parser.add_argument("--recovery", type=float, default=120.0, help="seconds")
    parser.add_argument("--reader-span", type=float, default=20.0, help="rr-readers: seconds each transaction lasts")
    parser.add_argument("--probe-jobs", type=int, default=3000, help="overload: the block drained to find the maximum")
    parser.add_argument("--kill-every", type=float, default=10.0, help="sigkill: seconds between kills")
    parser.add_argument("--visibility", type=float, default=10.0, help="sigkill: the queue's visibility timeout")
    parser.add_argument("--exhaust-max", type=int, default=300)
    parser.add_argument(
        "--window", type=float, default=30.0, help="seconds per row of the series printed after the table"
    )
    parser.add_argument(
        "--drain", type=float, default=300.0, help="seconds the worker gets after the recovery to finish every job"
    )
    parser.add_argument("--allow-exhaust", action="store_true", help="exhaust: yes, deny the server's connections")
    # the child's own options
    parser.add_argument("--child", choices=("alkstore", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--app", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "alkstore":
        child_alkstore(args)
        return 0
    if args.child == "floor":
        child_floor(args)
        return 0
    if urlsplit(args.dsn).hostname not in ("127.0.0.1", "localhost"):
        parser.error("only a server on 127.0.0.1 is measured")
    if args.scenario == "exhaust" and not args.allow_exhaust:
        parser.error("exhaust refuses connections to everyone on the server: pass --allow-exhaust to run it")
    subjects = [name.strip() for name in args.subjects.split(",") if name.strip()]
    admin = psycopg.connect(args.dsn, autocommit=True)
    print(
        f"scenario {args.scenario}, {args.rate:,.0f}/s offered, {args.threads} threads, {args.handler_ms} ms handler,"
        f" {args.payload}-byte payloads, runtime {args.runtime}; phases {args.clean:.0f}/{args.pressure:.0f}/"
        f"{args.recovery:.0f} s"
    )
    print(f"load before: {load_average()}", flush=True)
    rows: list[str] = []
    windows: list[str] = []
    ledgers: list[str] = []
    try:
        for subject in subjects:
            phases, run = run_subject(args, subject, admin)
            rows.extend(summarise(subject, phases, run))
            ledgers.append(ledger(subject, run))
            windows.extend(series(subject, phases, run, args.window))
            print(f"load after {subject}: {load_average()}", flush=True)
    finally:
        admin.close()
    print()
    print(
        "| subject | phase | offered/s | completed/s | completed/offered | pickup p50 (ms) | pickup p99 (ms)"
        " | backlog at end | oldest waiting (s) | n_dead_tup"
        " | cores busy / the worker's (process and backends) / its CPU a job (us) | WAL flushes/s"
        " | per completed job: index scans, entries read | notes |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    print()
    print(
        "| subject | enqueued | after the recovery | no finish reported | left in the table | finished more than once |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for row in ledgers:
        print(row)
    print()
    print(
        "| subject | phase | window | completed/s | pickup p99 (ms) | load (1 min, highest)"
        " | worker backends active (samples) | of them on WAL flush | other waits |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in windows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
