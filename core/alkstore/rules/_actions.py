"""The action log's rules (ADR 068): what an entry may hold, checked before any I/O, for every engine."""

from __future__ import annotations

from datetime import datetime

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._records import NewAction

from ._args import MAX_JOB_ID
from ._names import validate_label

__all__ = ["MAX_OUTCOME", "MAX_TARGET", "check_before", "new_action"]

#: The most characters an entry's target and its outcome hold (a console shortens longer ones first).
MAX_TARGET = 1000
MAX_OUTCOME = 2000


def _text(value: object, what: str, most: int, *, empty: bool) -> str:
    """``value`` if it is a ``str`` of at most ``most`` characters without NUL (which PostgreSQL's text
    cannot hold); ``InvalidArgument`` for another type, ``InvalidOptions`` otherwise."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a str, not {type(value).__name__}")
    if not value and not empty:
        raise InvalidOptions(f"{what} must not be empty")
    if len(value) > most:
        raise InvalidOptions(f"{what} is {len(value)} characters long; the limit is {most}")
    if "\x00" in value:
        raise InvalidOptions(f"{what} contains a NUL character")
    return value


def new_action(
    at: datetime, role: object, address: object, action: object, target: object, outcome: object
) -> NewAction:
    """An entry to log: ``role``, ``address`` and ``action`` are labels (``validate_label``), ``target`` up to
    ``MAX_TARGET`` characters (empty for none), ``outcome`` 1 to ``MAX_OUTCOME``; none holds NUL."""
    return NewAction(
        at,
        validate_label(role, "role"),
        validate_label(address, "address"),
        validate_label(action, "action"),
        _text(target, "target", MAX_TARGET, empty=True),
        _text(outcome, "outcome", MAX_OUTCOME, empty=False),
    )


def check_before(before: object) -> int | None:
    """An id to list the log before: ``None``, or an int from 1 to the largest id."""
    if before is None:
        return None
    if not isinstance(before, int) or isinstance(before, bool):
        raise InvalidArgument(f"before must be an int, not {type(before).__name__}")
    if not 1 <= before <= MAX_JOB_ID:
        raise InvalidOptions(f"before must be between 1 and {MAX_JOB_ID}, not {before}")
    return before
