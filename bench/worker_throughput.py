"""The worker runtime's throughput and wake latency on PostgreSQL, side by side with the floor.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/worker_throughput.py [--dsn URL] [--repeats 3] [--quick]

Drain: a block of no-op jobs is loaded, then drained: by the floor's threads claiming and
deleting one job per statement (the per-job floor), by the floor's threads claiming ten per
statement and deleting them with one ``DELETE … = ANY`` (the batched floor), and by an
``alkstore.Worker`` running a no-op task (timed from starting the worker until every job of
the block is durably done, as the peer harness does). Blocks alternate between the subjects,
so load that comes and goes hits each alike; the set runs ``--repeats`` times and each ratio is
the median of the per-run ratios. Wake: an idle worker (parked on LISTEN) and the floor's
listener; the time from just before the enqueue to the handler holding the job.

Targets (issues 10 and 11): the worker at 1 and 4 threads at least 0.8x the per-job floor and,
batched, at least 0.6x the batched floor at 4 threads; its wake at most 2x the floor's.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from queue_throughput import QUEUE, BatchedFloor, Floor, bench_arguments, bench_schemas, run_threads

import alkstore


@dataclass(frozen=True, slots=True)
class Config:
    block: int = 2500
    blocks: int = 4
    threads: tuple[int, ...] = (1, 4)
    wakes: int = 20
    repeats: int = 3


QUICK = Config(block=300, blocks=2, wakes=5, repeats=1)


class WorkerSubject:
    """``alkstore.Worker`` over a store of its own, running a no-op task."""

    def __init__(self, dsn: str, schema: str, threads: int, prefetch: int = 0) -> None:
        self.prefetch = prefetch
        self.store = alkstore.open(dsn, schema=schema, migrate=True, min_size=threads + 2, max_size=threads + 3)
        # A connection of the benchmark's own, to see when the table is empty (every ack is in).
        self.watch = psycopg.connect(dsn, autocommit=True)
        self.count_jobs = sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(schema))
        self.threads = threads
        self.tasks = alkstore.Tasks()
        self.done = 0
        self.target = 0
        self.all_done = threading.Event()
        self.lock = threading.Lock()
        self.held_at: list[float] = []

        @self.tasks.task("noop", queue=QUEUE)
        def noop(n: int) -> None:
            with self.lock:
                self.done += 1
                if n < 0:
                    self.held_at.append(time.perf_counter())
                if self.done == self.target:
                    self.all_done.set()

        self.noop = noop

    def load(self, count: int) -> None:
        with self.store.transaction() as tx:
            for n in range(count):
                self.noop.enqueue_tx(self.store, tx, n=n)

    def drain(self, count: int) -> float:
        """Seconds from starting a worker until ``count`` jobs are durably done (its stop not counted)."""
        self.done, self.target = 0, count
        self.all_done.clear()
        stop = alkstore.StopToken()
        worker = alkstore.Worker(
            self.store, self.tasks, concurrency=self.threads, prefetch=self.prefetch, poll_interval=0.05
        )
        thread = threading.Thread(target=worker.run, args=(stop,))
        started = time.perf_counter()
        thread.start()
        self.all_done.wait()
        while self._left():
            time.sleep(0.0005)  # durable: the acks are in
        elapsed = time.perf_counter() - started
        stop.cancel()
        thread.join()
        assert self.done == count, (self.done, count)
        return elapsed

    def _left(self) -> bool:
        row = self.watch.execute(self.count_jobs).fetchone()
        return bool(row and row[0])


def timed(call: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    done = call()
    return done, time.perf_counter() - started


def drain_run(floor: Floor, batched: BatchedFloor, worker: WorkerSubject, config: Config) -> dict[str, float]:
    """One run: blocks alternating between the subjects; jobs per second each."""
    rates: dict[str, list[tuple[int, float]]] = {"floor": [], "floor x10": [], "worker": []}
    threads = worker.threads
    for block in range(config.blocks):
        order = ["floor", "floor x10", "worker"]
        order = order[block % 3 :] + order[: block % 3]
        for name in order:
            if name == "worker":
                worker.load(config.block)
                rates[name].append((config.block, worker.drain(config.block)))
            else:
                floor.clear()
                floor.load(config.block)
                drain = (
                    (lambda: batched.drain(threads)) if name == "floor x10" else (lambda: _floor_drain(floor, threads))
                )
                rates[name].append(timed(drain))
    return {name: sum(done for done, _ in runs) / sum(seconds for _, seconds in runs) for name, runs in rates.items()}


def _floor_drain(floor: Floor, threads: int) -> int:
    def work(index: int) -> int:
        done = 0
        while floor.claim_ack(index, threads):
            done += 1
        return done

    return run_threads(threads, work)[1]


def wake_run(floor: Floor, worker: WorkerSubject, samples: int) -> dict[str, float]:
    """Median idle wake latency (ms) of an idle worker and of the floor's listener, interleaved."""
    stop = alkstore.StopToken()
    running = alkstore.Worker(worker.store, worker.tasks, concurrency=1, poll_interval=60.0)
    thread = threading.Thread(target=running.run, args=(stop,))
    thread.start()
    time.sleep(0.5)
    floor.clear()
    floor.start_waiting()
    got: list[float] = []

    def listen() -> None:
        for _ in range(samples + 3):
            got.append(floor.receive())

    listener = threading.Thread(target=listen)
    listener.start()
    latencies: dict[str, list[float]] = {"floor": [], "worker": []}
    try:
        for n in range(samples + 3):
            time.sleep(0.15)
            sent = time.perf_counter()
            floor.send(n)
            while len(got) <= n:
                time.sleep(0.0002)
            if n >= 3:
                latencies["floor"].append(got[n] - sent)
            time.sleep(0.15)
            before = len(worker.held_at)
            sent = time.perf_counter()
            worker.noop.enqueue(worker.store, n=-1)
            while len(worker.held_at) <= before:
                time.sleep(0.0002)
            if n >= 3:
                latencies["worker"].append(worker.held_at[-1] - sent)
    finally:
        listener.join()
        floor.stop_waiting()
        stop.cancel()
        thread.join()
    return {name: statistics.median(values) * 1000 for name, values in latencies.items()}


