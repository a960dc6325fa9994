"""Registering many schedules on PostgreSQL: ``Store.schedule_many`` beside one ``Store.schedule`` per call.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/schedule_registration.py [--dsn URL] [--schedules 10000] [--rounds 3]

Each round registers ``--schedules`` new ``@every 1h`` schedules into a fresh schema with one
``schedule_many`` call, and the same number into another fresh schema one ``schedule`` call
(one transaction) each; then registers them all again (an update keeps each schedule's phase,
ADR 004) the same two ways. The two subjects alternate within a round, so load that comes and
goes hits both alike; the figure is each subject's median over the rounds and the ratio of the
medians. Target (issue 11): bulk registration of 10,000 schedules at least 10x faster than one
transaction each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable

import psycopg
from _bench import DEFAULT_DSN, load_average
from psycopg import sql

import alkstore
from alkstore import ScheduleEntry


def entries(count: int) -> list[ScheduleEntry]:
    return [ScheduleEntry(f"report-{n}", "@every 1h", "reports", {"n": n}) for n in range(count)]


def one_by_one(store: alkstore.Store, batch: list[ScheduleEntry]) -> None:
    for entry in batch:
        store.schedule(entry.name, entry.spec, entry.queue, entry.payload)


def bulk(store: alkstore.Store, batch: list[ScheduleEntry]) -> None:
    store.schedule_many(batch)


def timed(
    dsn: str, admin: psycopg.Connection[tuple[object, ...]], register: Callable[..., None], count: int
) -> tuple[float, float]:
    """Seconds to register ``count`` new schedules, then to register them all again, in a fresh schema."""
    schema = f"bench_sched_{uuid.uuid4().hex[:8]}"
    batch = entries(count)
    try:
        with alkstore.open(dsn, schema=schema, migrate=True, min_size=1, max_size=1) as store:
            started = time.perf_counter()
            register(store, batch)
            new = time.perf_counter() - started
            started = time.perf_counter()
            register(store, batch)
            again = time.perf_counter() - started
            assert len(store.schedules()) == count
        return new, again
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"/proc/loadavg at the start: {load_average()}")
    figures: dict[str, list[tuple[float, float]]] = {"schedule_many": [], "schedule, one each": []}
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        for round_ in range(args.rounds):
            order = [("schedule_many", bulk), ("schedule, one each", one_by_one)]
            for name, register in order if round_ % 2 == 0 else reversed(order):
                figures[name].append(timed(args.dsn, admin, register, args.schedules))
                new, again = figures[name][-1]
                print(f"round {round_ + 1} {name}: new {new:.2f} s, again {again:.2f} s", file=sys.stderr)
    print(f"{args.schedules:,} schedules, {args.rounds} rounds, median seconds")
    medians = {
        name: (statistics.median(f[0] for f in runs), statistics.median(f[1] for f in runs))
        for name, runs in figures.items()
    }
    for name, (new, again) in medians.items():
        print(f"  {name:<20} new {new:8.2f} s   again {again:8.2f} s")
    one, many = medians["schedule, one each"], medians["schedule_many"]
    print(f"  schedule_many is {one[0] / many[0]:.1f}x faster (new), {one[1] / many[1]:.1f}x (again); target >= 10x")
    print(f"/proc/loadavg at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
