"""The Django backend's cost over plain alkstore on PostgreSQL: enqueue, and a worker's drain.

Run by hand on Python 3.12 or later, never from the test suite (figures depend on the machine)::

    .venv312/bin/python bench/django_enqueue.py [--dsn URL] [--repeats 3] [--quick]

Enqueue, one job per call and per transaction, on one store's connection settings (the URL the
backend derives from ``DATABASES``, its schema and pool bound): ``Task.enqueue`` through Django's
API outside a transaction (the backend's pool), ``Task.enqueue`` inside ``transaction.atomic()``
(Django's connection, one atomic block per job), ``Task.aenqueue`` (the loop's ``AsyncStore``),
and ``Queue.enqueue`` on an ``alkstore.open`` store of the same settings. Drain: a block of no-op
jobs loaded, then drained by ``AsyncWorker`` as ``manage.py alkstore_worker`` runs it (the Django
handler: import by module path, ``TaskResult``, signals, connections closed around each run, the
run on a thread) and by ``AsyncWorker`` running a plain no-op alkstore task on its threads, timed
from the start until every job of the block is acked. Subjects alternate block by block, so load
that comes and goes hits each alike; the set runs ``--repeats`` times and each figure is the
median of the runs.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import load_average
from queue_throughput import bench_arguments, bench_schemas

import alkstore

QUEUE = "bench-django"


@dataclass(frozen=True, slots=True)
class Config:
    enqueues: int = 2000
    block: int = 2000
    blocks: int = 3
    concurrency: int = 4
    repeats: int = 3


QUICK = Config(enqueues=40, block=40, blocks=1, repeats=1)


def set_up_django(dsn: str, schema: str, concurrency: int) -> None:
    """Configure Django on ``dsn`` with the alkstore backend on ``schema``, as a project's settings would."""
    import django
    from django.conf import settings

    url = urlsplit(dsn)
    settings.configure(
        USE_TZ=True,
        INSTALLED_APPS=["alkstore.adapters.django"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": url.path.lstrip("/"),
                "USER": url.username or "",
                "PASSWORD": url.password or "",
                "HOST": url.hostname or "",
                "PORT": str(url.port or ""),
            }
        },
        TASKS={
            "default": {
                "BACKEND": "alkstore.adapters.django.backend.AlkstoreBackend",
                "QUEUES": [QUEUE],
                "OPTIONS": {"schema": schema, "max_size": concurrency + 2},
            }
        },
    )
    django.setup()


