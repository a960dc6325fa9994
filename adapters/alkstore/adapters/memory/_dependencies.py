"""The memory engine's job dependencies (ADR 073): who waits on whom, and what a parent's end does.

A child's parents are kept as links (each ``waiting``, ``succeeded`` with the result it handed over,
or ``failed``), a parent's waiting children as a list; the child's ``parents_left`` counts its
``waiting`` links, and it is ``waiting`` (never claimed) while any is. An ack promotes under the
same lock as it deletes the parent; any other end of a parent (dead, cancelled, deleted) applies
each waiting child's policy, transitively, in that same step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from alkstore import engine as port
from alkstore.errors import UnknownParent

from ._state import TableState

__all__ = ["DependencyTables"]

_WAITING = "waiting"
_SUCCEEDED = "succeeded"
_FAILED = "failed"


class DependencyTables(TableState):
    """The links between jobs and the moves that keep them; the other parts call these under the lock."""

    def __init__(self) -> None:
        super().__init__()
        #: Each child's parents as it sees them, and each live parent's waiting children.
        self._links: dict[int, dict[int, port.ParentLink]] = {}
        self._children: dict[int, dict[int, None]] = {}

    @property
    def offers_dependencies(self) -> bool:
        return True

    def check_parents(self, jobs: Sequence[port.NewJob], also: Iterable[int] = ()) -> None:
        """``UnknownParent`` for an ``after`` id that is no job stored live or dead, nor a kept result,
        nor one of ``also`` (the jobs of the caller's open transaction)."""
        pending = None
        for job in jobs:
            for parent in job.after:
                if parent in self._jobs or parent in self._dead or parent in self._results:
                    continue
                if pending is None:
                    pending = set(also)
                if parent not in pending:
                    raise UnknownParent(f"job {parent} (after=) is not stored: nothing was enqueued")

    def _link(self, row: port.JobRecord) -> tuple[port.JobRecord, int | None]:
        """``row`` with its links made against the parents as they are now, and the first of them that is
        dead already (its policy then applies at once), if any."""
        links: dict[int, port.ParentLink] = {}
        left = 0
        died = None
        for parent in row.parents:
            if parent in self._jobs:
                links[parent] = port.ParentLink(parent, _WAITING)
                self._children.setdefault(parent, {})[row.id] = None
                left += 1
            elif parent in self._dead:
                links[parent] = port.ParentLink(parent, _FAILED)
                died = parent if died is None else died
            else:  # kept, or gone since it was checked: it succeeded
                kept = self._results.get(parent)
                links[parent] = port.ParentLink(parent, _SUCCEEDED, None if kept is None else kept.result)
        self._links[row.id] = links
        return replace(row, parents_left=left, waiting=left > 0), died

    def _succeeded(self, job: port.JobRecord, result: bytes | None) -> None:
        """``job`` was acked: each child waiting on it counts it done, and runs once none is left."""
        for child_id in self._children.pop(job.id, {}):
            self._settle(child_id, job.id, port.ParentLink(job.id, _SUCCEEDED, result))

    def _died(self, job: port.JobRecord, now: datetime | None) -> None:
        """``job`` ended without success: each child waiting on it follows its ``on_parent_failure``."""
        for child_id in self._children.pop(job.id, {}):
            child = self._settle(child_id, job.id, port.ParentLink(job.id, _FAILED), promote=False)
            if child is None:
                continue
            self._follow(child, job.id, now)

    def _follow(self, child: port.JobRecord, parent: int, now: datetime | None) -> None:
        """Apply ``child``'s policy for its ``parent`` that died."""
        policy = child.on_parent_failure
        if policy is port.ParentFailure.CANCEL:
            self._delete(child)
        elif policy is port.ParentFailure.DIE:
            self._to_dead(child, port.parent_failed_error(parent), None, now if now is not None else self._seen)
        else:
            self._promote(child)

    def _settle(
        self, child_id: int, parent: int, link: port.ParentLink, *, promote: bool = True
    ) -> port.JobRecord | None:
        """Record ``link`` for ``child_id``'s ``parent``; the child as it is now, or ``None`` if it waits no
        more (gone, or no longer waiting on it)."""
        child = self._jobs.get(child_id)
        links = self._links.get(child_id)
        if child is None or links is None or links.get(parent, link).state != _WAITING:
            return None
        links[parent] = link
        left = child.parents_left - 1
        child = replace(child, parents_left=left)
        self._jobs[child_id] = child
        if promote:
            self._promote(child)
        return child

    def _promote(self, child: port.JobRecord) -> None:
        """Store ``child`` again (its heaps' entries follow the new row): claimable once no parent is left."""
        left = sum(1 for link in self._links.get(child.id, {}).values() if link.state == _WAITING)
        self._make_pending(child, parents_left=left, waiting=left > 0)
        if left == 0:
            self._signal(child.queue)

    def _unlink(self, job_id: int) -> None:
        """Forget the links of a job deleted for good (acked, cancelled, purged)."""
        if self._links:
            self._links.pop(job_id, None)

    def _with_links(self, row: port.JobRecord) -> port.JobRecord:
        """``row`` as ``get_job`` reads it: its parents' links and its waiting children."""
        links = self._links.get(row.id)
        children = tuple(
            sorted(
                child
                for child in self._children.get(row.id, {})
                if child in self._jobs and self._links[child][row.id].state == _WAITING
            )
        )
        if links is None and not children:
            return row
        parent_links = () if links is None else tuple(links[parent] for parent in row.parents if parent in links)
        return replace(row, parent_links=parent_links, children=children)
