"""``alkstore migrate``, ``tick`` and ``run-schedules``: operating a database from the shell."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import alkstore
from alkstore import AsyncStore, Fire, Store
from alkstore.engine import redact
from alkstore.errors import SchemaOutOfDate

from ._args import add_command
from ._exits import EXIT_OK
from ._signals import Interrupts

__all__ = [
    "add_commands",
    "configure_logging",
    "migrate",
    "open_async_store",
    "open_store",
    "redact",
    "run_schedules",
    "tick",
    "where",
]

log = logging.getLogger("alkstore.cli")

_JOIN_POLL_SECONDS = 0.1


def open_store(url: str, schema: str | None, **options: Any) -> Store:
    """The store at ``url``, in ``schema`` when one is given (``memory://`` takes none)."""
    if schema is not None:
        options["schema"] = schema
    return alkstore.open(url, **options)


async def open_async_store(url: str, schema: str | None, **options: Any) -> AsyncStore:
    """``open_store`` for the async runtime: the ``AsyncStore`` at ``url``."""
    if schema is not None:
        options["schema"] = schema
    return await alkstore.open_async(url, **options)


def where(url: str, schema: str | None) -> str:
    """The database (and schema) as a log line names it, its password redacted."""
    return redact(url) if schema is None else f"schema {schema!r} at {redact(url)}"


def migrate(url: str, schema: str | None, grant: Sequence[str] = ()) -> int:
    """Apply the pending migrations, and say whether there were any; grant each of ``grant`` what an
    application role needs (ADR 019).

    Opening a store checks its schema, so a plain open that succeeds means the schema is
    current; one that raises ``SchemaOutOfDate`` is answered by opening with ``migrate=True``.
    """
    options: dict[str, Any] = {"grant": list(grant)} if grant else {}
    try:
        with open_store(url, schema):
            pass
    except SchemaOutOfDate:
        with open_store(url, schema, migrate=True, **options) as store:
            store.migrate()
        print(f"alkstore: migrated {where(url, schema)} to the current schema version")
    else:
        if options:
            open_store(url, schema, migrate=True, **options).close()
        done = "" if grant else "; nothing to do"
        print(f"alkstore: {where(url, schema)} is already at the current schema version{done}")
    if grant:
        roles = ", ".join(repr(role) for role in dict.fromkeys(grant))
        print(f"alkstore: granted {roles} what an application role needs on {where(url, schema)}")
    return EXIT_OK


def describe_fire(fire: Fire) -> str:
    """One line for one fire."""
    return f"fired {fire.schedule!r} boundary {fire.boundary.isoformat()} as job {fire.job_id} on {fire.queue!r}"


def tick(url: str, schema: str | None) -> int:
    """Fire every elapsed boundary once and print the fires."""
    with open_store(url, schema) as store:
        fires = store.tick()
    for fire in fires:
        print(describe_fire(fire))
    print(f"{len(fires)} fire{'' if len(fires) == 1 else 's'}")
    return EXIT_OK


def configure_logging() -> logging.Handler:
    """Log ``alkstore``'s INFO lines to stderr, for a long-running command; the handler, to remove after."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger("alkstore")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


def run_schedules(url: str, schema: str | None) -> int:
    """Lead the scheduler (or stand by) until SIGINT or SIGTERM; then stop cleanly."""
    handler = configure_logging()
    try:
        with open_store(url, schema) as store:
            return _supervise(store, url, schema)
    finally:
        logging.getLogger("alkstore").removeHandler(handler)


def _supervise(store: Store, url: str, schema: str | None) -> int:
    stop = alkstore.StopToken()
    failures: list[BaseException] = []
    runner = threading.Thread(target=_lead, args=(store, stop, failures), name="alkstore-run-schedules", daemon=True)
    log.info("running the scheduler on %s", where(url, schema))
    with Interrupts((signal.SIGINT, signal.SIGTERM)) as interrupts:
        runner.start()
        while runner.is_alive():
            if interrupts.count and not stop.is_cancelled():
                name = interrupts.last.name if interrupts.last is not None else "a signal"
                log.info("stopping on %s", name)
                stop.cancel()
            runner.join(_JOIN_POLL_SECONDS)
    if failures:
        raise failures[0]
    log.info("stopped")
    return EXIT_OK


def _lead(store: Store, stop: alkstore.StopToken, failures: list[BaseException]) -> None:
    """Lead the scheduler, or stand by and ask again every second (core's standby loop)."""
    try:
        store.run_schedules(stop, standby=True)
    except BaseException as exc:
        failures.append(exc)
        stop.cancel()


def add_commands(commands: Any) -> None:
    """Register ``migrate``, ``tick`` and ``run-schedules`` on ``commands``."""
    command = add_command(
        commands,
        "migrate",
        "create or upgrade alkstore's tables in a database",
        _migrate,
        description="Apply the pending schema migrations (idempotent; safe from several processes at once).",
    )
    command.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="ROLE",
        help="also grant ROLE what an application role needs on the schema (repeatable; "
        "every later migration renews it)",
    )
    add_command(
        commands,
        "tick",
        "fire every elapsed schedule boundary once (for a system cron job)",
        _tick,
        description="Run one scheduler tick now, without leadership (the tick locks what it fires), and print the "
        "fires.",
    )
    add_command(
        commands,
        "run-schedules",
        "run the scheduler leader loop until SIGINT or SIGTERM",
        _run_schedules,
        description="Lead the scheduler, or stand by while another process leads and take over when it stops; logs "
        "one line per event to stderr. Stops cleanly on SIGINT or SIGTERM.",
    )


def _migrate(args: argparse.Namespace) -> int:
    return migrate(args.url, args.schema, args.grant)


def _tick(args: argparse.Namespace) -> int:
    return tick(args.url, args.schema)


def _run_schedules(args: argparse.Namespace) -> int:
    return run_schedules(args.url, args.schema)
