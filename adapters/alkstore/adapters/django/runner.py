"""Running a Django task for an alkstore job: resolve it by module path, send Django's signals (ADR 039).

The worker's handler for every queue of the backend: it imports the task the job names (a
``django.tasks.Task`` at module level), calls it with the payload's ``args`` and ``kwargs`` (with
a ``TaskContext`` first for ``takes_context`` tasks), and sends ``task_started`` and
``task_finished`` around the call. Django's stale connections are closed before and after each
run, as a request would. A task that raises fails the run: alkstore retries it, then keeps it
dead.
"""

from __future__ import annotations

from collections.abc import Callable
from traceback import format_exception
from typing import Any

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from alkstore import Job

__all__ = ["handler_for"]


def handler_for(backend: Any) -> Callable[[Any, Job], object]:
    """The alkstore handler that runs the Django task each job of ``backend`` names."""
    sender = type(backend)

    def handle(payload: Any, job: Job) -> None:
        close_old_connections()
        try:
            _run(backend, sender, payload, job)
        finally:
            close_old_connections()

    return handle


def _run(backend: Any, sender: type, payload: Any, job: Job) -> None:
    if job.task is None:
        raise ValueError(f"job {job.id} names no task; the Django worker runs only jobs of Django tasks")
    found = import_string(job.task)
    if not isinstance(found, backend.task_class):
        raise TypeError(f"{job.task!r} is not a Django task (a django.tasks.Task), but {type(found).__name__}")
    if not isinstance(payload, dict):
        kind = type(payload).__name__
        raise TypeError(f"the payload of a Django task's job is {{'args': …, 'kwargs': …}}, not {kind}")
    task = found.using(priority=job.priority, queue_name=job.queue, backend=backend.alias)
    started = timezone.now()
    result = TaskResult(
        task=task,
        id=str(job.id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=job.enqueued_at,
        started_at=started,
        last_attempted_at=started,
        finished_at=None,
        args=payload.get("args", []),
        kwargs=payload.get("kwargs", {}),
        backend=backend.alias,
        errors=[],
        worker_ids=[job.worker_id or ""] * max(job.attempts, 1),
    )
    task_started.send(sender=sender, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *result.args, **result.kwargs)
        else:
            value = task.call(*result.args, **result.kwargs)
        object.__setattr__(result, "_return_value", normalize_json(value))
    except Exception as exc:
        object.__setattr__(result, "finished_at", timezone.now())
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        failed = type(exc)
        path = f"{failed.__module__}.{failed.__qualname__}"
        result.errors.append(TaskError(exception_class_path=path, traceback="".join(format_exception(exc))))
        task_finished.send(sender=sender, task_result=result)
        raise
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    task_finished.send(sender=sender, task_result=result)
