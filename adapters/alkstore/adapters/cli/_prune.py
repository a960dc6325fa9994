"""``alkstore prune``: ``jobs purge`` over every queue holding dead jobs, with the workers' retention by default,
the kept results past their own retention (ADR 042), and the action log past the workers' retention (ADR 068)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from alkstore import DEFAULT_ACTION_RETENTION, DEFAULT_DEAD_RETENTION

from . import _operate
from ._args import add_command, duration_text, kept_for, parse_duration, with_json
from ._exits import EXIT_OK
from ._jobs import purged
from ._output import dump

__all__ = ["add_commands"]


def _prune(args: argparse.Namespace) -> int:
    """Purge the dead jobs of every queue holding some (or of the one given) that died ``--older-than`` ago, the
    kept results past their ``keep_until``, and the action log's entries older than ``--actions-older-than``."""
    with _operate.open_store(args.url, args.schema) as store:
        if args.queue is not None:
            queues = [args.queue]
        else:
            queues = [stats.queue for stats in store.queue_stats(cap=1) if stats.dead]
        counts = {queue: store.purge_dead(queue, args.older_than) for queue in queues}
        expired = store.purge_results(args.queue)
        actions = 0 if args.actions_older_than is None else store.purge_actions(args.actions_older_than)
    if args.json:
        shape = {"older_than": args.older_than, "purged": counts, "expired_results": expired}
        dump({**shape, "actions_older_than": args.actions_older_than, "purged_actions": actions}, sys.stdout)
    else:
        for queue, count in counts.items():
            print(purged(queue, count, args.older_than))
        total = sum(counts.values())
        print(f"pruned {total} dead job{'' if total == 1 else 's'} in all")
        if expired:
            print(f"pruned {expired} expired result{'' if expired == 1 else 's'}")
        if actions:
            age = duration_text(args.actions_older_than)
            print(f"pruned {actions} action log entr{'y' if actions == 1 else 'ies'} older than {age}")
    return EXIT_OK


def add_commands(commands: Any) -> None:
    """Register ``prune`` on ``commands``."""
    retention = duration_text(DEFAULT_DEAD_RETENTION.total_seconds())
    kept = duration_text(DEFAULT_ACTION_RETENTION.total_seconds())
    prune = with_json(
        add_command(
            commands,
            "prune",
            f"delete the dead jobs kept longer than the retention (default {retention}) on every queue",
            _prune,
            description="Delete the dead jobs that died at least --older-than ago, on every queue holding dead jobs "
            "(or the one given), a batch at a time, the kept results past their queue's keep_results, and the action "
            "log's entries older than --actions-older-than (the store's log: --queue does not narrow it): what a "
            "worker's maintenance does (Worker(dead_retention=..., action_retention=...)), for a cron job or by hand.",
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
    prune.add_argument(
        "--actions-older-than",
        type=kept_for,
        default=DEFAULT_ACTION_RETENTION.total_seconds(),
        metavar="DURATION",
        help=f"the action log's entries older than DURATION (default: {kept}, as a worker keeps them; never: none)",
    )
