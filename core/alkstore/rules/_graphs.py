"""Job graphs (ADR 073): the one owner of a graph's validation and of the order it is stored in.

A ``Graph`` is built without I/O (a task's ``.s(...)`` is a graph of one job; ``chain``, ``group`` and
``chord`` join graphs): nodes named by keys, each a job for a queue (or a task) that
waits on other nodes of the graph (by key) and on stored jobs (by id). ``plan_graph`` checks it
(every key it names exists, no cycle, a policy each) and lays it out parents first, so that an
engine stores it in one ``enqueue`` call, each node naming its parents of the same call by their
positions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from alkstore.errors import DependencyCycle, InvalidOptions
from alkstore.port._dependency_records import ParentFailure

from ._names import validate_name
from ._options import NO_OPTS, EnqueueOpts, check_after, check_key, check_policy

__all__ = ["Graph", "GraphNode", "PlannedNode", "chain", "chord", "group", "plan_graph"]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One job of a graph: its key, queue, payload and options, the graph's keys and the stored ids it
    waits on, its policy when a parent dies, and the task it is for (``None``: a plain job)."""

    key: str
    queue: str
    payload: Any
    opts: EnqueueOpts
    after_keys: tuple[str, ...]
    after_ids: tuple[int, ...]
    on_parent_failure: ParentFailure
    task: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedNode:
    """A node in storing order: its parents of the same graph are at ``after_batch`` positions (earlier)."""

    node: GraphNode
    after_batch: tuple[int, ...]


class Graph:
    """Jobs that wait on each other, enqueued together in one transaction by ``Store.enqueue_graph``.

    ``add`` names each job by a key; ``after`` names the keys of other jobs of the graph (added
    before or after it) and ids of stored jobs. Nothing is checked against storage until the
    graph is enqueued; a cycle is refused then, with ``DependencyCycle``, and nothing is written.
    """

    __slots__ = ("_nodes",)

    def __init__(self) -> None:
        self._nodes: dict[str, GraphNode] = {}

    def __repr__(self) -> str:
        return f"<alkstore.Graph of {len(self._nodes)} jobs>"

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys of the graph's jobs, in the order they were added."""
        return tuple(self._nodes)

    def add(
        self,
        key: str,
        queue: str,
        payload: Any = None,
        opts: EnqueueOpts | None = None,
        *,
        after: Iterable[str | int] = (),
        on_parent_failure: str | None = None,
        task: str | None = None,
    ) -> str:
        """Add the job ``key`` for ``queue``, waiting on ``after`` (keys of this graph, ids of stored jobs);
        return ``key``. ``on_parent_failure`` defaults to ``opts``'s (``"cancel"``)."""
        check_key(key, "a graph's key")
        if key in self._nodes:
            raise InvalidOptions(f"the graph already has a job {key!r}")
        validate_name(queue, "queue")
        opts = NO_OPTS if opts is None else opts
        if not isinstance(opts, EnqueueOpts):
            raise InvalidOptions(f"opts must be EnqueueOpts, not {type(opts).__name__}")
        if isinstance(after, (str, bytes)):
            after = (after,)  # type: ignore[assignment]
        keys = tuple(dict.fromkeys(item for item in after if isinstance(item, str)))
        ids = check_after([*opts.after, *(item for item in after if not isinstance(item, str))])
        policy = check_policy(opts.on_parent_failure if on_parent_failure is None else on_parent_failure)
        if key in keys:
            raise DependencyCycle(f"the graph's job {key!r} waits on itself")
        plain = replace(opts, after=(), on_parent_failure=policy)
        self._nodes[key] = GraphNode(key, queue, payload, plain, keys, ids, policy, task)
        return key

    @property
    def nodes(self) -> tuple[GraphNode, ...]:
        """The graph's jobs in the order they were added."""
        return tuple(self._nodes.values())


def plan_graph(nodes: Iterable[GraphNode]) -> list[PlannedNode]:
    """``nodes`` parents first (otherwise in the order given), each naming its parents' positions.

    ``InvalidOptions`` if a node waits on a key that is not in the graph, ``DependencyCycle`` (naming
    the circle) if some wait on each other in a circle; both before any I/O.
    """
    by_key = {node.key: node for node in nodes}
    for node in by_key.values():
        for parent in node.after_keys:
            if parent not in by_key:
                raise InvalidOptions(f"the graph's job {node.key!r} waits on {parent!r}, which it does not have")
        if (node.after_keys or node.after_ids) and node.opts.ordering_key is not None:
            raise InvalidOptions("a job waits on its parents (after) or on its ordering_key, not both")
    position: dict[str, int] = {}
    planned: list[PlannedNode] = []
    left = dict(by_key)
    while left:
        ready = [node for node in left.values() if all(parent in position for parent in node.after_keys)]
        if not ready:
            raise DependencyCycle(f"the graph's jobs wait on each other in a circle: {' -> '.join(_circle(left))}")
        for node in ready:
            position[node.key] = len(planned)
            planned.append(PlannedNode(node, tuple(position[parent] for parent in node.after_keys)))
            del left[node.key]
    return planned


def _circle(left: dict[str, GraphNode]) -> list[str]:
    """One circle among ``left`` (every one of which waits on another of them), closed at its start."""
    path: list[str] = []
    seen: dict[str, int] = {}
    key = next(iter(left))
    while key not in seen:
        seen[key] = len(path)
        path.append(key)
        key = next(parent for parent in left[key].after_keys if parent in left)
    return [*path[seen[key] :], key]


# -- chains, groups and chords: graphs made of graphs (ADR 073) ----------------------------------


def chain(*steps: Graph) -> Graph:
    """``steps`` one after another: each job of a step with no parent in its step waits on every job of the
    step before that nothing of its step waits on. Keys become ``"<position>.<key>"``."""
    return _joined(steps, linked=True)


def group(*steps: Graph) -> Graph:
    """``steps`` side by side, none waiting on another. Keys become ``"<position>.<key>"``."""
    return _joined(steps, linked=False)


def chord(header: Graph, body: Graph) -> Graph:
    """``body`` once every job of ``header`` (a ``group``, usually) succeeded: ``chain(header, body)``."""
    return chain(header, body)


def _joined(steps: tuple[Graph, ...], *, linked: bool) -> Graph:
    joined = Graph()
    previous: tuple[str, ...] = ()
    for position, step in enumerate(steps):
        if not isinstance(step, Graph):
            raise InvalidOptions(
                f"a chain, group or chord is made of graphs (a task's .s()), not {type(step).__name__}"
            )
        prefix = f"{position}."
        sources = {node.key for node in step.nodes if not node.after_keys}
        for node in step.nodes:
            waits = tuple(prefix + key for key in node.after_keys)
            if linked and node.key in sources:
                waits = (*previous, *waits)
            joined._nodes[prefix + node.key] = replace(node, key=prefix + node.key, after_keys=waits)
        if linked:
            waited_on = {key for node in step.nodes for key in node.after_keys}
            previous = tuple(prefix + node.key for node in step.nodes if node.key not in waited_on)
    return joined
