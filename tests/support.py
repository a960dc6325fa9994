"""What every test directory shares: start instants, patience, and the CI switch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from alkstore import Job, JobInfo, Queue, Store

__all__ = ["MIDNIGHT", "PATIENCE", "T0", "must_claim", "must_get", "run_probe", "under_ci", "url_of", "wait_until"]

#: Where manual clocks start: a microsecond part, so stamps prove microsecond round trips.
T0 = datetime(2031, 5, 17, 9, 30, 0, 123456, tzinfo=UTC)
#: A round start, for tests whose figures read best from midnight.
MIDNIGHT = datetime(2030, 1, 1, tzinfo=UTC)
#: Wall seconds a test waits for another thread or process to make progress (generous: the
#: machine may be loaded); never a bound a passing test comes near.
PATIENCE = 30.0


def url_of(dsn: str, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
    """``dsn`` (a ``postgresql://`` URL) with its user and password, or its database, replaced."""
    parts = urlsplit(dsn)
    netloc = parts.netloc
    if user is not None:
        host = netloc.rpartition("@")[2]
        netloc = f"{quote(user, safe='')}:{quote(password or '', safe='')}@{host}"
    path = parts.path if database is None else f"/{database}"
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


def under_ci() -> bool:
    """Whether this run is CI, where a test that cannot reach what it needs fails rather than skips."""
    return os.environ.get("CI", "").lower() == "true"


def wait_until(predicate: Callable[[], object], what: str, timeout: float = PATIENCE) -> None:
    """Poll ``predicate`` until it holds; fail the test with ``what`` after ``timeout`` wall seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def must_claim(queue: Queue, worker_id: str = "w") -> Job:
    """The job ``queue.claim(worker_id)`` returns at once, failing the test if there is none."""
    job = queue.claim(worker_id)
    assert job is not None, f"nothing to claim on {queue.name!r}"
    return job


def must_get(store: Store, job_id: int) -> JobInfo:
    """``store.get_job(job_id)``, failing the test if the job is gone."""
    info = store.get_job(job_id)
    assert info is not None, f"job {job_id} is gone"
    return info


def run_probe(source: str, cwd: Path) -> dict[str, Any]:
    """Run ``source`` in a fresh interpreter in ``cwd``; the JSON object it printed last (it must succeed)."""
    result = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report
