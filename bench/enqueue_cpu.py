"""The client-side CPU of an enqueue per job: alkstore's public path up to the round trip, beside the floor's.

Run by hand, never from the test suite (the figures depend on the machine)::

    .venv/bin/python bench/enqueue_cpu.py [--dsn URL] [--jobs 20000] [--rounds 7] [--profile]

What is timed is this process's CPU (``time.process_time``), so a loaded machine slows both sides
alike rather than skewing the ratio. The store's engine is wrapped so its ``enqueue`` does the
client-side work only and returns made-up ids:

- ``core``: a ``memory://`` store whose engine's enqueue does nothing; what core spends (validate
  the options, encode each payload, resolve the stamps, build each ``NewJob``, wrap the ids);
- ``postgres``: a Postgres store whose engine's enqueue builds the parameters its statement would
  be sent with (``_rows``), as the engine does, then stops short of sending them;
- ``floor``: the floor's client work per job: a dict, ``json.dumps``, UTF-8, a parameter tuple
  (one per job), or one list of payloads per batch.

Each is measured for ``Queue.enqueue`` (one job a call) and ``Queue.enqueue_many`` of 100 payloads.
The figure is µs of CPU per job, the median over rounds (subjects interleaved round by round).
``--profile`` prints the hottest functions of each alkstore path instead (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, load_average
from queue_throughput import QUEUE, bench_schemas, payload

import alkstore
from alkstore import engine as port
from alkstore.adapters.postgres import _rows

PER_CALL = 100


class _ClientSide:
    """An engine whose ``enqueue`` stops before I/O: ``params`` (if any) builds what would be sent."""

    def __init__(self, real: Any, params: Callable[[Sequence[port.NewJob], datetime], object] | None) -> None:
        self._real = real
        self._params = params
        self._next = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        if self._params is not None:
            self._params(jobs, now)
        first = self._next
        self._next += len(jobs)
        return list(range(first + 1, first + 1 + len(jobs)))


def _postgres_params(jobs: Sequence[port.NewJob], now: datetime) -> object:
    """The parameters the Postgres engine builds for an enqueue without keys (its dispatch, less the I/O)."""
    if len(jobs) == 1:
        return _rows.job_params(jobs[0], now, "channel")
    if _rows.alike(jobs):
        return _rows.alike_params(jobs, now, "channel")
    return _rows.jobs_params(jobs, now, "schema")


def _client_side(store: alkstore.Store, params: Callable[[Sequence[port.NewJob], datetime], object] | None) -> None:
    kernel = store._kernel  # a benchmark reaches in to stop at the round trip
    kernel.engine = _ClientSide(kernel.engine, params)  # type: ignore[assignment]


def one(queue: alkstore.Queue, jobs: int) -> None:
    for n in range(jobs):
        queue.enqueue(payload(n))


def many(queue: alkstore.Queue, jobs: int) -> None:
    for first in range(0, jobs, PER_CALL):
        queue.enqueue_many([payload(n) for n in range(first, first + PER_CALL)])


def floor_one(jobs: int) -> None:
    sink = []
    for n in range(jobs):
        sink.append((QUEUE, json.dumps(payload(n)).encode()))
        sink.clear()


def floor_many(jobs: int) -> None:
    for first in range(0, jobs, PER_CALL):
        params = (QUEUE, [json.dumps(payload(n)).encode() for n in range(first, first + PER_CALL)])
        del params


def cpu_us_per_job(run: Callable[[], None], jobs: int) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) / jobs * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    jobs = args.jobs - args.jobs % PER_CALL or PER_CALL
    memory = alkstore.open("memory://")
    schema = bench_schemas("enqueue_cpu")[1]
    postgres = alkstore.open(args.dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    try:
        _client_side(memory, None)
        _client_side(postgres, _postgres_params)
        queues = {"core": memory.queue(QUEUE), "postgres": postgres.queue(QUEUE)}
        subjects: dict[str, Callable[[], None]] = {"floor one": partial(floor_one, jobs)}
        subjects.update({f"{name} one": partial(one, queue, jobs) for name, queue in queues.items()})
        subjects["floor many"] = partial(floor_many, jobs)
        subjects.update({f"{name} many": partial(many, queue, jobs) for name, queue in queues.items()})
        for run in subjects.values():  # warm-up: the queues' configs read and cached, code paths hot
            run()
        if args.profile:
            for name, run in subjects.items():
                if name.startswith("floor"):
                    continue
                print(f"== {name} ({jobs} jobs)")
                profile = cProfile.Profile()
                profile.runcall(run)
                pstats.Stats(profile).sort_stats("tottime").print_stats(18)
            return 0
        print(f"load before: {load_average()}")
        figures: dict[str, list[float]] = {name: [] for name in subjects}
        for _ in range(args.rounds):
            for name, run in subjects.items():
                figures[name].append(cpu_us_per_job(run, jobs))
        print(f"load after: {load_average()}")
        print(f"| subject ({jobs} jobs a round, {args.rounds} rounds) | CPU µs/job (median) | / floor |")
        print("| --- | ---: | ---: |")
        for name, values in figures.items():
            floor = statistics.median(figures["floor " + name.split()[1]])
            median = statistics.median(values)
            print(f"| {name} | {median:.2f} | {median / floor:.2f}x |")
    finally:
        memory.close()
        postgres.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
