"""Django task results through alkstore's kept results (ADR 046): ``get_result`` and ``aget_result``.

The jobs here are on the project's ``results`` queue, which only these tests use; what they claim
in-process they finish, so the worker process of the last test finds only its own jobs.
"""

from __future__ import annotations

import functools
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.tasks import TaskResultStatus, task_backends
from django.tasks.exceptions import TaskResultDoesNotExist

from alkstore.adapters.django.backend import AlkstoreBackend, task_error
from tests._proc import LiveProcess
from tests.django.project.shop.tasks import Boom, explode, flaky, returns_a_set, write
from tests.support import PATIENCE, wait_until

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django"]),
]

MANAGE = Path(__file__).with_name("manage.py")
BOOM = "tests.django.project.shop.tasks.Boom"
DAY = timedelta(days=1)


def backend() -> AlkstoreBackend:
    found = task_backends["default"]
    assert isinstance(found, AlkstoreBackend)
    return found


def claim(job_id: str, worker_id: str) -> Any:
    """Claim the ``results`` queue's job ``job_id`` as ``worker_id`` (it must be the only one there)."""
    claimed = backend().store.queue("results").claim_many(worker_id, 10)
    assert [job.id for job in claimed] == [int(job_id)]
    return claimed[0]


def stored_settings(queue: str) -> Any:
    """``queue``'s settings as stored now (read by a store of its own: the backend's caches them for a while)."""
    with backend().open_store(max_size=1) as store:
        return store.queue(queue).defaults()


def finished(result: Any) -> bool:
    """Whether ``result``, read again, is finished."""
    result.refresh()
    return bool(result.is_finished)


def raised(error: Exception) -> Exception:
    """``error`` as raised, with its traceback."""
    try:
        raise error
    except Exception as exc:
        return exc


def test_alkstore_migrate_has_every_queue_keep_results_for_a_day_and_leaves_its_other_settings() -> None:
    emails = backend().store.queue("emails")
    emails.configure(keep_results=60, max_attempts=4)
    try:
        call_command("alkstore_migrate")
        assert (stored_settings("emails").keep_results, stored_settings("emails").max_attempts) == (DAY, 4)
        kept = {queue: stored_settings(queue).keep_results for queue in backend().queues}
        assert kept == dict.fromkeys(backend().queues, DAY)
    finally:
        emails.configure(keep_results=DAY)


def test_a_kept_result_is_successful_with_its_return_value_earlier_errors_workers_and_times() -> None:
    enqueued = flaky.enqueue(failures=0)
    claim(enqueued.id, "w1").retry(raised(ValueError("first try")), delay=0)
    claim(enqueued.id, "w2").ack(result={"answer": [42]})
    found = flaky.get_result(enqueued.id)
    assert (found.status, found.return_value, found.kwargs) == (
        TaskResultStatus.SUCCESSFUL,
        {"answer": [42]},
        {"failures": 0},
    )
    assert (found.worker_ids, found.attempts) == (["w1", "w2"], 2)
    [error] = found.errors
    assert error.exception_class_path == "builtins.ValueError"
    assert error.exception_class is ValueError
    assert "ValueError: first try" in error.traceback
    assert None not in (found.enqueued_at, found.started_at, found.finished_at)
    # The first attempt's start, then the last one's (ADR 064).
    assert found.enqueued_at <= found.started_at < found.last_attempted_at <= found.finished_at
    assert async_to_sync(flaky.aget_result)(enqueued.id) == found
    enqueued.refresh()
    assert (enqueued.status, enqueued.return_value) == (TaskResultStatus.SUCCESSFUL, {"answer": [42]})


def test_a_dead_job_is_failed_with_its_exception_class_path_and_traceback() -> None:
    enqueued = explode.enqueue("gone")
    job = claim(enqueued.id, "w1")
    job.fail(raised(Boom("gone")))
    found = explode.get_result(enqueued.id)
    assert (found.status, found.worker_ids, found.finished_at is not None) == (TaskResultStatus.FAILED, ["w1"], True)
    [error] = found.errors
    assert (error.exception_class_path, error.exception_class) == (BOOM, Boom)
    assert f"{BOOM}: gone" in error.traceback
    with pytest.raises(ValueError, match="failed"):
        _ = found.return_value
    assert async_to_sync(explode.aget_result)(enqueued.id) == found


