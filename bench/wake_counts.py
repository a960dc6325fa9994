"""The peer table's D (an idle worker's wake) and C4 (a drain by four slots), counted rather than timed.

Run by hand, never from the test suite::

    .venv/bin/python bench/wake_counts.py [--dsn URL] [--wakes 12] [--jobs 400]

and against another checkout's code, from this one's environment (its sync twins generated)::

    PYTHONPATH=<tree>/core:<tree>/adapters .venv/bin/python bench/wake_counts.py

As the peer harness measures them, on the sync runtime: D is one slot idle for ``GAP`` seconds,
then one job enqueued by another store, counted from before the enqueue until its handler starts;
C4 is a ``Worker`` with four slots started on ``--jobs`` jobs, counted until every ack is written.
The counts do not depend on the machine's load: statements sent (each one round trip; by the
thread that sent it: the producer, the claim loop, the slots, the worker's helpers) and Python
function calls (``sys.setprofile``: Python functions, and C functions called from Python), per
wake (the median of the wakes after ``WARMUP``) and per job drained. What the profiler costs
changes the timing, so how many jobs each claim takes in C4 may differ from an unprofiled run;
the statements of C4 are therefore counted in a run of their own, without the profiler.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, QUEUE, load_average

import alkstore

#: Seconds the worker idles before each wake (the peer harness's ``IDLE_GAP_S`` is 0.15; longer here,
#: so the idle worker's own periodic reads fall between the wakes rather than in them).
GAP = 0.4
#: Wakes thrown away first: the worker's start and the statements' first runs (their plans).
WARMUP = 5
#: The thread the worker's claim loop runs on (``Worker.run``).
CLAIM_LOOP = "claim-loop"


def role(thread: str) -> str:
    if thread == CLAIM_LOOP:
        return "claim loop"
    if thread == threading.main_thread().name:
        return "producer"
    if thread.startswith("alkstore-worker-"):
        return "slots"
    return "helpers"


class Counting:
    """Statements sent through psycopg and Python calls, by role, while ``on``."""

    def __init__(self, profile: bool) -> None:
        self.on = False
        self.statements: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        execute = psycopg.Cursor.execute
        counting = self

        def recording(cursor: psycopg.Cursor[Any], query: Any, params: Any = None, **kwargs: Any) -> Any:
            if counting.on:
                with counting.lock:
                    counting.statements[role(threading.current_thread().name)] += 1
            return execute(cursor, query, params, **kwargs)

        setattr(psycopg.Cursor, "execute", recording)  # noqa: B010 - replaced for the count, as the tests do
        if profile:
            threading.setprofile(self._profile)
            sys.setprofile(self._profile)

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if self.on and event in ("call", "c_call"):
            self.calls[role(threading.current_thread().name)] += 1  # one thread per role but the slots

    def take(self) -> tuple[Counter[str], Counter[str]]:
        with self.lock:
            taken = (self.statements, self.calls)
            self.statements, self.calls = Counter(), Counter()
        return taken


def worker_thread(store: alkstore.Store, concurrency: int, handler: Callable[[Any, Any], None]) -> Any:
    worker = alkstore.Worker(store, handlers={QUEUE: handler}, concurrency=concurrency, worker_id="counted")
    stop = alkstore.StopToken()
    thread = threading.Thread(target=worker.run, args=(stop,), name=CLAIM_LOOP, daemon=True)
    thread.start()
    return worker, stop, thread


def wakes(dsn: str, schema: str, count: int) -> None:
    counting = Counting(profile=True)
    producer = alkstore.open(dsn, schema=schema, min_size=1, max_size=1)
    store = alkstore.open(dsn, schema=schema, min_size=4, max_size=4)
    started = threading.Event()

    def handler(payload: Any, job: Any) -> None:
        counting.on = False
        started.set()

    _, stop, thread = worker_thread(store, 1, handler)
    rows: list[tuple[Counter[str], Counter[str]]] = []
    try:
        queue = producer.queue(QUEUE)
        for _ in range(WARMUP + count):
            time.sleep(GAP)
            started.clear()
            counting.take()
            counting.on = True
            queue.enqueue({})
            if not started.wait(30):
                raise SystemExit("a wake's handler never started")
            rows.append(counting.take())
    finally:
        stop.cancel()
        thread.join(30)
        store.close()
        producer.close()
    rows = rows[WARMUP:]
    for index, what in enumerate(("statements", "Python calls")):
        roles = sorted({name for row in rows for name in row[index]})
        figures = {name: statistics.median(row[index][name] for row in rows) for name in roles}
        print(f"D, {what} per wake (median of {len(rows)}): {figures}")


def drain(dsn: str, schema: str, jobs: int, profile: bool) -> None:
    counting = Counting(profile=profile)
    producer = alkstore.open(dsn, schema=schema, min_size=1, max_size=1)
    producer.queue(QUEUE).enqueue_many([{} for _ in range(jobs)])
    store = alkstore.open(dsn, schema=schema, min_size=7, max_size=7)
    counting.on = True
    worker, stop, thread = worker_thread(store, 4, lambda payload, job: None)
    try:
        end = time.monotonic() + 600
        while worker.stats.succeeded < jobs and time.monotonic() < end:
            time.sleep(0.01)
        counting.on = False
    finally:
        stop.cancel()
        thread.join(30)
        store.close()
        producer.close()
    statements, calls = counting.take()
    if profile:
        print(f"C4, Python calls per job ({jobs} jobs): {_per(calls, jobs)}")
    else:
        print(f"C4, statements per job ({jobs} jobs): {_per(statements, jobs)}")


def _per(counts: Counter[str], jobs: int) -> dict[str, float]:
    figures = {name: round(value / jobs, 3) for name, value in sorted(counts.items())}
    figures["all"] = round(sum(counts.values()) / jobs, 3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--wakes", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=400)
    args = parser.parse_args()
    print(f"alkstore from {alkstore.__file__}; load {load_average()}")
    schema = f"wake_counts_{uuid.uuid4().hex[:8]}"
    alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=1).close()
    try:
        drain(args.dsn, schema, args.jobs, profile=False)
        drain(args.dsn, schema, args.jobs, profile=True)
        wakes(args.dsn, schema, args.wakes)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP SCHEMA {} CASCADE").format(psycopg.sql.Identifier(schema)))


if __name__ == "__main__":
    main()
