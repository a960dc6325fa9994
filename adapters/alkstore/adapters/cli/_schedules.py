"""``alkstore schedules list``, ``add`` and ``remove``, and how a schedule is shown (``status`` shows them too)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from alkstore import Schedule, ScheduleOpts

from . import _operate
from ._args import add_command, integer, json_value, positive_duration, spec, with_json
from ._exits import EXIT_ERROR, EXIT_OK
from ._output import Column, dump, iso, payload_json, table, when

__all__ = ["add_commands", "schedule_json", "schedule_lines"]

_SCHEDULE_COLUMNS = (
    Column("SCHEDULE", 15, whole=True),
    Column("EVERY", 5),
    Column("QUEUE", 13, whole=True),
    Column("NEXT (UTC)", 19),
    Column("LAST (UTC)", 19),
)


def schedule_json(schedule: Schedule) -> dict[str, Any]:
    """One schedule in JSON output (see ``docs/operations.md``)."""
    return {
        "name": schedule.name,
        "spec": schedule.spec,
        "queue": schedule.queue,
        "next_boundary": iso(schedule.next_boundary),
        "last_boundary": iso(schedule.last_boundary),
        **payload_json(schedule.payload),
        "priority": schedule.opts.priority,
        "max_attempts": schedule.opts.max_attempts,
        "expires_seconds": None
        if not isinstance(schedule.opts.expires, timedelta)
        else schedule.opts.expires.total_seconds(),
    }


def schedule_lines(schedules: Sequence[Schedule]) -> list[str]:
    """The schedules' table: name, period, queue, next and last boundary."""
    rows = [
        (
            schedule.name,
            schedule.spec.removeprefix("@every "),
            schedule.queue,
            when(schedule.next_boundary),
            when(schedule.last_boundary),
        )
        for schedule in schedules
    ]
    return table(_SCHEDULE_COLUMNS, rows, gap=2)


def _list(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        schedules = store.schedules()
    if args.json:
        dump([schedule_json(schedule) for schedule in schedules], sys.stdout)
    elif schedules:
        print("\n".join(schedule_lines(schedules)))
    else:
        print("no schedules")
    return EXIT_OK


def _add(args: argparse.Namespace) -> int:
    opts = ScheduleOpts(priority=args.priority, max_attempts=args.max_attempts, expires=args.expires)
    with _operate.open_store(args.url, args.schema) as store:
        schedule = store.schedule(args.name, args.spec, args.queue, args.payload, opts)
    if args.json:
        dump(schedule_json(schedule), sys.stdout)
    else:
        print(
            f"schedule {schedule.name!r} fires onto {schedule.queue!r} {schedule.spec};"
            f" next boundary {when(schedule.next_boundary)} UTC"
        )
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        removed = store.unschedule(args.name)
    if args.json:
        dump({"name": args.name, "removed": removed}, sys.stdout)
    elif removed:
        print(f"removed schedule {args.name!r} (the jobs it fired stay)")
    else:
        print(f"alkstore: no schedule named {args.name!r}", file=sys.stderr)
    return EXIT_OK if removed else EXIT_ERROR


def add_commands(commands: Any) -> None:
    """Register ``schedules list``, ``add`` and ``remove`` on ``commands``."""
    schedules = commands.add_parser(
        "schedules", help="list, add or remove schedules", description="Manage @every schedules."
    )
    verbs = schedules.add_subparsers(dest="action", metavar="ACTION", required=True)
    with_json(add_command(verbs, "list", "list the schedules with their next and last boundaries", _list))
    add = with_json(add_command(verbs, "add", "register (or update) a schedule", _add))
    add.add_argument("name")
    add.add_argument("spec", type=spec, help="@every <n><s|m|h|d>, e.g. '@every 10m'")
    add.add_argument("queue", help="the queue its fires go to")
    add.add_argument("--payload", type=json_value, help="each fire's payload, as JSON (default: null)")
    add.add_argument("--priority", type=integer)
    add.add_argument("--max-attempts", type=integer)
    add.add_argument("--expires", type=positive_duration, metavar="DURATION", help="each fire expires after DURATION")
    remove = with_json(add_command(verbs, "remove", "remove a schedule (the jobs it fired stay)", _remove))
    remove.add_argument("name")