def test_a_pending_job_is_ready_and_an_unknown_id_does_not_exist_in_both_runtimes() -> None:
    enqueued = write.enqueue(path="/nowhere", text="x")
    try:
        assert async_to_sync(write.aget_result)(enqueued.id).status == TaskResultStatus.READY
        for missing in ("999999999999", "not-a-number"):
            with pytest.raises(TaskResultDoesNotExist):
                async_to_sync(backend().aget_result)(missing)
    finally:
        backend().store.cancel(int(enqueued.id))


def test_a_failure_names_its_exception_by_the_line_that_raised_it_even_when_chained() -> None:
    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise Boom("outer\nsecond line") from inner
    except Boom as exc:
        chained = exc
    from traceback import format_exception

    assert task_error("outer", "".join(format_exception(chained))).exception_class_path == BOOM
    assert task_error(
        "x", "Traceback (most recent call last):\n  File 'a', line 1\nOSError\n"
    ).exception_class_path == ("builtins.OSError")
    text_only = task_error("given as text", None)
    assert (text_only.exception_class_path, text_only.traceback) == ("builtins.Exception", "given as text")


def test_keep_results_none_leaves_the_queues_as_they_are_and_does_not_support_get_result() -> None:
    off = AlkstoreBackend("off", {"QUEUES": ["results"], "OPTIONS": {"keep_results": None}})
    assert off.supports_get_result is False
    assert off.keeping(backend().store.queue("results").defaults()) is None
    assert backend().supports_get_result is True


@pytest.mark.parametrize("keep", [0, -1, "1d", True, float("nan")])
def test_a_keep_results_that_is_no_positive_number_of_seconds_fails_the_checks(keep: Any) -> None:
    checked = AlkstoreBackend("checked", {"QUEUES": ["default"], "OPTIONS": {"keep_results": keep}})
    assert "alkstore.E008" in [error.id for error in checked.check()]


@pytest.mark.slow
def test_a_worker_process_keeps_return_values_earlier_errors_and_failures_for_good(tmp_path: Path) -> None:
    results = backend().store.queue("results")
    # Quick retries, two attempts, and no kept results: the worker's start must turn keeping on.
    results.configure(backoff_base=0.05, backoff_cap=0.1, max_attempts=2)
    try:
        succeeds, dies, not_json = flaky.enqueue(failures=1), explode.enqueue("for good"), returns_a_set.enqueue()
        process = LiveProcess(
            [sys.executable, str(MANAGE), "alkstore_worker", "--queues", "results", "--worker-id", "wr"],
            env={"SHOP_SIGNAL_LOG": str(tmp_path / "signals")},
        )
        with process:
            process.wait_for(lambda name, line: name == "stdout" and "serving" in line, PATIENCE)
            for each in (succeeds, dies, not_json):
                wait_until(functools.partial(finished, each), f"task {each.id} finished")
            process.proc.send_signal(signal.SIGTERM)
            assert process.finish() == 0
        settings = stored_settings("results")
        assert (settings.keep_results, settings.max_attempts, settings.backoff_base) == (
            DAY,
            2,
            timedelta(seconds=0.05),
        )
    finally:
        results.configure(keep_results=DAY)

    assert (succeeds.status, succeeds.return_value) == (TaskResultStatus.SUCCESSFUL, {"attempt": 2, "pair": [1, "two"]})
    assert succeeds.worker_ids == ["wr", "wr"]
    assert [(error.exception_class_path, "attempt 1 fails" in error.traceback) for error in succeeds.errors] == [
        ("builtins.ValueError", True)
    ]
    assert succeeds.enqueued_at <= succeeds.started_at < succeeds.last_attempted_at <= succeeds.finished_at

    assert (dies.status, dies.worker_ids) == (TaskResultStatus.FAILED, ["wr", "wr"])  # one per attempt (ADR 064)
    assert [error.exception_class_path for error in dies.errors] == [BOOM, BOOM]
    assert f"{BOOM}: for good" in dies.errors[0].traceback
    assert (not_json.status, [error.exception_class_path for error in not_json.errors]) == (
        TaskResultStatus.FAILED,
        ["builtins.TypeError", "builtins.TypeError"],
    )
    assert "Unsupported type" in not_json.errors[0].traceback
