"""Small assertions shared by the contract tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from alkstore import JobInfo, Store

__all__ = ["assert_utc", "job_fields"]


def assert_utc(*instants: datetime | None) -> None:
    """Instants at the public surface are timezone-aware UTC (``None`` is allowed where a field is optional)."""
    for instant in instants:
        if instant is not None:
            assert instant.utcoffset() == timedelta(0), f"{instant!r} is not UTC"


def job_fields(job: JobInfo) -> dict[str, object]:
    """Every field of a job snapshot (or a claimed ``Job``), by name."""
    return {field.name: getattr(job, field.name) for field in dataclasses.fields(JobInfo)}


def committed(store: Store, call: Callable[[Any], object]) -> object:
    """Run ``call(tx)`` in a transaction that commits even if the call raises; re-raise afterwards."""
    error: Exception | None = None
    result: object = None
    with store.transaction() as tx:
        try:
            result = call(tx)
        except Exception as exc:
            error = exc
    if error is not None:
        raise error
    return result
