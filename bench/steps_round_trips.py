"""What a job's steps cost in round trips on PostgreSQL (ADR 069): statements counted, not timed.

Run by hand, never from the test suite::

    .venv/bin/python bench/steps_round_trips.py [--dsn URL]

Every statement the engine sends is counted by a wrapper around psycopg's ``Cursor.execute`` and the
connection's transaction commands (``BEGIN``, ``COMMIT``, ``ROLLBACK``), each one round trip. Three
runs of one job are counted from its claim to its ack: a plain job, a job of 10 steps on its first
claim, and the same job's next run after a retry (all 10 steps found done). Target: at most one
extra round trip per step.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

import alkstore
from alkstore import Queue

STEPS = 10


@contextmanager
def counted() -> Iterator[list[int]]:
    """Count the statements sent while the block runs (the list's one item)."""
    count = [0]
    execute = psycopg.Cursor.execute
    command = psycopg.Connection._exec_command

    def counting_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return execute(self, *args, **kwargs)

    def counting_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return command(self, *args, **kwargs)

    psycopg.Cursor.execute = counting_execute  # type: ignore[method-assign]
    psycopg.Connection._exec_command = counting_command  # type: ignore[method-assign]
    try:
        yield count
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Connection._exec_command = command  # type: ignore[method-assign]


def one_run(queue: Queue, body: Callable[[alkstore.Job], None], finish: str = "ack") -> int:
    """The statements of one run: claim, ``body``, then ack (or a retry at once)."""
    with counted() as count:
        job = queue.claim("bench")
        assert job is not None
        body(job)
        if finish == "ack":
            job.ack()
        else:
            job.retry("again", delay=0)
    return count[0]


def stepped(job: alkstore.Job) -> None:
    for index in range(STEPS):
        job.step(f"step {index}", lambda index=index: index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    schema = f"bench_steps_{uuid.uuid4().hex[:8]}"
    with alkstore.open(args.dsn, schema=schema, migrate=True, max_size=2) as store:
        queue = store.queue("jobs")
        for _ in range(2):  # warm: every statement prepared on the connection once
            queue.enqueue(None)
            one_run(queue, stepped)
            queue.enqueue(None)
            one_run(queue, stepped, "retry")
            one_run(queue, stepped)
        queue.enqueue(None)
        plain = one_run(queue, lambda job: None)
        queue.enqueue(None)
        first = one_run(queue, stepped, "retry")
        resumed = one_run(queue, stepped)
        with store.transaction() as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    print(f"round trips from claim to the run's end ({STEPS} steps):")
    print(f"  plain job, claim + ack:               {plain}")
    print(f"  {STEPS} steps, first claim (+ retry):     {first}  ({(first - plain) / STEPS:.2f} extra per step)")
    print(f"  {STEPS} steps found done, next claim:    {resumed}  ({resumed - plain} extra for the run)")


if __name__ == "__main__":
    main()
