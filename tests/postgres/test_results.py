"""Kept results on PostgreSQL (ADR 042): written by one process, read by another through the database.

The contract suite holds both engines to the behaviour; here a second store with a pool of its
own, and the ``alkstore`` command in a child process, read what a store wrote, and the kept
result and the deleted job commit as one.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import DatabaseError, EnqueueOpts, JobState, ManualClock, Store
from tests._proc import ALKSTORE, run
from tests.support import must_claim, must_get

from .conftest import OpenStore, table

pytestmark = pytest.mark.postgres


def test_a_result_is_read_by_another_store_and_another_process(
    store: Store, open_store: OpenStore, clock: ManualClock, pg_dsn: str, pg_module_schema: str
) -> None:
    queue = store.queue("kept-elsewhere")
    queue.configure(keep_results=3600)
    job_id = queue.enqueue({"n": 1})
    must_claim(queue, "w1").retry(ValueError("first"), delay=0)
    must_claim(queue, "w2").ack(result={"total": 42})

    other = open_store(clock=clock)  # another pool: what another process on the same database sees
    result = other.result(job_id)
    assert result is not None
    assert (result.result, result.worker_ids) == ({"total": 42}, ("w1", "w2"))
    assert [failed.exception for failed in result.errors] == ["builtins.ValueError"]

    shown = run([ALKSTORE, "jobs", "show", str(job_id), "--url", pg_dsn, "--schema", pg_module_schema, "--json"])
    assert shown.returncode == 0, shown.stderr
    printed = json.loads(shown.stdout)
    assert (printed["state"], printed["result"], printed["worker_ids"]) == ("done", {"total": 42}, ["w1", "w2"])


def test_the_kept_result_and_the_jobs_deletion_are_one_statement(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    queue = store.queue("kept-atomic")
    queue.configure(keep_results=3600)
    head = queue.enqueue("head", EnqueueOpts(ordering_key="k"))
    behind = queue.enqueue("behind", EnqueueOpts(ordering_key="k"))
    job = must_claim(queue)
    # A result row already there (written by hand) makes the insert fail: the job must stay.
    db.execute(
        sql.SQL(
            "INSERT INTO {} (id, queue, payload, attempts, max_attempts, enqueued_at, finished_at, keep_until, result)"
            " VALUES (%s, 'kept-atomic', '\\x00', 1, 1, now(), now(), now(), '\\x00')"
        ).format(table(pg_module_schema, "results")),
        [head],
    )
    with pytest.raises(DatabaseError, match="duplicate key"):
        job.ack(result="twice")
    assert must_get(store, head).state is JobState.RUNNING, "nothing of the failed ack took effect"
    assert must_get(store, behind).waiting, "and its ordering key's next job still waits"
