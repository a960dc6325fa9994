"""Argument parsing, dispatch and exit status of the ``alkstore`` command line."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import alkstore
from alkstore.errors import AlkstoreError

from . import _demo, _inspect, _operate, _work

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_USAGE", "URL_VARIABLE", "build_parser", "main"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_ABORTED = 130
#: Where a database command finds its URL when ``--url`` is not given.
URL_VARIABLE = "ALKSTORE_URL"

_MAX_DEMO_SECONDS = 86400.0


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``alkstore: …`` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"alkstore: {message} (see '{self.prog} --help')\n")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= _MAX_DEMO_SECONDS:
        raise argparse.ArgumentTypeError(f"seconds must be more than 0 and at most {_MAX_DEMO_SECONDS:g}, not {text}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, not {value}")
    return value


def _add_database_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        help=f"the database, e.g. postgresql://user@host:5432/dbname (default: ${URL_VARIABLE}, which keeps a "
        "password out of the process list)",
    )
    parser.add_argument("--schema", help="the schema holding alkstore's tables (default: the engine's, 'alkstore')")
    parser.set_defaults(database_parser=parser)


def _resolve_url(args: argparse.Namespace) -> None:
    """A database command's URL: ``--url``, else ``$ALKSTORE_URL``; neither is a usage error (exit 2)."""
    parser: argparse.ArgumentParser | None = getattr(args, "database_parser", None)
    if parser is None or args.url is not None:
        return
    url = os.environ.get(URL_VARIABLE, "")
    if not url:
        parser.error(f"the following arguments are required: --url (or set {URL_VARIABLE})")
    args.url = url


def build_parser() -> argparse.ArgumentParser:
    """The ``alkstore`` parser; each subcommand stores its handler as ``run``."""
    parser = _Parser(
        prog="alkstore",
        description="Durable job queues, leases, recurring schedules and a transactional outbox.",
    )
    parser.add_argument("--version", action="version", version=f"alkstore {alkstore.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo",
        help="watch schedules, a worker and an outbox at work on the embedded engine",
        description="Run two @every schedules, a worker writing outbox messages in transactions, and an outbox "
        "delivery that fails for some messages, on memory:// with the system clock; then print a summary. "
        "Ctrl-C stops early (a second Ctrl-C aborts).",
    )
    demo.add_argument("--seconds", type=_seconds, default=15.0, help="how long to run (default: 15)")
    demo.set_defaults(run=lambda args: _demo.run_demo(args.seconds))

    for name, help_, description, run, extra in _DATABASE_COMMANDS:
        command = commands.add_parser(name, help=help_, description=description)
        _add_database_arguments(command)
        dests = tuple(command.add_argument(flag, **keywords).dest for flag, keywords in extra)
        command.set_defaults(
            run=lambda args, run=run, dests=dests: run(args.url, args.schema, **{d: getattr(args, d) for d in dests})
        )

    worker = commands.add_parser(
        "worker",
        help="run an application's tasks until SIGINT or SIGTERM",
        description="Run the tasks of an alkstore.Tasks registry on the database, in threads. The first "
        "SIGINT or SIGTERM stops claiming and gives running jobs --grace seconds, then hands back what still "
        "runs; a second one stops at once. Logs one line per job to stderr.",
    )
    worker.add_argument(
        "--app", type=_work.load_app, required=True, metavar="MODULE:ATTR", help="the Tasks, e.g. myapp.jobs:tasks"
    )
    _add_database_arguments(worker)
    worker.add_argument(
        "--queues", type=_work.queue_list, metavar="A,B", help="the queues to serve (default: all of the app's)"
    )
    worker.add_argument("--concurrency", type=_count, default=1, help="worker threads (default: 1)")
    worker.add_argument(
        "--grace", type=_seconds, default=30.0, help="seconds running jobs get when stopping (default: 30)"
    )
    worker.add_argument("--schedules", action="store_true", help="also run the scheduler (leading, or standing by)")
    worker.set_defaults(
        run=lambda args: _work.run_worker(
            args.url,
            args.schema,
            args.app,
            queues=args.queues,
            concurrency=args.concurrency,
            grace=args.grace,
            schedules=args.schedules,
        )
    )
    _inspect.add_commands(commands, _add_database_arguments)
    return parser


#: The options of one command beyond --url and --schema: flag and argparse keywords.
_Extra = tuple[tuple[str, dict[str, Any]], ...]
_GRANT: _Extra = (
    (
        "--grant",
        {
            "action": "append",
            "default": [],
            "metavar": "ROLE",
            "help": "also grant ROLE what an application role needs on the schema (repeatable; "
            "every later migration renews it)",
        },
    ),
)

#: The commands that operate a database: name, one-line help, description, what runs it (with
#: the URL, the schema and its own options as keywords), its own options.
_DATABASE_COMMANDS: tuple[tuple[str, str, str, Callable[..., int], _Extra], ...] = (
    (
        "migrate",
        "create or upgrade alkstore's tables in a database",
        "Apply the pending schema migrations (idempotent; safe from several processes at once).",
        _operate.migrate,
        _GRANT,
    ),
    (
        "tick",
        "fire every elapsed schedule boundary once (for a system cron job)",
        "Run one scheduler tick now, without leadership (the tick locks what it fires), and print the fires.",
        _operate.tick,
        (),
    ),
    (
        "run-schedules",
        "run the scheduler leader loop until SIGINT or SIGTERM",
        "Lead the scheduler, or stand by while another process leads and take over when it stops; logs one "
        "line per event to stderr. Stops cleanly on SIGINT or SIGTERM.",
        _operate.run_schedules,
        (),
    ),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _resolve_url(args)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except AlkstoreError as exc:
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"alkstore: {message}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("alkstore: aborted", file=sys.stderr)
        return EXIT_ABORTED
