"""``manage.py alkstore_worker`` in a subprocess: runs enqueued Django tasks, sends their signals, drains on SIGTERM."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from django.tasks import task_backends

from alkstore import JobState
from tests._proc import LiveProcess
from tests.django.project.shop.tasks import awrite, exits, slow_write, write, write_context
from tests.support import PATIENCE, wait_until

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django"]),
]

MANAGE = Path(__file__).with_name("manage.py")


def worker(signal_log: Path, *args: str) -> LiveProcess:
    """``manage.py alkstore_worker`` with ``args``, its task signals written to ``signal_log``; started once serving."""
    process = LiveProcess(
        [sys.executable, str(MANAGE), "alkstore_worker", *args],
        env={"SHOP_SIGNAL_LOG": str(signal_log)},
    )
    process.wait_for(lambda name, line: name == "stdout" and "serving" in line, PATIENCE)
    return process


def stored(result: Any) -> Any:
    return task_backends["default"].store.get_job(int(result.id))


def test_the_worker_runs_enqueued_tasks_with_their_context_and_sends_started_and_finished(tmp_path: Path) -> None:
    out, context_out, log = tmp_path / "out", tmp_path / "context", tmp_path / "signals"
    plain = write.enqueue(str(out), text="ran")
    with_context = write_context.enqueue(path=str(context_out))
    with worker(log, "--queues", "default", "--concurrency", "2") as process:
        wait_until(lambda: out.exists() and context_out.exists(), "both tasks ran")
        wait_until(lambda: stored(plain) is None and stored(with_context) is None, "both jobs acked")
        process.proc.send_signal(signal.SIGTERM)
        assert process.finish() == 0
    assert out.read_text(encoding="utf-8") == "ran"
    assert json.loads(context_out.read_text(encoding="utf-8")) == {"id": with_context.id, "attempt": 1}
    lines = set(log.read_text(encoding="utf-8").splitlines())
    assert {
        f"started {plain.id} write RUNNING",
        f"finished {plain.id} write SUCCESSFUL",
        f"started {with_context.id} write_context RUNNING",
        f"finished {with_context.id} write_context SUCCESSFUL",
    } <= lines


def test_the_worker_awaits_an_async_task_on_its_event_loop_and_sends_its_signals(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "signals"
    result = awrite.enqueue(path=str(out), text="ran")
    with worker(log, "--queues", "default") as process:
        wait_until(lambda: out.exists() and stored(result) is None, "the async task ran and was acked")
        process.proc.send_signal(signal.SIGTERM)
        assert process.finish() == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("ran on ")
    assert text.endswith("EventLoop")
    lines = set(log.read_text(encoding="utf-8").splitlines())
    assert {f"started {result.id} awrite RUNNING", f"finished {result.id} awrite SUCCESSFUL"} <= lines


def test_sigterm_lets_the_running_task_finish_before_the_worker_exits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = slow_write.enqueue(path=str(out), seconds=2.0)
    with worker(tmp_path / "signals", "--queues", "default") as process:
        wait_until(lambda: out.exists(), "the task started")
        process.proc.send_signal(signal.SIGTERM)
        assert process.finish() == 0
    assert out.read_text(encoding="utf-8") == "done"
    assert stored(result) is None


def test_a_second_sigterm_abandons_a_task_that_does_not_return_and_the_process_exits(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = slow_write.enqueue(path=str(out), seconds=3600.0)
    try:
        with worker(tmp_path / "signals", "--queues", "default", "--grace", "3600") as process:
            wait_until(lambda: out.exists(), "the task started")
            process.proc.send_signal(signal.SIGTERM)
            process.wait_for(lambda name, line: "stopping on SIGTERM" in line, PATIENCE)
            process.proc.send_signal(signal.SIGTERM)
            assert process.finish() == 0  # its thread, still sleeping, does not keep the process
        assert out.read_text(encoding="utf-8") == "started"
        info = stored(result)
        assert info is not None  # handed back: it runs again
        assert info.state is JobState.PENDING
    finally:
        task_backends["default"].store.cancel(int(result.id))  # never in the way of the next tests' workers


def test_a_failing_run_sends_finished_as_failed_and_leaves_the_job_to_be_retried(tmp_path: Path) -> None:
    log = tmp_path / "signals"
    result = write.enqueue(path=str(tmp_path / "no" / "such" / "dir"), text="x")
    with worker(log, "--queues", "default") as process:
        wait_until(lambda: log.exists() and "FAILED" in log.read_text(encoding="utf-8"), "the run failed")
        process.proc.send_signal(signal.SIGTERM)
        assert process.finish() == 0
    assert f"finished {result.id} write FAILED" in log.read_text(encoding="utf-8").splitlines()
    info = stored(result)
    assert info.attempts == 1
    assert "No such file or directory" in (info.last_error or "")
    assert "FileNotFoundError" in (info.last_traceback or "")


def test_a_task_calling_sys_exit_fails_its_run_and_the_worker_serves_the_next_task(tmp_path: Path) -> None:
    log, exiting, out = tmp_path / "signals", tmp_path / "exiting", tmp_path / "out"
    result = exits.enqueue(path=str(exiting))
    try:
        with worker(log, "--queues", "default") as process:
            wait_until(lambda: log.exists() and "FAILED" in log.read_text(encoding="utf-8"), "the run to fail")
            after = write.enqueue(path=str(out), text="after")  # only a worker that survived runs this one
            wait_until(lambda: out.exists() and stored(after) is None, "the next task to run and be acked")
            assert process.proc.poll() is None, "the worker serves on"
            process.proc.send_signal(signal.SIGTERM)
            assert process.finish() == 0
        lines = log.read_text(encoding="utf-8").splitlines()
        assert f"finished {result.id} exits FAILED" in lines
        assert f"error {result.id} builtins.SystemExit" in lines
        assert f"finished {after.id} write SUCCESSFUL" in lines
        info = stored(result)
        assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 1, "SystemExit: 1")
        found = exits.get_result(result.id)
        assert [error.exception_class_path for error in found.errors] == ["builtins.SystemExit"]
        assert exiting.read_text(encoding="utf-8") == "exiting"
    finally:
        task_backends["default"].store.cancel(int(result.id))  # its retry never in the way of the next tests


def test_the_worker_refuses_a_queue_the_backend_does_not_have(tmp_path: Path) -> None:
    process = LiveProcess([sys.executable, str(MANAGE), "alkstore_worker", "--queues", "elsewhere"])
    assert process.finish() != 0
    assert "elsewhere" in "".join(process.stderr)
