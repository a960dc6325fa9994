# GENERATED FILE, DO NOT EDIT: made from core/alkstore/store/_graphs_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""A job graph's enqueue (ADR 073), through the kernel."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from alkstore.errors import InvalidArgument
from alkstore.port._records import NewJob
from alkstore.rules._graphs import Graph, plan_graph
from alkstore.rules._options import stamp_enqueue
from alkstore.rules._records import JobId, job_ids, new_jobs

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ["enqueue_graph"]

#: Where no telemetry records an enqueue: the trace it yields is ``None``.
_NO_SPAN = nullcontext(None)


def enqueue_graph(
    kernel: Kernel, graph: Graph, tx: Any = None, *, in_caller_tx: bool = False
) -> dict[str, JobId]:
    """Enqueue every job of ``graph`` in one engine call (one transaction: its own, or ``tx``), parents
    first; the id of each job by its key. Cycles and bad keys are refused before any I/O (ADR 073)."""
    engine = kernel.live()
    if not isinstance(graph, Graph):
        raise InvalidArgument(f"expected an alkstore.Graph, not {type(graph).__name__}")
    planned = plan_graph(graph.nodes)
    if not planned:
        return {}
    kernel.dependencies_offered("enqueue_graph()")
    encode = kernel.codec.encode
    data = [encode(item.node.payload) for item in planned]
    now = kernel.clock.now()
    if in_caller_tx:
        tx = engine.caller_transaction(tx)
    jobs: list[NewJob] = []
    telemetry = kernel.telemetry
    span = None
    if telemetry is not None:  # linked to the stored jobs it waits on (ADR 074)
        stored = [] if in_caller_tx else list(dict.fromkeys(i for item in planned for i in item.node.after_ids))
        parents = kernel.parent_traces(stored) if stored else []
        first, count = planned[0].node.queue, len(planned)
        span = telemetry.enqueue(first, None, count, parents) if parents else telemetry.enqueue(first, None, count)
    with span if span is not None else _NO_SPAN as trace:
        for item, payload in zip(planned, data, strict=True):
            node = item.node
            defaults = (kernel.config(node.queue, tx, now))[1]
            (job,) = new_jobs(node.queue, [payload], stamp_enqueue(node.opts, defaults, now), node.task, trace)
            jobs.append(
                replace(
                    job,
                    after=node.after_ids,
                    after_batch=item.after_batch,
                    on_parent_failure=node.on_parent_failure,
                )
            )
        ids = job_ids(engine.enqueue(jobs, now, tx))
    return {item.node.key: job_id for item, job_id in zip(planned, ids, strict=True)}
