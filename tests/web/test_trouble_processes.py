"""A real ``alkstore worker`` killed mid-run on PostgreSQL, and what the dashboard's overview says of it.

The worker runs on the system clock; the dashboard then looks at the same schema from a store whose
clock stands a minute and a half later (a manual clock: no test waits out a minute), as an operator
opening it after the kill would. Nothing is faked in the engine: the worker's report, its claimed
job and its lease are as the killed process left them.
"""

from __future__ import annotations

import html
import json
import re
import signal
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import alkstore
from alkstore import ManualClock
from alkstore.adapters.postgres.testing import drop_schema, find_server, unique_schema
from alkstore.adapters.web import create_app
from tests._proc import ALKSTORE, LiveProcess
from tests.support import PATIENCE, under_ci, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

APP = textwrap.dedent(
    """
    import json, os, time
    import alkstore

    tasks = alkstore.Tasks()


    @tasks.task("hang", queue="work")
    def hang(n):
        job = alkstore.current_job()
        with open(os.environ["APP_LOG"], "a") as log:
            log.write(json.dumps({"job": job.id, "worker": job.worker_id}) + "\\n")
        while not job.stop.is_cancelled():
            time.sleep(0.01)
    """
)


@pytest.fixture
def schema() -> Iterator[tuple[str, str]]:
    dsn, reason = find_server()
    if dsn is None:
        if under_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    name = unique_schema("web")
    alkstore.open(dsn, schema=name, migrate=True, max_size=1).close()
    try:
        yield dsn, name
    finally:
        drop_schema(dsn, name)


def troubles(client: TestClient) -> dict[tuple[str, str], str]:
    page = client.get("/").text
    found = re.findall(
        r'<li data-kind="([^"]+)" data-subject="([^"]+)"><a href="[^"]+">.*?</a>: (.*?)</li>', page, re.S
    )
    return {(kind, html.unescape(subject)): html.unescape(what) for kind, subject, what in found}


def test_a_worker_killed_mid_run_is_flagged_with_its_job_and_its_queue_left_unserved(
    schema: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, name = schema
    (tmp_path / "hangapp.py").write_text(APP, encoding="utf-8")
    log = tmp_path / "events.jsonl"
    log.touch()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "hangapp", raising=False)
    import hangapp  # type: ignore[import-not-found]

    with alkstore.open(dsn, schema=name, max_size=2) as store:
        job_id = hangapp.hang.with_options(alkstore.EnqueueOpts(visibility_timeout=600)).enqueue(store, n=1)
        command = [ALKSTORE, "worker", "--app", "hangapp:tasks", "--url", dsn, "--schema", name]
        with LiveProcess(command, cwd=tmp_path, env={"APP_LOG": str(log)}) as worker:
            wait_until(lambda: log.read_text(encoding="utf-8").strip(), "the run to start", timeout=PATIENCE * 2)
            (worker_id,) = {json.loads(line)["worker"] for line in log.read_text(encoding="utf-8").splitlines()}
            wait_until(lambda: store.workers(), "the worker's first report", timeout=PATIENCE * 2)
            with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
                assert troubles(client) == {}, "a live worker running its job is no trouble"
            worker.proc.kill()
            assert worker.finish() == -signal.SIGKILL
        hangapp.hang.enqueue(store, n=2)  # more work for the queue its only worker served

    later = ManualClock(datetime.now(UTC) + timedelta(seconds=90))
    with (
        alkstore.open(dsn, schema=name, max_size=2, clock=later) as store,
        TestClient(create_app(store), base_url="http://127.0.0.1") as client,
    ):
        found = troubles(client)
        assert found[("orphaned", "work")].startswith("1 running job held by a worker not seen live")
        assert re.match(r"last seen \d+m\d\ds ago on ", found[("worker-gone", worker_id)])
        assert found[("unserved", "work")].startswith("1 ready job and no live worker serves the queue")
        running = client.get("/queues/work?state=running").text
        row = re.search(rf'<tr data-job="{job_id}">(.*?)</tr>', running, re.S)
        assert row is not None
        assert worker_id in html.unescape(row.group(1))
        assert "not seen live" in row.group(1)
        workers = client.get("/workers").text
        assert f'/jobs/{job_id}"' in workers
        assert "gone" in workers
