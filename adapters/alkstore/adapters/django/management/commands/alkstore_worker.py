"""``manage.py alkstore_worker``: run the Django tasks enqueued on an alkstore backend (ADR 039, 045).

``alkstore.AsyncWorker`` runs on an event loop in the main thread with a handler per queue
(``runner.handler_for``): ``async def`` tasks are awaited on the loop, plain ones run on daemon
threads (``runner.DaemonThreads``). The periodic tasks of ``OPTIONS["schedules"]`` are registered when
the worker starts, and the worker stands by to lead the scheduler (``--no-schedules``: it does
not), so whichever worker leads fires each boundary once. The first SIGTERM or SIGINT stops
claiming and lets the running tasks finish (up to ``--grace`` seconds); a second abandons them
(their leases lapse and they run again elsewhere).

The options of a database worker's command are there too (ADR 064): ``--queues '*'`` with
``--exclude-queues``, ``--interval`` (how long an idle worker waits before it looks again),
``--batch`` (run what is ready, then exit), ``--max-tasks`` (exit after that many runs) and
``--startup-delay`` (a random wait, up to the interval, before the first claim). A worker that
stops on its own (``--batch``, ``--max-tasks``) stops as on SIGTERM: what it claimed finishes.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import random
import signal
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore import AsyncStore, AsyncWorker, StopToken
from alkstore.adapters.django.runner import DaemonThreads, handler_for, periodic_registry

from ._backend import alkstore_backend

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("alkstore.django")

#: How often the main loop looks at the signals counted so far (seconds).
_POLL = 0.1

#: ``--queues`` naming every queue of the backend's ``QUEUES``.
ALL = "*"


class Command(BaseCommand):
    help = "Run the Django tasks enqueued on an alkstore TASKS backend until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument(
            "--queues",
            "--queue-name",
            default="",
            help="comma-separated queues to serve, or '*' for every queue in the backend's QUEUES (the default)",
        )
        parser.add_argument(
            "--exclude-queues",
            default="",
            help="with --queues '*': comma-separated queues not to serve (names not in QUEUES are ignored)",
        )
        parser.add_argument(
            "--interval",
            type=_seconds,
            default=None,
            help="seconds an idle worker waits before it looks for tasks again (default 1)",
        )
        parser.add_argument(
            "--batch",
            action="store_true",
            help="run the tasks ready now and those they make ready, then exit (for cron jobs and tests)",
        )
        parser.add_argument(
            "--max-tasks",
            type=_count,
            default=None,
            help="exit once this many tasks have run (a failed run counts)",
        )
        parser.add_argument(
            "--startup-delay",
            action=argparse.BooleanOptionalAction,
            default=False,
            help="wait a random time, up to the interval, before the first claim (default: no)",
        )
        parser.add_argument("--concurrency", type=int, default=1, help="tasks at once (default 1)")
        parser.add_argument("--grace", type=float, default=30.0, help="seconds a stopping worker waits (default 30)")
        parser.add_argument("--worker-id", default=None, help="this worker's id (default: host and process)")
        parser.add_argument(
            "--schedules",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="stand by to lead the scheduler, firing every schedule's boundaries (default: yes)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        backend = alkstore_backend(options["backend"])
        queues = _served(backend, options["queues"], options["exclude_queues"])
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        asyncio.run(self._work(backend, queues, options))

    async def _work(self, backend: Any, queues: list[str], options: dict[str, Any]) -> None:
        concurrency, interval = options["concurrency"], options["interval"]
        if options["startup_delay"]:  # workers started together do not all claim at once
            await asyncio.sleep(random.uniform(0, 1.0 if interval is None else interval))
        threads = DaemonThreads("alkstore-django-task")
        stop, abort = StopToken(), StopToken()
        tally = _Tally(options["max_tasks"], stop)
        try:
            async with await backend.open_async_store(max_size=concurrency + 2) as store:
                await backend.aconfigure_queues(store)  # before any of its acks: they keep results as OPTIONS say
                handle = tally.counting(handler_for(backend, threads))
                worker = AsyncWorker(
                    store,
                    periodic_registry(backend.periodic(), handle),
                    handlers=dict.fromkeys(queues, handle),
                    queues=queues,
                    concurrency=concurrency,
                    grace=options["grace"],
                    worker_id=options["worker_id"],
                    # A batch does not lead the scheduler: its fires would keep the queues from emptying.
                    schedules=options["schedules"] and not options["batch"],
                    **({} if interval is None else {"poll_interval": interval}),
                )
                self.stdout.write(f"alkstore worker {worker.worker_id} serving {', '.join(queues)}")
                self.stdout.flush()
                idle = _idle(store, queues, tally) if options["batch"] else None
                await _supervise(worker, stop, abort, idle)
        finally:
            threads.shutdown()
        if tally.limit is not None and tally.finished >= tally.limit:
            self.stdout.write(f"alkstore worker {worker.worker_id} ran {tally.finished} tasks (--max-tasks)")
        self.stdout.write(f"alkstore worker {worker.worker_id} stopped")


def _served(backend: Any, named: str, excluded: str) -> list[str]:
    """The queues ``--queues`` and ``--exclude-queues`` name, each one of the backend's ``QUEUES``."""
    queues = [name.strip() for name in named.split(",") if name.strip()]
    left_out = {name.strip() for name in excluded.split(",") if name.strip()}
    if left_out and queues != [ALL]:
        raise CommandError(f"--exclude-queues can only be used with --queues {ALL!r}")
    if not queues or queues == [ALL]:
        queues = sorted(set(backend.queues) - left_out)
        if not queues:
            raise CommandError(f"no queue left to serve: TASKS[{backend.alias!r}]['QUEUES'] less --exclude-queues")
        return queues
    unknown = sorted(set(queues) - set(backend.queues))
    if unknown:
        raise CommandError(f"not in TASKS[{backend.alias!r}]['QUEUES']: {', '.join(unknown)}")
    return queues


