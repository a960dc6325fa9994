"""What recording the per-task figures (ADR 075) costs a worker on PostgreSQL: its ack path, and its report.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/task_figures.py [--dsn URL] [--rounds 15] [--block 1000] [--tasks 20]

- worker drain: a ``Worker`` (one thread, handler doing nothing, acks batched as by default) runs
  ``--block`` jobs loaded before it starts, timed from its start to the last ack; ``on`` as shipped,
  ``off`` with the tally's per-task figure (``Tally._figure``) made a no-op, so nothing but the
  per-queue counts is counted: the only work ADR 075 adds per run.
- tally (per ack): ``Tally.acked`` of runs in batches of 10, the in-process work per ack, CPU only.
- report: ``record_worker`` of one worker with one queue's counts (``off``), or with those and
  ``--tasks`` task figures (``on``): the statement a busy worker sends every 5 s, one round trip either
  way; ``--block`` reports a block.

Blocks alternate, the order reversed every round; a round's ratio is on's wall time over off's, the
figure the median of the rounds' ratios, with the process's CPU time per operation beside it.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import types
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average

import alkstore
from alkstore import Job, StopToken, Store, Worker
from alkstore.engine import TaskFiguresRecord, ThroughputRecord, WorkerRecord
from alkstore.rules._operations import minute_of
from alkstore.worker import _parts

_REAL_FIGURE = _parts.Tally._figure


def _figuring(on: bool) -> None:
    _parts.Tally._figure = _REAL_FIGURE if on else (lambda self, job, run_ms, done, failed: None)  # type: ignore[method-assign]


def drain(store: Store, on: bool, count: int, tasks: int) -> tuple[float, float]:
    _figuring(on)
    store.queue("drain").enqueue_many([{"n": n} for n in range(count)])

    def handler(payload: Any, job: Job) -> None:
        return None

    worker = Worker(store, handlers={"drain": handler}, poll_interval=0.05, grace=5)
    stop = StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    wall, cpu = time.perf_counter(), time.process_time()
    thread.start()
    while worker.stats.succeeded < count:
        time.sleep(0.002)
    spent = time.perf_counter() - wall, time.process_time() - cpu
    stop.cancel()
    thread.join()
    _figuring(True)
    return spent


def report(store: Store, on: bool, count: int, tasks: int) -> tuple[float, float]:
    now = store.clock.now()
    minute = minute_of(now)
    worker = WorkerRecord("bench-" + uuid.uuid4().hex[:8], "host", 1, ("drain",), 4, now - timedelta(hours=1), now)
    counts = [ThroughputRecord("drain", minute, 100, 1)]
    figures = [TaskFiguresRecord("drain", f"app.tasks.task_{n:03}", minute, 5, 0, 50.0, 5.0) for n in range(tasks)]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        store.engine.record_worker(worker, counts, figures if on else ())
    return time.perf_counter() - wall, time.process_time() - cpu


def tally(store: Store, on: bool, count: int, tasks: int) -> tuple[float, float]:
    """The tally's share of an ack alone: ``count`` runs of ``tasks`` tasks counted in batches of 10, as the ack
    buffer hands them over, with and without their figures."""
    _figuring(on)
    now = store.clock.now()
    jobs = [
        (types.SimpleNamespace(queue="drain", task=f"t{n % tasks}", run_at=now, _claimed_at=now), 1.5)
        for n in range(10)
    ]
    counter = _parts.Tally()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(count // 10):
        counter.acked(jobs, 0)
    spent = time.perf_counter() - wall, time.process_time() - cpu
    _figuring(True)
    return spent


PATHS: dict[str, Callable[[Store, bool, int, int], tuple[float, float]]] = {
    "tally (per ack)": tally,
    "worker drain": drain,
    "report": report,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--block", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--only", choices=sorted(PATHS), help="measure this path alone")
    args = parser.parse_args()
    schema = "bench_figures_" + uuid.uuid4().hex[:8]
    print(f"load before: {load_average()}")
    with alkstore.open(args.dsn, schema=schema, migrate=True) as store:
        for path, run in PATHS.items():
            if args.only not in (None, path):
                continue
            run(store, True, min(args.block, 200), args.tasks)  # warm-up
            ratios, cpu = [], {True: 0.0, False: 0.0}
            for round_ in range(args.rounds):
                order = (True, False) if round_ % 2 else (False, True)
                spent = {on: run(store, on, args.block, args.tasks) for on in order}
                ratios.append(spent[True][0] / spent[False][0])
                for on in (True, False):
                    cpu[on] += spent[on][1]
            per = args.rounds * args.block
            print(
                f"{path}: on/off wall {statistics.median(ratios):.3f} (quartiles "
                f"{statistics.quantiles(ratios, n=4)[0]:.3f}-{statistics.quantiles(ratios, n=4)[2]:.3f}); "
                f"CPU per op off {cpu[False] / per * 1e6:.2f} us, on {cpu[True] / per * 1e6:.2f} us"
            )
        print(f"load after: {load_average()}")
    with psycopg.connect(args.dsn, autocommit=True) as db:
        db.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
