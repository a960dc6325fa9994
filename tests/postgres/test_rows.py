"""A job row becomes the ``JobRecord`` of its columns: each column lands in the field of its meaning, every
value distinct here so that two swapped slots would show (the row maker fills the record in field order)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from alkstore.adapters.postgres import _rows
from alkstore.engine import JobRecord, JobState, ParentFailure, job_record
from tests.support import MIDNIGHT


def at(hours: int) -> datetime:
    return MIDNIGHT.astimezone(UTC) + timedelta(hours=hours)


COLUMNS = {
    "id": 7, "queue": "emails", "payload": b'{"to":"ada"}', "state": "waiting", "priority": 3, "run_at": at(1),
    "expires_at": at(2), "attempts": 2, "max_attempts": 5, "last_error": b"boom", "last_traceback": b"Traceback",
    "schedule": "nightly", "boundary": at(3), "enqueued_at": at(4), "worker_id": "w-1", "lease_until": at(5),
    "lease": 11, "visibility_us": 30_000_000, "task": "send", "trace": "00-trace-01", "unique_key": "unique",
    "unique_running": True, "ordering_key": "ordering", "cancel_requested": False, "claimed_at": at(6),
    "rate_key": "rated", "dependents": 4,
}  # fmt: skip


def test_each_column_of_a_job_row_lands_in_the_field_of_its_meaning() -> None:
    record = _rows._job(tuple(COLUMNS[name] for name in _rows.JOB_READ), at(7), [b"first", b"second"])
    assert record == JobRecord(
        id=7, queue="emails", payload=b'{"to":"ada"}', state=JobState.PENDING, priority=3, run_at=at(1),
        expires_at=at(2), attempts=2, max_attempts=5, last_error="boom", schedule="nightly", boundary=at(3),
        enqueued_at=at(4), worker_id="w-1", lease_until=at(5), died_at=at(7), fence=11,
        visibility=timedelta(seconds=30), task="send", last_traceback="Traceback", trace="00-trace-01",
        unique_key="unique", unique_running=True, ordering_key="ordering", waiting=True, cancel_requested=False,
        claimed_at=at(6), attempt_log=(b"first", b"second"), rate_key="rated", dependents=4,
    )  # fmt: skip


def test_a_record_made_field_by_field_is_the_one_its_class_makes() -> None:
    values: tuple[Any, ...] = tuple(f"v{at}" for at in range(17))  # the fields without a default; the rest at theirs
    made = job_record(*values)
    assert made == JobRecord(*values)
    assert (made.parents, made.on_parent_failure, made.children) == ((), ParentFailure.CANCEL, ())
    with pytest.raises(TypeError):
        job_record(*values[:-1])


INSTANTS = ("run_at", "expires_at", "boundary", "enqueued_at", "lease_until", "claimed_at")


@pytest.mark.parametrize("zone", ["utc", "other zone", "naive"])
def test_every_instant_of_a_job_row_is_read_in_utc_and_a_null_stays_null(zone: str) -> None:
    """A session in another time zone returns instants in it, a naive one as UTC's wall clock: each comes back
    as the same instant in ``datetime.UTC`` (so equal to, and printed as, what the engine stored)."""
    east = timezone(timedelta(hours=5, minutes=30))

    def shown(value: Any) -> datetime:
        assert isinstance(value, datetime)
        if zone == "utc":
            return value
        return value.astimezone(east) if zone == "other zone" else value.replace(tzinfo=None)

    row = dict(COLUMNS, **{name: shown(COLUMNS[name]) for name in INSTANTS})
    record = _rows._job(tuple(row[name] for name in _rows.JOB_READ), shown(at(7)))
    for name in (*INSTANTS, "died_at"):
        value = getattr(record, name)
        assert value.tzinfo is UTC, name
        assert value == (at(7) if name == "died_at" else COLUMNS[name]), name
    nulls = dict(COLUMNS, expires_at=None, boundary=None, lease_until=None, claimed_at=None)
    nulls.update(last_error=None, last_traceback=None, visibility_us=None)
    empty = _rows._job(tuple(nulls[name] for name in _rows.JOB_READ))
    assert (empty.expires_at, empty.boundary, empty.lease_until, empty.claimed_at, empty.died_at) == (None,) * 5
    assert (empty.last_error, empty.last_traceback, empty.visibility) == (None, None, None)
