"""``manage.py alkstore_prune_results``: delete the finished results of a task backend's queues (ADR 064).

A successful task's result is kept for ``OPTIONS["keep_results"]``; those past it are deleted. A
failed one (a dead job) is deleted once it died ``--failed-min-age-days`` ago (default: as long as
results are kept). Running workers do both on their own as upkeep; the command is for a project
whose workers are not always up (cron, a deploy step), or to clear failures sooner.
"""

from __future__ import annotations

import argparse
import math
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ._backend import alkstore_backend


class Command(BaseCommand):
    help = "Delete the finished task results of a TASKS backend's queues: kept ones past keep_results, failed ones."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument(
            "--queues",
            "--queue-name",
            default="*",
            help="comma-separated queues, or '*' for every queue in the backend's QUEUES (the default)",
        )
        parser.add_argument(
            "--failed-min-age-days",
            type=_days,
            default=None,
            help="delete the failed results that failed at least this many days ago (default: OPTIONS keep_results)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        backend = alkstore_backend(options["backend"])
        named = [name.strip() for name in options["queues"].split(",") if name.strip()]
        queues = sorted(backend.queues) if named in ([], ["*"]) else named
        unknown = sorted(set(queues) - set(backend.queues))
        if unknown:
            raise CommandError(f"not in TASKS[{backend.alias!r}]['QUEUES']: {', '.join(unknown)}")
        days = options["failed_min_age_days"]
        failed_age = timedelta(seconds=backend.keep_results or 0) if days is None else timedelta(days=days)
        successful = failed = 0
        with backend.open_store(max_size=1) as store:
            for queue in queues:
                successful += store.purge_results(queue)
                failed += store.purge_dead(queue, older_than=failed_age)
        self.stdout.write(f"pruned {successful} successful and {failed} failed task results of {', '.join(queues)}")


def _days(text: str) -> float:
    """``--failed-min-age-days``: a finite number of days, zero or more."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value < 1e6):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days, zero or more")
    return value
