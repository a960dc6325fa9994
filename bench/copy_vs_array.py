"""Bulk enqueue's two candidate statements on PostgreSQL: an array insert against ``COPY``, 100 rows a call.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/copy_vs_array.py [--dsn URL] [--calls 200] [--rounds 5]

Both write into the same minimal jobs table, one autocommit call per batch of 100 jobs with
1 KB-ish JSON payloads stored as ``bytea``:

- **array**: ``INSERT … SELECT … FROM unnest(%b::bytea[]) RETURNING id``, the payloads one binary
  array parameter and the rest scalars (the shape of ``enqueue_alike``), ids returned in order;
- **copy**: ``COPY jobs (queue, payload, priority, run_at) FROM STDIN`` in binary, which returns
  no ids: ``enqueue_many`` must return them, so a second statement (``nextval`` for the batch,
  before the COPY with explicit ids) is counted as part of it, as **copy + ids**, beside the
  bare **copy**.

Blocks of ``--calls`` calls alternate between the three, in an order that rotates each round;
each figure is the median over rounds of jobs per second, and the ratio to the array insert.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
from _bench import DEFAULT_DSN, load_average
from psycopg import sql

PER_CALL = 100


def payloads(call: int) -> list[bytes]:
    return [json.dumps({"n": call * PER_CALL + k, "body": "x" * 1000}).encode() for k in range(PER_CALL)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"/proc/loadavg at the start: {load_average()}")
    schema = f"bench_copy_{uuid.uuid4().hex[:8]}"
    conn: psycopg.Connection[Any] = psycopg.connect(args.dsn, autocommit=True)
    table = sql.Identifier(schema, "jobs")
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (id bigserial PRIMARY KEY, queue text NOT NULL, payload bytea NOT NULL,"
            " priority int NOT NULL, run_at timestamptz NOT NULL)"
        ).format(table)
    )
    array_insert = sql.SQL(
        "INSERT INTO {} (queue, payload, priority, run_at)"
        " SELECT %(queue)s, p, %(priority)s, %(run_at)s FROM unnest(%(payloads)b::bytea[]) AS p RETURNING id"
    ).format(table)
    ids = sql.SQL("SELECT nextval(pg_get_serial_sequence({}, 'id')) FROM generate_series(1, %(n)s)").format(
        sql.Literal(f"{schema}.jobs")
    )
    copy_plain = sql.SQL("COPY {} (queue, payload, priority, run_at) FROM STDIN (FORMAT BINARY)").format(table)
    copy_ids = sql.SQL("COPY {} (id, queue, payload, priority, run_at) FROM STDIN (FORMAT BINARY)").format(table)

    def array(batch: list[bytes]) -> None:
        rows = conn.execute(array_insert, {"queue": "q", "priority": 0, "run_at": datetime.now(UTC), "payloads": batch})
        assert len(rows.fetchall()) == PER_CALL

    def copy(batch: list[bytes]) -> None:
        now = datetime.now(UTC)
        with conn.cursor() as cur, cur.copy(copy_plain) as writer:
            writer.set_types(["text", "bytea", "int4", "timestamptz"])
            for payload in batch:
                writer.write_row(("q", payload, 0, now))

    def copy_with_ids(batch: list[bytes]) -> None:
        now = datetime.now(UTC)
        with conn.transaction():
            new = [row[0] for row in conn.execute(ids, {"n": len(batch)})]
            with conn.cursor() as cur, cur.copy(copy_ids) as writer:
                writer.set_types(["int8", "text", "bytea", "int4", "timestamptz"])
                for job_id, payload in zip(new, batch, strict=True):
                    writer.write_row((job_id, "q", payload, 0, now))

    subjects: list[tuple[str, Callable[[list[bytes]], None]]] = [
        ("array insert", array),
        ("copy", copy),
        ("copy + ids", copy_with_ids),
    ]
    batches = [payloads(call) for call in range(args.calls)]
    rates: dict[str, list[float]] = {name: [] for name, _ in subjects}
    try:
        for _, run in subjects:  # warm-up
            for batch in batches[:10]:
                run(batch)
        for round_ in range(args.rounds):
            shift = round_ % len(subjects)
            for name, run in subjects[shift:] + subjects[:shift]:
                conn.execute(sql.SQL("TRUNCATE {}").format(table))
                started = time.perf_counter()
                for batch in batches:
                    run(batch)
                rates[name].append(args.calls * PER_CALL / (time.perf_counter() - started))
    finally:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.close()
    base = statistics.median(rates["array insert"])
    print(f"{PER_CALL} jobs per call, {args.calls} calls a block, {args.rounds} rounds; median jobs/s")
    for name, runs in rates.items():
        print(
            f"  {name:<14} {statistics.median(runs):>9,.0f}/s   {statistics.median(runs) / base:.2f}x the array insert"
        )
    print(f"/proc/loadavg at the end: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
