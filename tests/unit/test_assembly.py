"""``assembler``: a frozen dataclass made by plain assignments is the object its class makes of the same
arguments: of that class, every field in its place (defaults and default factories as the class applies
them, keyword-only fields keyword-only), still frozen; a class it could not make alike is refused."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

import pytest

from alkstore.engine import ClaimRequest, JobRecord, NewJob
from alkstore.port._assembly import assembler
from alkstore.port._records import claim_request, new_job
from alkstore.rules._options import JobStamps, _job_stamps
from alkstore.store._job import Claim, Job, make_job

JOB_VALUES: tuple[Any, ...] = tuple(f"value of {f.name}" for f in fields(Job) if not f.kw_only)


def each_field(made: object) -> list[tuple[str, Any]]:
    return [(f.name, getattr(made, f.name)) for f in fields(made)]  # type: ignore[arg-type]


def test_a_claimed_job_is_the_one_its_class_makes() -> None:
    record = JobRecord(*range(17))
    made = make_job(*JOB_VALUES, _kernel="kernel", _record=record, _claimed_at="at")
    mine = Job(*JOB_VALUES, _kernel="kernel", _record=record, _claimed_at="at")  # type: ignore[arg-type]
    assert type(made) is Job
    assert [pair for pair in each_field(made) if pair[0] != "_claim"] == [
        pair for pair in each_field(mine) if pair[0] != "_claim"
    ]
    assert isinstance(made._claim, Claim)
    assert made == mine
    assert repr(made) == repr(mine)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.queue = "other"  # type: ignore[misc]


def test_each_job_gets_a_claim_of_its_own_and_its_keywords_stay_keywords() -> None:
    record = JobRecord(*range(17))
    first, second = (make_job(*JOB_VALUES, _kernel="kernel", _record=record) for _ in range(2))
    assert first._claim is not second._claim
    assert first._claimed_at is None
    with pytest.raises(TypeError):
        make_job(*JOB_VALUES, "kernel", record)


def test_a_class_it_could_not_make_alike_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True, slots=True)
    class Derived:
        value: int
        twice: int = field(init=False, default=0)

    for cls in (Checked, Derived):
        with pytest.raises(TypeError):
            assembler(cls)


def test_a_claim_request_is_the_one_its_class_makes() -> None:
    values = ("emails", "w-1", "now", "lease", 3, 4, "rate", "key rate")
    made = claim_request(*values)
    assert type(made) is ClaimRequest
    assert made == ClaimRequest(*values)  # type: ignore[arg-type]
    assert each_field(claim_request("emails", "w-1", "now", "lease")) == each_field(
        ClaimRequest("emails", "w-1", "now", "lease")  # type: ignore[arg-type]
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.limit = 1  # type: ignore[misc]


def test_a_new_job_and_its_stamps_are_the_ones_their_classes_make() -> None:
    makers: list[tuple[Any, Any, int]] = [(new_job, NewJob, 6), (_job_stamps, JobStamps, 4)]
    for make, cls, required in makers:
        values = tuple(f"value of {f.name}" for f in fields(cls))
        made = make(*values)
        assert type(made) is cls
        assert made == cls(*values)
        assert each_field(make(*values[:required])) == each_field(cls(*values[:required]))
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.priority = 1
    assert _job_stamps(priority=1, run_at="at", expires_at=None, max_attempts=2) == JobStamps(1, "at", None, 2)  # type: ignore[arg-type]
