"""``alkstore queues pause`` and ``resume``: stop (and restart) every worker claiming a queue's jobs;
``alkstore queues show``: a queue's settings as every process reads them, its rate limits among them."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from alkstore import CONFIG_TTL, QueueDefaults, RateLimit

from . import _operate
from ._args import add_command, with_json
from ._exits import EXIT_OK
from ._output import dump

__all__ = ["add_commands"]


def _set(args: argparse.Namespace, paused: bool) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        queue = store.queue(args.name)
        if paused:
            queue.pause()
        else:
            queue.resume()
    if args.json:
        dump({"queue": args.name, "paused": paused}, sys.stdout)
    elif paused:
        seconds = CONFIG_TTL.total_seconds()
        print(f"paused queue {args.name!r}: workers stop claiming its jobs within {seconds:g} s; running jobs finish")
    else:
        print(f"resumed queue {args.name!r}")
    return EXIT_OK


def _limit(limit: RateLimit | None) -> dict[str, float] | None:
    return None if limit is None else {"count": limit.count, "per": limit.per.total_seconds()}


def _said(limit: RateLimit | None, each: str = "") -> str:
    if limit is None:
        return "none"
    return (
        f"{limit.count} per {limit.per.total_seconds():g} s{each} (a start every {limit.interval.total_seconds():g} s)"
    )


def _show(args: argparse.Namespace) -> int:
    with _operate.open_store(args.url, args.schema) as store:
        defaults: QueueDefaults = store.queue(args.name).defaults()
        stats = store.queue_stats(args.name)
    paused = bool(stats and stats[0].paused)
    if args.json:
        dump(
            {
                "queue": args.name,
                "visibility_timeout": defaults.visibility_timeout.total_seconds(),
                "max_attempts": defaults.max_attempts,
                "backoff_base": defaults.backoff_base.total_seconds(),
                "backoff_cap": defaults.backoff_cap.total_seconds(),
                "priority": defaults.priority,
                "concurrency": defaults.concurrency,
                "rate": _limit(defaults.rate),
                "key_rate": _limit(defaults.key_rate),
                "paused": paused,
            },
            sys.stdout,
        )
        return EXIT_OK
    print(f"queue {args.name!r}{' (paused)' if paused else ''}")
    print(f"  visibility timeout  {defaults.visibility_timeout.total_seconds():g} s")
    print(f"  max attempts        {defaults.max_attempts}")
    base, cap = defaults.backoff_base.total_seconds(), defaults.backoff_cap.total_seconds()
    print(f"  backoff             {base:g} s, at most {cap:g} s")
    print(f"  priority            {defaults.priority}")
    print(f"  concurrency         {'none' if defaults.concurrency is None else defaults.concurrency}")
    print(f"  rate                {_said(defaults.rate)}")
    print(f"  key rate            {_said(defaults.key_rate, ' per rate key')}")
    return EXIT_OK


def _pause(args: argparse.Namespace) -> int:
    return _set(args, paused=True)


def _resume(args: argparse.Namespace) -> int:
    return _set(args, paused=False)


def add_commands(commands: Any) -> None:
    """Register ``queues pause``, ``queues resume`` and ``queues show`` on ``commands``."""
    queues = commands.add_parser(
        "queues", help="pause, resume or show a queue", description="Pause, resume or show a queue."
    )
    verbs = queues.add_subparsers(dest="action", metavar="ACTION", required=True)
    pause = with_json(
        add_command(verbs, "pause", "stop every worker claiming the queue's jobs (enqueues go on)", _pause)
    )
    pause.add_argument("name")
    resume = with_json(add_command(verbs, "resume", "let workers claim the queue's jobs again", _resume))
    resume.add_argument("name")
    show = with_json(add_command(verbs, "show", "show a queue's settings and rate limits", _show))
    show.add_argument("name")
