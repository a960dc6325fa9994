"""A transactional step on PostgreSQL happens exactly once though the processes running it are killed (ADR 069).

A worker process is killed (``SIGKILL``) inside the step, before its transaction commits: neither its
write nor its checkpoint is left. The next process, whose clock is past the first one's lease, runs
the step and is killed after it committed but before the job's ack: its write and its checkpoint
stay together. The last run finds the step done and writes nothing more. Each process runs on a
``ManualClock`` an hour after the one before (the leases lapse by the stores' clocks, not by waiting).
"""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from alkstore import EnqueueOpts, ManualClock
from tests._proc import LiveProcess
from tests.postgres.conftest import OpenStore
from tests.support import PATIENCE, must_claim

#: The child: claim the order, run its charge as a transactional step on a clock at argv[4], and stop
#: (print, then wait to be killed) inside the step or after it committed, as argv[5] says.
CHILD = """
import sys, time
from datetime import datetime
import alkstore
dsn, schema, table, at, where = sys.argv[1:6]
store = alkstore.open(dsn, schema=schema, clock=alkstore.ManualClock(datetime.fromisoformat(at)), max_size=2)
job = store.queue("orders").claim("child")
assert job is not None, "nothing to claim"
with job.step_tx("charge") as step:
    assert not step.done
    step.tx.execute(f"INSERT INTO {table} (order_id) VALUES (%s)", [job.payload])
    step.result = "charged"
    if where == "inside":
        print("inside", flush=True)
        time.sleep(600)
print("committed", flush=True)
time.sleep(600)
"""


def run_and_kill(pg_dsn: str, schema: str, table: str, at: datetime, where: str) -> None:
    with LiveProcess([sys.executable, "-c", CHILD, pg_dsn, schema, table, at.isoformat(), where]) as child:
        child.wait_for(lambda name, line: name == "stdout" and line.strip() == where, PATIENCE)
        child.proc.send_signal(signal.SIGKILL)  # SIGKILL: no handler, no finally, no goodbye to the server
        assert child.proc.wait(PATIENCE) == -signal.SIGKILL


def test_a_transactional_step_happens_once_though_its_workers_are_killed_inside_it_and_after_it(
    pg_dsn: str, pg_module_schema: str, open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    base = datetime.now(UTC)
    clock = ManualClock(base)
    store = open_store(clock=clock)
    charges = sql.Identifier(pg_module_schema, "charges").as_string(db)
    db.execute(f"CREATE TABLE {charges} (order_id int NOT NULL)")
    job_id = store.queue("orders").enqueue(42, EnqueueOpts(max_attempts=5))

    run_and_kill(pg_dsn, pg_module_schema, charges, base, "inside")
    assert db.execute(f"SELECT count(*) FROM {charges}").fetchone() == (0,)

    run_and_kill(pg_dsn, pg_module_schema, charges, base + timedelta(hours=1), "committed")
    assert db.execute(f"SELECT count(*) FROM {charges}").fetchone() == (1,)
    info = store.get_job(job_id)
    assert info is not None
    assert [(step.name, step.result) for step in info.steps] == [("charge", "charged")]

    clock.set(base + timedelta(hours=2))
    job = must_claim(store.queue("orders"))
    assert job.attempts == 3
    with job.step_tx("charge") as step:
        assert step.done
    assert step.result == "charged"
    job.ack()
    assert db.execute(f"SELECT order_id FROM {charges}").fetchall() == [(42,)]


def test_a_step_in_the_callers_own_connection_commits_with_it_or_not_at_all(
    pg_dsn: str, pg_module_schema: str, open_store: OpenStore, db: psycopg.Connection[Any]
) -> None:
    store = open_store(clock=ManualClock(datetime.now(UTC)))
    refunds = sql.Identifier(pg_module_schema, "refunds").as_string(db)
    db.execute(f"CREATE TABLE {refunds} (order_id int NOT NULL)")
    queue = store.queue("refunds")
    job_id = queue.enqueue(9)
    job = must_claim(queue)
    with psycopg.connect(pg_dsn) as own:  # a transaction begins with its first statement
        with job.step_tx("refund", own) as step:
            own.execute(f"INSERT INTO {refunds} (order_id) VALUES (9)")
            step.result = "re_9"
        info = store.get_job(job_id)
        assert info is not None
        assert info.steps == (), "not visible before the caller's commit"
        own.rollback()
    info = store.get_job(job_id)
    assert info is not None
    assert info.steps == ()
    assert db.execute(f"SELECT count(*) FROM {refunds}").fetchone() == (0,)
    with psycopg.connect(pg_dsn) as own:
        own.execute("SELECT 1")  # in a transaction
        with job.step_tx("refund", own) as step:
            own.execute(f"INSERT INTO {refunds} (order_id) VALUES (9)")
            step.result = "re_9"
    info = store.get_job(job_id)  # the connection's block committed on exit
    assert info is not None
    assert [(each.name, each.result) for each in info.steps] == [("refund", "re_9")]
    assert db.execute(f"SELECT count(*) FROM {refunds}").fetchone() == (1,)
    with job.step_tx("refund") as step:  # the same claim, after the caller's commit: done
        assert step.done
    assert step.result == "re_9"
    job.ack()
