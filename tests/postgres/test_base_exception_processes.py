"""``alkstore worker`` processes on PostgreSQL whose tasks raise what is no ``Exception`` (ADR 054).

``raise SystemExit``, ``sys.exit(1)``, ``raise KeyboardInterrupt`` or a ``BaseException`` of the
application's own fails that attempt, as any exception does: the job is retried with the error and
its traceback kept, and the worker serves the next job. The sync runtime runs a plain task on its
thread; the async one an ``async def`` task on its event loop. The worker's own signals still stop
it: each test ends with a SIGTERM and a clean exit.
"""

from __future__ import annotations

import json
import signal
import textwrap
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import JobState
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

APP = textwrap.dedent(
    """
    import json, os, sys
    import alkstore

    tasks = alkstore.Tasks()
    LOG = os.environ["APP_LOG"]


    class Halt(BaseException):
        pass


    def record(**event):
        with open(LOG, "a") as log:
            log.write(json.dumps({"pid": os.getpid(), **event}) + "\\n")


    def raise_(kind):
        record(event="raising", kind=kind)
        if kind == "raise SystemExit":
            raise SystemExit
        if kind == "sys.exit(1)":
            sys.exit(1)
        if kind == "raise KeyboardInterrupt":
            raise KeyboardInterrupt
        raise Halt("stop here")


    @tasks.task("halt", queue="work", max_attempts=2)
    def halt(kind):
        raise_(kind)


    def record_after():
        record(event="after")


    after = tasks.task("after", queue="work")(record_after)

    # The async runtime's application: the same on its loop (the sync runtime refuses an async def task).
    atasks = alkstore.Tasks()


    @atasks.task("halt", queue="work", max_attempts=2)
    async def ahalt(kind):
        raise_(kind)


    atasks.task("after", queue="work")(record_after)
    """
)

#: Each kind: the error its job keeps, and its traceback's last line.
KINDS = {
    "raise SystemExit": ("SystemExit", "SystemExit"),
    "sys.exit(1)": ("SystemExit: 1", "SystemExit: 1"),
    "raise KeyboardInterrupt": ("KeyboardInterrupt", "KeyboardInterrupt"),
    "a BaseException of its own": ("Halt: stop here", "exitapp.Halt: stop here"),
}


class App:
    """The application in a directory of its own, and its event log."""

    def __init__(self, root: Path, dsn: str, schema: str) -> None:
        self.root, self.dsn, self.schema = root, dsn, schema
        (root / "exitapp.py").write_text(APP, encoding="utf-8")
        self.log = root / "events.jsonl"
        self.log.touch()

    def events(self, kind: str) -> list[dict[str, Any]]:
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [event for event in map(json.loads, lines) if event["event"] == kind]

    def worker(self, runtime: str) -> LiveProcess:
        registry = "exitapp:tasks" if runtime == "sync" else "exitapp:atasks"
        command = [ALKSTORE, "worker", "--app", registry, "--url", self.dsn, "--schema", self.schema]
        return LiveProcess([*command, "--runtime", runtime], cwd=self.root, env={"APP_LOG": str(self.log)})


@pytest.fixture
def app(tmp_path: Path, pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> App:
    alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=1).close()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("APP_LOG", str(tmp_path / "events.jsonl"))
    monkeypatch.delitem(__import__("sys").modules, "exitapp", raising=False)
    return App(tmp_path, pg_dsn, pg_schema)


@pytest.mark.parametrize("runtime", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_task_raising_what_is_no_exception_fails_its_attempt_and_the_worker_serves_the_next_job(
    app: App, runtime: str, kind: str
) -> None:
    import exitapp  # type: ignore[import-not-found]

    error, last_line = KINDS[kind]
    task = exitapp.halt if runtime == "sync" else exitapp.ahalt  # async: an async def on the worker's loop
    with alkstore.open(app.dsn, schema=app.schema, max_size=2) as store:
        job_id = task.enqueue(store, kind=kind)
        with app.worker(runtime) as worker:
            wait_until(lambda: len(app.events("raising")) == 1, "the task to raise", timeout=PATIENCE * 2)
            exitapp.after.enqueue(store)  # after the failure: only a worker that survived it runs this one
            wait_until(lambda: len(app.events("after")) == 1, "the next job to run", timeout=PATIENCE * 2)
            assert worker.proc.poll() is None, "the worker serves on"
            info = store.get_job(job_id)
            assert info is not None
            assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 1, error)
            assert info.last_traceback is not None
            assert info.last_traceback.rstrip().endswith(last_line)
            worker.proc.send_signal(signal.SIGTERM)
            assert worker.finish(timeout=PATIENCE * 2) == 0
        assert any("failed in" in line and f"{error}; to be retried" in line for line in worker.stderr)
    assert {event["pid"] for event in app.events("raising") + app.events("after")} == {worker.proc.pid}
