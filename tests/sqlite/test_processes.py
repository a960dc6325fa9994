"""``alkstore worker`` processes sharing one SQLite file: thousands of jobs each run once, a SIGKILLed
worker's job run again after its lease, two scheduler runners firing each boundary once.

Real processes on the system clock: the tests assert what must hold however slow the machine is
(nothing lost, nothing run twice) and bound their waits only generously. The application's tasks
append one JSON line per event to a file (``O_APPEND`` writes of one short line each).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import alkstore
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, wait_until

pytestmark = [pytest.mark.slow]

APP = textwrap.dedent(
    """
    import json, os, time
    import alkstore

    tasks = alkstore.Tasks()
    LOG = os.environ["APP_LOG"]


    def record(**event):
        with open(LOG, "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "at": time.time(), **event}) + "\\n")


    @tasks.task("work", queue="work")
    def work(n, hang_first=False):
        job = alkstore.current_job()
        record(event="start", n=n, attempt=job.attempts, job=job.id)
        if hang_first and job.attempts == 1:
            while not job.stop.is_cancelled():
                time.sleep(0.01)
        record(event="done", n=n, attempt=job.attempts, job=job.id)


    @tasks.periodic("@every 1s", queue="pulses", name="pulse")
    def pulse():
        job = alkstore.current_job()
        record(event="pulse", boundary=job.boundary.isoformat(), job=job.id)
    """
)


class App:
    """The test application in a directory of its own, its SQLite file and its event log."""

    def __init__(self, root: Path, runtime: str) -> None:
        self.root = root
        self.runtime = runtime
        self.url = f"sqlite:///{root / 'jobs.db'}"
        (root / "sqliteapp.py").write_text(APP, encoding="utf-8")
        self.log = root / "events.jsonl"
        self.log.touch()

    def events(self, kind: str) -> list[dict[str, Any]]:
        """The events of ``kind`` logged so far: whole lines only (a line being appended is read next time)."""
        lines = self.log.read_text(encoding="utf-8").split("\n")[:-1]
        return [event for event in map(json.loads, lines) if event["event"] == kind]

    def worker(self, *args: str) -> LiveProcess:
        command = [ALKSTORE, "worker", "--app", "sqliteapp:tasks", "--url", self.url, "--runtime", self.runtime]
        return LiveProcess([*command, *args], cwd=self.root, env={"APP_LOG": str(self.log)})

    def enqueue(self, count: int, visibility: float | None = None, **kwargs: Any) -> list[int]:
        sys.path.insert(0, str(self.root))
        try:
            import sqliteapp  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(self.root))
        task = sqliteapp.work.with_options(alkstore.EnqueueOpts(visibility_timeout=visibility))
        with alkstore.open(self.url) as store, store.transaction() as tx:
            return [task.enqueue_tx(store, tx, n=n, **kwargs) for n in range(count)]

    def rows(self, where: str = "1 = 1") -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.root / "jobs.db") as db:
            return db.execute("SELECT id, state, attempts FROM alkstore_jobs WHERE " + where).fetchall()


@pytest.fixture(params=["sync", "async"])
def app(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    monkeypatch.delitem(sys.modules, "sqliteapp", raising=False)
    monkeypatch.setenv("APP_LOG", str(tmp_path / "events.jsonl"))
    return App(tmp_path, request.param)


def stop(worker: LiveProcess) -> None:
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.finish(timeout=PATIENCE * 2) == 0, "".join(worker.stderr)[-5000:]


def test_three_workers_on_one_file_run_each_of_five_thousand_jobs_exactly_once(app: App) -> None:
    app.enqueue(5000)
    workers = [app.worker("--concurrency", "2") for _ in range(3)]
    try:
        wait_until(lambda: len(app.events("done")) >= 5000, "every job to be done", timeout=PATIENCE * 10)
    finally:
        for worker in workers:
            stop(worker)
    assert Counter(event["n"] for event in app.events("start")) == Counter(range(5000)), "each ran exactly once"
    assert Counter(event["n"] for event in app.events("done")) == Counter(range(5000))
    assert len({event["pid"] for event in app.events("done")}) >= 2, "the work was shared between processes"
    assert app.rows() == []


def test_a_job_of_a_sigkilled_worker_runs_again_after_its_lease_on_another_worker(app: App) -> None:
    (job_id,) = app.enqueue(1, visibility=2, hang_first=True)
    with app.worker() as killed:
        wait_until(lambda: len(app.events("start")) == 1, "the first run to start", timeout=PATIENCE * 2)
        killed.proc.kill()
        assert killed.finish() == -signal.SIGKILL
    assert [row[1:] for row in app.rows()] == [("running", 1)], "the killed worker's job is still leased"
    with app.worker() as survivor:
        wait_until(lambda: len(app.events("done")) == 1, "the job to run again and finish", timeout=PATIENCE * 2)
        stop(survivor)
    first, second = app.events("start")
    assert (first["job"], first["attempt"], second["job"], second["attempt"]) == (job_id, 1, job_id, 2)
    assert second["pid"] != first["pid"]
    assert app.rows() == []


def test_two_scheduler_runners_on_one_file_fire_each_boundary_once(app: App) -> None:
    runners = [app.worker("--schedules", "--queues", "pulses") for _ in range(2)]
    try:
        wait_until(lambda: len(app.events("pulse")) >= 6, "six pulses", timeout=PATIENCE * 3)
        runners[0].proc.kill()  # the leader or the stand-by: either way the other carries on
        assert runners[0].finish() == -signal.SIGKILL
        seen = len(app.events("pulse"))
        wait_until(lambda: len(app.events("pulse")) >= seen + 4, "pulses after a kill", timeout=PATIENCE * 3)
    finally:
        for runner in runners[1:]:
            stop(runner)
    boundaries = [event["boundary"] for event in app.events("pulse")]
    assert len(boundaries) == len(set(boundaries)), "no boundary fired twice"
    jobs = [event["job"] for event in app.events("pulse")]
    assert len(jobs) == len(set(jobs))


def test_a_sigstopped_workers_job_runs_again_after_its_lease_and_its_late_finish_changes_nothing(app: App) -> None:
    (job_id,) = app.enqueue(1, visibility=2, hang_first=True)
    with app.worker() as stopped:
        wait_until(lambda: len(app.events("start")) == 1, "the first run to start", timeout=PATIENCE * 2)
        stopped.proc.send_signal(signal.SIGSTOP)
        try:
            with app.worker() as survivor:
                wait_until(lambda: len(app.events("done")) == 1, "the job to run again", timeout=PATIENCE * 2)
                stop(survivor)
        finally:
            stopped.proc.send_signal(signal.SIGCONT)
        stop(stopped)
    first, second = app.events("start")
    assert (first["job"], first["attempt"], second["job"], second["attempt"]) == (job_id, 1, job_id, 2)
    assert second["pid"] != first["pid"]
    assert app.rows() == [], "the continued worker's stale finish wrote nothing back"
