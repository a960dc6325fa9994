"""Running a Django task for an alkstore job: resolve it by module path, send Django's signals (ADR 039, 045).

The async worker's handler for every queue of the backend: it imports the task the job names (a
``django.tasks.Task`` at module level), calls it with the payload's ``args`` and ``kwargs`` (with
a ``TaskContext`` first for ``takes_context`` tasks), and sends ``task_started`` and
``task_finished`` around the call. An ``async def`` task is awaited on the worker's event loop; a
plain one runs, signals and all, on one of the worker's daemon threads, as a sync view would. Django's
stale connections are closed before and after each run, as a request would. A task that raises
fails the run: alkstore retries it, then keeps it dead. Its return value, normalised to JSON as
Django's own backends do (a value that is not JSON fails the run, as there), is the job's result.
Whatever a task raises fails its run, ``SystemExit`` included: ``task_finished`` says ``FAILED`` with
that exception's class, and the worker serves on (ADR 054).

Periodic tasks (``OPTIONS["schedules"]``) are registered in an ``alkstore.Tasks`` registry whose
every entry runs through the same handler, so a fired job and an enqueued one run alike.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from inspect import iscoroutinefunction
from queue import SimpleQueue
from traceback import format_exception
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.signals import task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from alkstore import Tasks, check_arguments, current_job

from .results import run_after_of

__all__ = ["DaemonThreads", "check_call", "handler_for", "periodic_registry", "stored_call"]


class DaemonThreads(Executor):
    """The threads plain tasks run on: an idle one is reused, else a new one starts, so no run waits.

    Daemon threads: a run that never returns (given up by the worker, its job handed back or its
    lease left to lapse) does not keep a stopped worker's process alive, as a
    ``ThreadPoolExecutor``'s threads, joined at exit, would. Its connections are the thread's
    own, kept between runs by Django's ``CONN_MAX_AGE``.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._work: SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run ``fn(*args, **kwargs)`` on an idle thread, or on a new one if none is idle."""
        future: Future[Any] = Future()
        self._work.put((future, functools.partial(fn, *args, **kwargs)))
        with self._lock:
            if self._idle:
                self._idle -= 1  # that thread's next item is this one
                return future
            self._threads += 1
            name = f"{self._name}-{self._threads}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Let the idle threads end (a running one ends after its run; none is waited for)."""
        with self._lock:
            count, self._threads = self._threads, 0
        for _ in range(count):
            self._work.put(None)

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(call())
                except BaseException as exc:
                    future.set_exception(exc)
            del future, call, item
            with self._lock:
                self._idle += 1


def handler_for(backend: Any, executor: Executor) -> Callable[[Any, Any], Awaitable[Any]]:
    """The async handler that runs the Django task each job of ``backend`` names (plain ones on ``executor``);
    it returns the task's return value normalised to JSON, which the worker's ack keeps (ADR 046)."""
    sender = type(backend)
    known: dict[tuple[str, int, str], tuple[Any, Any]] = {}

    def run_sync(task: Any, result: TaskResult) -> Any:
        close_old_connections()
        try:
            task_started.send(sender=sender, task_result=result)
            try:
                args, kwargs = _arguments(task, result)
                value = normalize_json(task.call(*args, **kwargs))
            except BaseException as exc:  # SystemExit too: the run fails, the worker serves on (ADR 054)
                task_finished.send(sender=sender, task_result=_failed(result, exc))
                raise
            task_finished.send(sender=sender, task_result=_succeeded(result, value))
            return value
        finally:
            close_old_connections()

    # asgiref's hints say ThreadPoolExecutor; it hands the call to ``loop.run_in_executor``, which any Executor serves.
    in_thread = sync_to_async(run_sync, thread_sensitive=False, executor=cast(ThreadPoolExecutor, executor))
    close_async = sync_to_async(close_old_connections)

    async def run_async(task: Any, result: TaskResult) -> Any:
        await close_async()
        try:
            await task_started.asend(sender=sender, task_result=result)
            try:
                args, kwargs = _arguments(task, result)
                value = normalize_json(await task.acall(*args, **kwargs))
            except BaseException as exc:
                if not _cancelled(exc):  # a run the worker cancels (its timeout, a drain's end) did not fail
                    await task_finished.asend(sender=sender, task_result=_failed(result, exc))
                raise
            await task_finished.asend(sender=sender, task_result=_succeeded(result, value))
            return value
        finally:
            await close_async()

    async def handle(payload: Any, job: Any) -> Any:
        task, result = _started(backend, payload, job, known)
        if iscoroutinefunction(task.func):
            return await run_async(task, result)
        return await in_thread(task, result)

    return handle


