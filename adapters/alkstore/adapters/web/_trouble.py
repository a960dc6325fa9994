"""What needs a human, read off one look at the store: the overview leads with it (ADR 065).

Plain functions of public records, free of any web framework. Each kind of trouble says what is
wrong, with the figures that show it, and where on the dashboard it is fixed:

- ``unserved``: a queue with ready work that no live worker serves (it grows until one does);
- ``lagging``: a served queue whose oldest ready job has waited longer than ``LAG_LIMIT``;
- ``no-leader``: schedules and no scheduler holding the lease (nothing fires them);
- ``overdue``: a schedule whose boundary passed ``OVERDUE_AFTER`` ago without firing;
- ``orphaned``: running jobs whose lease lapsed or whose worker is not live (they wait out their lease);
- ``worker-gone``: a worker that stopped reporting without removing itself (killed, or cut off);
- ``dying``: jobs of a queue that died within ``DYING_WITHIN``.

A worker is live while it reports: at least every ``IDLE_REPORT_EVERY`` (30 s), so one not seen
for ``LIVE_WITHIN`` (twice that) is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from alkstore import JobInfo, Leader, QueueStats, Schedule, WorkerInfo
from alkstore.display import span

__all__ = [
    "DYING_WITHIN",
    "LAG_LIMIT",
    "LIVE_WITHIN",
    "OVERDUE_AFTER",
    "Trouble",
    "WorkerView",
    "held_by",
    "is_live",
    "troubles",
    "worker_views",
]

#: A worker seen within this long is live (it reports at least every 30 s, ADR 044).
LIVE_WITHIN = timedelta(seconds=60)
#: A served queue whose oldest ready job waited longer than this is falling behind.
LAG_LIMIT = timedelta(seconds=60)
#: A schedule whose boundary passed this long ago without a fire is not firing.
OVERDUE_AFTER = timedelta(seconds=60)
#: Deaths within this long count as dead letters rising.
DYING_WITHIN = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class Trouble:
    """One thing that needs a human: its ``kind``, the ``subject`` it is about (a queue, a schedule, a
    worker), what is wrong, and the page where it is fixed (a route name, its query and path parameters)."""

    kind: str
    subject: str
    what: str
    route: str
    query: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""  # how the subject reads, when not as it is named (an outbox's backing queue)


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A worker as the workers page shows it: its report, whether it is live, and the running jobs it holds."""

    worker: WorkerInfo
    live: bool
    jobs: tuple[JobInfo, ...]


def is_live(worker: WorkerInfo, now: datetime) -> bool:
    return now - worker.seen_at <= LIVE_WITHIN


def held_by(running: Iterable[JobInfo]) -> dict[str, list[JobInfo]]:
    """The running jobs by the worker holding them."""
    held: dict[str, list[JobInfo]] = {}
    for job in running:
        if job.worker_id is not None:
            held.setdefault(job.worker_id, []).append(job)
    return held


def worker_views(workers: Sequence[WorkerInfo], running: Iterable[JobInfo], now: datetime) -> list[WorkerView]:
    """Each worker with its state and current jobs: the live first, then the gone, by id."""
    held = held_by(running)
    views = [WorkerView(w, is_live(w, now), tuple(held.get(w.id, ()))) for w in workers]
    return sorted(views, key=lambda view: (not view.live, view.worker.id))


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" if count == 1 else f"{count:,} {word}s"


def troubles(
    now: datetime,
    queues: Sequence[QueueStats],
    workers: Sequence[WorkerInfo],
    leader: Leader | None,
    schedules: Sequence[Schedule],
    running: Iterable[JobInfo],
    recent_dead: Mapping[str, Sequence[JobInfo]],
    dead_sample: int,
) -> list[Trouble]:
    """Everything that needs a human now, the most pressing kinds first.

    ``workers`` are those seen lately (the gone among them too), ``running`` the running jobs read,
    ``recent_dead`` each queue's newest dead jobs (newest first, at most ``dead_sample``).
    """
    found: list[Trouble] = []
    live = {w.id for w in workers if is_live(w, now)}
    served = {queue for w in workers if w.id in live for queue in w.queues}
    for stats in queues:
        if not stats.ready or stats.paused:
            continue
        waited = span(stats.lag)
        if stats.queue not in served and stats.outbox is not None:
            found.append(
                Trouble(
                    "unserved",
                    stats.queue,
                    f"{_plural(stats.ready, 'ready message')} and no live worker's courier delivers them "
                    f"(the oldest has waited {waited}).",
                    "outbox",
                    params={"outbox": stats.outbox},
                    label=f"outbox {stats.outbox}",
                )
            )
        elif stats.queue not in served:
            found.append(
                Trouble(
                    "unserved",
                    stats.queue,
                    f"{_plural(stats.ready, 'ready job')} and no live worker serves the queue "
                    f"(the oldest has waited {waited}).",
                    "queue",
                    params={"queue": stats.queue},
                )
            )
        elif stats.lag > LAG_LIMIT:
            found.append(
                Trouble(
                    "lagging",
                    stats.queue,
                    f"its oldest ready job has waited {waited}: its workers are not keeping up.",
                    "queue",
                    params={"queue": stats.queue},
                )
            )
    if schedules and leader is None:
        found.append(
            Trouble(
                "no-leader",
                "scheduler",
                f"no scheduler holds the lease: {_plural(len(schedules), 'schedule')} will not fire "
                "until one runs (alkstore schedules, or a worker with schedules on).",
                "schedules",
            )
        )
    for schedule in schedules:
        late = now - schedule.next_boundary
        if late > OVERDUE_AFTER:
            found.append(
                Trouble(
                    "overdue",
                    schedule.name,
                    f"its boundary {span(late)} ago has not fired (onto {schedule.queue}).",
                    "schedules",
                )
            )
    orphans: dict[str, list[JobInfo]] = {}
    for job in running:
        lapsed = job.lease_until is not None and job.lease_until <= now
        if lapsed or job.worker_id not in live:
            orphans.setdefault(job.queue, []).append(job)
    for queue, held in sorted(orphans.items()):
        past = sum(job.lease_until is not None and job.lease_until <= now for job in held)
        found.append(
            Trouble(
                "orphaned",
                queue,
                f"{_plural(len(held), 'running job')} held by a worker not seen live"
                + (f" ({past:,} past their lease)" if past else "")
                + (
                    ": it runs again once its lease lapses."
                    if len(held) == 1
                    else ": they run again once their lease lapses."
                ),
                "queue",
                query={"state": "running"},
                params={"queue": queue},
            )
        )
    for w in workers:
        if w.id not in live:
            found.append(
                Trouble(
                    "worker-gone",
                    w.id,
                    f"last seen {span(now - w.seen_at)} ago on {w.host} (pid {w.pid}), serving "
                    f"{', '.join(w.queues)}: it stopped without saying so.",
                    "workers",
                )
            )
    for queue, newest in sorted(recent_dead.items()):
        recent = [job for job in newest if job.died_at is not None and now - job.died_at <= DYING_WITHIN]
        if recent:
            more = "+" if len(recent) >= dead_sample else ""
            found.append(
                Trouble(
                    "dying",
                    queue,
                    f"{len(recent):,}{more} {'job' if len(recent) == 1 and not more else 'jobs'} "
                    "died in the last hour.",
                    "dead",
                    query={"queue": queue},
                )
            )
    return found
