"""``alkstore worker``: run the tasks of an application, and deliver its outboxes, until SIGINT or SIGTERM
(ADR 021, 029, 057).

Two runtimes: the sync ``alkstore.Worker`` runs each job on one of its threads; the async
``alkstore.AsyncWorker`` awaits ``async def`` tasks on an event loop and runs plain ones on
threads. ``--runtime auto`` (the default) picks the async one when the application has an
``async def`` task, so an application without one pays no loop.

Either way the first signal stops claiming and lets running jobs finish within ``--grace``
seconds; what still runs then is handed back for another worker to take at once. A second
signal stops at once (handing back what runs). Exit status 0 on a clean stop, 1 on a runtime
error, 2 on usage (an ``async def`` task under ``--runtime sync`` is one).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from alkstore import DEFAULT_ACTION_RETENTION, DEFAULT_DEAD_RETENTION, AsyncWorker, StopToken, Tasks, Worker

from ._args import add_database_arguments, count, duration_text, kept_for, seconds
from ._exits import EXIT_OK
from ._operate import configure_logging, open_async_store, open_store, where
from ._signals import Interrupts

__all__ = ["RUNTIMES", "add_commands", "async_tasks", "choose_runtime", "load_app", "queue_list", "run_worker"]

log = logging.getLogger("alkstore.cli")

#: The choices of ``--runtime``.
RUNTIMES = ("auto", "sync", "async")
Runtime = Literal["sync", "async"]

_JOIN_POLL_SECONDS = 0.1
#: Connections a worker needs beyond one per slot: its claims, heartbeats, the scheduler.
_SPARE_CONNECTIONS = 3
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


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


def async_tasks(tasks: Tasks) -> list[str]:
    """The names of the ``async def`` tasks and outbox deliveries (couriers, ADR 057) of ``tasks`` (an object
    whose ``__call__`` is one counts too), which only the async worker runs."""
    code = [(task.name, task.func) for task in tasks] + [(c.name, c.delivery) for c in tasks.couriers]
    return [
        name
        for name, func in code
        if inspect.iscoroutinefunction(func)
        or (not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__))
    ]


def choose_runtime(tasks: Tasks, runtime: str) -> Runtime:
    """The runtime ``--runtime`` means for ``tasks``: ``auto`` is async when any task is ``async def``."""
    if runtime == "auto":
        return "async" if async_tasks(tasks) else "sync"
    if runtime not in RUNTIMES:
        raise ValueError(f"not a runtime: {runtime!r}")
    return "async" if runtime == "async" else "sync"


def run_worker(
    url: str,
    schema: str | None,
    tasks: Tasks,
    *,
    queues: list[str] | None,
    concurrency: int,
    grace: float,
    schedules: bool,
    runtime: str = "auto",
    outboxes: list[str] | None = None,
    action_retention: float | None = DEFAULT_ACTION_RETENTION.total_seconds(),
    dead_retention: float | None = DEFAULT_DEAD_RETENTION.total_seconds(),
) -> int:
    """Run a worker of ``runtime`` on the database until a signal stops it; return the exit status."""
    handler = configure_logging()
    try:
        options: dict[str, Any] = {}
        if not url.lower().startswith(("memory:", "sqlite:")):  # one connection per engine: no pool to size
            options["max_size"] = max(10, concurrency + _SPARE_CONNECTIONS)
        worker_options: dict[str, Any] = {
            "queues": queues,
            "outboxes": outboxes,
            "concurrency": concurrency,
            "grace": grace,
            "schedules": schedules,
            "action_retention": action_retention,
            "dead_retention": dead_retention,
        }
        if choose_runtime(tasks, runtime) == "async":
            return asyncio.run(_run_async(url, schema, tasks, options, worker_options))
        with open_store(url, schema, **options) as store:
            worker = Worker(store, tasks, **worker_options)
            log.info("worker %s on %s", worker.worker_id, where(url, schema))
            return _supervise(worker)
    finally:
        logging.getLogger("alkstore").removeHandler(handler)


def _react(interrupts: Interrupts, stop: StopToken, abort: StopToken) -> None:
    """Act on the signals counted so far (both runtimes): the first stops claiming, a second stops at once."""
    name = interrupts.last.name if interrupts.last is not None else "a signal"
    if interrupts.count == 1 and not stop.is_cancelled():
        log.info("stopping on %s: no more claims; running jobs get their grace (a second signal: at once)", name)
        stop.cancel()
    elif interrupts.count >= 2 and not abort.is_cancelled():
        log.info("stopping at once on %s: handing back what runs", name)
        stop.cancel()
        abort.cancel()


def _supervise(worker: Worker) -> int:
    """Run the sync worker on a thread while this (the main) thread answers the signals."""
    stop, abort = StopToken(), StopToken()
    failures: list[BaseException] = []

    def work() -> None:
        try:
            worker.run(stop, abort=abort)
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=work, name="alkstore-worker", daemon=True)
    with Interrupts(_SIGNALS, abort_on_second=False) as interrupts:
        thread.start()
        while thread.is_alive():
            _react(interrupts, stop, abort)
            thread.join(_JOIN_POLL_SECONDS)
    if failures:
        raise failures[0]
    return EXIT_OK


async def _run_async(
    url: str, schema: str | None, tasks: Tasks, options: dict[str, Any], worker_options: dict[str, Any]
) -> int:
    """Open the store and run the async worker on this event loop until a signal stops it."""
    async with await open_async_store(url, schema, **options) as store:
        worker = AsyncWorker(store, tasks, **worker_options)
        log.info(
            "async worker %s on %s: async def tasks on the event loop, plain ones on threads",
            worker.worker_id,
            where(url, schema),
        )
        return await _supervise_async(worker)


async def _supervise_async(worker: AsyncWorker) -> int:
    """Run the async worker as a task while this one answers the signals, as ``_supervise`` does."""
    stop, abort = StopToken(), StopToken()
    with Interrupts(_SIGNALS, abort_on_second=False) as interrupts:
        running = asyncio.ensure_future(worker.run(stop, abort=abort))
        while not running.done():
            _react(interrupts, stop, abort)
            await asyncio.wait((running,), timeout=_JOIN_POLL_SECONDS)
    running.result()  # the worker's failure, if it failed
    return EXIT_OK


def _refuse_async_tasks_under_sync(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--runtime sync`` with an ``async def`` task is a usage error (exit 2), found before any connection."""
    if args.runtime != "sync":
        return
    names = async_tasks(args.app)
    if names:
        listed = ", ".join(repr(name) for name in names)
        parser.error(
            f"--runtime sync cannot run async def task{'' if len(names) == 1 else 's'} {listed}: "
            "use --runtime async (or auto, the default)"
        )


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The usage errors found before any connection: async code under ``--runtime sync``, an outbox
    in ``--outboxes`` the app has no courier for."""
    _refuse_async_tasks_under_sync(parser, args)
    couriers = {courier.outbox for courier in args.app.couriers}
    unknown = [name for name in args.outboxes or () if name not in couriers]
    if unknown:
        known = ", ".join(repr(name) for name in sorted(couriers)) or "none"
        parser.error(f"--outboxes: the app has no courier for {', '.join(map(repr, unknown))} (couriers: {known})")


def add_commands(commands: Any) -> None:
    """Register ``worker`` on ``commands``."""
    worker = commands.add_parser(
        "worker",
        help="run an application's tasks and deliver its outboxes until SIGINT or SIGTERM",
        description="Run the tasks of an alkstore.Tasks registry on the database, and deliver the messages of "
        "the outboxes it has couriers for (@tasks.courier). The sync runtime "
        "(alkstore.Worker) runs each job on one of its threads; the async runtime (alkstore.AsyncWorker) awaits "
        "async def tasks on an event loop and runs plain ones on threads; --runtime auto picks the async one when "
        "the app has an async def task. The first SIGINT or SIGTERM stops claiming and gives running jobs --grace "
        "seconds, then hands back what still runs; a second one stops at once. Logs one line per job to stderr.",
    )
    worker.add_argument(
        "--app", type=load_app, required=True, metavar="MODULE:ATTR", help="the Tasks, e.g. myapp.jobs:tasks"
    )
    add_database_arguments(worker)
    worker.add_argument(
        "--queues", type=queue_list, metavar="A,B", help="the queues to serve (default: all of the app's)"
    )
    worker.add_argument(
        "--outboxes",
        type=queue_list,
        metavar="A,B",
        help="the outboxes whose messages to deliver, by their couriers (default: every courier of the app's)",
    )
    worker.add_argument(
        "--concurrency",
        type=count,
        default=1,
        help="jobs at once: sync, worker threads; async, slots on the event loop (default: 1)",
    )
    worker.add_argument(
        "--grace", type=seconds, default=30.0, help="seconds running jobs get when stopping (default: 30)"
    )
    worker.add_argument("--schedules", action="store_true", help="also run the scheduler (leading, or standing by)")
    worker.add_argument(
        "--action-retention",
        type=kept_for,
        default=DEFAULT_ACTION_RETENTION.total_seconds(),
        metavar="DURATION",
        help="its upkeep deletes the action log's entries older than DURATION (default: "
        f"{duration_text(DEFAULT_ACTION_RETENTION.total_seconds())}; never: keep them forever)",
    )
    worker.add_argument(
        "--dead-retention",
        type=kept_for,
        default=DEFAULT_DEAD_RETENTION.total_seconds(),
        metavar="DURATION",
        help="its upkeep deletes its queues' dead jobs that died more than DURATION ago (default: "
        f"{duration_text(DEFAULT_DEAD_RETENTION.total_seconds())}; never: keep them forever)",
    )
    worker.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default="auto",
        help="async: alkstore.AsyncWorker, async def tasks on an event loop and plain ones on threads; sync: "
        "alkstore.Worker, plain tasks on threads, no async def task; auto (default): async when the app has an "
        "async def task, else sync",
    )
    worker.set_defaults(run=_run, check=functools.partial(_check, worker))


def _run(args: argparse.Namespace) -> int:
    return run_worker(
        args.url,
        args.schema,
        args.app,
        queues=args.queues,
        outboxes=args.outboxes,
        concurrency=args.concurrency,
        grace=args.grace,
        schedules=args.schedules,
        runtime=args.runtime,
        action_retention=args.action_retention,
        dead_retention=args.dead_retention,
    )
