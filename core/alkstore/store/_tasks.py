"""Tasks: named functions a worker runs for the jobs of a queue (ADR 021).

A ``Tasks`` registry does no I/O and can be imported anywhere: the application that enqueues
and the worker that runs share it. Each task belongs to one queue (several may share one); a
job records which task it is for (its ``task``), and its payload is the task's keyword
arguments, as JSON. A periodic task is also registered as a schedule (``@every``) when a worker
serving it starts. A courier names the delivery of an outbox's messages: a worker serving the
outbox delivers them as it runs jobs (ADR 057).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.rules._args import check_call, signature_of
from alkstore.rules._graphs import Graph
from alkstore.rules._names import outbox_queue, validate_label, validate_name
from alkstore.rules._options import EnqueueOpts, ScheduleOpts, as_duration, check_key
from alkstore.rules._records import JobId
from alkstore.rules._spec import parse_spec

from ._kernel import kernel_of
from ._kernel_async import kernel_of as async_kernel_of

if TYPE_CHECKING:
    from ._job import Job
    from ._job_async import AsyncJob
    from ._store import Store
    from ._store_async import AsyncStore

__all__ = [
    "Courier",
    "KeyRule",
    "Periodic",
    "Task",
    "TaskKeys",
    "Tasks",
    "check_arguments",
    "current_job",
    "set_current",
]

P = ParamSpec("P")
R = TypeVar("R")

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("alkstore_current_job", default=None)


def current_job() -> Any:
    """The job the calling run is for (``InvalidArgument`` outside a job run by a worker).

    A ``Job`` under the sync ``Worker``, an ``AsyncJob`` under ``AsyncWorker`` (in an ``async def``
    task and in a plain one it runs on a thread alike). A task that runs long can look at
    ``current_job().stop``: it is cancelled when the job's lease was lost, its timeout passed, or
    the worker is stopping at once; the task should then return (or raise) soon, since its
    outcome will no longer count.
    """
    job = _current.get()
    if job is None:
        raise InvalidArgument("current_job() is called outside a job run by a worker")
    return job


def set_current(job: Job | AsyncJob | None) -> None:
    """Make ``job`` what ``current_job()`` answers in the calling thread or task (the worker's)."""
    _current.set(job)


#: A task's key for a run: a template formatted with the run's keyword arguments (``"user:{user_id}"``),
#: or a function of them.
KeyRule = str | Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class TaskKeys:
    """How a task keys each run: its ``unique_key`` (held while running too with ``unique_running``,
    ADR 031), ``ordering_key`` (ADR 032) and ``rate_key`` (ADR 070), from its arguments."""

    unique: KeyRule | None = None
    ordering: KeyRule | None = None
    unique_running: bool = False
    rate: KeyRule | None = None

    def of(self, payload: Mapping[str, Any]) -> tuple[str | None, bool, str | None, str | None]:
        """The run's (unique key, unique_running, ordering key, rate key); ``InvalidArgument`` when a rule
        cannot make one."""
        return (
            _key(self.unique, payload, "unique_key"),
            self.unique_running,
            _key(self.ordering, payload, "ordering_key"),
            _key(self.rate, payload, "rate_key"),
        )


def _key(rule: KeyRule | None, payload: Mapping[str, Any], what: str) -> str | None:
    if rule is None:
        return None
    try:
        key = rule.format_map(payload) if isinstance(rule, str) else rule(payload)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise InvalidArgument(f"the task's {what} rule cannot key this run: {type(exc).__name__}: {exc}") from None
    return check_key(key, what)


@dataclass(frozen=True)
class Task(Generic[P, R]):
    """A registered task: call it to run the function in-process, ``enqueue`` it to have a worker run it."""

    name: str
    queue: str
    func: Callable[P, R]
    opts: EnqueueOpts
    timeout: timedelta | None
    keys: TaskKeys | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<alkstore.Task {self.name!r} on {self.queue!r}>"

    @cached_property
    def _signature(self) -> inspect.Signature | None:
        """The function's signature, read once: every enqueue binds its arguments to it (ADR 055)."""
        return signature_of(self.func)

    # The sync runtime's enqueues, then the async runtime's (``a``-prefixed): each builds the payloads
    # here, each bound to the function first (ADR 055), and hands them, with the task's name, options
    # and keys, to the store's kernel, which does what a store's enqueue does.

    def enqueue(self, store: Store, /, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """Enqueue a run of this task with these keyword arguments, in a transaction of its own."""
        payloads = (_payload(self, args, kwargs),)
        return kernel_of(store).enqueue(self.queue, payloads, self.opts, **self._as)[0]

    def enqueue_tx(self, store: Store, tx: Any, /, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """Enqueue a run of this task inside the caller's transaction ``tx``."""
        payloads = (_payload(self, args, kwargs),)
        return kernel_of(store).enqueue(self.queue, payloads, self.opts, tx, in_caller_tx=True, **self._as)[0]

    def enqueue_many(self, store: Store, calls: Iterable[Mapping[str, Any]], /) -> list[JobId]:
        """Enqueue one run per mapping of keyword arguments, in one transaction of their own; the ids in order."""
        payloads = _payloads(self, calls)
        return kernel_of(store).enqueue(self.queue, payloads, self.opts, **self._as)

    def enqueue_many_tx(self, store: Store, tx: Any, calls: Iterable[Mapping[str, Any]], /) -> list[JobId]:
        """``enqueue_many`` inside the caller's transaction ``tx``."""
        payloads = _payloads(self, calls)
        return kernel_of(store).enqueue(self.queue, payloads, self.opts, tx, in_caller_tx=True, **self._as)

    async def aenqueue(self, store: AsyncStore, /, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """``enqueue`` on an ``AsyncStore``."""
        payloads = (_payload(self, args, kwargs),)
        return (await async_kernel_of(store).enqueue(self.queue, payloads, self.opts, **self._as))[0]

    async def aenqueue_tx(self, store: AsyncStore, tx: Any, /, *args: P.args, **kwargs: P.kwargs) -> JobId:
        """``enqueue_tx`` on an ``AsyncStore``, inside the caller's async transaction ``tx``."""
        payloads = (_payload(self, args, kwargs),)
        kernel = async_kernel_of(store)
        return (await kernel.enqueue(self.queue, payloads, self.opts, tx, in_caller_tx=True, **self._as))[0]

    async def aenqueue_many(self, store: AsyncStore, calls: Iterable[Mapping[str, Any]], /) -> list[JobId]:
        """``enqueue_many`` on an ``AsyncStore``."""
        payloads = _payloads(self, calls)
        return await async_kernel_of(store).enqueue(self.queue, payloads, self.opts, **self._as)

    async def aenqueue_many_tx(self, store: AsyncStore, tx: Any, calls: Iterable[Mapping[str, Any]], /) -> list[JobId]:
        """``enqueue_many_tx`` on an ``AsyncStore``."""
        payloads = _payloads(self, calls)
        kernel = async_kernel_of(store)
        return await kernel.enqueue(self.queue, payloads, self.opts, tx, in_caller_tx=True, **self._as)

    def s(self, /, *args: P.args, **kwargs: P.kwargs) -> Graph:
        """A run of this task with these keyword arguments, not yet enqueued: a graph of one job (keyed by the
        task's name) for ``chain``, ``group`` and ``chord``, or ``Store.enqueue_graph`` (ADR 073)."""
        payload = _payload(self, args, kwargs)
        graph = Graph()
        graph.add(self.name, self.queue, payload, self.opts, task=self.name)
        return graph

    @property
    def _as(self) -> dict[str, Any]:
        """What an enqueue of this task's runs tells the kernel beyond the payloads: whose they are, their keys."""
        return {"task": self.name, "keys": None if self.keys is None else self.keys.of}

    def with_options(self, opts: EnqueueOpts) -> Task[P, R]:
        """The same task enqueued with other options (a delay, a priority, keys, …) for this once."""
        if not isinstance(opts, EnqueueOpts):
            raise InvalidOptions(f"opts must be EnqueueOpts, not {type(opts).__name__}")
        return Task(self.name, self.queue, self.func, _merged(self.opts, opts), self.timeout, self.keys)


@dataclass(frozen=True)
class Periodic:
    """A task that also fires on a schedule: every ``spec``, a run with ``kwargs``."""

    task: Task[..., Any]
    spec: str
    kwargs: Mapping[str, Any]
    opts: ScheduleOpts


@dataclass(frozen=True)
class Courier:
    """The delivery of an outbox's messages: ``delivery(payload, job)`` for each, raising on failure.

    A worker serving the outbox claims its messages from the backing queue with its jobs, runs
    ``delivery`` in one of its slots (at most ``timeout`` long) and acks, retries on the outbox's
    curve or buries each as it does a job (ADR 057).
    """

    outbox: str
    delivery: Callable[[Any, Any], object]
    name: str
    timeout: timedelta | None = None

    @property
    def queue(self) -> str:
        """The outbox's backing queue, which the worker claims from."""
        return outbox_queue(self.outbox)

    def __repr__(self) -> str:
        return f"<alkstore.Courier {self.name!r} of outbox {self.outbox!r}>"


class Tasks:
    """A registry of tasks (and periodic tasks), and of outboxes' couriers, by name; it does no I/O."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task[..., Any]] = {}
        self._periodic: dict[str, Periodic] = {}
        self._couriers: dict[str, Courier] = {}

    def __repr__(self) -> str:
        return f"<alkstore.Tasks {sorted(self._tasks)}>"

    def __iter__(self) -> Iterator[Task[..., Any]]:
        return iter(self._tasks[name] for name in sorted(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def get(self, name: str) -> Task[..., Any] | None:
        """The task registered as ``name``, or ``None``."""
        return self._tasks.get(name)

    @property
    def queues(self) -> list[str]:
        """Every queue a registered task belongs to, in name order."""
        return sorted({task.queue for task in self._tasks.values()})

    @property
    def periodic_tasks(self) -> list[Periodic]:
        """The periodic tasks, by name."""
        return [self._periodic[name] for name in sorted(self._periodic)]

    @property
    def couriers(self) -> list[Courier]:
        """The outboxes' couriers, by outbox name."""
        return [self._couriers[name] for name in sorted(self._couriers)]

    def task(
        self,
        name: str | None = None,
        *,
        queue: str,
        max_attempts: int | None = None,
        priority: int | None = None,
        timeout: float | timedelta | None = None,
        visibility_timeout: float | timedelta | None = None,
        expires: float | timedelta | None = None,
        unique_key: KeyRule | None = None,
        unique_running: bool = False,
        ordering_key: KeyRule | None = None,
        rate_key: KeyRule | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register the decorated function as a task of ``queue``.

        ``name`` defaults to ``module:qualname``; the stamps (``max_attempts``, ``priority``,
        ``visibility_timeout``, relative ``expires``) apply to every run unless an enqueue says
        otherwise; ``timeout`` bounds each run (the worker gives the job up after it).
        ``unique_key``, ``ordering_key`` and ``rate_key`` key each run from its keyword arguments: a
        template (``"sync-user:{user_id}"``) or a function of them (ADR 031, 032, 070). Every enqueue binds its
        arguments to the function's signature first: ``InvalidArgument`` for a missing or unexpected
        one, and nothing is written (ADR 055).
        """
        validate_name(queue, "queue")
        for rule, what in ((unique_key, "unique_key"), (ordering_key, "ordering_key"), (rate_key, "rate_key")):
            if rule is not None and not isinstance(rule, str) and not callable(rule):
                raise InvalidOptions(f"{what} must be a template str or a function of the run's arguments")
        if unique_running and unique_key is None:
            raise InvalidOptions("unique_running says how long a unique_key holds: give one")
        opts = EnqueueOpts(
            priority=priority, max_attempts=max_attempts, expires=expires, visibility_timeout=visibility_timeout
        )
        keys = None
        if unique_key is not None or ordering_key is not None or rate_key is not None:
            keys = TaskKeys(unique_key, ordering_key, unique_running, rate_key)
        limit = None if timeout is None else as_duration(timeout, "timeout", allow_zero=False)
        if name is not None:
            validate_label(name, "task")

        def register(func: Callable[P, R]) -> Task[P, R]:
            if not callable(func):
                raise InvalidArgument(f"a task must be a function, not {type(func).__name__}")
            task_name = _name_of(name, func)
            validate_label(task_name, "task")
            if task_name in self._tasks:
                raise InvalidOptions(f"a task named {task_name!r} is already registered")
            task = Task(task_name, queue, func, opts, limit, keys)
            self._tasks[task_name] = task
            return task

        return register

    def periodic(
        self,
        spec: str,
        *,
        queue: str,
        name: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
        max_attempts: int | None = None,
        priority: int | None = None,
        timeout: float | timedelta | None = None,
        expires: float | timedelta | None = None,
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register the decorated function as a task of ``queue`` that also fires every ``spec``.

        A worker serving ``queue`` registers the schedule (named like the task) when it starts;
        re-registering keeps the phase, so restarts never shift or lose fires. ``kwargs`` are the
        keyword arguments of every fired run (``InvalidArgument`` here when they do not bind, ADR 055).
        """
        parse_spec(spec)
        fired = dict(kwargs or {})
        schedule_opts = ScheduleOpts(priority=priority, max_attempts=max_attempts, expires=expires)
        register_task = self.task(name, queue=queue, max_attempts=max_attempts, priority=priority, timeout=timeout)

        def register(func: Callable[P, R]) -> Task[P, R]:
            if callable(func):  # every fire would fail: refuse it now (anything else the registration refuses)
                check_call(_name_of(name, func), signature_of(func), (), fired)
            task = register_task(func)
            self._periodic[task.name] = Periodic(task, spec, fired, schedule_opts)
            return task

        return register

    def courier(
        self, outbox: str, *, timeout: float | timedelta | None = None
    ) -> Callable[[Callable[[Any, Any], R]], Callable[[Any, Any], R]]:
        """Register the decorated function as the delivery of ``outbox``'s messages (one per outbox).

        It is called as ``delivery(payload, job)``, as ``Outbox.run_once`` calls it; a worker serving
        the outbox delivers its messages as they are written, retried on the outbox's curve when the
        delivery raises. ``timeout`` bounds each delivery (the worker gives the message up after it,
        and it is retried). The function is returned as it is.
        """
        validate_name(outbox, "outbox")
        limit = None if timeout is None else as_duration(timeout, "timeout", allow_zero=False)
        if outbox in self._couriers:
            raise InvalidOptions(f"outbox {outbox!r} already has a courier: {self._couriers[outbox].name!r}")

        def register(delivery: Callable[[Any, Any], R]) -> Callable[[Any, Any], R]:
            if not callable(delivery):
                raise InvalidArgument(f"a delivery must be a function, not {type(delivery).__name__}")
            if outbox in self._couriers:
                raise InvalidOptions(f"outbox {outbox!r} already has a courier: {self._couriers[outbox].name!r}")
            name = getattr(delivery, "__qualname__", type(delivery).__qualname__)
            label = f"{getattr(delivery, '__module__', None) or type(delivery).__module__}:{name}"
            self._couriers[outbox] = Courier(outbox, delivery, label, limit)
            return delivery

        return register


def _name_of(name: str | None, func: Callable[..., Any]) -> str:
    """A task's name: the one given, else its function's ``module:qualname``."""
    return name if name is not None else f"{func.__module__}:{func.__qualname__}"


def check_arguments(task: str, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Refuse (``InvalidArgument``, naming ``task`` and the argument) arguments ``func`` cannot be called with.

    What every ``Task`` enqueue checks of its run before any I/O (ADR 055), for code that stores calls of
    its own shape and makes them itself (the Django backend: a task's ``args`` and ``kwargs``).
    """
    check_call(task, signature_of(func), args, kwargs)


def _payload(task: Task[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """A run's payload: its keyword arguments (tasks take them by name, so a payload reads as a call), bound
    to the task's function (``InvalidArgument`` when they cannot be)."""
    if args:
        raise InvalidArgument(f"task {task.name!r} takes its arguments by keyword, so that jobs read as calls")
    check_call(task.name, task._signature, (), kwargs)
    return kwargs


def _payloads(task: Task[..., Any], calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The payloads of several runs: each call's keyword arguments (a mapping with string keys), each bound to
    the task's function; one that is not refuses them all."""
    if isinstance(calls, str | bytes | Mapping) or not isinstance(calls, Iterable):
        raise InvalidArgument(
            f"task {task.name!r}: calls must be an iterable of keyword mappings, not {type(calls).__name__}"
        )
    payloads = []
    for call in calls:
        if not isinstance(call, Mapping) or not all(isinstance(key, str) for key in call):
            raise InvalidArgument(
                f"task {task.name!r}: each call is a mapping of keyword arguments by name, not {type(call).__name__}"
            )
        payload = dict(call)
        check_call(task.name, task._signature, (), payload)
        payloads.append(payload)
    return payloads


def _merged(base: EnqueueOpts, override: EnqueueOpts) -> EnqueueOpts:
    """``override``'s options where it sets them, ``base``'s elsewhere."""
    fields = (
        "delay",
        "run_at",
        "priority",
        "max_attempts",
        "expires",
        "visibility_timeout",
        "unique_key",
        "ordering_key",
        "rate_key",
    )
    values = {
        field: getattr(override, field) if getattr(override, field) is not None else getattr(base, field)
        for field in fields
    }
    if override.run_at is not None:
        values["delay"] = None
    if override.delay is not None:
        values["run_at"] = None
    values["unique_running"] = override.unique_running if override.unique_key is not None else base.unique_running
    values["after"] = override.after or base.after
    values["on_parent_failure"] = override.on_parent_failure if override.after else base.on_parent_failure
    return EnqueueOpts(**values)
