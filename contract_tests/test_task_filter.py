"""A listing's task filter (``Store.jobs(..., task=...)``, ADR 048): the jobs of one task, on every engine."""

from __future__ import annotations

import itertools
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from alkstore import InvalidName, JobPhase, ManualClock, Store
from alkstore.engine import NewJob

from ._profiles import sized

_QUEUES = itertools.count()


def listed(store: Store, queue: str, phase: JobPhase = JobPhase.READY, limit: int = 50, **filters: Any) -> list[int]:
    """Every id a listing shows, page after page."""
    found: list[int] = []
    cursor: str | None = None
    while True:
        page = store.jobs(queue, phase, limit=limit, cursor=cursor, **filters)
        found += [job.id for job in page.jobs]
        assert len(found) <= 1000, "a listing whose pages never end"
        if page.cursor is None:
            return found
        cursor = page.cursor


def enqueue(store: Store, queue: str, jobs: list[tuple[str | None, Any]], delay: float = 0) -> list[int]:
    """``jobs`` (task, payload) enqueued as a task's enqueue stores them, due after ``delay`` seconds."""
    now = store.clock.now()
    run_at = now + timedelta(seconds=delay)
    new = [NewJob(queue, json.dumps(payload).encode(), 0, run_at, None, 3, task=task) for task, payload in jobs]
    return [int(job_id) for job_id in store.engine.enqueue(new, now)]


def test_a_task_filter_keeps_that_tasks_jobs_in_every_phase_page_after_page(store: Store) -> None:
    ready = enqueue(store, "mixed", [("mail", {"n": 1}), ("report", {"n": 2}), (None, {"n": 3}), ("mail", {"n": 4})])
    delayed = enqueue(store, "mixed", [("report", {"n": 5}), ("mail", {"n": 6})], delay=3600)
    running = store.queue("mixed").claim_many("w", 2)
    assert [job.id for job in running] == ready[:2]
    running[1].fail("boom")  # the report job dies

    assert listed(store, "mixed", task="mail") == [ready[3]]
    assert listed(store, "mixed", task="report") == []
    assert listed(store, "mixed", JobPhase.RUNNING, task="mail") == [ready[0]]
    assert listed(store, "mixed", JobPhase.DEAD, task="report") == [ready[1]]
    assert listed(store, "mixed", JobPhase.DEAD, task="mail") == []
    assert listed(store, "mixed", JobPhase.DEAD, task="report", reverse=True) == [ready[1]]
    assert listed(store, "mixed", JobPhase.RUNNING, task="mail", reverse=True) == [ready[0]]
    assert listed(store, "mixed", JobPhase.RUNNING, task="report", reverse=True) == []
    assert listed(store, "mixed", JobPhase.DEAD, task="mail", reverse=True) == []
    assert listed(store, "mixed", JobPhase.DELAYED, task="mail") == [delayed[1]]
    assert listed(store, "mixed", JobPhase.DELAYED, task="mail", reverse=True) == [delayed[1]]
    assert listed(store, "mixed", JobPhase.DELAYED, task="report", limit=1) == [delayed[0]]
    assert listed(store, "mixed", task="mail", contains={"n": 4}) == [ready[3]]
    assert listed(store, "mixed", task="mail", contains={"n": 3}) == [], "both filters hold"
    assert listed(store, "mixed", task="nobody") == []
    assert listed(store, "mixed") == [ready[2], ready[3]], "no filter lists plain jobs too"


