"""``alkstore worker --runtime {auto,sync,async}``: which worker runs an application, and how it stops.

The process tests run the installed script on a fresh PostgreSQL schema with real signals; the
application's tasks append one line per run to a file, naming the thread they ran on.
"""

from __future__ import annotations

import signal
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import alkstore
from alkstore.adapters.cli import EXIT_OK, EXIT_USAGE, main
from alkstore.adapters.cli._work import async_tasks, choose_runtime, load_app
from tests._proc import ALKSTORE, LiveProcess, run
from tests.support import PATIENCE, wait_until

#: An application with one ``async def`` task and one plain task on one queue, and one that hangs.
MIXED = textwrap.dedent(
    """
    import asyncio, os, threading
    import alkstore

    tasks = alkstore.Tasks()


    def record(name, n):
        with open(os.environ["APP_LOG"], "a") as log:
            log.write(f"{name} {n} {threading.current_thread() is threading.main_thread()}\\n")


    @tasks.task("fetch", queue="mixed")
    async def fetch(n):
        await asyncio.sleep(0.01)
        record("fetch", n)


    @tasks.task("resize", queue="mixed")
    def resize(n):
        record("resize", n)


    @tasks.task("hang", queue="slow")
    async def hang():
        record("hang", 0)
        await asyncio.sleep(3600)
    """
)
#: An application with plain tasks only.
PLAIN = textwrap.dedent(
    """
    import os, threading
    import alkstore

    tasks = alkstore.Tasks()


    @tasks.task("resize", queue="mixed")
    def resize(n):
        with open(os.environ["APP_LOG"], "a") as log:
            log.write(f"resize {n} {threading.current_thread() is threading.main_thread()}\\n")
    """
)


class App:
    """An application module written to a directory of its own, and the file its runs append to."""

    def __init__(self, root: Path, source: str) -> None:
        self.root = root
        self.module = f"runtime_app_{uuid.uuid4().hex[:8]}"
        (root / f"{self.module}.py").write_text(source, encoding="utf-8")
        self.log = root / "runs.txt"
        self.log.touch()

    @property
    def spec(self) -> str:
        return f"{self.module}:tasks"

    def tasks(self) -> alkstore.Tasks:
        return load_app(self.spec)

    def runs(self) -> list[str]:
        return self.log.read_text(encoding="utf-8").splitlines()

    def wait_for_runs(self, worker: LiveProcess, *runs: str) -> None:
        """Wait until the runs recorded are ``runs`` (in any order); fail at once if the worker exits first."""
        wait_until(
            lambda: sorted(self.runs()) == sorted(runs) or worker.proc.poll() is not None,
            f"the runs {runs}",
            timeout=PATIENCE * 2,
        )
        assert worker.proc.poll() is None, f"the worker exited early: {''.join(worker.stderr)}"
        assert sorted(self.runs()) == sorted(runs)

    def worker(self, dsn: str, schema: str, *args: str) -> LiveProcess:
        command = [ALKSTORE, "worker", "--app", self.spec, "--url", dsn, "--schema", schema, *args]
        return LiveProcess(command, cwd=self.root, env={"APP_LOG": str(self.log)})


@pytest.fixture
def importable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``tmp_path`` on ``sys.path`` and as the current directory (where a child process imports the app from),
    its modules forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("runtime_app_"):
            del sys.modules[name]


def test_auto_is_async_when_any_task_is_async_def_and_sync_otherwise(importable: Path) -> None:
    mixed, plain = App(importable, MIXED).tasks(), App(importable, PLAIN).tasks()

    assert sorted(async_tasks(mixed)) == ["fetch", "hang"]
    assert async_tasks(plain) == []
    assert choose_runtime(mixed, "auto") == "async"
    assert choose_runtime(plain, "auto") == "sync"
    assert choose_runtime(plain, "async") == "async"
    assert choose_runtime(mixed, "sync") == "sync"


def test_an_object_whose_call_is_async_def_counts_as_an_async_task() -> None:
    class Fetcher:
        async def __call__(self, n: int) -> None:
            """Awaited like an async def function."""

    tasks = alkstore.Tasks()
    tasks.task("fetcher", queue="q")(Fetcher())
    tasks.task("plain", queue="q")(lambda n: None)

    assert async_tasks(tasks) == ["fetcher"]
    assert choose_runtime(tasks, "auto") == "async"


