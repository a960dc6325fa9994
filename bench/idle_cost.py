"""What an idle worker costs the database: transactions per second, nothing queued, LISTEN working.

Run by hand, never from the test suite (``tests/postgres/test_idle_cost.py`` pins the bound)::

    .venv/bin/python bench/idle_cost.py [--dsn URL] [--queues 1 20] [--window 30] [--runtime sync]

For each queue count (and with and without the embedded scheduler) a worker runs in a child
process of its own (4 slots, on a store in a database of its own, ``alkstore_idle``, created if
missing), nothing is enqueued, and after a warm-up the server's own count of that database's
transactions (``xact_commit + xact_rollback`` of ``pg_stat_database``) is read at the start and at
the end of the window, from a connection to another database, so only the worker's transactions
count. The server flushes a backend's counts when it goes idle at most once a second (or 10 s
after its last burst): the window opens once the worker's start is flushed (``WARM_UP_S``), and
each end may be off by the transactions of about a second.

Every connection also spends transactions the worker never asks for: an idle backend signalled
to catch up with the cluster's catalog invalidations (any database's DDL: schemas come and go
under test suites) or, listening, to read the notification queue (any database's NOTIFY) runs a
transaction for it. That is PostgreSQL's cost of holding a connection, and on a shared server it
follows everybody else's work. A control connection in a database of its own
(``alkstore_idle_control``), idle and listening, counts it over the same window: the figures show
it beside the worker's, with the worker's connections. On a quiet server it is nought; a
measurement taken when it is not mostly measures the neighbours.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import conninfo, sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average

#: The database the measured worker alone uses.
DATABASE = "alkstore_idle"
SCHEMA = "idle_cost"
#: Where the control listener sits: a database nothing else uses.
CONTROL_DATABASE = "alkstore_idle_control"
#: How long the worker runs before the window opens: its start (LISTEN on every queue, the first
#: claims and prune pass) is a burst, and the server flushes a backend's counts of a burst only
#: when it next goes idle a second after its last flush, or 10 s later (``PGSTAT_IDLE_INTERVAL``).
WARM_UP_S = 11.0


def idle_database(dsn: str, database: str = DATABASE) -> str:
    """Create ``database`` on the server of ``dsn`` if it is missing; the DSN that leads to it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    return conninfo.make_conninfo(dsn, dbname=database)


def transactions(conn: psycopg.Connection[tuple[int]], database: str = DATABASE) -> int:
    """The server's count of ``database``'s committed and rolled-back transactions, as flushed so far."""
    row = conn.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [database]
    ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True, slots=True)
class Reading:
    """The server's counts at one instant: the idle database's transactions and backends, the control's."""

    transactions: int
    backends: int
    control: int


@contextmanager
def counting(dsn: str, database: str = DATABASE) -> Iterator[Callable[[], Reading]]:
    """While open, a ``Reading`` of ``database`` now, beside an idle, listening control connection."""
    control_dsn = idle_database(dsn, CONTROL_DATABASE)
    with psycopg.connect(dsn, autocommit=True) as watch, psycopg.connect(control_dsn, autocommit=True) as control:
        control.execute("LISTEN alkstore_idle_control")  # then idle: the server signals it as any other

        def read() -> Reading:
            # A backend counts what it did idle only once it next answers a statement: ask it one.
            control.execute("SELECT")
            row = watch.execute(
                "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = %s)", [database]
            ).fetchone()
            assert row is not None
            return Reading(transactions(watch, database), int(row[0]), transactions(watch, CONTROL_DATABASE))

        yield read


def start_worker(dsn: str, queues: int, schedules: bool, runtime: str = "sync") -> subprocess.Popen[bytes]:
    """A child process running an idle worker with 4 slots on ``queues`` queues (see ``child``)."""
    args = [sys.executable, __file__, "--child", "--dsn", dsn, "--queues", str(queues), "--runtime", runtime]
    return subprocess.Popen([*args, *(["--schedules"] if schedules else [])])


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def child(dsn: str, queues: int, schedules: bool, runtime: str) -> None:
    """Run the idle worker until SIGTERM."""
    import asyncio

    import alkstore

    names = [f"q{index:02d}" for index in range(queues)]
    stop = alkstore.StopToken()
    signal.signal(signal.SIGTERM, lambda *_: stop.cancel())
    if runtime == "async":

        async def handler(payload: object, job: alkstore.AsyncJob) -> None:
            pass

        async def main() -> None:
            async with await alkstore.open_async(dsn, schema=SCHEMA, migrate=True) as store:
                worker = alkstore.AsyncWorker(
                    store, handlers=dict.fromkeys(names, handler), concurrency=4, schedules=schedules
                )
                await worker.run(stop)

        asyncio.run(main())
        return

    def sync_handler(payload: object, job: alkstore.Job) -> None:
        pass

    with alkstore.open(dsn, schema=SCHEMA, migrate=True) as store:
        alkstore.Worker(store, handlers=dict.fromkeys(names, sync_handler), concurrency=4, schedules=schedules).run(
            stop
        )


def measure(dsn: str, queues: int, schedules: bool, window: float, runtime: str) -> tuple[Reading, Reading]:
    """Readings at the start and the end of ``window`` seconds of an idle worker on ``queues`` queues."""
    idle = idle_database(dsn)
    process = start_worker(idle, queues, schedules, runtime)
    try:
        time.sleep(WARM_UP_S)
        with counting(dsn) as read:
            before = read()
            time.sleep(window)
            after = read()
    finally:
        stop_worker(process)
    return before, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("ALKSTORE_BENCH_DSN", DEFAULT_DSN))
    parser.add_argument("--queues", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--window", type=float, default=30.0, help="seconds counted (default 30)")
    parser.add_argument("--runtime", choices=["sync", "async"], default="sync")
    parser.add_argument("--schedules", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.dsn, args.queues[0], args.schedules, args.runtime)
        return
    print(f"load average at start: {load_average()}")
    print(f"{'queues':>6} {'scheduler':>9} {'transactions/s':>15} {'connections':>11} {'control/s':>9}")
    for queues in args.queues:
        for schedules in (False, True):
            before, after = measure(args.dsn, queues, schedules, args.window, args.runtime)
            rate = (after.transactions - before.transactions) / args.window
            control = (after.control - before.control - 1) / args.window  # less the statement that made it count
            connections = max(before.backends, after.backends)
            print(f"{queues:>6} {'on' if schedules else 'off':>9} {rate:>15.2f} {connections:>11} {control:>9.2f}")


if __name__ == "__main__":
    main()
