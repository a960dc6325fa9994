"""``alkstore queues pause`` and ``resume``: stop (and restart) every worker claiming a queue's jobs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from alkstore import CONFIG_TTL

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


def _pause(args: argparse.Namespace) -> int:
    return _set(args, paused=True)


def _resume(args: argparse.Namespace) -> int:
    return _set(args, paused=False)


def add_commands(commands: Any) -> None:
    """Register ``queues pause`` and ``queues resume`` on ``commands``."""
    queues = commands.add_parser("queues", help="pause or resume a queue", description="Pause or resume a queue.")
    verbs = queues.add_subparsers(dest="action", metavar="ACTION", required=True)
    pause = with_json(
        add_command(verbs, "pause", "stop every worker claiming the queue's jobs (enqueues go on)", _pause)
    )
    pause.add_argument("name")
    resume = with_json(add_command(verbs, "resume", "let workers claim the queue's jobs again", _resume))
    resume.add_argument("name")
