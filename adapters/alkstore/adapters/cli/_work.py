"""``alkstore worker``: run the tasks of an application until SIGINT or SIGTERM (ADR 021).

The first signal stops claiming and lets running jobs finish within ``--grace`` seconds; what
still runs then is handed back for another worker to take at once. A second signal stops at
once (handing back what runs). Exit status 0 on a clean stop, 1 on a runtime error, 2 on usage.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from alkstore import StopToken, Tasks, Worker

from ._args import add_database_arguments, count, seconds
from ._exits import EXIT_OK
from ._operate import configure_logging, open_store, where
from ._signals import Interrupts

__all__ = ["add_commands", "load_app", "queue_list", "run_worker"]

log = logging.getLogger("alkstore.cli")

_JOIN_POLL_SECONDS = 0.1
#: Connections a worker needs beyond one per thread: its claims, heartbeats, the scheduler.
_SPARE_CONNECTIONS = 3


def load_app(text: str) -> Tasks:
    """``MODULE:ATTR`` as the ``Tasks`` it names (imported from the current directory too)."""
    module_name, sep, attr = text.partition(":")
    if not sep or not module_name or not attr:
        raise argparse.ArgumentTypeError(f"expected MODULE:ATTR (e.g. myapp.jobs:tasks), not {text!r}")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise argparse.ArgumentTypeError(f"cannot import {module_name!r}: {exc}") from None
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise argparse.ArgumentTypeError(f"{module_name!r} has no attribute {attr!r}") from None
    if not isinstance(value, Tasks):
        raise argparse.ArgumentTypeError(f"{text!r} is a {type(value).__name__}, not an alkstore.Tasks")
    return value


def queue_list(text: str) -> list[str]:
    """``a,b,c`` as queue names."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected queue names separated by commas, not {text!r}")
    return names


def run_worker(
    url: str,
    schema: str | None,
    tasks: Tasks,
    *,
    queues: list[str] | None,
    concurrency: int,
    grace: float,
    schedules: bool,
) -> int:
    """Run a worker on the database until a signal stops it; return the exit status."""
    handler = configure_logging()
    try:
        options: dict[str, Any] = {}
        if not url.lower().startswith("memory:"):
            options["max_size"] = max(10, concurrency + _SPARE_CONNECTIONS)
        with open_store(url, schema, **options) as store:
            worker = Worker(store, tasks, queues=queues, concurrency=concurrency, grace=grace, schedules=schedules)
            log.info("worker %s on %s", worker.worker_id, where(url, schema))
            return _supervise(worker)
    finally:
        logging.getLogger("alkstore").removeHandler(handler)


def _supervise(worker: Worker) -> int:
    stop, abort = StopToken(), StopToken()
    failures: list[BaseException] = []

    def work() -> None:
        try:
            worker.run(stop, abort=abort)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=work, name="alkstore-worker", daemon=True)
    with Interrupts((signal.SIGINT, signal.SIGTERM), abort_on_second=False) as interrupts:
        thread.start()
        while thread.is_alive():
            name = interrupts.last.name if interrupts.last is not None else "a signal"
            if interrupts.count == 1 and not stop.is_cancelled():
                log.info(
                    "stopping on %s: no more claims; running jobs get their grace (a second signal: at once)", name
                )
                stop.cancel()
            elif interrupts.count >= 2 and not abort.is_cancelled():
                log.info("stopping at once on %s: handing back what runs", name)
                stop.cancel()
                abort.cancel()
            thread.join(_JOIN_POLL_SECONDS)
    if failures:
        raise failures[0]
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``worker`` on ``commands``."""
    worker = commands.add_parser(
        "worker",
        help="run an application's tasks until SIGINT or SIGTERM",
        description="Run the tasks of an alkstore.Tasks registry on the database, in threads. The first "
        "SIGINT or SIGTERM stops claiming and gives running jobs --grace seconds, then hands back what still "
        "runs; a second one stops at once. Logs one line per job to stderr.",
    )
    worker.add_argument(
        "--app", type=load_app, required=True, metavar="MODULE:ATTR", help="the Tasks, e.g. myapp.jobs:tasks"
    )
    add_database_arguments(worker)
    worker.add_argument(
        "--queues", type=queue_list, metavar="A,B", help="the queues to serve (default: all of the app's)"
    )
    worker.add_argument("--concurrency", type=count, default=1, help="worker threads (default: 1)")
    worker.add_argument(
        "--grace", type=seconds, default=30.0, help="seconds running jobs get when stopping (default: 30)"
    )
    worker.add_argument("--schedules", action="store_true", help="also run the scheduler (leading, or standing by)")
    worker.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    return run_worker(
        args.url,
        args.schema,
        args.app,
        queues=args.queues,
        concurrency=args.concurrency,
        grace=args.grace,
        schedules=args.schedules,
    )
