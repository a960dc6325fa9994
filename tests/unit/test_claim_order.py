"""The claim's sort key, written out for its hot path, sorts exactly as the ready listing's declared order."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import timedelta, timezone

from alkstore.engine import JobPhase, JobRecord, JobState, claim_order, listing_order
from tests.support import MIDNIGHT


def ready(job_id: int, priority: int, minutes: int, hours_east: int = 0) -> JobRecord:
    """A ready job; its ``run_at`` given in a zone ``hours_east`` of UTC (the same instant whatever the zone)."""
    at = (MIDNIGHT + timedelta(minutes=minutes)).astimezone(timezone(timedelta(hours=hours_east)))
    return JobRecord(
        id=job_id,
        queue="q",
        payload=b"{}",
        state=JobState.PENDING,
        priority=priority,
        run_at=at,
        expires_at=None,
        attempts=0,
        max_attempts=3,
        last_error=None,
        schedule=None,
        boundary=None,
        enqueued_at=MIDNIGHT,
        worker_id=None,
        lease_until=None,
        died_at=None,
        fence=0,
    )


def test_the_claim_key_orders_every_pair_as_the_ready_listing_does() -> None:
    records = [
        ready(job_id, priority, minutes, east)
        for job_id, (priority, minutes, east) in enumerate(itertools.product((-2, 0, 5), (0, 1, 90), (0, 3)), start=1)
    ]
    records += [dataclasses.replace(records[0], id=100), dataclasses.replace(records[-1], id=0)]
    listed = listing_order(JobPhase.READY)
    for a, b in itertools.product(records, repeat=2):
        assert (claim_order(a) < claim_order(b)) == (listed(a) < listed(b)), (a.id, b.id)
    assert sorted(records, key=claim_order) == sorted(records, key=listed)
