"""A job's graph for the dashboard: the jobs reached from it through parents and children, bounded, by depth.

Read with ``get_job`` one job at a time (its ``parents`` and ``children``, ADR 073); a job no longer stored
(acked) is shown by its kept result when its queue keeps one, else as gone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from alkstore import JobInfo

__all__ = ["GRAPH_JOBS", "GraphJob", "JobGraph", "read_graph"]

#: The most jobs a graph page reads and draws; a bigger graph is cut, and the page says so.
GRAPH_JOBS = 200


@dataclass(slots=True)
class GraphJob:
    """One job of a graph as the page draws it: its id, state (``done`` or ``gone`` when no longer stored),
    its stored snapshot if any, and its parents and children among the jobs read."""

    id: int
    state: str
    info: JobInfo | None = None
    parents: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)


@dataclass(slots=True)
class JobGraph:
    """The jobs read, in rows by depth (a job's row is one below its deepest parent read), and whether the
    bound cut the graph short."""

    root: int
    rows: list[list[GraphJob]]
    cut: bool


async def read_graph(
    get_job: Callable[[int], Awaitable[JobInfo | None]],
    was_done: Callable[[int], Awaitable[bool]],
    job_id: int,
    most: int = GRAPH_JOBS,
) -> JobGraph | None:
    """The graph around ``job_id`` read breadth first through parents and children, at most ``most`` jobs;
    ``None`` when ``job_id`` is not stored."""
    first = await get_job(job_id)
    if first is None:
        return None
    jobs: dict[int, GraphJob] = {}
    edges: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    queue: deque[tuple[int, JobInfo | None]] = deque([(job_id, first)])
    seen = {job_id}
    cut = False
    while queue:
        current, info = queue.popleft()
        if info is None:
            info = await get_job(current)
        if info is None:
            jobs[current] = GraphJob(current, "done" if await was_done(current) else "gone")
            continue
        jobs[current] = GraphJob(current, info.state.value, info)
        edges[current] = (info.parents, info.children)
        for near in (*info.parents, *info.children):
            if near in seen:
                continue
            if len(seen) >= most:
                cut = True
                continue
            seen.add(near)
            queue.append((near, None))
    for child, (parents, _) in edges.items():
        for parent in parents:
            if parent in jobs:
                jobs[child].parents.append(parent)
                jobs[parent].children.append(child)
    return JobGraph(job_id, _rows(jobs), cut)


def _rows(jobs: dict[int, GraphJob]) -> list[list[GraphJob]]:
    """``jobs`` in rows by depth: a job without parents among them is at depth 0, any other one below its
    deepest parent (dependencies never form a circle, ADR 073)."""
    depth: dict[int, int] = {}

    def of(job_id: int) -> int:
        stack = [job_id]
        while stack:
            top = stack[-1]
            waiting = [p for p in jobs[top].parents if p not in depth]
            if waiting:
                stack.extend(waiting)
                continue
            stack.pop()
            depth[top] = max((depth[p] + 1 for p in jobs[top].parents), default=0)
        return depth[job_id]

    rows: dict[int, list[GraphJob]] = {}
    for job_id in sorted(jobs):
        rows.setdefault(of(job_id), []).append(jobs[job_id])
    return [rows[level] for level in sorted(rows)]