def main() -> int:
    args, config = bench_arguments(
        __doc__.split("\n")[0],
        Config(),
        QUICK,
        extend=lambda parser: parser.add_argument(
            "--prefetch", type=int, default=0, help="the worker's prefetch (default 0: off, as Worker's)"
        ),
    )
    admin = psycopg.connect(args.dsn, autocommit=True)
    floor_schema, worker_schema = bench_schemas("worker")
    floor = Floor(args.dsn, floor_schema, admin)
    batched = BatchedFloor(floor)
    try:
        results: dict[int, list[dict[str, float]]] = {threads: [] for threads in config.threads}
        wakes: list[dict[str, float]] = []
        for repeat in range(config.repeats):
            for threads in config.threads:
                worker = WorkerSubject(args.dsn, f"{worker_schema}_{threads}", threads, args.prefetch)
                try:
                    rates = drain_run(floor, batched, worker, config)
                    results[threads].append(rates)
                    print(
                        f"run {repeat + 1} x{threads}: "
                        + "  ".join(f"{name} {rate:,.0f}/s" for name, rate in rates.items())
                        + f"  worker/floor {rates['worker'] / rates['floor']:.2f}x"
                        + f"  worker/floor x10 {rates['worker'] / rates['floor x10']:.2f}x",
                        flush=True,
                    )
                    if threads == 1:
                        wake = wake_run(floor, worker, config.wakes)
                        wakes.append(wake)
                        print(
                            f"run {repeat + 1} wake: floor {wake['floor']:.2f} ms  worker {wake['worker']:.2f} ms",
                            flush=True,
                        )
                finally:
                    worker.store.close()
                    worker.watch.close()
                    admin.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(f"{worker_schema}_{threads}"))
                    )
        print()
        print("measure                      worker   floor   floor x10   worker/floor   worker/floor x10")
        for threads, runs in results.items():

            def med(key: str, runs: list[dict[str, float]] = runs) -> float:
                return statistics.median(run[key] for run in runs)

            ratio = statistics.median(run["worker"] / run["floor"] for run in runs)
            batched_ratio = statistics.median(run["worker"] / run["floor x10"] for run in runs)
            label = f"drain, {threads} thread{'s' if threads > 1 else ' '} (jobs/s)"
            print(
                f"{label}  {med('worker'):>8,.0f} {med('floor'):>7,.0f}"
                f" {med('floor x10'):>11,.0f} {ratio:>13.2f}x {batched_ratio:>17.2f}x"
            )
        wake_ratio = statistics.median(w["worker"] / w["floor"] for w in wakes)
        print(
            f"wake, median (ms)            {statistics.median(w['worker'] for w in wakes):>8.2f}"
            f" {statistics.median(w['floor'] for w in wakes):>7.2f}             {wake_ratio:>13.2f}x"
        )
    finally:
        floor.close()
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(floor_schema)))
        admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