def per_second(count: int, call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return count / (time.perf_counter() - started)


def enqueue_run(store: alkstore.Store, n: int) -> dict[str, float]:
    """Jobs per second of each enqueue path, one block of ``n`` each, in turn."""
    from _django_tasks import noop
    from asgiref.sync import async_to_sync
    from django.db import transaction

    queue = store.queue(QUEUE)

    def django_enqueue() -> None:
        for i in range(n):
            noop.enqueue(n=i)

    def django_atomic() -> None:
        for i in range(n):
            with transaction.atomic():
                noop.enqueue(n=i)

    async def aenqueue_all() -> None:
        for i in range(n):
            await noop.aenqueue(n=i)

    def plain() -> None:
        for i in range(n):
            queue.enqueue({"args": [], "kwargs": {"n": i}})

    subjects: dict[str, Callable[[], object]] = {
        "django enqueue": django_enqueue,
        "django enqueue in atomic": django_atomic,
        "django aenqueue": async_to_sync(aenqueue_all),
        "Queue.enqueue": plain,
    }
    noop.enqueue(n=-1)  # the backend's pool opened before the clock runs
    return {name: per_second(n, call) for name, call in subjects.items()}


class Drain:
    """Drains of a block of no-op jobs by the Django worker's handler and by a plain task, on one async store."""

    def __init__(self, backend: Any, dsn: str, schema: str, concurrency: int) -> None:
        from _django_tasks import noop

        self.backend = backend
        self.concurrency = concurrency
        self.watch = psycopg.connect(dsn, autocommit=True)
        self.count_jobs = sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(schema))
        self.delete_jobs = sql.SQL("DELETE FROM {}.jobs").format(sql.Identifier(schema))
        self.plain_runs = 0
        self.lock = threading.Lock()
        self.tasks = alkstore.Tasks()

        @self.tasks.task("bench.plain_noop", queue=QUEUE)
        def plain_noop(n: int) -> None:
            with self.lock:
                self.plain_runs += 1

        self.plain_noop = plain_noop
        # The Django task's jobs as an enqueue writes them: named by module path, {"args", "kwargs"}.
        self.django_noop = alkstore.Tasks().task(noop.module_path, queue=QUEUE)(noop.func)

    def load(self, django: bool, count: int) -> None:
        """One statement: ``count`` jobs of the Django task (``django``) or of the plain one."""
        store = self.backend.store
        if django:
            self.django_noop.enqueue_many(store, [{"args": [], "kwargs": {"n": n}} for n in range(count)])
        else:
            self.plain_noop.enqueue_many(store, [{"n": n} for n in range(count)])

    def drain(self, django: bool, count: int) -> float:
        """Seconds from starting the worker until ``count`` jobs are durably done (its stop not counted)."""
        return asyncio.run(self._drain(django, count))

    async def _drain(self, django: bool, count: int) -> float:
        import _django_tasks

        from alkstore.adapters.django.runner import DaemonThreads, handler_for

        before = _django_tasks.runs if django else self.plain_runs
        executor = DaemonThreads("bench-django")
        try:
            async with await self.backend.open_async_store(max_size=self.concurrency + 2) as store:
                options: dict[str, Any] = {"concurrency": self.concurrency, "poll_interval": 0.05}
                if django:
                    worker = alkstore.AsyncWorker(
                        store, handlers={QUEUE: handler_for(self.backend, executor)}, **options
                    )
                else:
                    worker = alkstore.AsyncWorker(store, self.tasks, **options)
                stop = alkstore.StopToken()
                started = time.perf_counter()
                running = asyncio.ensure_future(worker.run(stop))
                while (_django_tasks.runs if django else self.plain_runs) - before < count or self._left():
                    await asyncio.sleep(0.001)
                elapsed = time.perf_counter() - started
                stop.cancel()
                await running
        finally:
            executor.shutdown()
        return elapsed

    def clear(self) -> None:
        """Delete every job (the enqueue runs' pile), so that a drain block holds its jobs alone."""
        self.watch.execute(self.delete_jobs)

    def _left(self) -> bool:
        row = self.watch.execute(self.count_jobs).fetchone()
        return bool(row and row[0])


def main() -> int:
    args, config = bench_arguments(__doc__.split("\n")[0], Config(), QUICK)
    _, schema = bench_schemas("django")
    set_up_django(args.dsn, schema, config.concurrency)
    from django.tasks import task_backends

    from alkstore.adapters.django.backend import database_url

    backend = task_backends["default"]
    url = database_url(backend_settings())
    print(f"load             {load_average()}")
    print(
        f"sizes            enqueue {config.enqueues} a path, drain {config.blocks} blocks of {config.block} "
        f"at concurrency {config.concurrency}; {config.repeats} run(s), interleaved"
    )
    try:
        with alkstore.open(url, schema=schema, migrate=True, max_size=backend.max_size) as store:
            drain = Drain(backend, args.dsn, schema, config.concurrency)
            enqueues: dict[str, list[float]] = {}
            drains: dict[str, list[float]] = {"django worker": [], "plain worker": []}
            for _ in range(config.repeats):
                for name, rate in enqueue_run(store, config.enqueues).items():
                    enqueues.setdefault(name, []).append(rate)
                drain.clear()
                for block in range(config.blocks):
                    for django in (block % 2 == 0, block % 2 != 0):
                        drain.load(django, config.block)
                        seconds = drain.drain(django, config.block)
                        drains["django worker" if django else "plain worker"].append(config.block / seconds)
            print("enqueue, jobs/s (median of runs)")
            for name, rates in enqueues.items():
                print(f"  {name:<26} {statistics.median(rates):>10.0f}")
            print(f"drain, jobs/s (median of blocks), concurrency {config.concurrency}")
            for name, rates in drains.items():
                print(f"  {name:<26} {statistics.median(rates):>10.0f}")
            ratio = statistics.median(drains["django worker"]) / statistics.median(drains["plain worker"])
            print(f"  django / plain             {ratio:>10.2f}")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return 0


def backend_settings() -> Any:
    from django.conf import settings

    return settings.DATABASES["default"]


if __name__ == "__main__":
    sys.exit(main())
