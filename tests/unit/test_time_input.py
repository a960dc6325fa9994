"""Bad instants and steps given to the time helpers are ``InvalidOptions`` (a ``ValueError``), never a bare error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

import pytest

from alkstore import AlkstoreError, EnqueueOpts, InvalidOptions, ManualClock
from alkstore.port._time import as_utc
from tests.support import T0

AHEAD, BEHIND = timezone(timedelta(hours=5)), timezone(timedelta(hours=-5))


class BrokenZone(tzinfo):
    """A caller's time zone whose offset cannot be read."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        raise RuntimeError("no offset")

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str:
        return "broken"


NO_UTC_EQUIVALENT = [
    datetime.min.replace(tzinfo=AHEAD),
    datetime.max.replace(tzinfo=BEHIND),
    datetime(2030, 1, 1, tzinfo=BrokenZone()),
]


@pytest.mark.parametrize("instant", NO_UTC_EQUIVALENT, ids=["first day ahead", "last day behind", "broken zone"])
def test_an_instant_with_no_utc_equivalent_is_invalid_options_wherever_it_is_given(instant: datetime) -> None:
    calls: list[Any] = [
        lambda: as_utc(instant, "run_at"),
        lambda: EnqueueOpts(run_at=instant),
        lambda: EnqueueOpts(expires=instant),
        lambda: ManualClock(instant),
        lambda: ManualClock(T0).set(instant),
    ]
    for call in calls:
        with pytest.raises(InvalidOptions):
            call()


def test_the_edges_of_the_range_themselves_convert() -> None:
    assert as_utc(datetime.min.replace(tzinfo=BEHIND), "x") == datetime.min.replace(tzinfo=UTC) + timedelta(hours=5)
    assert as_utc(datetime.max.replace(tzinfo=AHEAD), "x") == datetime.max.replace(tzinfo=UTC) - timedelta(hours=5)


@pytest.mark.parametrize("start", [datetime(2030, 1, 1), "2030-01-01T00:00:00Z", 0, None])
def test_a_manual_clock_refuses_a_naive_or_non_datetime_start_as_an_alkstore_value_error(start: Any) -> None:
    with pytest.raises(InvalidOptions) as refused:
        ManualClock(start)
    assert isinstance(refused.value, AlkstoreError)
    assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    "step", [-1, timedelta(seconds=-1), float("inf"), float("nan"), 1e20, "1", None, True, timedelta.max]
)
def test_a_manual_clock_refuses_a_bad_step_and_stays_where_it_was(step: Any) -> None:
    clock = ManualClock(T0)
    with pytest.raises(InvalidOptions):
        clock.advance(step)
    with pytest.raises(InvalidOptions):
        clock.set(datetime(2030, 1, 1))
    assert clock.now() == T0


def test_a_manual_clock_refuses_to_advance_past_the_last_instant() -> None:
    clock = ManualClock(datetime.max.replace(tzinfo=UTC) - timedelta(seconds=1))
    with pytest.raises(InvalidOptions, match="last instant"):
        clock.advance(2)
    assert clock.advance(1) == datetime.max.replace(tzinfo=UTC)
