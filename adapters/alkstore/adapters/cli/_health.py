"""``alkstore healthcheck``: exit 0 when the database answers, its schema is current and (with schedules) a
scheduler leads; else 1, for container health probes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from alkstore import DatabaseError, SchemaOutOfDate, Store

from . import _operate
from ._args import add_command, with_json
from ._exits import EXIT_ERROR, EXIT_OK
from ._output import dump, when

__all__ = ["add_commands"]


def _healthcheck(args: argparse.Namespace) -> int:
    """Exit 0 when the database answers, its schema is current and (with schedules) a leader leads; else 1."""
    checks: list[tuple[str, bool, str]] = []
    where = _operate.where(args.url, args.schema)
    try:
        store = _operate.open_store(args.url, args.schema)
    except SchemaOutOfDate as exc:
        checks += [("database", True, f"reachable: {where}"), ("schema", False, " ".join(str(exc).split()))]
    except DatabaseError as exc:
        checks.append(("database", False, f"{where}: {' '.join(str(exc).split())}"))
    else:
        with store:
            checks += [("database", True, f"reachable: {where}"), ("schema", True, "current")]
            try:
                checks.append(_leader_check(store))
            except DatabaseError as exc:
                checks.append(("leader", False, f"could not be read: {' '.join(str(exc).split())}"))
    healthy = all(ok for _, ok, _ in checks)
    if args.json:
        dump(
            {"healthy": healthy, "checks": [{"name": n, "ok": ok, "detail": detail} for n, ok, detail in checks]},
            sys.stdout,
        )
    else:
        for name, ok, detail in checks:
            print(f"{'ok' if ok else 'FAIL':<4}  {name:<8}  {detail}")
        print("healthy" if healthy else "unhealthy")
    return EXIT_OK if healthy else EXIT_ERROR


def _leader_check(store: Store) -> tuple[str, bool, str]:
    count = len(store.schedules())
    leader = store.leader()
    if leader is not None:
        return ("leader", True, f"{leader.owner}, lease until {when(leader.lease_until)} UTC")
    if count == 0:
        return ("leader", True, "none needed: no schedules")
    plural = "schedule exists" if count == 1 else "schedules exist"
    return ("leader", False, f"no scheduler leads while {count} {plural} (is `alkstore run-schedules` running?)")


def add_commands(commands: Any) -> None:
    """Register ``healthcheck`` on ``commands``."""
    with_json(
        add_command(
            commands,
            "healthcheck",
            "check the database, its schema and (with schedules) the scheduler's leader; exit 0 or 1",
            _healthcheck,
            description="Exit 0 when the database answers, its schema is current, and a scheduler leads whenever "
            "schedules exist; exit 1 otherwise (and 2 for a usage error), for container health probes.",
        )
    )
