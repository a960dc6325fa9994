"""``alkstore prune``: ``jobs purge`` over every queue holding dead jobs, with the workers' retention by default,
and the kept results past their own retention (ADR 042)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from alkstore import DEFAULT_DEAD_RETENTION

from . import _operate
from ._args import add_command, duration_text, parse_duration, with_json
from ._exits import EXIT_OK
from ._jobs import purged
from ._output import dump

__all__ = ["add_commands"]


def _prune(args: argparse.Namespace) -> int:
    """Purge the dead jobs of every queue holding some (or of the one given) that died ``--older-than`` ago, and
    the kept results past their ``keep_until``."""
    with _operate.open_store(args.url, args.schema) as store:
        if args.queue is not None:
            queues = [args.queue]
        else:
            queues = [stats.queue for stats in store.queue_stats(cap=1) if stats.dead]
        counts = {queue: store.purge_dead(queue, args.older_than) for queue in queues}
        expired = store.purge_results(args.queue)
    if args.json:
        dump({"older_than": args.older_than, "purged": counts, "expired_results": expired}, sys.stdout)
    else:
        for queue, count in counts.items():
            print(purged(queue, count, args.older_than))
        total = sum(counts.values())
        print(f"pruned {total} dead job{'' if total == 1 else 's'} in all")
        if expired:
            print(f"pruned {expired} expired result{'' if expired == 1 else 's'}")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``prune`` on ``commands``."""
    retention = duration_text(DEFAULT_DEAD_RETENTION.total_seconds())
    prune = with_json(
        add_command(
            commands,
            "prune",
            f"delete the dead jobs kept longer than the retention (default {retention}) on every queue",
            _prune,
            description="Delete the dead jobs that died at least --older-than ago, on every queue holding dead jobs "
            "(or the one given), a batch at a time, and the kept results past their queue's keep_results: what a "
            "worker's maintenance does for its own queues (Worker(dead_retention=...)), for a cron job or by hand.",
        )
    )
    prune.add_argument(
        "--older-than",
        type=parse_duration,
        default=DEFAULT_DEAD_RETENTION.total_seconds(),
        metavar="DURATION",
        help=f"only those that died at least DURATION ago (default: {retention}; 0 for all)",
    )
    prune.add_argument("--queue", help="this queue's dead jobs alone (default: every queue's)")
