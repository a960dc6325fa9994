"""The rules behind inspection (``alkstore.rules._operations``): lag, listing keys, cursors, throughput's minutes."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore import InvalidArgument, InvalidOptions, JobPhase
from alkstore.engine import JobKey
from alkstore.rules._operations import as_phase, check_page_size, lag, minute_of, read_cursor, write_cursor
from tests.support import T0

instants = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))
names = st.text(min_size=1, max_size=128)


def test_lag_is_how_long_the_oldest_ready_job_has_waited_and_never_negative() -> None:
    assert lag(T0 - timedelta(seconds=90, microseconds=5), T0) == timedelta(seconds=90, microseconds=5)
    assert lag(T0, T0) == timedelta(0)
    assert lag(T0 + timedelta(seconds=1), T0) == timedelta(0)
    assert lag(None, T0) == timedelta(0)


@given(at=instants, offset=st.integers(-14 * 60, 14 * 60))
def test_a_run_counts_in_the_utc_minute_that_holds_the_instant_it_ended(at: datetime, offset: int) -> None:
    minute = minute_of(at)
    assert minute <= at < minute + timedelta(minutes=1)
    assert (minute.second, minute.microsecond, minute.utcoffset()) == (0, 0, timedelta(0))
    assert minute_of(minute) == minute
    assert minute_of(at.astimezone(timezone(timedelta(minutes=offset)))) == minute, "the instant, not its zone"


@given(
    queue=names,
    phase=st.sampled_from([JobPhase.READY, JobPhase.DELAYED, JobPhase.DEAD]),
    job_id=st.integers(0, 2**63 - 1),
    priority=st.integers(-(2**31), 2**31 - 1),
    at=instants,
)
def test_a_cursor_gives_back_exactly_the_key_it_was_written_with(
    queue: str, phase: JobPhase, job_id: int, priority: int, at: datetime
) -> None:
    key = JobKey(job_id, priority, at)
    cursor = write_cursor(queue, phase, key)
    assert cursor.isascii()
    assert read_cursor(cursor, queue, phase) == key


@pytest.mark.parametrize("phase", [JobPhase.RUNNING, JobPhase.WAITING])
def test_a_cursor_of_a_listing_in_id_order_carries_the_id_alone(phase: JobPhase) -> None:
    cursor = write_cursor("jobs", phase, JobKey(17))
    assert read_cursor(cursor, "jobs", phase) == JobKey(17)
    with pytest.raises(InvalidOptions):
        read_cursor(write_cursor("jobs", phase, JobKey(17, at=T0)), "jobs", phase)
    with pytest.raises(InvalidOptions):
        read_cursor(write_cursor("jobs", JobPhase.READY, JobKey(17)), "jobs", JobPhase.READY)


def test_no_cursor_is_the_first_page_and_a_cursor_of_another_listing_is_refused() -> None:
    cursor = write_cursor("jobs", JobPhase.READY, JobKey(3, 1, T0))
    assert read_cursor(None, "jobs", JobPhase.READY) is None
    with pytest.raises(InvalidOptions, match="'other'"):
        read_cursor(cursor, "other", JobPhase.READY)
    with pytest.raises(InvalidOptions, match="delayed"):
        read_cursor(cursor, "jobs", JobPhase.DELAYED)
    with pytest.raises(InvalidArgument):
        read_cursor(42, "jobs", JobPhase.READY)


@pytest.mark.parametrize(
    "text",
    [
        '[2,"jobs","ready",1,0,0]',  # another version
        '[1,"jobs","ready",-1,0,0]',
        '[1,"jobs","ready",9223372036854775808,0,0]',
        '[1,"jobs","ready",1,2147483648,0]',
        '[1,"jobs","ready",1,0,"0"]',
        '[1,"jobs","ready",true,0,0]',
        '[1,"jobs","ready",1,0,1e300]',
        '[1,"jobs","ready",1,0,999999999999999999999]',
        '{"id": 1}',
    ],
)
def test_a_forged_cursor_is_refused(text: str) -> None:
    cursor = base64.urlsafe_b64encode(text.encode()).decode()
    with pytest.raises(InvalidOptions):
        read_cursor(cursor, "jobs", JobPhase.READY)


def test_phases_are_named_by_their_values_and_pages_are_1_to_1000_jobs() -> None:
    assert [as_phase(name) for name in ("ready", "delayed", "waiting", "running", "dead")] == list(JobPhase)
    assert as_phase(JobPhase.DEAD) is JobPhase.DEAD
    with pytest.raises(InvalidOptions, match="ready, delayed, waiting, running, dead"):
        as_phase("pending")
    with pytest.raises(InvalidArgument, match=r"^phase must be an alkstore.JobPhase or a str, not NoneType$"):
        as_phase(None)
    assert check_page_size(1) == 1
    assert check_page_size(1000) == 1000
    for bad in (0, 1001, -1):
        with pytest.raises(InvalidOptions, match=rf"^limit must be between 1 and 1000, not {bad}$"):
            check_page_size(bad)
    for wrong in (1.0, True, "5", None):
        with pytest.raises(InvalidArgument, match=rf"^limit must be an int, not {type(wrong).__name__}$"):
            check_page_size(wrong)