def _seconds(text: str) -> float:
    """``--interval``: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds above zero")
    return value


def _count(text: str) -> int:
    """``--max-tasks``: a whole number above zero."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above zero")
    return int(text)


class _Tally:
    """The runs of a worker's handler: how many run now, how many have finished; ``stop`` is cancelled once
    ``limit`` have (``--max-tasks``), before the last one's ack, so no claim follows it."""

    def __init__(self, limit: int | None, stop: StopToken) -> None:
        self.limit, self.stop = limit, stop
        self.running = self.finished = 0

    def counting(self, handle: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
        """``handle``, counted."""

        async def counted(payload: Any, job: Any) -> Any:
            self.running += 1
            try:
                return await handle(payload, job)
            finally:
                self.running -= 1
                self.finished += 1
                if self.limit is not None and self.finished >= self.limit and not self.stop.is_cancelled():
                    log.info("stopping after %d tasks (--max-tasks)", self.finished)
                    self.stop.cancel()

        return counted


def _idle(store: AsyncStore, queues: list[str], tally: _Tally) -> Callable[[], Awaitable[bool]]:
    """Whether a batch is done: nothing of its own runs and no job of its queues is ready (what other
    workers run is theirs; a job it claimed but has not started yet finishes as the stop drains it)."""

    async def idle() -> bool:
        if tally.running:
            return False
        for queue in queues:
            if any(stats.ready for stats in await store.queue_stats(queue, cap=1)):
                return False
        return not tally.running

    return idle


async def _supervise(
    worker: AsyncWorker, stop: StopToken, abort: StopToken, idle: Callable[[], Awaitable[bool]] | None
) -> None:
    """Run ``worker`` as a task; this one counts signals (in handlers) and reacts to them, and stops a batch
    once ``idle`` says so."""
    received: list[int] = []

    def count(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, count) for signum in _SIGNALS}
    try:
        running = asyncio.ensure_future(worker.run(stop, abort=abort))
        while not running.done():
            if received and not stop.is_cancelled():
                log.info("stopping on %s: no more claims; running tasks get their grace", _name(received[0]))
                stop.cancel()
            if len(received) > 1 and not abort.is_cancelled():
                log.info("stopping at once on %s: handing back what runs", _name(received[1]))
                abort.cancel()
            if idle is not None and not stop.is_cancelled() and await idle():
                log.info("stopping: nothing ready on the queues served (--batch)")
                stop.cancel()
            await asyncio.wait((running,), timeout=_POLL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    running.result()  # the worker's failure, if it failed


def _name(signum: int) -> str:
    return signal.Signals(signum).name
