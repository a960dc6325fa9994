"""``manage.py alkstore_worker``: run the Django tasks enqueued on an alkstore backend (ADR 039, 045).

``alkstore.AsyncWorker`` runs on an event loop in the main thread with a handler per queue
(``runner.handler_for``): ``async def`` tasks are awaited on the loop, plain ones run on daemon
threads (``runner.DaemonThreads``). The periodic tasks of ``OPTIONS["schedules"]`` are registered when
the worker starts, and the worker stands by to lead the scheduler (``--no-schedules``: it does
not), so whichever worker leads fires each boundary once. The first SIGTERM or SIGINT stops
claiming and lets the running tasks finish (up to ``--grace`` seconds); a second abandons them
(their leases lapse and they run again elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore import AsyncWorker, StopToken
from alkstore.adapters.django.runner import DaemonThreads, handler_for, periodic_registry

from ._backend import alkstore_backend

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("alkstore.django")

#: How often the main loop looks at the signals counted so far (seconds).
_POLL = 0.1


class Command(BaseCommand):
    help = "Run the Django tasks enqueued on an alkstore TASKS backend until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument(
            "--queues",
            default="",
            help="comma-separated queues to serve (default: every queue in the backend's QUEUES)",
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
        queues = [name.strip() for name in options["queues"].split(",") if name.strip()] or sorted(backend.queues)
        unknown = sorted(set(queues) - set(backend.queues))
        if unknown:
            raise CommandError(f"not in TASKS[{backend.alias!r}]['QUEUES']: {', '.join(unknown)}")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        asyncio.run(self._work(backend, queues, options))

    async def _work(self, backend: Any, queues: list[str], options: dict[str, Any]) -> None:
        concurrency = options["concurrency"]
        threads = DaemonThreads("alkstore-django-task")
        try:
            async with await backend.open_async_store(max_size=concurrency + 2) as store:
                await backend.aconfigure_queues(store)  # before any of its acks: they keep results as OPTIONS say
                handle = handler_for(backend, threads)
                worker = AsyncWorker(
                    store,
                    periodic_registry(backend.periodic(), handle),
                    handlers=dict.fromkeys(queues, handle),
                    queues=queues,
                    concurrency=concurrency,
                    grace=options["grace"],
                    worker_id=options["worker_id"],
                    schedules=options["schedules"],
                )
                self.stdout.write(f"alkstore worker {worker.worker_id} serving {', '.join(queues)}")
                self.stdout.flush()
                await _supervise(worker)
        finally:
            threads.shutdown()
        self.stdout.write(f"alkstore worker {worker.worker_id} stopped")


async def _supervise(worker: AsyncWorker) -> None:
    """Run ``worker`` as a task; this one only counts signals (in handlers) and reacts to them."""
    stop, abort = StopToken(), StopToken()
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
            await asyncio.wait((running,), timeout=_POLL)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    running.result()  # the worker's failure, if it failed


def _name(signum: int) -> str:
    return signal.Signals(signum).name
