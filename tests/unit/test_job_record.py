"""``job_record`` (each engine's maker of the records it reads) makes the record ``JobRecord`` makes of the
same values: of its class, equal and hashed alike, frozen, every field in its place and the ones left out at
their defaults; too few or too many values are refused as the class refuses them."""

from __future__ import annotations

import dataclasses
from dataclasses import fields
from typing import Any

import pytest

from alkstore.engine import JobRecord, job_record

FIELDS = [f.name for f in fields(JobRecord)]
REQUIRED = sum(f.default is dataclasses.MISSING for f in fields(JobRecord))


def test_a_record_of_every_value_is_the_classes_own() -> None:
    values: tuple[Any, ...] = tuple(f"value of {name}" for name in FIELDS)  # each distinct: a swap would show
    made = job_record(*values)
    assert type(made) is JobRecord
    assert made == JobRecord(*values)
    assert hash(made) == hash(JobRecord(*values))
    assert [getattr(made, name) for name in FIELDS] == list(values)
    assert repr(made) == repr(JobRecord(*values))
    assert dataclasses.replace(made, fence=1) == job_record(*values[:16], 1, *values[17:]) != made


def test_the_values_left_out_are_at_their_defaults() -> None:
    values: tuple[Any, ...] = tuple(range(REQUIRED + 3))
    made = job_record(*values)
    assert made == JobRecord(*values)
    assert [getattr(made, f.name) for f in fields(JobRecord)[REQUIRED + 3 :]] == [
        f.default for f in fields(JobRecord)[REQUIRED + 3 :]
    ]


def test_it_is_frozen() -> None:
    made = job_record(*range(REQUIRED))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.fence = 2  # type: ignore[misc]
    assert not hasattr(made, "__dict__")


@pytest.mark.parametrize("count", [REQUIRED - 1, len(FIELDS) + 1])
def test_too_few_or_too_many_values_are_refused(count: int) -> None:
    with pytest.raises(TypeError):
        job_record(*range(count))