def test_runtime_sync_with_an_async_def_task_is_a_usage_error_naming_the_tasks(
    importable: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = App(importable, MIXED)

    assert main(["worker", "--app", app.spec, "--url", "memory://", "--runtime", "sync"]) == EXIT_USAGE

    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line == (
        "alkstore: --runtime sync cannot run async def tasks 'fetch', 'hang': use --runtime async (or auto, the "
        "default) (see 'alkstore worker --help')"
    )


def test_the_installed_script_refuses_runtime_sync_before_connecting(importable: Path) -> None:
    # Port 1 answers nobody: a refusal that came after connecting would be a runtime error (1).
    app = App(importable, MIXED)
    url = "postgresql://postgres@127.0.0.1:1/nowhere"

    result = run([ALKSTORE, "worker", "--app", app.spec, "--url", url, "--runtime", "sync"])

    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.startswith("alkstore: --runtime sync cannot run async def tasks 'fetch', 'hang'")
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_an_unknown_runtime_is_a_usage_error(importable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = App(importable, PLAIN)

    assert main(["worker", "--app", app.spec, "--url", "memory://", "--runtime", "trio"]) == EXIT_USAGE

    assert "invalid choice: 'trio'" in capsys.readouterr().err


def test_the_worker_help_says_which_runtime_runs_what(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["worker", "--help"]) == EXIT_OK

    text = " ".join(capsys.readouterr().out.split())
    assert "--runtime {auto,sync,async}" in text
    assert "alkstore.AsyncWorker" in text
    assert "alkstore.Worker" in text
    assert "auto (default): async when the app has an async def task, else sync" in text


def enqueue(dsn: str, schema: str, app: App, *calls: tuple[str, dict[str, object]]) -> None:
    tasks = app.tasks()
    with alkstore.open(dsn, schema=schema, max_size=2) as store:
        for name, kwargs in calls:
            task = tasks.get(name)
            assert task is not None
            task.enqueue(store, **kwargs)


@pytest.fixture
def migrated(pg_dsn: str, pg_schema: str) -> str:
    alkstore.open(pg_dsn, schema=pg_schema, migrate=True, max_size=1).close()
    return pg_schema


@pytest.mark.postgres
@pytest.mark.slow
def test_auto_runs_an_app_with_an_async_def_task_on_the_async_worker_until_sigterm(
    importable: Path, pg_dsn: str, migrated: str
) -> None:
    app = App(importable, MIXED)
    enqueue(pg_dsn, migrated, app, ("fetch", {"n": 1}), ("resize", {"n": 2}))

    with app.worker(pg_dsn, migrated, "--runtime", "auto", "--queues", "mixed", "--concurrency", "2") as worker:
        # The async def task is awaited on the event loop (the main thread), the plain one runs on a thread.
        app.wait_for_runs(worker, "fetch 1 True", "resize 2 False")
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=PATIENCE * 2)

    log = "".join(worker.stderr)
    assert code == EXIT_OK, log
    assert "alkstore.cli: async worker " in log
    assert "async def tasks on the event loop, plain ones on threads" in log
    assert "stopping on SIGTERM: no more claims; running jobs get their grace (a second signal: at once)" in log
    assert "stopped: 2 processed (2 ok, 0 retried, 0 dead)" in log
    with alkstore.open(pg_dsn, schema=migrated, max_size=2) as store:
        assert store.queue("mixed").claim("check") is None


@pytest.mark.postgres
@pytest.mark.slow
def test_auto_runs_an_app_of_plain_tasks_on_the_sync_worker(importable: Path, pg_dsn: str, migrated: str) -> None:
    app = App(importable, PLAIN)
    enqueue(pg_dsn, migrated, app, ("resize", {"n": 1}))

    with app.worker(pg_dsn, migrated) as worker:
        app.wait_for_runs(worker, "resize 1 False")
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=PATIENCE * 2)

    log = "".join(worker.stderr)
    assert code == EXIT_OK, log
    assert "alkstore.cli: worker " in log
    assert "async worker" not in log
    assert "stopped: 1 processed (1 ok, 0 retried, 0 dead)" in log


@pytest.mark.postgres
@pytest.mark.slow
def test_a_second_sigterm_stops_the_async_worker_at_once_and_hands_back_what_runs(
    importable: Path, pg_dsn: str, migrated: str
) -> None:
    app = App(importable, MIXED)
    enqueue(pg_dsn, migrated, app, ("hang", {}))

    with app.worker(pg_dsn, migrated, "--queues", "slow", "--grace", "600") as worker:
        app.wait_for_runs(worker, "hang 0 True")
        worker.proc.send_signal(signal.SIGTERM)
        worker.wait_log(lambda line: "stopping on SIGTERM" in line, timeout=PATIENCE)
        worker.proc.send_signal(signal.SIGTERM)
        code = worker.finish(timeout=PATIENCE * 2)  # far less than the 600 s grace

    log = "".join(worker.stderr)
    assert code == EXIT_OK, log
    assert "stopping at once on SIGTERM: handing back what runs" in log
    assert "1 handed back" in log
    with alkstore.open(pg_dsn, schema=migrated, max_size=2) as store:
        job = store.queue("slow").claim("check")  # handed back: claimable at once, its attempt not spent
        assert job is not None
        assert job.attempts == 1
