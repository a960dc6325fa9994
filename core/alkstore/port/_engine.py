# GENERATED FILE, DO NOT EDIT: made from core/alkstore/port/_engine_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The engine: the runtime port and the operations port in one class, as every engine implements them (ADR 062).

``RuntimePort`` (``_runtime_port``) is what the store, the worker and the scheduler
need; ``OperationsPort`` (``_operations_port``) what operators read and do. A store
opens on an ``Engine``, or on an engine that stops at the runtime port: ``operations_of``
tells which. The sync runtime's ``Engine`` is generated from this file.
"""

from __future__ import annotations

from ._operations_port import OperationsPort
from ._runtime_port import RuntimePort, Waiter

__all__ = ["Engine", "Waiter", "operations_of"]


class Engine(RuntimePort, OperationsPort):
    """Storage and atomic transitions for queues, jobs, locks and schedules, and their operators' calls.

    Calls of one engine may come from any number of tasks at once (in the sync twin, threads).
    """


def operations_of(engine: RuntimePort) -> OperationsPort | None:
    """``engine``'s operations port, or ``None`` when it stops at the runtime port (ADR 062)."""
    return engine if isinstance(engine, OperationsPort) else None
