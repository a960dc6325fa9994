"""``runner.DaemonThreads``, the threads plain tasks run on: no run waits for another, and none outlives the process;
and the Django task a job names, made for its priority and queue once per kind of job."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTask

from alkstore.adapters.django.runner import DaemonThreads, _cancelled, _started
from tests.django.project.shop import tasks
from tests.django.project.shop.tasks import write

WRITE = "tests.django.project.shop.tasks.write"


def test_calls_at_once_each_get_a_thread_of_their_own() -> None:
    threads = DaemonThreads("test")
    together = threading.Barrier(3, timeout=30)  # only if all three run at once do they pass it
    names = [threads.submit(lambda: (together.wait(), threading.current_thread().name)[1]) for _ in range(3)]
    assert len({future.result(timeout=30) for future in names}) == 3
    threads.shutdown()


def test_a_call_that_raises_fails_its_future_and_the_threads_are_daemons() -> None:
    threads = DaemonThreads("test")

    def fail() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        threads.submit(fail).result(timeout=30)
    assert threads.submit(lambda: threading.current_thread().daemon).result(timeout=30)
    threads.shutdown()


def job_of(path: str, *, priority: int = 0, queue: str = "default") -> Any:
    """What ``_started`` reads of a claimed job of the Django task at ``path``."""
    return SimpleNamespace(
        task=path, id=1, priority=priority, queue=queue, enqueued_at=None, worker_id="w", attempts=1, claimed_at=None
    )


def made() -> dict[tuple[str, int, str], tuple[Any, Any]]:
    """An empty record of the tasks made for jobs, as the handler keeps one."""
    return {}


def test_a_task_made_for_a_job_is_reused_for_the_next_job_of_its_kind_and_remade_for_another() -> None:
    backend, known = task_backends["default"], made()
    payload: dict[str, Any] = {"args": [], "kwargs": {"path": "p", "text": "t"}}
    first, _ = _started(backend, payload, job_of(WRITE), known)
    again, result = _started(backend, payload, job_of(WRITE), known)
    other, _ = _started(backend, payload, job_of(WRITE, priority=7, queue="emails"), known)
    assert again is first
    assert result.task is first
    assert (other.priority, other.queue_name) == (7, "emails")
    assert (first.priority, first.queue_name) == (0, "default")


def test_a_task_replaced_at_its_path_is_the_one_the_next_job_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    backend, known = task_backends["default"], made()
    payload: dict[str, Any] = {"args": [], "kwargs": {}}
    before, _ = _started(backend, payload, job_of(WRITE), known)
    monkeypatch.setattr(tasks, "write", tasks.send_email.using(queue_name="default"))
    after, _ = _started(backend, payload, job_of(WRITE), known)
    assert before.func is write.func
    assert after.func is tasks.send_email.func


def test_a_job_on_a_queue_the_backend_refuses_fails_each_time() -> None:
    backend, known = task_backends["default"], made()
    for _ in range(2):
        with pytest.raises(InvalidTask, match="not valid"):
            _started(backend, {"args": [], "kwargs": {}}, job_of(WRITE, queue="nowhere"), known)
    assert known == {}


def test_only_the_workers_cancellation_of_a_run_is_no_failure_of_the_task() -> None:
    async def main() -> list[bool]:
        seen: list[bool] = []

        async def run() -> None:
            try:
                await asyncio.sleep(3600)
            except BaseException as exc:
                seen.append(_cancelled(exc))
                raise

        running = asyncio.create_task(run())
        await asyncio.sleep(0)
        running.cancel()  # as the worker cancels a run past its timeout
        await asyncio.gather(running, return_exceptions=True)
        seen.extend([_cancelled(asyncio.CancelledError()), _cancelled(SystemExit(1))])  # raised by the task itself
        return seen

    assert asyncio.run(main()) == [True, False, False]
