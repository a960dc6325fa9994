"""Argument parsing, dispatch and exit status of the ``alkstore`` command line.

Each command's module registers its own parser (``add_commands``), handler (``run``) and, where
its arguments must agree, a usage check (``check``); this module builds the parser from them,
resolves a database command's URL and maps errors to exit statuses. Other adapters add commands
through the ``alkstore.commands`` entry points (the dashboard's ``alkstore web``): each names an
``add_commands(commands)`` like these modules', found without importing the adapter here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import NoReturn

import alkstore
from alkstore.errors import AlkstoreError

from . import _demo, _health, _jobs, _operate, _prune, _queues, _schedules, _status, _work
from ._args import URL_VARIABLE
from ._exits import EXIT_ABORTED, EXIT_ERROR, EXIT_USAGE

__all__ = ["build_parser", "main"]

#: The commands' modules, in the order ``alkstore --help`` lists their commands.
_COMMANDS = (_demo, _operate, _work, _status, _jobs, _queues, _prune, _schedules, _health)
#: The entry-point group through which other adapters add commands (after this module's own).
COMMAND_ENTRY_POINTS = "alkstore.commands"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``alkstore: …`` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"alkstore: {message} (see '{self.prog} --help')\n")


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
    for module in _COMMANDS:
        module.add_commands(commands)
    for entry in sorted(entry_points(group=COMMAND_ENTRY_POINTS), key=lambda entry: entry.name):
        entry.load()(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        _resolve_url(args)
        check: Callable[[argparse.Namespace], None] | None = getattr(args, "check", None)
        if check is not None:  # a command's usage rule across its arguments (it exits 2)
            check(args)
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
