"""``Job.fence``: each claim of a job carries a higher fence, and a stale holder's fence is the refused one."""

from __future__ import annotations

import asyncio

import pytest

import alkstore
from alkstore import EnqueueOpts, LeaseLost, ManualClock
from tests.support import T0


def test_each_claim_of_a_job_carries_a_higher_fence_and_the_lower_one_is_refused() -> None:
    clock = ManualClock(T0)
    with alkstore.open("memory://", clock=clock) as store:
        queue = store.queue("q")
        job_id = queue.enqueue("x", EnqueueOpts(visibility_timeout=10))
        first = queue.claim("a")
        assert first is not None
        clock.advance(11)  # the lease lapses; the job is claimed again
        second = queue.claim("b")
        assert second is not None
        assert (first.id, second.id) == (job_id, job_id)
        assert second.fence > first.fence >= 1
        with pytest.raises(LeaseLost, match=f"fence {first.fence}"):
            first.ack()
        second.ack()


def test_the_async_job_reports_the_same_fence() -> None:
    async def claimed_fences() -> list[int]:
        clock = ManualClock(T0)
        async with await alkstore.open_async("memory://", clock=clock) as store:
            queue = store.queue("q")
            await queue.enqueue("x", EnqueueOpts(visibility_timeout=10))
            fences = []
            for _ in range(3):
                job = await queue.claim("w")
                assert job is not None
                fences.append(job.fence)
                clock.advance(11)
            return fences

    assert asyncio.run(claimed_fences()) == [1, 2, 3]
