"""What every benchmark script shares: the server it measures by default, the load it ran under,
subjects measured interleaved, and the scratch schemas and server-side plans of the PostgreSQL ones."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

import alkstore

#: The local test server (trust auth), as the test suite and CI find it.
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
#: The queue a benchmark's jobs go to, unless it needs several.
QUEUE = "bench"


def load_average() -> str:
    """``/proc/loadavg`` as it reads now, for the record beside a figure."""
    return Path("/proc/loadavg").read_text().strip()


def interleaved(names: Sequence[str], block: Callable[[str], tuple[int, float]], size: int) -> dict[str, float]:
    """Each subject's rate per second: ``block(name)`` (how many it did, in how many seconds) for each name
    in turn, round after round, until each did fewer than ``size``; load that comes and goes hits all alike."""
    totals = {name: [0, 0.0] for name in names}
    live = set(names)
    while live:
        for name in names:
            if name not in live:
                continue
            done, seconds = block(name)
            totals[name][0] += done
            totals[name][1] += seconds
            if done < size:
                live.discard(name)
    return {name: count / seconds for name, (count, seconds) in totals.items()}


def repeated(doc: str, run_once: Callable[[str, int], dict[str, float]]) -> tuple[int, list[dict[str, float]]]:
    """A script's ``--dsn``, ``--jobs`` and ``--repeats`` read, and ``run_once(dsn, jobs)`` run that many times
    between two readings of the load (printed); the number of repeats and each run's rates."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load before: {load_average()}")
    runs = [run_once(args.dsn, args.jobs) for _ in range(args.repeats)]
    print(f"load after: {load_average()}")
    return args.repeats, runs


def print_rates(repeats: int, runs: Sequence[dict[str, float]], baselines: dict[str, str | None]) -> None:
    """The table of each subject's best rate and its median ratio to its baseline (``None``: it is one)."""
    print(f"| subject | claim+ack/s (best of {repeats}) | ratio to plain (median) |")
    print("| --- | --- | --- |")
    for name, baseline in baselines.items():
        best = max(run[name] for run in runs)
        ratio = "-" if baseline is None else f"{statistics.median(run[name] / run[baseline] for run in runs):.2f}x"
        print(f"| {name} | {best:,.0f} | {ratio} |")


@contextmanager
def scratch_stores(dsn: str, names: Iterable[str]) -> Iterator[dict[str, alkstore.Store]]:
    """A store on each of the schemas ``names``, migrated afresh (on the system clock); on the way out the
    stores closed and the schemas dropped, whatever happened."""
    stores: dict[str, alkstore.Store] = {}
    try:
        for name in names:
            stores[name] = alkstore.open(dsn, schema=name, migrate=True, clock=alkstore.SystemClock())
        yield stores
    finally:
        for store in stores.values():
            store.close()
        drop_schemas(dsn, *stores)


def drop_schemas(dsn: str, *names: str) -> None:
    """Drop the scratch schemas ``names`` (those missing skipped): a bench's last step, whatever happened."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        for name in names:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def drop_trigger(dsn: str, schema: str, trigger: str) -> None:
    """Drop ``trigger`` of ``schema``'s jobs table: the subject without what the trigger costs."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP TRIGGER {} ON {}.jobs").format(sql.Identifier(trigger), sql.Identifier(schema)))


def explained(admin: psycopg.Connection[Any], query: sql.Composed, params: Sequence[Any]) -> dict[str, Any]:
    """The plan of ``query`` (an ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)``) as the server returned it."""
    row = admin.execute(query, params).fetchone()
    assert row is not None
    plan: dict[str, Any] = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]
    return plan


def buffers(plan: dict[str, Any]) -> int:
    """The shared buffers a plan's top node hit or read."""
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0))


def explained_ack(admin: psycopg.Connection[Any], schema: str, job_id: int) -> tuple[float, float, int]:
    """(execution ms, trigger ms, shared buffers hit or read) of the ack of the running job ``job_id``."""
    query = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) DELETE FROM {}.jobs WHERE id = %s AND state = 'running'")
    plan = explained(admin, query.format(sql.Identifier(schema)), [job_id])
    trigger_ms = sum(trigger["Time"] for trigger in plan.get("Triggers", []))
    return plan["Execution Time"], trigger_ms, buffers(plan)


def print_acks(figures: dict[str, list[tuple[float, float, int]]]) -> None:
    """Each subject's median ack: its execution, its triggers' share, its buffers (``explained_ack``'s)."""
    for subject, rows in figures.items():
        total, trigger, touched = zip(*rows, strict=True)
        print(
            f"{subject:<12} execution {statistics.median(total):.3f} ms"
            f" (trigger {statistics.median(trigger):.3f} ms),"
            f" buffers {statistics.median(touched):.0f}, over {len(rows)} acks"
        )


def server_cpu_ns(pid: int) -> int:
    """The CPU time the server process ``pid`` (on this machine) has run, in nanoseconds."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def backend_pid(store: alkstore.Store) -> int:
    """The server process of ``store``'s pooled connection (a store of one connection: always the same)."""
    engine: Any = store.engine
    with engine.pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(row[0]) if row else 0


def enqueue_block(store: alkstore.Store, queue: str, jobs: int, chained: bool) -> None:
    """``jobs`` jobs on ``queue``: independent, or one graph, each waiting on the one before."""
    if not chained:
        store.queue(queue).enqueue_many(range(jobs))
        return
    graph = store.graph()
    for n in range(jobs):
        graph.add(f"j{n}", queue, n, after=[f"j{n - 1}"] if n else ())
    store.enqueue_graph(graph)


def callgrind_instructions(pattern: str, pid: int) -> int:
    """The total instructions in the callgrind file of the exited backend ``pid``, once it is written."""
    path = Path(pattern.replace("%p", str(pid)))
    for _ in range(900):
        if path.exists() and path.stat().st_size > 0:
            for line in path.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.2)
    raise RuntimeError(f"no callgrind counts in {path}")


def trace_messages(path: str | Path) -> Counter[str]:
    """The frontend's messages in a libpq trace, by type (``Query``, ``Parse``, ``Bind``, ``Sync``...)."""
    sent: Counter[str] = Counter()
    with open(path) as lines:
        for line in lines:
            fields = line.split("\t")
            if len(fields) > 3 and fields[1] == "F":
                sent[fields[3].split(" ")[0].strip()] += 1
    return sent
