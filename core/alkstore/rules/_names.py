"""Name validation and the engine's own (reserved) names: the single owner of both rules."""

from __future__ import annotations

from alkstore.errors import InvalidName, ReservedName

__all__ = [
    "MAX_NAME_LENGTH",
    "OUTBOX_QUEUE_PREFIX",
    "RESERVED_PREFIX",
    "SCHEDULER_LOCK",
    "is_outbox_queue",
    "outbox_of",
    "outbox_queue",
    "validate_label",
    "validate_listed_queue",
    "validate_name",
]

RESERVED_PREFIX = "__alkstore_"
MAX_NAME_LENGTH = 128
SCHEDULER_LOCK = RESERVED_PREFIX + "scheduler"
OUTBOX_QUEUE_PREFIX = RESERVED_PREFIX + "outbox:"


def validate_name(name: object, kind: str) -> str:
    """Return ``name`` if it is a valid user name for a ``kind``, else raise.

    Valid: a ``str`` of 1 to 128 printable characters without leading or trailing
    whitespace (``InvalidName`` otherwise) that does not start with ``__alkstore_``
    (``ReservedName`` otherwise).
    """
    name = validate_label(name, kind)
    if name.startswith(RESERVED_PREFIX):
        raise ReservedName(f"{kind} name {name!r} uses the reserved prefix {RESERVED_PREFIX!r}")
    return name


def validate_label(name: object, kind: str) -> str:
    """The shape rule alone (no reserved-prefix check): for worker ids and lock owners."""
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidName(f"{kind} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"{kind} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}")
    if not name.isprintable():
        raise InvalidName(f"{kind} name {name!r} contains unprintable characters")
    if name.strip() != name:
        raise InvalidName(f"{kind} name {name!r} has leading or trailing whitespace")
    return name


def outbox_queue(outbox: str) -> str:
    """The backing queue of an (already validated) outbox name; reserved, so unreachable."""
    return OUTBOX_QUEUE_PREFIX + outbox


def is_outbox_queue(queue: str) -> bool:
    """Whether ``queue`` is an outbox's backing queue (it then derives the outbox defaults)."""
    return queue.startswith(OUTBOX_QUEUE_PREFIX)


def outbox_of(queue: str) -> str | None:
    """The outbox whose backing queue ``queue`` is, or ``None`` for a user queue."""
    return queue[len(OUTBOX_QUEUE_PREFIX) :] if is_outbox_queue(queue) else None


def validate_listed_queue(name: object) -> str:
    """A queue name as inspection lists it: a user queue's (``validate_name``) or an outbox's backing
    queue (``outbox_queue`` of a valid outbox name), so operators can act on what they see."""
    if isinstance(name, str) and is_outbox_queue(name):
        validate_name(name[len(OUTBOX_QUEUE_PREFIX) :], "outbox")
        return name
    return validate_name(name, "queue")
