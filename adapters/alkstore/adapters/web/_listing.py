"""The dashboard's listing pages (ADR 065): dead letters grouped, the workers, the locks, and the live
fragment each one's counts refresh from.

``Listing`` is a part of the dashboard (``_app._Dashboard`` inherits it, as it does ``Acting``). Each
page's refreshing region is a template of its own (``_dead_counts.html``, ``_workers.html``,
``_locks.html``) that the page includes and its fragment route serves alone, from the same reads, so
a refresh shows what a reload would. The dead-letters page refreshes its counts only: its groups read
up to ``DEAD_SCAN`` jobs, and a refresh must not undo the operator's ticked boxes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from alkstore import JobInfo, JobPhase, QueueStats
from alkstore.errors import InvalidArgument, InvalidName

from ._threaded import ThreadedStore
from ._trouble import LIVE_WITHIN, worker_views
from ._views import DeadGroup, DeadGroups, group_key, key_of

if TYPE_CHECKING:
    from alkstore import AsyncStore

__all__ = [
    "DEAD_GROUP_PAGE",
    "DEAD_SCAN",
    "DEAD_SCAN_EACH",
    "GONE_WITHIN",
    "LOCKS_PAGE",
    "RUNNING_SAMPLE",
    "WORKERS_WITHIN",
    "Listing",
]

#: The ids of a dead-letter group's page at a time; the held locks the locks page lists at a time.
DEAD_GROUP_PAGE = 200
LOCKS_PAGE = 200
#: The dead jobs of a queue the dead-letters page groups (all of them, up to this many, newest death
#: first); of each queue when every queue's are shown; the ids of each group it shows (its own page
#: has them all).
DEAD_SCAN = 100_000
DEAD_SCAN_EACH = 10_000
GROUP_IDS_SHOWN = 10
#: The most jobs one listing call returns (``AsyncStore.jobs``' limit).
_READ = 1000
#: The workers the overview lists (the live ones); how far back the workers page and the trouble list
#: look for workers gone without a word (a reporting worker forgets them after an hour); the running
#: jobs read per queue to tell whose worker is gone.
WORKERS_WITHIN = LIVE_WITHIN.total_seconds()
GONE_WITHIN = 3600.0
RUNNING_SAMPLE = 200


class Listing:
    """The listing pages' handlers and their fragments; ``_app._Dashboard`` inherits them."""

    if TYPE_CHECKING:
        cap: int | None

        @property
        def store(self) -> AsyncStore | ThreadedStore: ...

        def render(self, request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse: ...

    async def _running(self, queues: Iterable[QueueStats]) -> list[JobInfo]:
        """The running jobs of ``queues`` (up to ``RUNNING_SAMPLE`` a queue), oldest first."""
        running: list[JobInfo] = []
        for stats in queues:
            if stats.running:
                running.extend((await self.store.jobs(stats.queue, JobPhase.RUNNING, limit=RUNNING_SAMPLE)).jobs)
        return running

    # -- dead letters ----------------------------------------------------------------

    async def _dead_jobs(self, queue: str, most: int = DEAD_SCAN) -> AsyncIterator[JobInfo]:
        """``queue``'s dead jobs, newest death first, up to ``most`` of them (read ``_READ`` at a time);
        none for a name no queue can have."""
        cursor: str | None = None
        read = 0
        while read < most:
            try:
                page = await self.store.jobs(queue, JobPhase.DEAD, limit=min(_READ, most - read), cursor=cursor)
            except (InvalidName, InvalidArgument):
                return
            for job in page.jobs:
                yield job
            read += len(page.jobs)
            cursor = page.cursor
            if cursor is None:
                return

    async def _dead_groups(self, queue: str, most: int) -> tuple[list[DeadGroup], int]:
        """``queue``'s newest ``most`` dead jobs grouped (``group_dead``), and how many were read."""
        groups = DeadGroups(queue, GROUP_IDS_SHOWN)
        async for job in self._dead_jobs(queue, most):
            groups.add(job)
        return groups.ordered(), groups.read

    async def _group_ids(self, queue: str, key: str) -> tuple[DeadGroup | None, list[int]]:
        """The group of ``queue``'s dead jobs named ``key``, and the ids of all its jobs read (newest death first)."""
        ids: list[int] = []
        groups = DeadGroups(queue, 0)
        found: DeadGroup | None = None
        async for job in self._dead_jobs(queue):
            if group_key(*key_of(job)) == key:
                found = groups.add(job)
                ids.append(job.id)
        return found, ids

    async def _dead_counts(self, request: Request) -> dict[str, Any]:
        """The dead-letters page's live figures: each queue with dead jobs (or the one asked for), counted
        up to the cap."""
        only = request.query_params.get("queue") or None
        try:
            listed = await self.store.queue_stats(only, cap=self.cap)
        except InvalidName:
            listed = []
        return {"only": only, "counted": [stats for stats in listed if stats.dead], "at": self.store.clock.now()}

    async def dead(self, request: Request) -> Response:
        counts = await self._dead_counts(request)
        only = counts["only"]
        scan = DEAD_SCAN if only else DEAD_SCAN_EACH
        queues = []
        for stats in counts["counted"]:
            groups, read = await self._dead_groups(stats.queue, scan)
            queues.append((stats, groups, read))
        return self.render(request, "dead.html", page="dead", queues=queues, scan=scan, **counts)

    async def dead_fragment(self, request: Request) -> Response:
        """The dead-letters page's counts, the fragment it refreshes."""
        return self.render(request, "_dead_counts.html", **await self._dead_counts(request))

    async def dead_group(self, request: Request) -> Response:
        """One group's dead jobs, their ids ``DEAD_GROUP_PAGE`` at a time, with its newest error in full."""
        queue = request.query_params.get("queue", "")
        key = request.query_params.get("key", "")
        try:
            number = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            raise HTTPException(400, "the page is not a number") from None
        group, ids = await self._group_ids(queue, key)
        if group is None:
            raise HTTPException(404, f"no dead jobs of {queue} in that group (requeued, purged, or never there)")
        pages = max(1, -(-len(ids) // DEAD_GROUP_PAGE))
        number = min(number, pages)
        chosen = ids[(number - 1) * DEAD_GROUP_PAGE : number * DEAD_GROUP_PAGE]
        return self.render(
            request, "dead_group.html", page="dead", group=group, ids=chosen, number=number, pages=pages, scan=DEAD_SCAN
        )

    # -- workers and locks -----------------------------------------------------------

    async def _workers_context(self) -> dict[str, Any]:
        """The workers seen in the last hour: live or gone, what each serves and the running jobs it holds."""
        at = self.store.clock.now()
        seen = await self.store.workers(GONE_WITHIN)
        running = await self._running(await self.store.queue_stats(cap=self.cap))
        views = worker_views(seen, running, at)
        known = {view.worker.id for view in views}
        return {
            "workers": views,
            "unknown": [job for job in running if job.worker_id not in known],
            "at": at,
            "live_within": WORKERS_WITHIN,
            "gone_within": GONE_WITHIN,
            "sample": RUNNING_SAMPLE,
        }

    async def workers(self, request: Request) -> Response:
        return self.render(request, "workers.html", page="workers", **await self._workers_context())

    async def workers_fragment(self, request: Request) -> Response:
        """The workers page's table and held jobs, the fragment it refreshes."""
        return self.render(request, "_workers.html", **await self._workers_context())

    async def _locks_context(self, request: Request) -> dict[str, Any]:
        """The locks held now, by name, ``LOCKS_PAGE`` at a time (``?after=`` a name pages on)."""
        after = request.query_params.get("after") or None
        at = self.store.clock.now()
        try:
            held = await self.store.locks(limit=LOCKS_PAGE + 1, after=after)
        except InvalidName:
            raise HTTPException(400, "that is not a lock name to list after") from None
        more = len(held) > LOCKS_PAGE
        held = held[:LOCKS_PAGE]
        next_after = held[-1].name if more else None
        return {"locks": held, "at": at, "after": after, "next_after": next_after, "size": LOCKS_PAGE}

    async def locks(self, request: Request) -> Response:
        """The locks held now: owner, fencing token and lease end."""
        return self.render(request, "locks.html", page="locks", **await self._locks_context(request))

    async def locks_fragment(self, request: Request) -> Response:
        """The locks page's listing, the fragment it refreshes."""
        return self.render(request, "_locks.html", **await self._locks_context(request))
