"""A small workflow for the dashboard's pages: a diamond of dependencies, a dead parent, a job with a hostile
finished step asleep on a hostile event (ADR 073, 069)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import AsyncStore, EnqueueOpts, JobSuspended
from tests.web._seed import HOSTILE

__all__ = ["EVENT", "STEP", "seed_flow"]

#: A step's name and an event's name made of markup (both are printable, so the store takes them).
STEP = HOSTILE[0]
EVENT = '"><img src=x onerror=alert(2)>'


async def seed_flow(store: AsyncStore) -> dict[str, int]:
    """A diamond ``top`` -> ``left``, ``right`` -> ``bottom``; a dead ``lost`` with a child ``heir`` that runs
    anyway; and ``stepped``, a job with a hostile finished step, asleep on a hostile event."""
    flow = store.queue("flow")
    ids: dict[str, int] = {"top": await flow.enqueue({"n": "top"})}
    ids["left"] = await flow.enqueue({"n": "left"}, EnqueueOpts(after=[ids["top"]]))
    ids["right"] = await flow.enqueue({"n": "right"}, EnqueueOpts(after=[ids["top"]]))
    ids["bottom"] = await flow.enqueue({"n": "bottom"}, EnqueueOpts(after=[ids["left"], ids["right"]]))
    lost = store.queue("lost")
    ids["lost"] = await lost.enqueue({"n": "lost"}, EnqueueOpts(max_attempts=1))
    ids["heir"] = await lost.enqueue({"n": "heir"}, EnqueueOpts(after=[ids["lost"]], on_parent_failure="run"))
    dying = await lost.claim("w-1")
    assert dying is not None
    assert dying.id == ids["lost"]
    await dying.fail("gone")
    steps = store.queue("steps")
    ids["stepped"] = await steps.enqueue({"n": "stepped"})
    job = await steps.claim("w-2")
    assert job is not None
    await job.step(STEP, lambda: {"said": HOSTILE[1]})
    await job.step("s" * 128, lambda: "x" * 3_000)  # a name as long as names go, unbroken
    with pytest.raises(JobSuspended):
        await job.wait_for(EVENT, timedelta(hours=2))
    return ids
