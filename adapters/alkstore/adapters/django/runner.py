"""Running a Django task for an alkstore job: resolve it by module path, send Django's signals (ADR 039, 045).

The async worker's handler for every queue of the backend: it imports the task the job names (a
``django.tasks.Task`` at module level), calls it with the payload's ``args`` and ``kwargs`` (with
a ``TaskContext`` first for ``takes_context`` tasks), and sends ``task_started`` and
``task_finished`` around the call. An ``async def`` task is awaited on the worker's event loop; a
plain one runs, signals and all, on a thread of the worker's pool, as a sync view would. Django's
stale connections are closed before and after each run, as a request would. A task that raises
fails the run: alkstore retries it, then keeps it dead.

Periodic tasks (``OPTIONS["schedules"]``) are registered in an ``alkstore.Tasks`` registry whose
every entry runs through the same handler, so a fired job and an enqueued one run alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from inspect import iscoroutinefunction
from traceback import format_exception
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from alkstore import Tasks, current_job

__all__ = ["handler_for", "periodic_registry"]


def handler_for(backend: Any, executor: ThreadPoolExecutor) -> Callable[[Any, Any], Awaitable[None]]:
    """The async handler that runs the Django task each job of ``backend`` names (plain ones on ``executor``)."""
    sender = type(backend)

    def run_sync(task: Any, result: TaskResult) -> None:
        close_old_connections()
        try:
            task_started.send(sender=sender, task_result=result)
            try:
                args, kwargs = _arguments(task, result)
                value = normalize_json(task.call(*args, **kwargs))
            except Exception as exc:
                task_finished.send(sender=sender, task_result=_failed(result, exc))
                raise
            task_finished.send(sender=sender, task_result=_succeeded(result, value))
        finally:
            close_old_connections()

    in_thread = sync_to_async(run_sync, thread_sensitive=False, executor=executor)
    close_async = sync_to_async(close_old_connections)

    async def run_async(task: Any, result: TaskResult) -> None:
        await close_async()
        try:
            await task_started.asend(sender=sender, task_result=result)
            try:
                args, kwargs = _arguments(task, result)
                value = normalize_json(await task.acall(*args, **kwargs))
            except Exception as exc:
                await task_finished.asend(sender=sender, task_result=_failed(result, exc))
                raise
            await task_finished.asend(sender=sender, task_result=_succeeded(result, value))
        finally:
            await close_async()

    async def handle(payload: Any, job: Any) -> None:
        task, result = _started(backend, payload, job)
        if iscoroutinefunction(task.func):
            await run_async(task, result)
        else:
            await in_thread(task, result)

    return handle


def periodic_registry(schedules: Mapping[str, Any], handle: Callable[[Any, Any], Awaitable[None]]) -> Tasks:
    """An ``alkstore.Tasks`` of the periodic Django tasks (``backend.periodic()``), each run by ``handle``.

    Each is named by its module path, on its task's queue with its priority, firing the payload
    ``{"args": …, "kwargs": …}`` an enqueue writes; the worker registers the schedules when it starts.
    """

    async def fired(args: list[Any], kwargs: dict[str, Any]) -> None:
        await handle({"args": args, "kwargs": kwargs}, current_job())

    registry = Tasks()
    for path, (task, every, args, kwargs) in schedules.items():
        register = registry.periodic(
            every, queue=task.queue_name, name=path, kwargs={"args": args, "kwargs": kwargs}, priority=task.priority
        )
        register(fired)
    return registry


def _started(backend: Any, payload: Any, job: Any) -> tuple[Any, TaskResult]:
    """The Django task the job names, and its ``TaskResult`` as it starts (``RUNNING``)."""
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
    return task, result


def _arguments(task: Any, result: TaskResult) -> tuple[list[Any], dict[str, Any]]:
    """What the task is called with: a ``TaskContext`` first for ``takes_context`` tasks, then its arguments."""
    args = [TaskContext(task_result=result), *result.args] if task.takes_context else list(result.args)
    return args, dict(result.kwargs)


def _failed(result: TaskResult, exc: Exception) -> TaskResult:
    """``result`` finished as ``FAILED``, with the exception's class path and traceback as its error."""
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "status", TaskResultStatus.FAILED)
    failed = type(exc)
    path = f"{failed.__module__}.{failed.__qualname__}"
    result.errors.append(TaskError(exception_class_path=path, traceback="".join(format_exception(exc))))
    return result


def _succeeded(result: TaskResult, value: Any) -> TaskResult:
    """``result`` finished as ``SUCCESSFUL`` with ``value`` (normalised to JSON) as its return value."""
    object.__setattr__(result, "_return_value", value)
    object.__setattr__(result, "finished_at", timezone.now())
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    return result
