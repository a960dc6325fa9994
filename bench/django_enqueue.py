"""The Django backend's cost over plain alkstore on PostgreSQL: enqueue, and a worker's drain, with their bounds.

Run by hand on Python 3.12 or later, never from the test suite (figures depend on the machine)::

    .venv312/bin/python bench/django_enqueue.py [--dsn URL] [--repeats 5] [--quick]

Enqueue, one job per call and per transaction, on one store's connection settings (the URL the
backend derives from ``DATABASES``, its schema and pool bound): ``Task.enqueue`` through Django's
API outside a transaction (the backend's pool), ``Task.enqueue`` inside ``transaction.atomic()``
(Django's connection, one atomic block per job), ``Task.aenqueue`` (the loop's ``AsyncStore``;
through ``async_to_sync``, so a new loop and pool per block), ``Queue.enqueue`` on an
``alkstore.open`` store of the same settings, and ``Store.enqueue_tx`` on Django's connection
inside ``atomic()`` (the floor of the atomic path). The bound: a null backend
(``_django_tasks.NullBackend``: Django's own work of an enqueue, nothing stored) alone, and
followed by ``Queue.enqueue`` in each call, which is the fastest any backend's ``Task.enqueue``
can be on this store.

Drain: a block of no-op jobs loaded, then drained by ``AsyncWorker`` as ``manage.py
alkstore_worker`` runs it (the Django handler: import by module path, ``TaskResult``, signals,
connections closed around each run, the run on a thread), by ``AsyncWorker`` running a plain no-op
alkstore task on its threads, and by ``AsyncWorker`` running the null handler
(``_django_tasks.null_handler``: Django's own work of a run, on the worker's own threads), timed
from the start until every job of the block is acked.

Subjects alternate in small blocks whose order turns from one round to the next, so load that comes
and goes, and whatever the previous subject left behind, hits each alike. Ratios are taken within
each run (enqueue) or round (drain), and each figure is the median of them.
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
    chunks: int = 4
    block: int = 2000
    blocks: int = 3
    concurrency: int = 4
    repeats: int = 5


QUICK = Config(enqueues=40, chunks=2, block=40, blocks=1, repeats=1)

#: The drain's subjects: the Django worker's handler, the null handler (Django's own work of a run), a plain task.
DRAINS = ("django worker", "null handler", "plain worker")


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
            },
            "null": {"BACKEND": "_django_tasks.NullBackend", "QUEUES": [QUEUE]},
        },
    )
    django.setup()


def enqueue_run(store: alkstore.Store, n: int, chunks: int, turn: int) -> dict[str, float]:
    """Jobs per second of each enqueue path: ``chunks`` blocks of ``n // chunks`` each, the subjects in an order
    that turns by one each block (starting at ``turn``)."""
    from _django_tasks import noop
    from asgiref.sync import async_to_sync
    from django.db import connection, transaction

    queue = store.queue(QUEUE)
    null = noop.using(backend="null")

    def django_enqueue(size: int) -> None:
        for i in range(size):
            noop.enqueue(n=i)

    def django_atomic(size: int) -> None:
        for i in range(size):
            with transaction.atomic():
                noop.enqueue(n=i)

    async def aenqueue_all(size: int) -> None:
        for i in range(size):
            await noop.aenqueue(n=i)

    def plain(size: int) -> None:
        for i in range(size):
            queue.enqueue({"args": [], "kwargs": {"n": i}})

    def plain_atomic(size: int) -> None:
        for i in range(size):
            with transaction.atomic():
                connection.ensure_connection()
                store.enqueue_tx(connection.connection, QUEUE, {"args": [], "kwargs": {"n": i}})

    def null_alone(size: int) -> None:
        for i in range(size):
            null.enqueue(n=i)

    def null_then_plain(size: int) -> None:
        for i in range(size):
            null.enqueue(n=i)
            queue.enqueue({"args": [], "kwargs": {"n": i}})

    subjects: dict[str, Callable[[int], object]] = {
        "django enqueue": django_enqueue,
        "django enqueue in atomic": django_atomic,
        "django aenqueue": async_to_sync(aenqueue_all),
        "Queue.enqueue": plain,
        "Store.enqueue_tx in atomic": plain_atomic,
        "null backend": null_alone,
        "null backend + Queue.enqueue": null_then_plain,
    }
    noop.enqueue(n=-1)  # the backend's pool opened before the clock runs
    size = max(n // chunks, 1)
    seconds = dict.fromkeys(subjects, 0.0)
    names = list(subjects)
    for chunk in range(chunks):
        at = (turn + chunk) % len(names)
        for name in names[at:] + names[:at]:
            started = time.perf_counter()
            subjects[name](size)
            seconds[name] += time.perf_counter() - started
    return {name: size * chunks / spent for name, spent in seconds.items()}


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

    def drain(self, subject: str, count: int) -> float:
        """Seconds from starting the worker until ``count`` jobs are durably done (its stop not counted)."""
        return asyncio.run(self._drain(subject, count))

    async def _drain(self, subject: str, count: int) -> float:
        import _django_tasks

        from alkstore.adapters.django.runner import DaemonThreads, handler_for

        django = subject != "plain worker"
        before = _django_tasks.runs if django else self.plain_runs
        executor = DaemonThreads("bench-django")
        try:
            async with await self.backend.open_async_store(max_size=self.concurrency + 2) as store:
                options: dict[str, Any] = {"concurrency": self.concurrency, "poll_interval": 0.05}
                if subject == "django worker":
                    handlers = {QUEUE: handler_for(self.backend, executor)}
                    worker = alkstore.AsyncWorker(store, handlers=handlers, **options)
                elif subject == "null handler":
                    handler = _django_tasks.null_handler(_django_tasks.noop, type(self.backend))
                    worker = alkstore.AsyncWorker(store, handlers={QUEUE: handler}, **options)
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
        f"sizes            enqueue {config.enqueues} a path in {config.chunks} blocks, drain {config.blocks} blocks "
        f"of {config.block} a subject at concurrency {config.concurrency}; {config.repeats} run(s), interleaved"
    )
    try:
        with alkstore.open(url, schema=schema, migrate=True, max_size=backend.max_size) as store:
            drain = Drain(backend, args.dsn, schema, config.concurrency)
            enqueues: list[dict[str, float]] = []
            drains: list[dict[str, float]] = []
            for run in range(config.repeats):
                enqueues.append(enqueue_run(store, config.enqueues, config.chunks, run))
                drain.clear()
                for block in range(config.blocks):
                    at = (run * config.blocks + block) % len(DRAINS)
                    rates = {}
                    for subject in DRAINS[at:] + DRAINS[:at]:
                        drain.load(subject != "plain worker", config.block)
                        rates[subject] = config.block / drain.drain(subject, config.block)
                    drains.append(rates)
            report(enqueues, drains, config.concurrency)
            print(f"load             {load_average()}")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    return 0


def report(enqueues: list[dict[str, float]], drains: list[dict[str, float]], concurrency: int) -> None:
    """Each subject's median rate, and the ratios the targets and their bounds are read from (medians of ratios
    taken within a run or a round)."""

    def median_ratio(runs: list[dict[str, float]], subject: str, baseline: str) -> float:
        return statistics.median(run[subject] / run[baseline] for run in runs)

    print("enqueue, jobs/s (median of runs)")
    for name in enqueues[0]:
        print(f"  {name:<32} {statistics.median(run[name] for run in enqueues):>10.0f}")
    null_us = statistics.median(1e6 / run["null backend"] for run in enqueues)
    print(f"  null backend, µs a call          {null_us:>10.1f}")
    print("  ratios (median of the runs')")
    for subject, baseline in (
        ("django enqueue", "Queue.enqueue"),
        ("null backend + Queue.enqueue", "Queue.enqueue"),
        ("django enqueue", "null backend + Queue.enqueue"),
        ("django enqueue in atomic", "Store.enqueue_tx in atomic"),
    ):
        label = f"{subject} / {baseline}"
        print(f"    {label:<60} {median_ratio(enqueues, subject, baseline):>5.2f}")
    print(f"drain, jobs/s (median of blocks), concurrency {concurrency}")
    for name in DRAINS:
        print(f"  {name:<32} {statistics.median(block[name] for block in drains):>10.0f}")
    print("  ratios (median of the rounds')")
    for subject, baseline in (
        ("django worker", "plain worker"),
        ("null handler", "plain worker"),
        ("django worker", "null handler"),
    ):
        label = f"{subject} / {baseline}"
        print(f"    {label:<60} {median_ratio(drains, subject, baseline):>5.2f}")


def backend_settings() -> Any:
    from django.conf import settings

    return settings.DATABASES["default"]


if __name__ == "__main__":
    sys.exit(main())
