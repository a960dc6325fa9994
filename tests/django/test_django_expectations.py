"""What Django's own task tests, its ``TaskResult`` reference and django-tasks-db's tests expect of a
database backend, held by alkstore's (issue 40, ADR 064).

Each test names, in its docstring, the upstream test or document its expectation comes from:
Django's ``tests/tasks/`` and ``docs/ref/tasks.txt``, and django-tasks-db's ``tests/tests.py``.
The expectations are the upstream ones; the tests are written for this project. Those about the
worker run the real ``manage.py alkstore_worker``.
"""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management import call_command
from django.db import transaction
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist
from django.test import override_settings

from alkstore.adapters.django.backend import AlkstoreBackend
from tests._proc import LiveProcess
from tests.django.project.shop.tasks import explode, flaky, send_email, slow_write, write
from tests.support import PATIENCE, wait_until

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django"]),
]

MANAGE = Path(__file__).with_name("manage.py")
BOOM = "tests.django.project.shop.tasks.Boom"


def backend() -> AlkstoreBackend:
    found = task_backends["default"]
    assert isinstance(found, AlkstoreBackend)
    return found


@pytest.fixture
def cancelled() -> Iterator[list[Any]]:
    """Results whose jobs are cancelled after the test, so that no later test's worker runs them."""
    results: list[Any] = []
    yield results
    for result in results:
        if result.id:
            backend().store.cancel(int(result.id))


def finished(result: Any) -> bool:
    """Whether ``result``, read again, is finished."""
    result.refresh()
    return bool(result.is_finished)


def stored_enqueued_at(result: Any) -> datetime:
    """The ``enqueued_at`` the job of ``result`` is stored with."""
    info = backend().store.get_job(int(result.id))
    assert info is not None
    return info.enqueued_at


def manage(*args: str) -> LiveProcess:
    """``manage.py`` with ``args`` in a subprocess."""
    return LiveProcess([sys.executable, str(MANAGE), *args])


# -- enqueue and get_result -------------------------------------------------------------------


