"""The jobs of one enqueue (``new_jobs``): stamped alike, one per payload; without per-job keys they come as
``Alike`` (an engine may read the batch's path and fields from its first job), with them as a plain list."""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import timedelta

from alkstore.engine import Alike, NewJob
from alkstore.rules._options import JobStamps
from alkstore.rules._records import new_jobs
from tests.support import MIDNIGHT

STAMPS = JobStamps(
    priority=4,
    run_at=MIDNIGHT,
    expires_at=MIDNIGHT + timedelta(hours=1),
    max_attempts=7,
    visibility=timedelta(seconds=30),
    unique_key="unique",
    unique_running=True,
    ordering_key="ordering",
    rate_key="rated",
    after=(3, 5),
)


def test_jobs_without_keys_of_their_own_are_alike_but_for_their_payloads() -> None:
    jobs = new_jobs("emails", [b"1", b"2", b"3"], STAMPS, "send", "00-trace-01")
    assert type(jobs) is Alike
    assert [job.payload for job in jobs] == [b"1", b"2", b"3"]
    first = jobs[0]
    assert first == NewJob(
        "emails", b"1", 4, MIDNIGHT, MIDNIGHT + timedelta(hours=1), 7, timedelta(seconds=30), "send",
        "00-trace-01", "unique", True, "ordering", "rated", (3, 5), (), STAMPS.on_parent_failure,
    )  # fmt: skip
    for job in jobs:
        assert type(job) is NewJob
        assert [getattr(job, f.name) for f in fields(NewJob) if f.name != "payload"] == [
            getattr(first, f.name) for f in fields(NewJob) if f.name != "payload"
        ]


def test_jobs_with_keys_of_their_own_are_a_plain_list() -> None:
    keyed = [("u1", False, "o1", None), ("u2", True, None, "r2")]
    jobs = new_jobs(
        "emails",
        [b"1", b"2"],
        replace(STAMPS, unique_key=None, unique_running=False, ordering_key=None, rate_key=None),
        None,
        None,
        keyed,
    )
    assert type(jobs) is list
    assert [(job.unique_key, job.unique_running, job.ordering_key, job.rate_key) for job in jobs] == keyed
