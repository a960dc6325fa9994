"""A transactional step on SQLite in the caller's own ``sqlite3`` connection (ADR 069): the step's writes and its
checkpoint commit with the caller's transaction, or neither does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import alkstore
from tests.support import must_claim, must_get


def test_a_step_in_the_callers_connection_commits_with_it_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with alkstore.open(f"sqlite:///{path}") as store:
        queue = store.queue("orders")
        job_id = queue.enqueue({"order": 7})
        job = must_claim(queue)
        db = sqlite3.connect(path)
        try:
            db.execute("CREATE TABLE charges (order_id INTEGER)")
            db.commit()
            with pytest.raises(RuntimeError), job.step_tx("charge", db) as step:  # noqa: PT012 - the block is the test
                db.execute("INSERT INTO charges VALUES (7)")
                step.result = "ch_7"
                raise RuntimeError("declined")
            db.rollback()
            assert must_get(store, job_id).steps == ()
            with job.step_tx("charge", db) as step:
                assert not step.done
                db.execute("INSERT INTO charges VALUES (7)")
                step.result = "ch_7"
            assert must_get(store, job_id).steps == (), "not visible before the caller's commit"
            db.commit()
            assert db.execute("SELECT order_id FROM charges").fetchall() == [(7,)]
        finally:
            db.close()
        assert [(s.name, s.result) for s in must_get(store, job_id).steps] == [("charge", "ch_7")]
        job.retry("again", delay=0)
        with must_claim(queue).step_tx("charge") as step:
            assert step.done
        assert step.result == "ch_7"
