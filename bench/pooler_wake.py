"""Wake latency of a parked claim through PgBouncer, in each pool mode, beside a direct connection.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/pooler_wake.py [--dsn URL] [--samples 20]

It starts two PgBouncers of its own (session and transaction pooling, on free loopback ports,
as the tests do: ``tests/postgres/_pgbouncer.py``) in front of the server at ``--dsn``, and
measures, for each of these stores, the time from just before an enqueue (on the store's own
connections) to a worker parked in ``queue.claim(worker, wait=60)`` holding the job:

- ``direct``: the store on the server itself;
- ``session``: the store wholly behind the session pooler (it listens there too);
- ``transaction``: the store behind the transaction pooler (``prepare_threshold=None``),
  listening directly (``listen_url``): the recipe of the README's "Deploying" section;
- ``transaction, no listen_url``: the same store listening through the transaction pooler,
  which cannot work: the store finds out, warns once and polls (``poll_interval`` 1 s).

Samples are interleaved (a round takes one sample of every store, in an order that rotates) so
load that comes and goes hits all alike; the first rounds are not timed (they open listening
connections). It prints each store's median and p90, the ratio of its median to the direct one,
and the load average (``uptime``) before and after. Results go to ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from queue import Queue
from typing import Any

import psycopg
from _bench import DEFAULT_DSN

import alkstore
from alkstore import Store
from alkstore.adapters.postgres.testing import drop_schema

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for its PgBouncer launcher
from tests.postgres._pgbouncer import PgBouncer

#: How long a sample waits before enqueuing, so the worker is parked (not re-claiming).
SETTLE_S = 0.1
#: Rounds taken before the timed ones.
WARMUP = 3
#: Server connections of each PgBouncer, and the pools of each store (its bound: their sum).
POOL = 4
MAX_SIZE = 2
LISTEN_MAX_SIZE = 2


@dataclass(slots=True)
class Subject:
    """One store under measurement, and a worker parked on its queue."""

    name: str
    store: Store
    queue: str = field(default_factory=lambda: f"wake-{uuid.uuid4().hex[:8]}")
    held: Queue[float | BaseException] = field(default_factory=Queue)
    thread: threading.Thread | None = None

    def start(self, count: int) -> None:
        self.thread = threading.Thread(target=self._work, args=(count,), name=f"bench-{self.name}", daemon=True)
        self.thread.start()

    def _work(self, count: int) -> None:
        handle = self.store.queue(self.queue)
        try:
            for _ in range(count):
                job = handle.claim("parked", wait=60.0)
                now = time.perf_counter()
                if job is None:
                    raise RuntimeError(f"{self.name}: the parked claim came back empty")
                job.ack()
                self.held.put(now)
        except BaseException as exc:
            self.held.put(exc)

    def sample(self, n: int) -> float:
        time.sleep(SETTLE_S)
        sent = time.perf_counter()
        self.store.queue(self.queue).enqueue(n)
        held = self.held.get(timeout=120.0)
        if isinstance(held, BaseException):
            raise held
        return held - sent


def rotations(subjects: list[Subject], rounds: int) -> Iterator[list[Subject]]:
    for n in range(rounds):
        shift = n % len(subjects)
        yield subjects[shift:] + subjects[:shift]


def uptime() -> str:
    found = shutil.which("uptime")
    if found is not None:
        return subprocess.run([found], capture_output=True, text=True, check=False).stdout.strip()
    return "load average: " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


@contextmanager
def bouncer(dsn: str, mode: str) -> Iterator[PgBouncer]:
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    started = PgBouncer(found, dsn, mode, POOL)
    try:
        yield started
    finally:
        started.stop()


def measure(dsn: str, samples: int, log: Callable[[str], None]) -> dict[str, list[float]]:
    schema = f"bench_wake_{uuid.uuid4().hex[:8]}"
    alkstore.open(dsn, schema=schema, migrate=True, min_size=0, max_size=1).close()
    try:
        with ExitStack() as stack:
            session = stack.enter_context(bouncer(dsn, "session"))
            transaction = stack.enter_context(bouncer(dsn, "transaction"))
            common: dict[str, Any] = {"schema": schema, "max_size": MAX_SIZE, "listen_max_size": LISTEN_MAX_SIZE}
            stores: dict[str, tuple[str, dict[str, Any]]] = {
                "direct": (dsn, {}),
                "session": (session.url(), {}),
                "transaction": (transaction.url(), {"prepare_threshold": None, "listen_url": dsn}),
                "transaction, no listen_url": (transaction.url(), {"prepare_threshold": None}),
            }
            subjects = []
            for name, (url, options) in stores.items():
                store = stack.enter_context(alkstore.open(url, **common, **options))
                subjects.append(Subject(name, store))
            for subject in subjects:
                subject.start(WARMUP + samples)
            latencies: dict[str, list[float]] = {subject.name: [] for subject in subjects}
            for n, order in enumerate(rotations(subjects, WARMUP + samples)):
                for subject in order:
                    latency = subject.sample(n)
                    if n >= WARMUP:
                        latencies[subject.name].append(latency)
                log(f"  round {n + 1}/{WARMUP + samples}")
            for subject in subjects:
                assert subject.thread is not None
                subject.thread.join(120.0)
            return latencies
    finally:
        drop_schema(dsn, schema)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("ALKSTORE_TEST_DSN", DEFAULT_DSN))
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with psycopg.connect(args.dsn) as conn:
        server = conn.execute("SHOW server_version").fetchone()
    pgbouncer = subprocess.run(
        [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", "--version"], capture_output=True, text=True, check=False
    ).stdout.splitlines()[0]
    before = uptime()
    log(f"uptime before: {before}")
    latencies = measure(args.dsn, args.samples, log)
    after = uptime()

    print(f"alkstore {metadata.version('alkstore')}, Python {platform.python_version()}, psycopg {psycopg.__version__}")
    print(f"PostgreSQL {server[0] if server else '?'}, {pgbouncer}, {os.cpu_count()} CPUs")
    print(f"uptime before: {before}")
    print(f"uptime after:  {after}")
    print(f"{args.samples} samples per store, interleaved, after {WARMUP} untimed rounds\n")
    direct = statistics.median(latencies["direct"])
    print("| store                      | median (ms) | p90 (ms) | median / direct |")
    print("|----------------------------|------------:|---------:|----------------:|")
    for name, values in latencies.items():
        median = statistics.median(values)
        print(f"| {name:<26} | {median * 1e3:11.2f} | {p90(values) * 1e3:8.2f} | {median / direct:14.2f}x |")


if __name__ == "__main__":
    main()
