"""``alkstore worker`` processes on PostgreSQL: signals, kills, a killed backend, two schedulers.

Real processes on the system clock, so these tests assert what must hold however slow the
machine is — nothing lost, nothing run twice, nothing left running — and bound waits only
generously. The application's tasks append one JSON line per event to a file. Every test runs
each runtime's worker (``--runtime sync`` and ``--runtime async``: the same plain tasks, on the
async worker's threads).
"""

from __future__ import annotations

import itertools
import json
import signal
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

import alkstore
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, wait_until

from .conftest import table

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

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
    def work(n, sleep=0.0, hang_first=False):
        job = alkstore.current_job()
        record(event="start", n=n, attempt=job.attempts, job=job.id)
        end = time.monotonic() + (3600.0 if hang_first and job.attempts == 1 else sleep)
        while time.monotonic() < end and not job.stop.is_cancelled():
            time.sleep(0.005)
        record(event="done", n=n, attempt=job.attempts, job=job.id)


    @tasks.periodic("@every 1s", queue="pulses", name="pulse")
    def pulse():
        job = alkstore.current_job()
        record(event="pulse", boundary=job.boundary.isoformat(), job=job.id)
    """
)


class App:
    """The test application in a directory of its own, and its event log; its workers run ``runtime``."""

    def __init__(self, root: Path, dsn: str, schema: str, runtime: str = "sync") -> None:
        self.root = root
        self.dsn = dsn
        self.schema = schema
        self.runtime = runtime
        (root / "procapp.py").write_text(APP, encoding="utf-8")
        self.log = root / "events.jsonl"
        self.log.touch()

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [event for event in map(json.loads, lines) if kind is None or event["event"] == kind]

    def worker(self, *args: str, url: str | None = None, env: dict[str, str] | None = None) -> LiveProcess:
        command = [ALKSTORE, "worker", "--app", "procapp:tasks", "--url", url or self.dsn, "--schema", self.schema]
        command += ["--runtime", self.runtime]
        return LiveProcess([*command, *args], cwd=self.root, env={"APP_LOG": str(self.log), **(env or {})})

    def enqueue(self, count: int, visibility: float | None = None, **kwargs: Any) -> list[int]:
        import procapp  # type: ignore[import-not-found]

        task = procapp.work.with_options(alkstore.EnqueueOpts(visibility_timeout=visibility))
        with alkstore.open(self.dsn, schema=self.schema, max_size=2) as store:
            return [task.enqueue(store, n=n, **kwargs) for n in range(count)]


@pytest.fixture(params=["sync", "async"])
def app(
    request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> App:
    alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=1).close()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APP_LOG", str(tmp_path / "events.jsonl"))
    monkeypatch.delitem(__import__("sys").modules, "procapp", raising=False)
    return App(tmp_path, pg_dsn, pg_schema, request.param)


def rows(db: psycopg.Connection[Any], schema: str, where: str = "TRUE") -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT id, state, attempts FROM {} WHERE " + where).format(table(schema, "jobs"))
    return db.execute(query).fetchall()


def test_sigterm_stops_claiming_lets_running_jobs_finish_and_loses_nothing(
    app: App, db: psycopg.Connection[Any]
) -> None:
    ids = app.enqueue(80, sleep=0.05)
    with app.worker("--concurrency", "4", "--grace", "30") as first:
        wait_until(lambda: len(app.events("done")) >= 10, "ten runs to finish", timeout=PATIENCE * 2)
        first.proc.send_signal(signal.SIGTERM)
        assert first.finish(timeout=PATIENCE * 2) == 0
    assert rows(db, app.schema, "state = 'running'") == [], "a stopped worker leaves nothing running"
    started = Counter(event["n"] for event in app.events("start"))
    done = Counter(event["n"] for event in app.events("done"))
    assert started == done, "every run it started, it finished within its grace"
    assert len(rows(db, app.schema)) == 80 - len(done)
    with app.worker("--concurrency", "4") as second:
        wait_until(lambda: len(app.events("done")) == 80, "the rest to be done", timeout=PATIENCE * 4)
        second.proc.send_signal(signal.SIGTERM)
        assert second.finish(timeout=PATIENCE * 2) == 0
    assert Counter(event["n"] for event in app.events("done")) == Counter(range(80)), "each job ran exactly once"
    assert rows(db, app.schema) == []
    assert len(ids) == 80


def test_a_job_of_a_sigkilled_worker_is_run_again_after_its_visibility_timeout(
    app: App, db: psycopg.Connection[Any]
) -> None:
    (job_id,) = app.enqueue(1, visibility=2, hang_first=True)
    with app.worker() as killed:
        wait_until(lambda: len(app.events("start")) == 1, "the first run to start", timeout=PATIENCE * 2)
        killed.proc.kill()
        assert killed.finish() == -signal.SIGKILL
    assert [row[1:] for row in rows(db, app.schema)] == [("running", 1)]
    query = sql.SQL("SELECT extract(epoch FROM lease_until)::float8 FROM {}").format(table(app.schema, "jobs"))
    (lapse,) = db.execute(query).fetchone() or (None,)
    with app.worker() as survivor:
        wait_until(lambda: len(app.events("done")) == 1, "the job to run again and finish", timeout=PATIENCE * 2)
        survivor.proc.send_signal(signal.SIGTERM)
        assert survivor.finish(timeout=PATIENCE) == 0
    first, second = app.events("start")
    assert (first["job"], first["attempt"], second["job"], second["attempt"]) == (job_id, 1, job_id, 2)
    assert second["pid"] != first["pid"]
    # Not before the lease lapsed: the survivor sweeps it at its lapse (ADR 044). The lapse is read
    # from the row (the database's clock, this machine's), not from the first run's stamp, which a
    # loaded machine may take well after the claim the lease counts from.
    assert lapse is not None
    assert second["at"] >= lapse - 0.05, "not before the lease lapsed"
    assert rows(db, app.schema) == []


def test_a_draining_worker_acks_a_finished_run_at_once_so_a_kill_in_its_grace_does_not_run_it_again(
    app: App, db: psycopg.Connection[Any]
) -> None:
    import procapp

    task = procapp.work.with_options(alkstore.EnqueueOpts(visibility_timeout=2))
    with alkstore.open(app.dsn, schema=app.schema, max_size=2) as store:
        short = task.enqueue(store, n=1, sleep=2.0)
        long = task.enqueue(store, n=2, hang_first=True)  # runs until handed back, then quick
    with app.worker("--concurrency", "2", "--grace", "20") as killed:
        wait_until(lambda: len(app.events("start")) == 2, "both runs to start", timeout=PATIENCE * 2)
        killed.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: rows(db, app.schema, f"id = {short}") == [], "the short job's ack", timeout=PATIENCE * 2)
        assert killed.proc.poll() is None, "acked while the worker is still in its grace"
        assert [event["n"] for event in app.events("done")] == [1]
        assert [row[1:] for row in rows(db, app.schema)] == [("running", 1)], "the long job still runs"
        killed.proc.kill()
        assert killed.finish() == -signal.SIGKILL
    with app.worker("--concurrency", "2") as survivor:
        wait_until(lambda: len(app.events("done")) == 2, "the long job to run again and finish", timeout=PATIENCE * 2)
        survivor.proc.send_signal(signal.SIGTERM)
        assert survivor.finish(timeout=PATIENCE) == 0
    assert Counter(event["job"] for event in app.events("start")) == {short: 1, long: 2}, "the short one ran once"
    assert rows(db, app.schema) == []


def test_a_worker_whose_backends_are_killed_mid_drain_carries_on_and_runs_each_job_once(
    app: App, db: psycopg.Connection[Any]
) -> None:
    name = f"alkstore-drain-{uuid.uuid4().hex[:8]}"
    url = f"{app.dsn}{'&' if '?' in app.dsn else '?'}application_name={name}"
    app.enqueue(300, visibility=3, sleep=0.005)
    with app.worker("--concurrency", "4", url=url) as worker:
        for target in (30, 120):
            wait_until(_at_least(app, "done", target), f"{target} runs", timeout=PATIENCE * 2)
            killed = db.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s) AS killed",
                [name],
            ).fetchone()
            assert killed is not None
            assert killed[0] >= 1
            time.sleep(0.2)
        wait_until(lambda: len(app.events("done")) >= 300, "every job to be done", timeout=PATIENCE * 4)
        assert worker.proc.poll() is None, "the worker is still running"
        worker.proc.send_signal(signal.SIGTERM)
        assert worker.finish(timeout=PATIENCE * 2) == 0
    assert Counter(event["n"] for event in app.events("done")) == Counter(range(300)), "each job ran exactly once"
    assert rows(db, app.schema) == []


def test_two_workers_running_the_scheduler_fire_each_boundary_once_across_a_leader_sigkill(
    app: App, db: psycopg.Connection[Any]
) -> None:
    first = app.worker("--schedules", "--queues", "pulses")
    second = app.worker("--schedules", "--queues", "pulses")
    try:
        wait_until(lambda: len(app.events("pulse")) >= 3, "a few pulses", timeout=PATIENCE * 2)
        leader = next(
            (worker for worker in (first, second) if any("leadership acquired" in line for line in worker.stderr)),
            None,
        )
        assert leader is not None
        survivor = second if leader is first else first
        leader.proc.kill()
        before = len(app.events("pulse"))

        def run_by_survivor() -> int:  # it may have run some of the leader's fires already
            return sum(1 for event in app.events("pulse") if event["pid"] == survivor.proc.pid)

        already = run_by_survivor()
        wait_until(lambda: run_by_survivor() >= already + 3, "the standby to lead and fire", timeout=PATIENCE * 2)
        assert len(app.events("pulse")) > before
        survivor.proc.send_signal(signal.SIGTERM)
        assert survivor.finish(timeout=PATIENCE) == 0
    finally:
        first.close()
        second.close()
    fired: dict[str, set[int]] = {}
    for event in app.events("pulse"):
        fired.setdefault(event["boundary"], set()).add(event["job"])
    query = sql.SQL("SELECT boundary, id FROM {} WHERE schedule = 'pulse'").format(table(app.schema, "jobs"))
    for boundary, job_id in db.execute(query):
        fired.setdefault(boundary.isoformat(), set()).add(job_id)  # fired, not run (the killed worker's)
    assert all(len(jobs) == 1 for jobs in fired.values()), "a boundary fired twice"
    boundaries = sorted(map(datetime.fromisoformat, fired))
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(boundaries)]
    assert gaps == [1.0] * len(gaps), "a boundary was lost"


def _at_least(app: App, kind: str, count: int) -> Callable[[], bool]:
    return lambda: len(app.events(kind)) >= count
