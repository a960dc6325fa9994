"""``AlkstoreBackend``: Django's task backend contract over an alkstore store (ADR 039, 045).

A Django task becomes an alkstore job of the queue named by ``queue_name``: its task name is the
task's module path, its payload ``{"args": [...], "kwargs": {...}}`` (JSON), its priority the
task's (both orders put higher first, so the number is kept as it is), its ``run_at`` the task's
``run_after``. The result id is the job's id, as a string.

Inside ``transaction.atomic()`` on the configured database the job is written on Django's own
connection (its psycopg 3 connection, or on SQLite its ``sqlite3`` connection to the same file,
through the store's caller-transaction path): it commits or rolls back with the caller's data.
Outside one it is written, and committed, on the store's own pool (on SQLite, its connection).
``aenqueue`` writes on an ``AsyncStore`` of the caller's event loop, committed at once, unless the
thread where Django runs the caller's sync code is inside ``atomic()``: then it is ``enqueue``
there, in that transaction (ADR 045).

Over 500 lines: Django's backend contract is one class (enqueue and aenqueue, in and out of a
caller's transaction, on PostgreSQL and on SQLite, results, checks); the result mapping and the
database probing are modules of their own already (``results``, ``_database``).
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import weakref
from collections.abc import Mapping
from dataclasses import fields
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import connections, transaction
from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

import alkstore
from alkstore import (
    AlkstoreError,
    AsyncStore,
    EnqueueOpts,
    JobInfo,
    JobResult,
    QueueDefaults,
    Store,
    Tasks,
    parse_spec,
)

from ._database import (
    POSTGRES_ENGINE,
    SQLITE_ENGINE,
    astored_at,
    database_url,
    in_transaction,
    job_id_of,
    sqlite_file,
    store_url,
    stored_at,
)
from .results import kept_result_of, result_of, run_after_of, task_error
from .runner import check_call, stored_call

__all__ = ["DEFAULT_OPTIONS", "AlkstoreBackend", "database_url", "task_error"]

#: What ``OPTIONS`` may say, and what each is when it does not.
#: ``keep_results`` is how long (seconds) a finished task's result is kept for ``get_result``: a
#: day by default, so that the result of a task that just finished can be read (``None``: not kept).
DEFAULT_OPTIONS: Mapping[str, Any] = {
    "database": "default",
    "schema": "alkstore",
    "max_size": 4,
    "schedules": {},
    "keep_results": 86400,
}

#: The Django application of the backend, whose management commands migrate and run it.
APP = "alkstore.adapters.django"

#: A schema name as the Postgres adapter accepts one (a plain identifier).
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: One store per (URL, schema, pool bound), shared by every thread's backend instance.
_stores: dict[tuple[str, str, int], Store] = {}
_stores_lock = threading.Lock()

#: The async runtime's likewise, per event loop (an ``AsyncStore`` lives on one), each with the
#: task that closes it when its loop shuts down (``asyncio.run`` and ``Runner`` cancel a loop's
#: tasks, so the store's pool is closed while the loop still runs; ADR 046).
_async_stores: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str, int], tuple[AsyncStore, asyncio.Task[None]]]
] = weakref.WeakKeyDictionary()


async def _closed_with_the_loop(store: AsyncStore) -> None:
    """Wait until cancelled (as a loop's tasks are when it shuts down), then close ``store``.

    A task, not an async generator: ``asyncio.run`` cancels every task before it closes async
    generators, and a pool worker cancelled in the middle of its work carries on waiting for
    more (psycopg's pool catches the cancel), which only the pool's close ends.
    """
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        await store.close()


class AlkstoreBackend(BaseTaskBackend):
    """Django tasks enqueued as alkstore jobs, on the PostgreSQL (or SQLite) database Django already uses."""

    #: ``run_after`` becomes the job's ``run_at``.
    supports_defer = True
    #: The worker (``AsyncWorker``) awaits ``async def`` tasks on its loop, and runs plain ones on threads.
    supports_async_task = True
    #: alkstore claims higher priorities first, as Django orders them.
    supports_priority = True
    #: ``True`` unless ``OPTIONS["keep_results"]`` is ``None`` (set per instance): the backend's queues
    #: then keep a finished task's result, which ``get_result`` reads from any process (ADR 046).
    supports_get_result = False

    def __init__(self, alias: str, params: Mapping[str, Any]) -> None:
        super().__init__(alias, params)
        self.database: str = self.options.get("database", DEFAULT_OPTIONS["database"])
        self.schema: str = self.options.get("schema", DEFAULT_OPTIONS["schema"])
        self.max_size: int = self.options.get("max_size", DEFAULT_OPTIONS["max_size"])
        self.schedules: Any = self.options.get("schedules", DEFAULT_OPTIONS["schedules"])
        self.keep_results: Any = self.options.get("keep_results", DEFAULT_OPTIONS["keep_results"])
        self.supports_get_result = self.keep_results is not None
        #: The store's key, worked out for the settings of the database it was worked out from (a test
        #: that overrides ``DATABASES`` gets a new one), and each task's alkstore twin: an enqueue reads both.
        self._store_key: tuple[object, tuple[str, str, int]] | None = None
        #: The store, for the ``DATABASES`` entry it was found for (as ``_store_key``): read by every enqueue.
        self._store: tuple[object, Store] | None = None
        self._twins: dict[tuple[str, str, int], Any] = {}

    # -- configuration -------------------------------------------------------------------

    def _errors(self) -> list[checks.CheckMessage]:
        where = f"TASKS[{self.alias!r}]"
        errors: list[checks.CheckMessage] = []
        unknown = sorted(set(self.options) - set(DEFAULT_OPTIONS))
        if unknown:
            errors.append(
                checks.Error(
                    f"{where}['OPTIONS'] has unknown entries: {', '.join(unknown)}",
                    hint=f"the alkstore backend reads only {', '.join(sorted(DEFAULT_OPTIONS))}",
                    id="alkstore.E001",
                )
            )
        if self.database not in settings.DATABASES:
            errors.append(
                checks.Error(
                    f"{where}['OPTIONS']['database'] is {self.database!r}, which is not in DATABASES",
                    hint=f"name one of: {', '.join(sorted(settings.DATABASES))}",
                    id="alkstore.E002",
                )
            )
        elif settings.DATABASES[self.database].get("ENGINE") not in (POSTGRES_ENGINE, SQLITE_ENGINE):
            errors.append(
                checks.Error(
                    f"DATABASES[{self.database!r}] is neither PostgreSQL nor SQLite, so alkstore cannot store its"
                    " jobs there",
                    hint=f"point {where}['OPTIONS']['database'] at a database whose ENGINE is {POSTGRES_ENGINE!r}"
                    f" or {SQLITE_ENGINE!r}",
                    id="alkstore.E003",
                )
            )
        elif settings.DATABASES[self.database]["ENGINE"] == SQLITE_ENGINE and not sqlite_file(
            settings.DATABASES[self.database]
        ):
            errors.append(
                checks.Error(
                    f"DATABASES[{self.database!r}] is a SQLite database in memory (or a file: URI), which"
                    " alkstore's workers cannot open",
                    hint="give it a file as NAME (and its TEST NAME a file too, for Django's test runner)",
                    id="alkstore.E003",
                )
            )
        if not isinstance(self.schema, str) or not _SCHEMA.match(self.schema):
            errors.append(
                checks.Error(
                    f"{where}['OPTIONS']['schema'] is {self.schema!r}, not a plain PostgreSQL schema name",
                    hint="lower-case letters, digits and underscores, not starting with a digit (e.g. 'alkstore')",
                    id="alkstore.E004",
                )
            )
        if not isinstance(self.max_size, int) or isinstance(self.max_size, bool) or self.max_size < 1:
            errors.append(
                checks.Error(
                    f"{where}['OPTIONS']['max_size'] is {self.max_size!r}, not a positive whole number",
                    hint="the most connections the backend's own pool opens (default 4)",
                    id="alkstore.E005",
                )
            )
        keep = self.keep_results
        if keep is not None and (not isinstance(keep, int | float) or isinstance(keep, bool) or not 0 < keep < 1e9):
            errors.append(
                checks.Error(
                    f"{where}['OPTIONS']['keep_results'] is {keep!r}, not a positive number of seconds or None",
                    hint="how long a finished task's result is kept for get_result (default 86400, a day; "
                    "None: not kept)",
                    id="alkstore.E008",
                )
            )
        for queue in sorted(self.queues):
            try:
                Tasks().task(queue=queue)
            except AlkstoreError as exc:
                errors.append(
                    checks.Error(
                        f"{where}['QUEUES'] has {queue!r}, which alkstore refuses as a queue name: {exc}",
                        hint="queue names are printable, without leading or trailing white space, at most 200 "
                        "characters, and do not start with alkstore's reserved prefix",
                        id="alkstore.E006",
                    )
                )
        return errors

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Django's system checks: the OPTIONS, the database they name, the queue names and the schedules."""
        return [*super().check(**kwargs), *self._app_errors(), *self._errors(), *self._schedule_errors()]

    def _app_errors(self) -> list[checks.CheckMessage]:
        """The app missing from ``INSTALLED_APPS``: its commands (``alkstore_migrate``, ``alkstore_worker``) with it."""
        if apps.is_installed(APP):
            return []
        return [
            checks.Error(
                f"TASKS[{self.alias!r}] uses the alkstore backend, but {APP!r} is not in INSTALLED_APPS",
                hint=f"add {APP!r} to INSTALLED_APPS: its commands create the schema and run the worker",
                id="alkstore.E009",
            )
        ]

    def _schedule_errors(self) -> list[checks.CheckMessage]:
        try:
            self.periodic()
        except InvalidTask as exc:
            hint = (
                'a mapping of task module paths to "@every <n><s|m|h|d>", or to {"every": …, "args": [...], '
                '"kwargs": {...}}'
            )
            message = f"TASKS[{self.alias!r}]['OPTIONS']['schedules']: {exc}"
            return [checks.Error(message, hint=hint, id="alkstore.E007")]
        return []

    def periodic(self) -> dict[str, tuple[Any, str, list[Any], dict[str, Any]]]:
        """The periodic tasks of ``OPTIONS["schedules"]``: by module path, (task, spec, args, kwargs).

        ``InvalidTask`` names the first entry that is not a task of this backend's queues with a
        valid ``@every`` spec and JSON arguments.
        """
        if not isinstance(self.schedules, Mapping):
            raise InvalidTask(f"is a {type(self.schedules).__name__}, not a mapping of task paths to schedules")
        found: dict[str, tuple[Any, str, list[Any], dict[str, Any]]] = {}
        for path, entry in self.schedules.items():
            spec = entry if isinstance(entry, str) else entry.get("every") if isinstance(entry, Mapping) else None
            extra = set(entry) - {"every", "args", "kwargs"} if isinstance(entry, Mapping) else set()
            if not isinstance(spec, str) or extra:
                raise InvalidTask(f"{path!r} has no 'every' spec, or entries other than every, args and kwargs")
            try:
                task = import_string(str(path))
            except ImportError as exc:
                raise InvalidTask(f"{path!r} cannot be imported: {exc}") from exc
            if not isinstance(task, self.task_class):
                raise InvalidTask(f"{path!r} is not a Django task (a django.tasks.Task)")
            args = entry.get("args", []) if isinstance(entry, Mapping) else []
            kwargs = entry.get("kwargs", {}) if isinstance(entry, Mapping) else {}
            try:
                parse_spec(spec)
                self.validate_task(task)
                args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
                check_call(task, args, kwargs)
            except (AlkstoreError, InvalidTask, TypeError, ValueError) as exc:
                raise InvalidTask(f"{path!r}: {exc}") from exc
            found[task.module_path] = (task, spec, args, kwargs)
        return found

    def _key(self) -> tuple[str, str, int]:
        """The store's URL, schema and pool bound, checked once per ``DATABASES`` entry it comes from
        (``InvalidTask`` when the backend is misconfigured)."""
        entry = settings.DATABASES.get(self.database)
        if self._store_key is not None and self._store_key[0] is entry:
            return self._store_key[1]
        errors = self._errors()
        if errors:
            raise InvalidTask(f"the alkstore backend {self.alias!r} is misconfigured: {errors[0].msg}")
        key = (store_url(settings.DATABASES[self.database]), self.schema, self.max_size)
        self._store_key = (entry, key)
        return key

    @property
    def store(self) -> Store:
        """The store this backend writes through outside a transaction (opened at first use, then shared).

        Found once per ``DATABASES`` entry, as its key is: a test that overrides ``DATABASES`` gets the
        store of its settings, and stores are never closed while the process runs.
        """
        entry = settings.DATABASES.get(self.database)
        found = self._store
        if found is not None and found[0] is entry:
            return found[1]
        key = self._key()
        url = key[0]
        with _stores_lock:
            store = _stores.get(key)
            if store is None:
                store = _stores[key] = alkstore.open(url, **self._options(url))
        self._store = (entry, store)
        return store

    def _options(self, url: str, **options: Any) -> dict[str, Any]:
        """What ``alkstore.open`` takes for ``url`` besides it: ``schema`` and ``max_size`` on PostgreSQL, with
        ``options`` over them. On SQLite there is no schema or pool (the tables live in the project's file, next
        to Django's, each named ``alkstore_…``): pool sizes and an empty ``grant`` are dropped, and the store
        migrates only when told to (``alkstore_migrate``), as on PostgreSQL."""
        if not url.startswith("sqlite:"):
            return {"schema": self.schema, "max_size": self.max_size, **options}
        dropped = {"max_size", "min_size"}
        given = {name: value for name, value in options.items() if name not in dropped}
        if not given.get("grant", True):
            del given["grant"]
        return {"migrate": False, **given}

    def open_store(self, **options: Any) -> Store:
        """A store of its own on the backend's database and schema (for commands: ``migrate=True``, …)."""
        url = store_url(settings.DATABASES[self.database])
        return alkstore.open(url, **self._options(url, **options))

    async def open_async_store(self, **options: Any) -> AsyncStore:
        """``open_store`` in the async runtime (the worker's)."""
        url = store_url(settings.DATABASES[self.database])
        return await alkstore.open_async(url, **self._options(url, **options))

    async def astore(self) -> AsyncStore:
        """The ``AsyncStore`` of the running event loop that ``aenqueue`` writes through (opened at first
        use on that loop, closed when the loop shuts down)."""
        key = self._key()
        url = key[0]
        opened = _async_stores.setdefault(asyncio.get_running_loop(), {})
        if key not in opened:
            store = await alkstore.open_async(url, **self._options(url))
            if key in opened:  # another task of this loop opened one meanwhile
                await store.close()
            else:
                lifetime = asyncio.get_running_loop().create_task(_closed_with_the_loop(store), name="alkstore-django")
                opened[key] = (store, lifetime)
        return opened[key][0]

    # -- kept results ------------------------------------------------------------------

    def keeping(self, defaults: QueueDefaults) -> dict[str, Any] | None:
        """What ``Queue.configure`` is given for a queue of ``defaults`` to keep results as ``OPTIONS`` say:
        its settings as they are with ``keep_results`` changed; ``None`` when nothing is to change.

        ``configure`` replaces a queue's stored settings, so the others are given as they are now.
        """
        if self.keep_results is None or defaults.keep_results == timedelta(seconds=self.keep_results):
            return None
        now = {field.name: getattr(defaults, field.name) for field in fields(defaults)}
        return {**now, "keep_results": self.keep_results}

    def configure_queues(self, store: Store) -> None:
        """Have the backend's queues keep results as ``OPTIONS["keep_results"]`` says (``alkstore_migrate``)."""
        for queue in sorted(self.queues):
            wanted = self.keeping(store.queue(queue).defaults())
            if wanted is not None:
                store.queue(queue).configure(**wanted)

    async def aconfigure_queues(self, store: AsyncStore) -> None:
        """``configure_queues`` on an ``AsyncStore`` (the worker's, before it claims)."""
        for queue in sorted(self.queues):
            wanted = self.keeping(await store.queue(queue).defaults())
            if wanted is not None:
                await store.queue(queue).configure(**wanted)

    # -- enqueue -------------------------------------------------------------------------

    def validate_task(self, task: Any) -> None:
        """Django's checks, and alkstore's rules for the names (a queue alkstore refuses is an invalid task)."""
        super().validate_task(task)
        self._twin(task)

    def _twin(self, task: Any) -> Any:
        """The alkstore task a Django task is enqueued as (its name, queue and priority checked by alkstore's
        rules once, then kept): ``InvalidTask`` for one alkstore refuses. Its runs take the job's payload,
        ``args`` and ``kwargs`` (``runner.stored_call``)."""
        key = (task.module_path, task.queue_name, task.priority)
        twin = self._twins.get(key)
        if twin is None:
            try:
                twin = Tasks().task(task.module_path, queue=task.queue_name, priority=task.priority)(stored_call)
            except AlkstoreError as exc:
                raise InvalidTask(
                    f"alkstore cannot enqueue {task.module_path!r} on {task.queue_name!r}: {exc}"
                ) from exc
            twin = self._twins.setdefault(key, twin)
        return twin

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Write the job: in the caller's transaction inside ``atomic()`` on the backend's database, else alone.

        The result's ``enqueued_at`` is the job's stored instant, read back once the job is committed: at
        once outside a transaction; inside ``atomic()``, the store's clock until the caller's commit, then
        the stored instant (a job rolled back keeps the clock's; so does one written with autocommit
        turned off, which has no commit hook)."""
        result, job, payload = self._prepare(task, args, kwargs)
        store = self.store  # InvalidTask if misconfigured, so the database is in DATABASES from here
        connection = connections[self.database]
        if in_transaction(connection):
            connection.ensure_connection()
            job_id = job.enqueue_tx(store, connection.connection, **payload)
            self._enqueued(result, job_id, store.clock.now())
            if connection.in_atomic_block:  # (autocommit turned off by hand has no commit hook)
                stored = functools.partial(stored_at, store, job_id)
                transaction.on_commit(lambda: self._enqueued(result, job_id, stored()), using=self.database)
        else:
            job_id = job.enqueue(store, **payload)
            self._enqueued(result, job_id, stored_at(store, job_id) or store.clock.now())
        task_enqueued.send(type(self), task_result=result)
        return result

    async def aenqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """``enqueue`` from async code: on the loop's ``AsyncStore``, committed at once (ADR 045).

        Django's transactions are sync only: an ``atomic()`` block is open in the thread that runs
        the caller's sync code (``sync_to_async``'s, where the async ORM runs too), never on the
        loop. When that thread is inside one (async code run by ``async_to_sync`` from an atomic
        block), the job is written there by ``enqueue``, in that transaction, as the async ORM's
        writes are; otherwise it is written on the loop without a thread.
        """
        written = await sync_to_async(self._enqueue_in_transaction)(task, args, kwargs)
        if written is not None:
            return written
        result, job, payload = self._prepare(task, args, kwargs)
        store = await self.astore()
        job_id = await job.aenqueue(store, **payload)
        self._enqueued(result, job_id, await astored_at(store, job_id) or store.clock.now())
        await task_enqueued.asend(type(self), task_result=result)
        return result

    def _in_transaction(self) -> bool:
        """Whether this thread's connection to the backend's database is in a transaction: an atomic block,
        or autocommit turned off."""
        if self.database not in settings.DATABASES:
            return False  # misconfigured: the write refuses it (InvalidTask)
        return in_transaction(connections[self.database])

    def _enqueue_in_transaction(self, task: Any, args: Any, kwargs: Any) -> Any:
        """``enqueue`` if this thread is in a transaction (its result), else ``None``: nothing written."""
        return self.enqueue(task, args, kwargs) if self._in_transaction() else None

    def _prepare(self, task: Any, args: Any, kwargs: Any) -> tuple[TaskResult, Any, dict[str, Any]]:
        """The checked task's ``TaskResult`` (``READY``), its alkstore task, and the job's payload."""
        self.validate_task(task)
        result = TaskResult(
            task=task,
            id="",
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
        check_call(task, result.args, result.kwargs)  # before any I/O: a call that cannot bind is never stored
        job = self._twin(task)
        payload = {"args": result.args, "kwargs": result.kwargs}  # normalised to JSON by TaskResult
        if task.run_after is not None:
            job = job.with_options(EnqueueOpts(run_at=task.run_after))
            payload["run_after"] = task.run_after.isoformat()  # the task as enqueued, whatever its retries make run_at
        return result, job, payload

    @staticmethod
    def _enqueued(result: TaskResult, job_id: int, enqueued_at: Any) -> None:
        """``result`` once its job is written: its id is the job's, ``enqueued_at`` the instant given (if any)."""
        object.__setattr__(result, "id", str(job_id))
        if enqueued_at is not None:
            object.__setattr__(result, "enqueued_at", enqueued_at)

    # -- results -------------------------------------------------------------------------

    def get_result(self, result_id: str) -> Any:
        """The ``TaskResult`` of a stored job (``READY``, ``RUNNING``, ``FAILED`` when dead) or of a kept
        result (``SUCCESSFUL``, ADR 046); ``TaskResultDoesNotExist`` for any other id."""
        job_id = job_id_of(result_id)
        store = self.store
        info = store.get_job(job_id)
        kept = store.result(job_id) if info is None else None  # gone: finished, kept if its queue keeps results
        return self._result(result_id, info, kept)

    async def aget_result(self, result_id: str) -> Any:
        """``get_result`` on the event loop's ``AsyncStore`` (the one ``aenqueue`` writes through)."""
        job_id = job_id_of(result_id)
        store = await self.astore()
        info = await store.get_job(job_id)
        kept = await store.result(job_id) if info is None else None
        return self._result(result_id, info, kept)

    def _result(self, result_id: str, info: JobInfo | None, kept: JobResult | None) -> Any:
        """The ``TaskResult`` of what ``get_job`` and ``result`` read for ``result_id``."""
        if info is not None and info.task is not None:
            task = self._task(str(info.task), info.id, info.payload, priority=info.priority, queue_name=info.queue)
            return result_of(task, info, self.alias)
        if kept is not None and kept.task is not None:
            task = self._task(str(kept.task), kept.id, kept.payload, queue_name=kept.queue)
            return kept_result_of(task, kept, self.alias)
        raise TaskResultDoesNotExist(result_id)

    def _task(self, path: str, job_id: int, payload: Any, **using: Any) -> Any:
        """The Django task of this backend that ``path`` names, as it was enqueued: its ``run_after`` the one
        its job's payload keeps (``TaskResultDoesNotExist`` if none)."""
        try:
            found = import_string(path)
        except ImportError as exc:
            raise TaskResultDoesNotExist(str(job_id)) from exc
        if not isinstance(found, self.task_class):
            raise TaskResultDoesNotExist(str(job_id))
        return found.using(backend=self.alias, run_after=run_after_of(payload), **using)
