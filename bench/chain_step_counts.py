"""What the server does for a chain's step on PostgreSQL beside an independent job's, in counts (ADR 073).

Run by hand, never from the test suite, on the machine that runs the server (it reads the server
process's ``/proc/<pid>/schedstat`` and, with ``--wal``, the server's WAL files through ``pg_waldump``)::

    .venv/bin/python bench/chain_step_counts.py [--dsn URL] [--jobs 1000] [--rounds 5] [--ballast 5000]
        [--handed] [--wal] [--plans 20]

Each subject is a step of a job run one at a time through a worker's call (the ack carried by the
next claim, ``ack_and_claim``): a chain's (each job waiting on the one before) and an independent
job's. Per step, over ``--jobs`` steps, it reads from the server:

- CPU: the server process's CPU time (``schedstat``'s first field), the median over ``--rounds``
  rounds of the per-round mean; load-independent (other work on the machine is not counted);
- rows: inserted, updated (HOT or not) and deleted per table, and index scans, from
  ``pg_stat_user_tables`` (flushed by the measured connection itself);
- functions: calls and self time per function (``pg_stat_user_functions``; the database needs
  ``track_functions = 'all'``, else none are counted);
- WAL (``--wal``): the bytes of the records of the measured database and of its commits, read with
  ``pg_waldump`` between two LSNs (the server's other databases left out);
- plans (``--plans N``): every statement the step runs, the trigger bodies' included, with its buffers
  hit and dirtied and its WAL, from ``auto_explain`` (``log_nested_statements``), over N steps in a
  round of their own (auto_explain's own cost kept out of the CPU figures).

``--ballast N`` first stores N jobs in another queue and analyses the table, as a table in use is:
on a small table never analysed the planner's choices differ (sequential scans, and no custom plan
looks cheaper than a generic one). Another checkout's code runs the same script with
``PYTHONPATH=<checkout>/core:<checkout>/adapters``; ``--setup FILE`` runs SQL on the migrated
schema first (``{s}``: its name), for a variant of the schema.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, enqueue_block, load_average, server_cpu_ns

import alkstore
from alkstore import Store
from alkstore.engine import ClaimRequest, Handed, Held

SUBJECTS = ("chain", "independent")
#: Whether a chain's acks hand a result over (``--handed``), as a worker's do for a task that returns one.
HANDED: list[bool] = [False]
WALDUMP = "/usr/lib/postgresql/15/bin/pg_waldump"


def on_connection(store: Store, statement: str) -> Any:
    """The first value of ``statement`` run on the store's one pooled connection."""
    engine: Any = store.engine
    with engine.pool.connection() as conn:
        row = conn.execute(statement).fetchone()
    return None if row is None else row[0]


def steps(store: Store, queue: str, jobs: int, pid: int) -> float:
    """Mean server CPU (ms) of one step: the ack of a job carried by the claim of the next."""
    engine: Any = store.engine
    clock = alkstore.SystemClock()

    def request() -> ClaimRequest:
        return ClaimRequest(queue=queue, worker_id="bench", now=clock.now(), lease=timedelta(seconds=300), limit=1)

    held = engine.claim(request())
    spent = 0
    for _ in range(jobs - 1):
        before = server_cpu_ns(pid)
        ack = Held(held[0].id, held[0].fence)
        if HANDED[0] and held[0].dependents:
            ack = Handed(ack.job_id, ack.fence, b"\x80N.")  # a pickled None
        stale, held = engine.ack_and_claim([ack], request())
        spent += server_cpu_ns(pid) - before
        assert stale == [], queue
        assert len(held) == 1, queue
    assert engine.ack([Held(held[0].id, held[0].fence)]) == []
    return spent / (jobs - 1) / 1e6


