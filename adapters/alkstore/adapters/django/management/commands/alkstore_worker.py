"""``manage.py alkstore_worker``: run the Django tasks enqueued on an alkstore backend (ADR 039).

The sync ``alkstore.Worker`` runs on a thread with a handler per queue (``runner.handler_for``)
while the main thread answers signals: the first SIGTERM or SIGINT stops claiming and lets the
running tasks finish (up to ``--grace`` seconds); a second abandons them (their leases lapse and
they run again elsewhere).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from alkstore import StopToken, Worker
from alkstore.adapters.django.runner import handler_for

from ._backend import alkstore_backend

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Command(BaseCommand):
    help = "Run the Django tasks enqueued on an alkstore TASKS backend until SIGTERM or SIGINT."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument(
            "--queues",
            default="",
            help="comma-separated queues to serve (default: every queue in the backend's QUEUES)",
        )
        parser.add_argument("--concurrency", type=int, default=1, help="tasks at once, each on a thread (default 1)")
        parser.add_argument("--grace", type=float, default=30.0, help="seconds a stopping worker waits (default 30)")
        parser.add_argument("--worker-id", default=None, help="this worker's id (default: host and process)")

    def handle(self, *args: Any, **options: Any) -> None:
        backend = alkstore_backend(options["backend"])
        queues = [name.strip() for name in options["queues"].split(",") if name.strip()] or sorted(backend.queues)
        unknown = sorted(set(queues) - set(backend.queues))
        if unknown:
            raise CommandError(f"not in TASKS[{backend.alias!r}]['QUEUES']: {', '.join(unknown)}")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1")
        with backend.open_store(max_size=options["concurrency"] + 2) as store:
            handle = handler_for(backend)
            worker = Worker(
                store,
                handlers=dict.fromkeys(queues, handle),
                concurrency=options["concurrency"],
                grace=options["grace"],
                worker_id=options["worker_id"],
            )
            self.stdout.write(f"alkstore worker {worker.worker_id} serving {', '.join(queues)}")
            self.stdout.flush()
            _supervise(worker)
        self.stdout.write(f"alkstore worker {worker.worker_id} stopped")


def _supervise(worker: Worker) -> None:
    """Run ``worker`` on a thread; the main thread only counts signals (in handlers) and reacts to them."""
    stop, abort = StopToken(), StopToken()
    received: list[int] = []
    failures: list[BaseException] = []

    def count(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    def work() -> None:
        try:
            worker.run(stop, abort=abort)
        except BaseException as exc:
            failures.append(exc)

    previous = {signum: signal.signal(signum, count) for signum in _SIGNALS}
    thread = threading.Thread(target=work, name="alkstore-django-worker", daemon=True)
    try:
        thread.start()
        while thread.is_alive():
            if received and not stop.is_cancelled():
                stop.cancel()
            if len(received) > 1 and not abort.is_cancelled():
                abort.cancel()
            thread.join(0.1)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if failures:
        raise failures[0]
