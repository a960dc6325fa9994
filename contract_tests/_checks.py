"""Small assertions shared by the contract tests."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from alkstore import JobInfo

__all__ = ["assert_utc", "job_fields"]


def assert_utc(*instants: datetime | None) -> None:
    """Instants at the public surface are timezone-aware UTC (``None`` is allowed where a field is optional)."""
    for instant in instants:
        if instant is not None:
            assert instant.utcoffset() == timedelta(0), f"{instant!r} is not UTC"


def job_fields(job: JobInfo) -> dict[str, object]:
    """Every field of a job snapshot (or a claimed ``Job``), by name."""
    return {field.name: getattr(job, field.name) for field in dataclasses.fields(JobInfo)}