def test_get_result_right_after_enqueue_equals_what_enqueue_returned(cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendTestCase.test_get_result``: ``get_result(result.id) == result``."""
    result = write.enqueue(path="/nowhere", text="x")
    cancelled.append(result)
    assert backend().get_result(result.id) == result
    assert result.enqueued_at == stored_enqueued_at(result)


def test_aget_result_right_after_aenqueue_equals_what_aenqueue_returned(cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendTestCase.test_get_result_async``: the same through ``aenqueue`` and
    ``aget_result``."""

    async def both() -> tuple[Any, Any]:
        result = await backend().aenqueue(write, [], {"path": "/nowhere", "text": "x"})
        return result, await backend().aget_result(result.id)

    result, found = async_to_sync(both)()
    cancelled.append(result)
    assert found == result
    assert result.enqueued_at == stored_enqueued_at(result)


def test_get_result_task_is_the_task_as_enqueued_with_run_after_priority_queue_and_backend(
    cancelled: list[Any],
) -> None:
    """Django ``docs/ref/tasks.txt`` (``TaskResult.task``: the task the result is for) and django-tasks-db
    ``DatabaseBackendTestCase.test_run_after_tz``: ``run_after`` comes back as enqueued."""
    run_after = datetime.now(UTC).replace(microsecond=123456) + timedelta(hours=2)
    deferred = send_email.using(run_after=run_after, priority=-7)
    result = deferred.enqueue(to="later@example.com")
    cancelled.append(result)
    found = backend().get_result(result.id)
    assert found.task == deferred == result.task
    assert (found.task.run_after, found.task.priority, found.task.queue_name, found.task.backend) == (
        run_after,
        -7,
        "emails",
        "default",
    )
    assert found == result


def test_enqueued_at_inside_atomic_is_the_stored_instant_once_committed(cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendTestCase.test_get_result``, for a task enqueued in a transaction:
    once it commits, the result ``enqueue`` returned equals the stored one."""
    with transaction.atomic():
        result = write.enqueue(path="/nowhere", text="x")
        cancelled.append(result)
        assert result.enqueued_at is not None  # the store's clock until the commit
    assert backend().get_result(result.id) == result


# -- checks ------------------------------------------------------------------------------------


def test_check_reports_the_app_missing_from_installed_apps() -> None:
    """django-tasks-db ``DatabaseBackendTestCase.test_database_backend_app_missing``."""
    assert "alkstore.E009" not in [error.id for error in backend().check()]
    without = [app for app in settings.INSTALLED_APPS if app != "alkstore.adapters.django"]
    with override_settings(INSTALLED_APPS=without):
        errors = [error for error in backend().check() if error.id == "alkstore.E009"]
    assert len(errors) == 1
    assert "INSTALLED_APPS" in errors[0].msg


def test_a_ready_result_has_no_start_and_is_not_finished(cancelled: list[Any]) -> None:
    """Django ``docs/ref/tasks.txt``: a ``READY`` result has not started (``started_at``,
    ``last_attempted_at`` and ``finished_at`` are ``None``) and has no errors nor workers."""
    result = write.enqueue(path="/nowhere", text="x")
    cancelled.append(result)
    found = backend().get_result(result.id)
    assert found.status == TaskResultStatus.READY
    assert (found.started_at, found.last_attempted_at, found.finished_at) == (None, None, None)
    assert (found.errors, found.worker_ids, found.attempts) == ([], [], 0)


# -- the worker command's options --------------------------------------------------------------


def worker(signal_log: Path, *args: str) -> LiveProcess:
    """``manage.py alkstore_worker`` with ``args``, its task signals written to ``signal_log``."""
    return LiveProcess(
        [sys.executable, str(MANAGE), "alkstore_worker", *args], env={"SHOP_SIGNAL_LOG": str(signal_log)}
    )


def finished_ids(signal_log: Path) -> list[str]:
    """The result ids of the runs that finished, in the order they did."""
    if not signal_log.exists():
        return []
    lines = signal_log.read_text(encoding="utf-8").splitlines()
    return [line.split()[1] for line in lines if line.startswith("finished")]


@pytest.mark.slow
def test_batch_runs_the_ready_tasks_then_exits(tmp_path: Path, cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendWorkerTestCase.test_batch_processes_all_tasks`` and ``test_no_tasks``:
    ``--batch`` runs what is ready, a failing task's run included, then exits."""
    log = tmp_path / "signals"
    ready = [write.enqueue(path=str(tmp_path / f"out{n}"), text=str(n)) for n in range(3)]
    failing = write.enqueue(path=str(tmp_path / "no" / "such" / "dir"), text="x")
    later = write.using(run_after=datetime.now(UTC) + timedelta(hours=1)).enqueue(path=str(tmp_path / "later"), text="")
    cancelled.extend([failing, later])
    process = worker(log, "--batch", "--queues", "default")
    assert process.finish(timeout=PATIENCE * 4) == 0
    assert "stopped" in "".join(process.stdout)
    for n, result in enumerate(ready):
        result.refresh()
        assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, str(n))
    failing.refresh()
    assert failing.id in finished_ids(log)
    assert [error.exception_class_path for error in failing.errors][:1] == ["builtins.FileNotFoundError"]
    later.refresh()
    assert later.status == TaskResultStatus.READY  # not due: a batch leaves it
    again = worker(tmp_path / "again", "--batch", "--queues", "emails", "--interval", "0.5", "--startup-delay")
    assert again.finish(timeout=PATIENCE * 4) == 0  # nothing ready: it exits at once


@pytest.mark.slow
def test_max_tasks_exits_after_that_many_runs(tmp_path: Path, cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendWorkerTestCase.test_max_tasks``: of five tasks, ``--max-tasks 2`` runs
    two and leaves three ready."""
    log = tmp_path / "signals"
    results = [write.enqueue(path=str(tmp_path / f"out{n}"), text=str(n)) for n in range(5)]
    cancelled.extend(results)
    process = worker(log, "--max-tasks", "2", "--queues", "default")
    assert process.finish(timeout=PATIENCE * 4) == 0
    assert "ran 2 tasks (--max-tasks)" in "".join(process.stdout)
    ran = finished_ids(log)
    assert len(ran) == 2
    statuses = []
    for result in results:
        result.refresh()
        statuses.append(result.status)
    mine = [result.id for result in results if result.id in ran]
    assert statuses.count(TaskResultStatus.SUCCESSFUL) == len(mine)
    assert statuses.count(TaskResultStatus.READY) == 5 - len(mine)


@pytest.mark.slow
def test_every_queue_but_those_excluded(tmp_path: Path, cancelled: list[Any]) -> None:
    """django-tasks-db ``DatabaseBackendWorkerTestCase.test_process_all_queues_excluding_one_queue`` and
    ``test_excluding_unknown_queue_processes_selected_queues``: ``--queues '*'`` serves every queue of
    ``QUEUES`` but those ``--exclude-queues`` names, and a name not there is ignored."""
    log = tmp_path / "signals"
    served = write.enqueue(path=str(tmp_path / "out"), text="served")
    excluded = send_email.enqueue(to="someone@example.com")
    cancelled.append(excluded)
    process = worker(log, "--batch", "--queues", "*", "--exclude-queues", "emails,ticks,results,missing")
    assert process.finish(timeout=PATIENCE * 4) == 0
    assert "serving default\n" in "".join(process.stdout)
    served.refresh()
    excluded.refresh()
    assert (served.status, excluded.status) == (TaskResultStatus.SUCCESSFUL, TaskResultStatus.READY)


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--queues", "default,emails", "--exclude-queues", "emails"], "--exclude-queues can only be used with"),
        (["--interval", "-1"], "--interval"),
        (["--interval", "inf"], "--interval"),
        (["--interval", "0"], "--interval"),
        (["--max-tasks", "-1"], "--max-tasks"),
        (["--max-tasks", "0"], "--max-tasks"),
    ],
)
def test_the_worker_refuses_options_out_of_range(args: list[str], refusal: str) -> None:
    """django-tasks-db ``test_exclude_queues_requires_processing_all_queues``, ``test_negative_interval``,
    ``test_infinite_interval`` and ``test_negative_max_tasks``: refused before anything runs."""
    process = manage("alkstore_worker", *args)
    assert process.finish(timeout=PATIENCE * 2) != 0
    assert refusal in "".join(process.stderr)


# -- pruning results ---------------------------------------------------------------------------


def claimed(result: Any, worker_id: str) -> Any:
    """The job of ``result`` (on the ``results`` queue, where it must be the only one ready), claimed."""
    [job] = backend().store.queue("results").claim_many(worker_id, 10)
    assert job.id == int(result.id)
    return job


def pruned(*args: str) -> str:
    """What ``manage.py alkstore_prune_results`` with ``args`` says."""
    out = StringIO()
    call_command("alkstore_prune_results", *args, stdout=out)
    return out.getvalue()


def test_prune_deletes_failed_results_by_age_and_kept_ones_past_keep_results(cancelled: list[Any]) -> None:
    """django-tasks-db ``PruneDatabaseTaskResultsTestCase.test_prunes_tasks``, ``test_doesnt_prune_new_tasks``
    and ``test_failed_min_age``: finished results go, by their age; a ready one stays."""
    results = backend().store.queue("results")
    dies = explode.enqueue("gone")
    claimed(dies, "w1").fail("for good")
    results.configure(keep_results=timedelta(microseconds=1))  # kept, and past its keep at once
    try:
        succeeds = flaky.enqueue(failures=0)
        claimed(succeeds, "w1").ack(result={"ok": True})
    finally:
        results.configure(keep_results=timedelta(days=1))
    waiting = write.enqueue(path="/nowhere", text="x")
    cancelled.append(waiting)

    assert "pruned 1 successful and 0 failed" in pruned("--queues", "results")  # it failed under a day ago
    assert backend().get_result(dies.id).status == TaskResultStatus.FAILED
    with pytest.raises(TaskResultDoesNotExist):
        succeeds.refresh()
    assert "and 1 failed" in pruned("--failed-min-age-days", "0")
    with pytest.raises(TaskResultDoesNotExist):
        dies.refresh()
    assert backend().get_result(waiting.id).status == TaskResultStatus.READY


@pytest.mark.parametrize("args", [["--failed-min-age-days", "-1"], ["--queues", "elsewhere"]])
def test_prune_refuses_a_negative_age_and_an_unknown_queue(args: list[str]) -> None:
    """django-tasks-db ``PruneDatabaseTaskResultsTestCase.test_negative_age``."""
    process = manage("alkstore_prune_results", *args)
    assert process.finish(timeout=PATIENCE * 2) != 0


# -- results as Django documents them ----------------------------------------------------------


@pytest.mark.slow
def test_a_failed_result_has_one_error_and_one_worker_id_per_attempt_and_its_instants(tmp_path: Path) -> None:
    """Django ``docs/ref/tasks.txt`` (``TaskResult.errors``: one per failed attempt; ``worker_ids``: one per
    attempt; ``started_at``: the first attempt's start; ``last_attempted_at``: the latest), Django
    ``tests/tasks/test_immediate_backend.py`` ``test_catches_exception`` (each error's traceback ends with the
    exception's line; ``started_at >= enqueued_at``, ``finished_at >= started_at``) and django-tasks-db
    ``DatabaseBackendWorkerTestCase.test_failing_task``: a task that fails for good is ``FAILED`` with its
    exception's class path and traceback, started after it was enqueued and finished after its last start."""
    results = backend().store.queue("results")
    results.configure(backoff_base=0.05, backoff_cap=0.1, max_attempts=3)
    try:
        failing = explode.enqueue("every time")
        process = worker(tmp_path / "signals", "--queues", "results", "--worker-id", "wf")
        with process:
            process.wait_for(lambda name, line: name == "stdout" and "serving" in line, PATIENCE)
            wait_until(functools.partial(finished, failing), f"task {failing.id} failed for good")
            process.proc.send_signal(signal.SIGTERM)
            assert process.finish() == 0
    finally:
        results.configure(keep_results=timedelta(days=1))
    assert (failing.status, failing.attempts, failing.worker_ids) == (TaskResultStatus.FAILED, 3, ["wf"] * 3)
    assert [error.exception_class_path for error in failing.errors] == [BOOM] * 3
    assert all(error.traceback.endswith(f"{BOOM}: every time\n") for error in failing.errors), failing.errors
    assert None not in (failing.started_at, failing.last_attempted_at, failing.finished_at)
    assert failing.enqueued_at <= failing.started_at < failing.last_attempted_at <= failing.finished_at
    assert async_to_sync(backend().aget_result)(failing.id) == backend().get_result(failing.id)


@pytest.mark.slow
def test_a_running_result_names_its_worker_and_a_retried_one_its_earlier_attempts(tmp_path: Path) -> None:
    """Django ``docs/ref/tasks.txt``: a ``RUNNING`` result has its worker among ``worker_ids`` and its start
    (``started_at``, ``last_attempted_at``); a ``READY`` one waiting for its next attempt has that attempt's
    error, worker and start."""
    out = tmp_path / "out"
    running = slow_write.enqueue(path=str(out), seconds=3600.0)
    try:
        with worker(tmp_path / "signals", "--queues", "default", "--worker-id", "wr") as process:
            process.wait_for(lambda name, line: name == "stdout" and "serving" in line, PATIENCE)
            wait_until(out.exists, "the task started")
            found = backend().get_result(running.id)
            assert (found.status, found.worker_ids, found.attempts) == (TaskResultStatus.RUNNING, ["wr"], 1)
            assert found.finished_at is None
            assert found.started_at is not None  # its claim's instant
            assert found.enqueued_at <= found.started_at == found.last_attempted_at
            process.proc.send_signal(signal.SIGTERM)
            process.proc.send_signal(signal.SIGTERM)  # abandon it: its lease is handed back
            assert process.finish() == 0
    finally:
        backend().store.cancel(int(running.id))
    retried = explode.enqueue("once")
    try:
        [job] = backend().store.queue("results").claim_many("w1", 1)
        job.retry(RuntimeError("first"), delay=3600)
        found = backend().get_result(retried.id)
        assert (found.status, found.worker_ids, found.attempts) == (TaskResultStatus.READY, ["w1"], 1)
        assert [error.exception_class_path for error in found.errors] == ["builtins.RuntimeError"]
        assert found.enqueued_at <= found.started_at == found.last_attempted_at
        assert found.finished_at is None
    finally:
        backend().store.cancel(int(retried.id))
