"""The Django tasks ``django_enqueue.py`` measures, and the null backend and handler that bound them: module-level,
as Django requires, imported once Django is set up."""

from __future__ import annotations

import threading
from typing import Any

from django.db import close_old_connections
from django.tasks import TaskResult, TaskResultStatus, task
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

#: Runs so far of ``noop`` (the drain waits for its block), under ``lock``.
runs = 0
lock = threading.Lock()


@task(queue_name="bench-django")  # type: ignore[untyped-decorator]  # Django ships no type hints
def noop(n: int) -> None:
    """Count the run, nothing else."""
    global runs
    with lock:
        runs += 1


class NullBackend(BaseTaskBackend):  # type: ignore[misc]  # Django ships no type hints
    """Django's own work of an enqueue and nothing else: the task validated, its ``TaskResult`` built (the
    arguments normalised to JSON), stamped and announced by ``task_enqueued``, as Django's own backends do;
    nothing is stored. Its cost is what no backend can take out of ``Task.enqueue``."""

    supports_defer = True
    supports_async_task = True
    supports_priority = True

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Validate, build the ``TaskResult``, stamp it and send ``task_enqueued``; store nothing."""
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id="0",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        object.__setattr__(result, "enqueued_at", timezone.now())
        task_enqueued.send(type(self), task_result=result)
        return result


def null_handler(task: Any, sender: type) -> Any:
    """A plain handler (the worker runs it on its own threads, as a plain task) doing only Django's own work of a
    run of ``task``: its ``RUNNING`` ``TaskResult``, stale connections closed around it, ``task_started``, the
    call, the return value normalised to JSON, ``task_finished``. What no Django worker can take out of a run."""

    def handle(payload: Any, job: Any) -> Any:
        started = timezone.now()
        result = TaskResult(
            task=task,
            id=str(job.id),
            status=TaskResultStatus.RUNNING,
            enqueued_at=job.enqueued_at,
            started_at=started,
            last_attempted_at=started,
            finished_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=task.backend,
            errors=[],
            worker_ids=[job.worker_id or ""],
        )
        close_old_connections()
        try:
            task_started.send(sender=sender, task_result=result)
            value = normalize_json(task.call(*result.args, **result.kwargs))
            object.__setattr__(result, "_return_value", value)
            object.__setattr__(result, "finished_at", timezone.now())
            object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
            task_finished.send(sender=sender, task_result=result)
            return value
        finally:
            close_old_connections()

    return handle
