"""Couriers in the worker: which outboxes a worker delivers, checked once, with no I/O (ADR 057).

An outbox is a queue under a reserved name (``_names.outbox_queue``); a worker serving an outbox
claims from that backing queue with its other queues and runs the courier's delivery as the
queue's handler. So deliveries are claimed in batches for the free slots, their leases are
extended while they run, a failure is retried on the outbox's curve (the queue's own rule, as
``Outbox.run_once`` applies it) and a stopping worker hands back what it could not finish within
its grace: the worker's rules, not a second loop's.
"""

from __future__ import annotations

from collections.abc import Sequence

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._acompat import is_async
from alkstore.rules._names import validate_name
from alkstore.store._tasks import Courier, Tasks

__all__ = ["served_couriers"]


def served_couriers(registry: Tasks, outboxes: object, *, coroutines: bool) -> tuple[Courier, ...]:
    """The couriers of ``registry`` a worker serves: those of ``outboxes`` (default: every one).

    ``outboxes`` names outboxes, each with a courier in ``registry``; a worker of the sync runtime
    (``coroutines`` false) refuses an ``async def`` delivery, as it does an ``async def`` task.
    """
    couriers = {courier.outbox: courier for courier in registry.couriers}
    if outboxes is None:
        names: Sequence[object] = sorted(couriers)
    elif isinstance(outboxes, str) or not isinstance(outboxes, Sequence):
        raise InvalidArgument("outboxes must be a sequence of outbox names, not one str")
    else:
        names = outboxes
    served = []
    for name in dict.fromkeys(names):
        courier = couriers.get(validate_name(name, "outbox"))
        if courier is None:
            known = ", ".join(repr(outbox) for outbox in sorted(couriers)) or "none"
            raise InvalidOptions(f"outbox {name!r} has no courier in the tasks (couriers: {known})")
        if not coroutines and is_async(courier.delivery):
            raise InvalidOptions(
                f"the courier of outbox {courier.outbox!r} is async: "
                "run it with alkstore.AsyncWorker (alkstore worker does)"
            )
        served.append(courier)
    return tuple(served)
