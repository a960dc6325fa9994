"""The orders jobs are claimed and listed in: declared once, here, and derived everywhere else.

``ORDERS`` names, per listing phase, the job fields its order sorts by and the direction of
each; the claim takes ready jobs in the ``READY`` order. Python engines sort with the key
functions derived below, the Postgres engine composes its ``ORDER BY`` clauses from the same
declaration, and a listing's cursor (``key_of``) keeps exactly these fields, so the three can
never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from alkstore.port._records import JobKey, JobPhase, JobRecord, JobState

__all__ = [
    "CLAIM_ORDER",
    "ORDERS",
    "after_key",
    "claim_order",
    "key_of",
    "keyed_by_instant",
    "listing_order",
    "order_of",
    "phase_at",
]

#: Per phase: ``(field, descending)`` pairs, most significant first. Each order ends in the id, so it is total.
ORDERS: dict[JobPhase, tuple[tuple[str, bool], ...]] = {
    JobPhase.READY: (("priority", True), ("run_at", False), ("id", False)),
    JobPhase.DELAYED: (("run_at", False), ("id", False)),
    JobPhase.WAITING: (("id", False),),
    JobPhase.RUNNING: (("id", False),),
    JobPhase.DEAD: (("died_at", True), ("id", True)),
}
#: The claim's order: the ready listing's.
CLAIM_ORDER = ORDERS[JobPhase.READY]
#: Which ``JobKey`` field holds each order field: the instant fields share ``at``.
_KEY_FIELD = {"priority": "priority", "run_at": "at", "died_at": "at", "id": "id"}


def phase_at(record: JobRecord, now: datetime) -> JobPhase:
    """Where a stored job stands at ``now``: a pending job is waiting behind its ordering key, else ready
    once its ``run_at`` has come."""
    if record.state is JobState.PENDING:
        if record.waiting:
            return JobPhase.WAITING
        return JobPhase.READY if record.run_at <= now else JobPhase.DELAYED
    return JobPhase(record.state.value)


def _sortable(order: tuple[tuple[str, bool], ...], values: Callable[[str], Any]) -> tuple[Any, ...]:
    """A tuple that sorts ascending in ``order``: descending numbers negated, descending instants as
    negated microseconds since an epoch (so instants and numbers compare alike)."""
    out: list[Any] = []
    for name, descending in order:
        value = values(name)
        if descending:
            value = -value if not isinstance(value, datetime) else -_micros(value)
        elif isinstance(value, datetime):
            value = _micros(value)
        out.append(value)
    return tuple(out)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(instant: datetime) -> int:
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def order_of(phase: JobPhase, reverse: bool = False) -> tuple[tuple[str, bool], ...]:
    """The order a listing of ``phase`` sorts by: ``ORDERS[phase]``, or with ``reverse`` every field turned round."""
    order = ORDERS[phase]
    return tuple((name, not descending) for name, descending in order) if reverse else order


def listing_order(phase: JobPhase, reverse: bool = False) -> Callable[[JobRecord], tuple[Any, ...]]:
    """The sort key (ascending) of a listing of ``phase``; the claim sorts with ``listing_order(READY)``."""
    order = order_of(phase, reverse)
    return lambda record: _sortable(order, lambda name: getattr(record, name))


#: The order ``claim_order`` spells out: a change to ``CLAIM_ORDER`` must change it too (refused at import).
_CLAIM_KEY = (("priority", True), ("run_at", False), ("id", False))
if CLAIM_ORDER != _CLAIM_KEY:
    raise TypeError(f"claim_order spells out {_CLAIM_KEY}, not the declared {CLAIM_ORDER}")


def claim_order(record: JobRecord) -> tuple[Any, ...]:
    """The claim's sort key of a ready job: priority descending, ``run_at``, id. The key ``listing_order(READY)``
    makes, written out rather than walked field by field: it is taken once per claimed job."""
    return (-record.priority, _micros(record.run_at), record.id)


def key_of(record: JobRecord, phase: JobPhase) -> JobKey:
    """The cursor key of ``record`` in a listing of ``phase``: the fields its order sorts by."""
    fields = {_KEY_FIELD[name]: getattr(record, name) for name, _ in ORDERS[phase]}
    return JobKey(**fields)


def keyed_by_instant(phase: JobPhase) -> bool:
    """Whether a cursor key of ``phase`` holds an instant (``JobKey.at``): its order sorts by one."""
    return any(_KEY_FIELD[name] == "at" for name, _ in ORDERS[phase])


def after_key(record: JobRecord, key: JobKey, phase: JobPhase, reverse: bool = False) -> bool:
    """Whether ``record`` sorts strictly after ``key`` in a listing of ``phase`` (``reverse``: turned round)."""
    order = order_of(phase, reverse)
    mine = _sortable(order, lambda name: getattr(record, name))
    theirs = _sortable(order, lambda name: getattr(key, _KEY_FIELD[name]))
    return mine > theirs
