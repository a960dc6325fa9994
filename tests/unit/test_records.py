"""A ``JobInfo`` is built from a ``JobRecord`` by field name: each field copied from the record's of its
name holds that value (every one distinct here, so two swapped slots would show), and the fields worked
out (payload, errors, dependencies) hold what they are worked out from."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta

from alkstore import JobInfo
from alkstore.engine import JobRecord, JobState
from alkstore.port._dependency_records import ParentLink
from alkstore.rules._records import info_of
from tests.support import MIDNIGHT

DERIVED = {"payload", "errors", "steps", "waits_for", "parents", "waiting_on", "children"}


def distinct_record() -> JobRecord:
    """A record whose every field JobInfo copies holds a value no other such field holds."""
    return JobRecord(
        id=7,
        queue="emails",
        payload=b'{"to":"ada"}',
        state=JobState.RUNNING,
        priority=3,
        run_at=MIDNIGHT,
        expires_at=MIDNIGHT + timedelta(hours=1),
        attempts=2,
        max_attempts=5,
        last_error="boom",
        schedule="nightly",
        boundary=MIDNIGHT + timedelta(hours=2),
        enqueued_at=MIDNIGHT - timedelta(hours=1),
        worker_id="w-1",
        lease_until=MIDNIGHT + timedelta(hours=3),
        died_at=MIDNIGHT + timedelta(hours=4),
        fence=11,
        task="send",
        last_traceback="Traceback ...",
        trace="00-trace-01",
        unique_key="unique",
        ordering_key="ordering",
        waiting=True,
        cancel_requested=False,  # waiting is True: the two flags differ too
        claimed_at=MIDNIGHT + timedelta(hours=5),
        rate_key="rated",
        parents=(1, 2),
        parent_links=(ParentLink(1, "succeeded"), ParentLink(2, "waiting")),
        children=(9,),
    )


def test_each_copied_field_holds_the_records_field_of_its_name() -> None:
    record = distinct_record()
    info = info_of(record, {"to": "ada"})
    copied = [f.name for f in fields(JobInfo) if f.name not in DERIVED]
    assert copied
    values = [getattr(record, name) for name in copied]
    assert len({repr(value) for value in values}) == len(values)
    for name in copied:
        assert getattr(info, name) == getattr(record, name), name


def test_the_worked_out_fields_hold_the_payload_the_errors_and_the_dependencies() -> None:
    info = info_of(distinct_record(), {"to": "ada"})
    assert info.payload == {"to": "ada"}
    assert info.errors == ()
    assert (info.parents, info.waiting_on, info.children) == ((1, 2), (2,), (9,))
    assert (info.steps, info.waits_for) == ((), None)  # get_job adds them (ADR 069)