TABLE_STATS = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, coalesce(idx_scan, 0), seq_scan
FROM pg_stat_user_tables WHERE schemaname = %s"""
FUNCTION_STATS = "SELECT funcname, calls, self_time FROM pg_stat_user_functions WHERE schemaname = %s"
COLUMNS = ("ins", "upd", "hot_upd", "del", "idx_scan", "seq_scan")


def scalar(admin: psycopg.Connection[Any], statement: str) -> Any:
    row = admin.execute(statement).fetchone()
    assert row is not None
    return row[0]


def counters(admin: psycopg.Connection[Any], schema: str) -> dict[str, float]:
    admin.execute("SELECT pg_stat_clear_snapshot()")
    found: dict[str, float] = {}
    for name, *values in admin.execute(TABLE_STATS, [schema]).fetchall():
        for column, value in zip(COLUMNS, values, strict=True):
            found[f"{name}.{column}"] = value
    for name, calls, self_time in admin.execute(FUNCTION_STATS, [schema]).fetchall():
        found[f"{name}() calls"] = calls
        found[f"{name}() self ms"] = self_time
    return found


def wal_bytes(dsn_db_oid: int, start: str, end: str) -> dict[str, int]:
    """Bytes of the WAL records of database ``dsn_db_oid`` between two LSNs, and of the commits of their xids."""
    out = subprocess.run(
        [WALDUMP, "-p", "/var/lib/postgresql/15/main/pg_wal", "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    ours: set[str] = set()
    totals: Counter[str] = Counter()
    commits: dict[str, int] = {}
    pattern = re.compile(r"rmgr: (\w+)\s+len \(rec/tot\):\s+\d+/\s*(\d+), tx:\s+(\d+),.*desc: (\w+)")
    for line in out.splitlines():
        match = pattern.search(line)
        if match is None:
            continue
        rmgr, size, xid, desc = match.group(1), int(match.group(2)), match.group(3), match.group(4)
        if f"/{dsn_db_oid}/" in line:
            ours.add(xid)
            totals[f"{rmgr} {desc}"] += size
        elif rmgr == "Transaction" and desc == "COMMIT":
            commits[xid] = size
    totals["Transaction COMMIT"] = sum(size for xid, size in commits.items() if xid in ours)
    return dict(totals)


def plans(store: Store, queue: str, jobs: int) -> dict[str, list[float]]:
    """Per statement (its first line), over ``jobs - 1`` steps: [count, hit, dirtied, written, wal bytes]."""
    engine: Any = store.engine
    seen: list[str] = []
    with engine.pool.connection() as conn:
        conn.add_notice_handler(lambda diag: seen.append(diag.message_primary or ""))
        for setting in (
            "LOAD 'auto_explain'",
            "SET auto_explain.log_min_duration = 0",
            "SET auto_explain.log_analyze = on",
            "SET auto_explain.log_buffers = on",
            "SET auto_explain.log_wal = on",
            "SET auto_explain.log_timing = off",
            "SET auto_explain.log_nested_statements = on",
            "SET auto_explain.log_format = json",
            "SET auto_explain.log_level = notice",
            "SET client_min_messages = notice",
        ):
            conn.execute(setting)
    seen.clear()
    steps(store, queue, jobs, int(on_connection(store, "SELECT pg_backend_pid()")))
    with engine.pool.connection() as conn:
        conn.execute("SET auto_explain.log_min_duration = -1")
    figures: dict[str, list[float]] = defaultdict(lambda: [0.0] * 5)
    for message in seen:
        if "{" not in message:
            continue
        plan = json.loads(message[message.index("{") :])
        text = " ".join(plan.get("Query Text", "?").split())[:90]
        top = plan["Plan"]
        figure = figures[text]
        figure[0] += 1
        figure[1] += top.get("Shared Hit Blocks", 0)
        figure[2] += top.get("Shared Dirtied Blocks", 0)
        figure[3] += top.get("Shared Written Blocks", 0)
        figure[4] += top.get("WAL Bytes", 0)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wal", action="store_true")
    parser.add_argument("--plans", type=int, default=0)
    parser.add_argument("--ballast", type=int, default=0, help="jobs of another queue, then ANALYZE (a table in use)")
    parser.add_argument("--handed", action="store_true", help="a chain's acks hand a result over")
    parser.add_argument("--setup", help="a file of SQL run on the migrated schema ({s}: its name), a variant")
    args = parser.parse_args()
    HANDED[0] = args.handed
    schema = f"bench_steps_{uuid.uuid4().hex[:8]}"
    print(f"load before      {load_average()}")
    store = alkstore.open(args.dsn, schema=schema, migrate=True, clock=alkstore.SystemClock(), min_size=1, max_size=1)
    cpu: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, dict[str, float]] = {subject: defaultdict(float) for subject in SUBJECTS}
    wal: dict[str, Counter[str]] = {subject: Counter() for subject in SUBJECTS}
    try:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            if args.ballast:
                store.queue("ballast").enqueue_many(range(args.ballast))
                admin.execute(sql.SQL("ANALYZE {}.jobs").format(sql.Identifier(schema)))
            if args.setup:
                admin.execute(Path(args.setup).read_text().replace("{s}", schema).encode())
            db_oid = scalar(admin, "SELECT oid FROM pg_database WHERE datname = current_database()")
            pid = int(on_connection(store, "SELECT pg_backend_pid()"))
            for number in range(args.rounds):
                order = SUBJECTS if number % 2 == 0 else SUBJECTS[::-1]
                for subject in order:
                    queue = f"{subject}-{number}"
                    enqueue_block(store, queue, args.jobs, subject == "chain")
                    on_connection(store, "SELECT pg_stat_force_next_flush()")
                    on_connection(store, "SELECT 1")
                    before = counters(admin, schema)
                    lsn = scalar(admin, "SELECT pg_current_wal_lsn()")
                    cpu[subject].append(steps(store, queue, args.jobs, pid))
                    end = scalar(admin, "SELECT pg_current_wal_lsn()")
                    on_connection(store, "SELECT pg_stat_force_next_flush()")
                    on_connection(store, "SELECT 1")
                    after = counters(admin, schema)
                    for key, value in after.items():
                        counts[subject][key] += value - before.get(key, 0)
                    if args.wal:
                        wal[subject].update(wal_bytes(db_oid, str(lsn), str(end)))
            assert pid == int(on_connection(store, "SELECT pg_backend_pid()")), "the connection changed"
            per_step = (args.jobs - 1) * args.rounds
            print(f"server CPU per step, median of {args.rounds} rounds of {args.jobs - 1} steps:")
            for subject in SUBJECTS:
                print(
                    f"  {subject:<12} {statistics.median(cpu[subject]):.3f} ms  (rounds: "
                    + ", ".join(f"{ms:.3f}" for ms in cpu[subject])
                    + ")"
                )
            print("per step (counters / steps):")
            keys = sorted(set(counts["chain"]) | set(counts["independent"]))
            for key in keys:
                chain, alone = counts["chain"][key] / per_step, counts["independent"][key] / per_step
                if chain or alone:
                    print(f"  {key:<40} chain {chain:8.3f}   independent {alone:8.3f}")
            if args.wal:
                print("WAL bytes per step:")
                for key in sorted(set(wal["chain"]) | set(wal["independent"])):
                    print(
                        f"  {key:<40} chain {wal['chain'][key] / per_step:8.1f}"
                        f"   independent {wal['independent'][key] / per_step:8.1f}"
                    )
                print(
                    f"  {'total':<40} chain {sum(wal['chain'].values()) / per_step:8.1f}"
                    f"   independent {sum(wal['independent'].values()) / per_step:8.1f}"
                )
            if args.plans:
                for subject in SUBJECTS:
                    queue = f"{subject}-plans"
                    enqueue_block(store, queue, args.plans + 1, subject == "chain")
                    print(f"statements of a {subject} step, per step: count, buffers hit, dirtied, written, WAL bytes")
                    for text, figure in plans(store, queue, args.plans + 1).items():
                        n, hit, dirtied, written, wal_b = (value / args.plans for value in figure)
                        print(f"  {n:4.1f} {hit:6.1f} {dirtied:5.2f} {written:5.2f} {wal_b:7.1f}  {text}")
    finally:
        store.close()
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
