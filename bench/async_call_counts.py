"""Python calls (or instructions) per ``Queue.enqueue`` of one job on PostgreSQL, either runtime.

Run by hand, never from the test suite. A scratch schema is migrated, ``--warm`` jobs are enqueued
(the queue's config read and cached, the code paths hot), then ``--jobs`` more, one a call, one
transaction each, default options: ``queue.enqueue(payload)`` on the sync runtime, ``await
queue.enqueue(payload)`` on ``asyncio.run`` for ``--runtime async``. The schema is dropped at the end.

``--calls`` counts the Python function calls of the measured enqueues (``sys.setprofile``: Python
functions and the C functions they call) and prints them per job, by function with ``--by-function``
(those at or over 0.5 a job). ``--statements FILE`` has libpq trace every open connection's
messages during the measured enqueues into ``FILE`` and prints those the client sent, per job, by
type (``Bind``, ``Execute``, ``Sync``...: a ``Sync`` is a round trip). Without either the script
only enqueues, for callgrind: two runs of different sizes, less each other, give one enqueue's
instructions, whatever the machine's load::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=a.out .venv/bin/python \\
        bench/async_call_counts.py --runtime async --jobs 600
    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=b.out .venv/bin/python \\
        bench/async_call_counts.py --runtime async --jobs 100

The same script runs any checkout's code from this one's environment
(``PYTHONPATH=<tree>/core:<tree>/adapters``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import uuid
from collections import Counter
from pathlib import Path
from types import FrameType

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, trace_messages

import alkstore

QUEUE = "bench"
#: Where ``--statements`` has libpq trace the measured enqueues' messages.
TRACE: str | None = None


def trace(path: str | None) -> None:
    """Trace every open connection's protocol messages (libpq's trace) into ``path``, if given."""
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for thing in gc.get_objects():
        if isinstance(thing, (psycopg.Connection, psycopg.AsyncConnection)) and not thing.closed:
            thing.pgconn.trace(fd)


class Calls:
    """Python calls counted by ``sys.setprofile`` while on, by function."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def _profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            code = frame.f_code
            self.counts[f"{Path(code.co_filename).name}:{code.co_qualname}"] += 1
        elif event == "c_call":
            self.counts[f"<c>:{getattr(arg, '__qualname__', arg)}"] += 1

    def on(self) -> None:
        sys.setprofile(self._profile)

    def off(self) -> None:
        sys.setprofile(None)


def sync_run(dsn: str, schema: str, warm: int, jobs: int, calls: Calls | None) -> None:
    store = alkstore.open(dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    try:
        queue = store.queue(QUEUE)
        for n in range(warm):
            queue.enqueue({"n": n})
        trace(TRACE)
        if calls is not None:
            calls.on()
        for n in range(jobs):
            queue.enqueue({"n": n})
        if calls is not None:
            calls.off()
    finally:
        store.close()


async def async_run(dsn: str, schema: str, warm: int, jobs: int, calls: Calls | None) -> None:
    store = await alkstore.open_async(dsn, schema=schema, migrate=True, min_size=1, max_size=1)
    try:
        queue = store.queue(QUEUE)
        for n in range(warm):
            await queue.enqueue({"n": n})
        trace(TRACE)
        if calls is not None:
            calls.on()
        for n in range(jobs):
            await queue.enqueue({"n": n})
        if calls is not None:
            calls.off()
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--runtime", choices=("sync", "async"), default="async")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--warm", type=int, default=50)
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--by-function", action="store_true")
    parser.add_argument("--statements", metavar="TRACE_FILE")
    args = parser.parse_args()
    global TRACE
    TRACE = args.statements
    schema = f"bench_acalls_{uuid.uuid4().hex[:8]}"
    calls = Calls() if args.calls else None
    try:
        if args.runtime == "sync":
            sync_run(args.dsn, schema, args.warm, args.jobs, calls)
        else:
            asyncio.run(async_run(args.dsn, schema, args.warm, args.jobs, calls))
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    if args.statements:
        sent = trace_messages(args.statements)
        print(
            f"{args.runtime}: messages sent per enqueue: "
            + ", ".join(f"{k} {v / args.jobs:g}" for k, v in sorted(sent.items()))
        )
    if calls is not None:
        total = sum(calls.counts.values())
        print(f"{args.runtime}: {total / args.jobs:.1f} Python calls per enqueue ({args.jobs} enqueues)")
        if args.by_function:
            for name, count in calls.counts.most_common():
                if count / args.jobs < 0.5:
                    break
                print(f"{count / args.jobs:8.2f}  {name}")


if __name__ == "__main__":
    main()