def test_a_job_is_delayed_until_its_instant_whatever_state_its_enqueue_stored(store: Store) -> None:
    """DELAYED is ``run_at > now`` at the listing: a job due at the instant listed is ready, and so is
    one stored delayed whose instant has come; one stored due by a host whose clock runs ahead is
    still delayed here. The filters and both directions hold for each."""
    clock = store.clock
    assert isinstance(clock, ManualClock)
    (due,) = enqueue(store, "when", [("mail", {"n": 1})])  # run_at == now: due at once
    later = enqueue(store, "when", [("mail", {"n": 2}), ("report", {"n": 5})], delay=60)
    ahead_now = clock.now() + timedelta(seconds=60)
    ahead = [
        int(job_id)
        for job_id in store.engine.enqueue(
            [
                NewJob("when", json.dumps({"n": n}).encode(), 0, ahead_now, None, 3, task=task)
                for task, n in (("mail", 2), ("report", 3))
            ],
            ahead_now,  # the host's now: the jobs are stored due
        )
    ]
    not_yet = sorted([*later, *ahead])  # one instant: in id order
    for reverse in (False, True):
        mail = [later[0], ahead[0]]
        in_order, mail_in_order = (not_yet[::-1], mail[::-1]) if reverse else (not_yet, mail)
        assert listed(store, "when", reverse=reverse, limit=1) == [due]
        assert listed(store, "when", JobPhase.DELAYED, reverse=reverse, limit=1) == in_order
        assert listed(store, "when", JobPhase.DELAYED, reverse=reverse, limit=1, task="mail") == mail_in_order
        assert listed(store, "when", JobPhase.DELAYED, reverse=reverse, limit=1, contains={"n": 2}) == mail_in_order
        assert listed(store, "when", JobPhase.DELAYED, reverse=reverse, task="report", contains={"n": 3}) == [ahead[1]]
    clock.advance(60)  # every instant has come
    for reverse in (False, True):
        assert listed(store, "when", JobPhase.DELAYED, reverse=reverse) == []
        assert sorted(listed(store, "when", reverse=reverse, limit=1)) == sorted([due, *not_yet])
        assert sorted(listed(store, "when", reverse=reverse, limit=1, task="report")) == [later[1], ahead[1]]
        assert listed(store, "when", reverse=reverse, contains={"n": 3}) == [ahead[1]]


def test_a_task_filter_keeps_that_tasks_waiting_jobs_in_both_directions(store: Store) -> None:
    now = store.clock.now()
    line = [("mail", 1), ("mail", 2), ("report", 3), ("mail", 4)]  # one ordering key: the first runs first
    jobs = [
        NewJob("line", json.dumps({"n": n}).encode(), 0, now, None, 3, task=task, ordering_key="k") for task, n in line
    ]
    head, *waiting = (int(job_id) for job_id in store.engine.enqueue(jobs, now))
    for reverse in (False, True):
        turn = -1 if reverse else 1
        assert listed(store, "line", JobPhase.WAITING, limit=1, reverse=reverse) == waiting[::turn]
        assert (
            listed(store, "line", JobPhase.WAITING, limit=1, reverse=reverse, task="mail")
            == [
                waiting[0],
                waiting[2],
            ][::turn]
        )
        assert listed(store, "line", JobPhase.WAITING, reverse=reverse, task="report") == [waiting[1]]
        assert listed(store, "line", JobPhase.WAITING, reverse=reverse, contains={"n": 4}) == [waiting[2]]
        assert listed(store, "line", reverse=reverse, task="mail") == [head]


@pytest.mark.parametrize("bad", ["", " mail", "a\nb", "x" * 129, 42, b"mail"])
def test_a_task_filter_is_a_task_name(store: Store, bad: Any) -> None:
    with pytest.raises(InvalidName):
        store.jobs("mixed", task=bad)


@sized(0.5, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=st.lists(
        st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 2), st.booleans()), min_size=1, max_size=8
    ),
    task=st.sampled_from(["a", "b"]),
    contains=st.sampled_from([None, {"k": 0}, {"k": 1}]),
    phase=st.sampled_from([JobPhase.READY, JobPhase.DELAYED]),
    reverse=st.booleans(),
    limit=st.integers(1, 3),
)
def test_the_filter_is_the_listing_with_the_other_tasks_jobs_left_out(
    store: Store,
    jobs: list[tuple[str | None, int, bool]],
    task: str,
    contains: dict[str, int] | None,
    phase: JobPhase,
    reverse: bool,
    limit: int,
) -> None:
    queue = f"model-{next(_QUEUES)}"
    made: dict[int, tuple[str | None, int]] = {}
    for name, k, later in jobs:
        (job_id,) = enqueue(store, queue, [(name, {"k": k})], delay=3600 if later else 0)
        made[job_id] = (name, k)
    everything = listed(store, queue, phase, reverse=reverse)
    expected = [
        job_id
        for job_id in everything
        if made[job_id][0] == task and (contains is None or made[job_id][1] == contains["k"])
    ]
    assert listed(store, queue, phase, limit, task=task, contains=contains, reverse=reverse) == expected