def periodic_registry(schedules: Mapping[str, Any], handle: Callable[[Any, Any], Awaitable[Any]]) -> Tasks:
    """An ``alkstore.Tasks`` of the periodic Django tasks (``backend.periodic()``), each run by ``handle``.

    Each is named by its module path, on its task's queue with its priority, firing the payload
    ``{"args": …, "kwargs": …}`` an enqueue writes; the worker registers the schedules when it starts.
    """

    async def fired(args: list[Any], kwargs: dict[str, Any]) -> Any:
        return await handle({"args": args, "kwargs": kwargs}, current_job())

    registry = Tasks()
    for path, (task, every, args, kwargs) in schedules.items():
        register = registry.periodic(
            every, queue=task.queue_name, name=path, kwargs={"args": args, "kwargs": kwargs}, priority=task.priority
        )
        register(fired)
    return registry


def _started(
    backend: Any, payload: Any, job: Any, known: dict[tuple[str, int, str], tuple[Any, Any]] | None = None
) -> tuple[Any, TaskResult]:
    """The Django task the job names, and its ``TaskResult`` as it starts (``RUNNING``).

    ``known`` keeps each task as ``using`` made it for a job's priority and queue (a new, validated
    ``Task`` each time), keyed by module path, priority and queue, while that path still names the
    same object: the next job of the same kind reuses it.
    """
    if job.task is None:
        raise ValueError(f"job {job.id} names no task; the Django worker runs only jobs of Django tasks")
    found = import_string(job.task)
    if not isinstance(payload, dict):
        kind = type(payload).__name__
        raise TypeError(f"the payload of a Django task's job is {{'args': …, 'kwargs': …}}, not {kind}")
    if not isinstance(found, backend.task_class):
        raise TypeError(f"{job.task!r} is not a Django task (a django.tasks.Task), but {type(found).__name__}")
    run_after = run_after_of(payload)
    if run_after is not None:  # the task as enqueued (a deferred one: rarer, made afresh)
        task = found.using(priority=job.priority, queue_name=job.queue, backend=backend.alias, run_after=run_after)
    else:
        key = (job.task, job.priority, job.queue)
        made = known.get(key) if known is not None else None
        if made is None or made[0] is not found:
            made = (found, found.using(priority=job.priority, queue_name=job.queue, backend=backend.alias))
            if known is not None:
                known[key] = made
        task = made[1]
    started = job.claimed_at or timezone.now()  # its claim's instant, as get_result reads it (ADR 064)
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


def stored_call(args: list[Any], kwargs: dict[str, Any], run_after: str | None = None) -> None:
    """The call a Django task's job stores, as its alkstore task's signature: its ``args`` and ``kwargs``, and
    the task's ``run_after`` (ISO 8601) when it was enqueued with one."""


def check_call(task: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Refuse (``InvalidArgument``, a ``TypeError``) arguments the task's function cannot be called with as
    ``_arguments`` will call it, a ``TaskContext`` first for a ``takes_context`` task (ADR 055)."""
    context = (None,) if task.takes_context else ()
    check_arguments(task.module_path, task.func, *context, *args, **kwargs)


def _cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is the cancellation of the running task (the worker's), not one the task raised itself."""
    task = asyncio.current_task()
    return isinstance(exc, asyncio.CancelledError) and task is not None and task.cancelling() > 0


def _failed(result: TaskResult, exc: BaseException) -> TaskResult:
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
