"""Periodic Django tasks (``OPTIONS["schedules"]``): fired once per boundary by whichever worker leads, with catch-up.

Two ``manage.py alkstore_worker`` processes: the first leads the scheduler and serves ``default``;
the second serves ``ticks`` (so it registers the ``@every 1s`` schedule of ``shop.tasks.tick``)
and stands by. The leader is SIGKILLed between boundaries; once its lease lapses the second leads,
catches up the boundaries missed meanwhile, and every boundary from the first run to the last is
fired exactly once (one job per boundary), without a gap.
"""

from __future__ import annotations

import signal
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.tasks import task_backends

from alkstore.adapters.django.backend import AlkstoreBackend
from alkstore.adapters.django.runner import periodic_registry
from tests._proc import LiveProcess
from tests.support import PATIENCE, wait_until

#: Transactional, flushing only the tables of these apps after each test (not the admin's: they are slow to flush).
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True, available_apps=["alkstore.adapters.django"]),
]

MANAGE = Path(__file__).with_name("manage.py")
SECOND = timedelta(seconds=1)
SEND_EMAIL = "tests.django.project.shop.tasks.send_email"


def worker(tick_log: Path, *args: str) -> LiveProcess:
    """``manage.py alkstore_worker`` with ``args``, the tick task writing to ``tick_log``; started once serving."""
    process = LiveProcess([sys.executable, str(MANAGE), "alkstore_worker", *args], env={"SHOP_TICK_LOG": str(tick_log)})
    process.wait_for(lambda name, line: name == "stdout" and "serving" in line, PATIENCE)
    return process


def runs(tick_log: Path) -> list[tuple[int, datetime, datetime]]:
    """Each run of the tick task so far: (job id, boundary, enqueued at)."""
    if not tick_log.exists():
        return []
    lines = [line.split() for line in tick_log.read_text(encoding="utf-8").splitlines()]
    return [(int(job), datetime.fromisoformat(at), datetime.fromisoformat(enqueued)) for job, at, enqueued in lines]


def leader_pid() -> int | None:
    """The process id of the scheduler's leader (its owner token is host:pid:…), or ``None``."""
    leader = task_backends["default"].store.leader()
    return None if leader is None else int(leader.owner.split(":")[1])


def test_the_registry_fires_each_schedule_as_its_task_would_be_enqueued() -> None:
    backend = AlkstoreBackend(
        "checked",
        {"QUEUES": ["emails"], "OPTIONS": {"schedules": {SEND_EMAIL: {"every": "@every 5m", "kwargs": {"to": "a@b"}}}}},
    )

    async def handle(payload: object, job: object) -> None:
        """Never run here."""

    (periodic,) = periodic_registry(backend.periodic(), handle).periodic_tasks
    assert (periodic.task.name, periodic.task.queue, periodic.spec) == (SEND_EMAIL, "emails", "@every 5m")
    assert periodic.kwargs == {"args": [], "kwargs": {"to": "a@b"}}  # the payload an enqueue writes
    assert periodic.opts.priority == 50  # the task's


def test_a_periodic_task_fires_once_per_boundary_across_two_workers_when_the_leader_is_killed(tmp_path: Path) -> None:
    log = tmp_path / "ticks"
    task_backends["default"].store.unschedule("tests.django.project.shop.tasks.tick")  # a fresh phase and backlog
    with worker(log, "--queues", "default") as first:
        wait_until(lambda: leader_pid() == first.proc.pid, "the first worker leads")
        with worker(log, "--queues", "ticks") as second:
            wait_until(lambda: len(runs(log)) >= 2, "the second worker ran two fires of the first")
            first.proc.send_signal(signal.SIGKILL)
            first.finish()
            killed_at = max(boundary for _, boundary, _ in runs(log))
            wait_until(lambda: leader_pid() == second.proc.pid, "the second worker leads once the lease lapsed")
            wait_until(
                lambda: max(boundary for _, boundary, _ in runs(log)) >= killed_at + 3 * SECOND,
                "the second worker fires boundaries of its own",
            )
            second.proc.send_signal(signal.SIGTERM)
            assert second.finish() == 0
    done = runs(log)
    boundaries = sorted({boundary for _, boundary, _ in done})
    jobs_per_boundary = {boundary: {job for job, at, _ in done if at == boundary} for boundary in boundaries}
    assert all(len(jobs) == 1 for jobs in jobs_per_boundary.values()), jobs_per_boundary  # fired once each
    first_at, last_at = boundaries[0], boundaries[-1]
    expected = [first_at + k * SECOND for k in range(round((last_at - first_at) / SECOND) + 1)]
    assert boundaries == expected  # no boundary missed, the killed leader's gap caught up
    assert any(enqueued - at > 2 * SECOND for _, at, enqueued in done)  # some were fired late: the catch-up
