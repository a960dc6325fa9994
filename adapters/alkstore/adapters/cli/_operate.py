"""``alkstore migrate``, ``tick`` and ``run-schedules``: operating a database from the shell."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import alkstore
from alkstore import Fire, Store
from alkstore.engine import redact
from alkstore.errors import SchemaOutOfDate

from ._signals import Interrupts

__all__ = ["configure_logging", "migrate", "open_store", "redact", "run_schedules", "tick", "where"]

log = logging.getLogger("alkstore.cli")

_JOIN_POLL_SECONDS = 0.1


def open_store(url: str, schema: str | None, **options: Any) -> Store:
    if schema is not None:
        options["schema"] = schema
    return alkstore.open(url, **options)


def where(url: str, schema: str | None) -> str:
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
    return 0


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
    return 0


def configure_logging() -> logging.Handler:
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
    return 0


def _lead(store: Store, stop: alkstore.StopToken, failures: list[BaseException]) -> None:
    """Lead the scheduler, or stand by and ask again every second (core's standby loop)."""
    try:
        store.run_schedules(stop, standby=True)
    except BaseException as exc:
        failures.append(exc)
        stop.cancel()
