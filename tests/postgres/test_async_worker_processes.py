"""``alkstore worker`` running ``async def`` tasks, as real processes on PostgreSQL.

What only the async worker does, shown through the command a user runs: a run past its
timeout is cancelled (the task sees ``CancelledError``) and its job retried; a plain task that
blocks its thread does not hold up the ``async def`` tasks beside it; SIGTERM drains the async
runs within the grace and loses nothing. The tasks append one JSON line per event to a file.
"""

from __future__ import annotations

import json
import signal
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

import alkstore
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, wait_until

from .test_worker_processes import rows

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

APP = textwrap.dedent(
    """
    import asyncio, json, os, time
    import alkstore

    tasks = alkstore.Tasks()
    LOG = os.environ["APP_LOG"]


    def record(**event):
        with open(LOG, "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "at": time.time(), **event}) + "\\n")


    @tasks.task("crawl", queue="aio", timeout=1.0)
    async def crawl(n):
        job = alkstore.current_job()
        record(event="start", n=n, attempt=job.attempts)
        if job.attempts == 1:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                record(event="cancelled", n=n, attempt=job.attempts)
                raise
        record(event="done", n=n, attempt=job.attempts)


    @tasks.task("quick", queue="aio")
    async def quick(n, sleep=0.0):
        await asyncio.sleep(sleep)
        record(event="done", n=n)


    @tasks.task("block", queue="aio")
    def block(seconds):
        record(event="blocking")
        time.sleep(seconds)  # holds its thread, never the loop
        record(event="unblocked")
    """
)


class AsyncApp:
    def __init__(self, root: Path, dsn: str, schema: str) -> None:
        self.root, self.dsn, self.schema = root, dsn, schema
        (root / "aioapp.py").write_text(APP, encoding="utf-8")
        self.log = root / "events.jsonl"
        self.log.touch()

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [event for event in map(json.loads, lines) if kind is None or event["event"] == kind]

    def worker(self, *args: str) -> LiveProcess:
        command = [ALKSTORE, "worker", "--app", "aioapp:tasks", "--url", self.dsn, "--schema", self.schema, *args]
        return LiveProcess(command, cwd=self.root, env={"APP_LOG": str(self.log)})

    def enqueue(self, task: str, calls: list[dict[str, Any]]) -> list[int]:
        import aioapp  # type: ignore[import-not-found]

        with alkstore.open(self.dsn, schema=self.schema, max_size=2) as store:
            return list(getattr(aioapp, task).enqueue_many(store, calls))


@pytest.fixture
def app(tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> AsyncApp:
    alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=1).close()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APP_LOG", str(tmp_path / "events.jsonl"))
    monkeypatch.delitem(__import__("sys").modules, "aioapp", raising=False)
    return AsyncApp(tmp_path, pg_dsn, pg_schema)


def test_an_async_run_past_its_timeout_is_cancelled_and_its_job_retried(
    app: AsyncApp, db: psycopg.Connection[Any]
) -> None:
    app.enqueue("crawl", [{"n": 1}])
    with app.worker() as worker:
        wait_until(lambda: len(app.events("done")) == 1, "the retried run to finish", timeout=PATIENCE * 2)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=PATIENCE) == 0
        assert any("async worker" in line for line in worker.stderr)
    assert [(event["event"], event["attempt"]) for event in app.events()] == [
        ("start", 1),
        ("cancelled", 1),
        ("start", 2),
        ("done", 2),
    ]
    assert rows(db, app.schema) == []


def test_a_blocking_plain_task_does_not_hold_up_the_async_tasks_beside_it(
    app: AsyncApp, db: psycopg.Connection[Any]
) -> None:
    app.enqueue("block", [{"seconds": 6.0}])
    with app.worker("--concurrency", "4") as worker:
        wait_until(lambda: len(app.events("blocking")) == 1, "the plain task to block", timeout=PATIENCE * 2)
        app.enqueue("quick", [{"n": n} for n in range(20)])
        wait_until(lambda: len(app.events("done")) == 20, "the async tasks, while it blocks", timeout=PATIENCE)
        assert app.events("unblocked") == [], "the async tasks all ran while the plain one still blocked"
        wait_until(lambda: len(app.events("unblocked")) == 1, "the plain task", timeout=PATIENCE)
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=PATIENCE) == 0
    assert rows(db, app.schema) == []


def test_sigterm_drains_the_async_runs_within_the_grace_and_loses_nothing(
    app: AsyncApp, db: psycopg.Connection[Any]
) -> None:
    app.enqueue("quick", [{"n": n, "sleep": 0.05} for n in range(60)])
    with app.worker("--concurrency", "8", "--grace", "30") as first:
        wait_until(lambda: len(app.events("done")) >= 10, "ten runs", timeout=PATIENCE * 2)
        first.proc.send_signal(signal.SIGTERM)
        assert first.finish(timeout=PATIENCE * 2) == 0
    assert rows(db, app.schema, "state = 'running'") == []
    with app.worker("--concurrency", "8") as second:
        wait_until(lambda: len(app.events("done")) >= 60, "the rest", timeout=PATIENCE * 2)
        second.proc.send_signal(signal.SIGTERM)
        assert second.finish(timeout=PATIENCE) == 0
    assert Counter(event["n"] for event in app.events("done")) == Counter(range(60)), "each job ran exactly once"
    assert rows(db, app.schema) == []
