"""The engine: the runtime port and the operations port in one class, as every engine implements them (ADR 062).

``AsyncRuntimePort`` (``_runtime_port_async``) is what the store, the worker and the scheduler
need; ``AsyncOperationsPort`` (``_operations_port_async``) what operators read and do. A store
opens on an ``AsyncEngine``, or on an engine that stops at the runtime port: ``operations_of``
tells which. The sync runtime's ``Engine`` is generated from this file.
"""

from __future__ import annotations

from ._operations_port_async import AsyncOperationsPort
from ._runtime_port_async import AsyncRuntimePort, AsyncWaiter

__all__ = ["AsyncEngine", "AsyncWaiter", "operations_of"]


class AsyncEngine(AsyncRuntimePort, AsyncOperationsPort):
    """Storage and atomic transitions for queues, jobs, locks and schedules, and their operators' calls.

    Calls of one engine may come from any number of tasks at once (in the sync twin, threads).
    """


def operations_of(engine: AsyncRuntimePort) -> AsyncOperationsPort | None:
    """``engine``'s operations port, or ``None`` when it stops at the runtime port (ADR 062)."""
    return engine if isinstance(engine, AsyncOperationsPort) else None
