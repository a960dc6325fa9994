"""The one spelling of a duration the CLI and the dashboard share."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alkstore.display import span


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=-5), "0s"),
        (timedelta(seconds=12.34), "12.3s"),
        (timedelta(seconds=59.9), "59.9s"),
        (timedelta(seconds=60), "1m00s"),
        (timedelta(minutes=4, seconds=5), "4m05s"),
        (timedelta(hours=3, minutes=12, seconds=59), "3h12m"),
        (timedelta(days=2, hours=4, minutes=30), "2d04h"),
        (timedelta(days=99, hours=23), "99d23h"),
        (timedelta(days=140, hours=5), "140d"),
    ],
)
def test_a_duration_reads_in_its_largest_units(delta: timedelta, text: str) -> None:
    assert span(delta) == text


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=9999)))
def test_a_duration_fits_seven_characters(delta: timedelta) -> None:
    assert len(span(delta)) <= 7
