"""Argument types, durations and the parser helpers every command shares.

An argument type turns one command-line word into a value or raises ``ArgumentTypeError``,
which the parser reports as a usage error (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from typing import Any

from alkstore import Every, InvalidSpec, parse_spec

__all__ = [
    "MAX_SECONDS",
    "URL_VARIABLE",
    "add_command",
    "add_database_arguments",
    "count",
    "duration_text",
    "integer",
    "job_id",
    "json_value",
    "kept_for",
    "parse_duration",
    "positive_duration",
    "seconds",
    "spec",
    "watch_seconds",
    "with_json",
]

#: Where a database command finds its URL when ``--url`` is not given.
URL_VARIABLE = "ALKSTORE_URL"
#: The longest ``--seconds`` or ``--grace`` accepted, and the longest ``--watch`` period (a day).
MAX_SECONDS = 86400.0
#: The longest duration argument accepted (a hundred years).
_MAX_DURATION_SECONDS = 36500 * 86400.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)", re.ASCII)


# -- argument types ----------------------------------------------------------------------------


def seconds(text: str) -> float:
    """A number of seconds, more than 0 and at most a day (``demo --seconds``, ``worker --grace``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"seconds must be more than 0 and at most {MAX_SECONDS:g}, not {text}")
    return value


def count(text: str) -> int:
    """A whole number from 1 to 1000 (``worker --concurrency``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 1000, not {value}")
    return value


def parse_duration(text: str, *, allow_zero: bool = True, limit: float = _MAX_DURATION_SECONDS) -> float:
    """Seconds from ``90``, ``1.5``, ``90s``, ``15m``, ``12h`` or ``7d`` (``ArgumentTypeError`` otherwise)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration (seconds, or a number and s, m, h or d): {text!r}")
    value = float(match.group(1)) * Every.UNIT_SECONDS.get(match.group(2) or "s", 1)
    if not math.isfinite(value) or value > limit or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"the duration must be {bound} and at most {limit:g} s, not {text!r}")
    return value


def watch_seconds(text: str) -> float:
    """A ``--watch`` period: a duration more than 0 and at most a day."""
    return parse_duration(text, allow_zero=False, limit=MAX_SECONDS)


def positive_duration(text: str) -> float:
    """A duration more than 0."""
    return parse_duration(text, allow_zero=False)


def kept_for(text: str) -> float | None:
    """How long something is kept: a duration more than 0, or ``never`` (``None``: kept forever)."""
    return None if text.strip() == "never" else parse_duration(text, allow_zero=False)


def job_id(text: str) -> int:
    """A job id: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a job id is a positive integer, not {text}")
    return value


def spec(text: str) -> str:
    """A schedule spec, checked by core's grammar before any connection (a bad one is a usage error)."""
    try:
        parse_spec(text)
    except InvalidSpec as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def json_value(text: str) -> Any:
    """Any JSON document, decoded."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None


def integer(text: str) -> int:
    """Any integer (the store checks its range)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def duration_text(value: float) -> str:
    """A duration as given on the command line: ``7d``, ``12h``, ``15m`` when whole, else seconds."""
    for unit in ("d", "h", "m"):
        size = Every.UNIT_SECONDS[unit]
        if value >= size and value % size == 0:
            return f"{int(value // size)}{unit}"
    return f"{value:g}s"


# -- parser helpers ----------------------------------------------------------------------------


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--schema``; the parser is remembered so a missing URL is its usage error."""
    parser.add_argument(
        "--url",
        help=f"the database, e.g. postgresql://user@host:5432/dbname (default: ${URL_VARIABLE}, which keeps a "
        "password out of the process list)",
    )
    parser.add_argument("--schema", help="the schema holding alkstore's tables (default: the engine's, 'alkstore')")
    parser.set_defaults(database_parser=parser)


def add_command(
    parent: Any, name: str, help_: str, run: Callable[[argparse.Namespace], int], *, description: str | None = None
) -> argparse.ArgumentParser:
    """A database command under ``parent`` (a subparsers action) that ``run`` handles; its description
    defaults to its help as a sentence."""
    command: argparse.ArgumentParser = parent.add_parser(
        name, help=help_, description=description or help_[0].upper() + help_[1:] + "."
    )
    add_database_arguments(command)
    command.set_defaults(run=run)
    return command


def with_json(command: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``command`` with a ``--json`` flag."""
    command.add_argument("--json", action="store_true", help="print JSON (shapes: docs/operations.md)")
    return command
