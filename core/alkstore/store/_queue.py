# GENERATED FILE, DO NOT EDIT: made from core/alkstore/store/_queue_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""Queues: ``Queue`` enqueues and claims (the claimed ``Job`` is in ``_job``).

A queue is a handle on a store's kernel (``_kernel``); every rule it follows is core's:
stamps from ``_options``, claim waits from ``_lifecycle``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Unpack

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._time import StopToken
from alkstore.rules._args import batch
from alkstore.rules._lifecycle import check_poll_interval, check_wait, claim_wait
from alkstore.rules._names import validate_label
from alkstore.rules._options import EnqueueOpts, QueueDefaults, QueueSettings, check_queue_config
from alkstore.rules._records import JobId

from ._job import Job

if TYPE_CHECKING:
    from ._kernel import Kernel

__all__ = ["MAX_CLAIM", "Queue"]

#: The most jobs one claim may take.
MAX_CLAIM = 1000


class Queue:
    """A named queue: ``enqueue`` jobs, ``claim`` them; its defaults in ``defaults()``."""

    __slots__ = ("_kernel", "name")

    def __init__(self, kernel: Kernel, name: str) -> None:
        self._kernel = kernel
        self.name = name

    def __repr__(self) -> str:
        return f"<alkstore.{type(self).__name__} {self.name!r}>"

    def defaults(self) -> QueueDefaults:
        """Visibility timeout, attempts, retry curve and priority this queue's jobs get by default."""
        return self._kernel.defaults(self.name)

    def configure(self, **settings: Unpack[QueueSettings]) -> QueueDefaults:
        """Store this queue's defaults for every process sharing the storage; return the effective ones.

        Replaces what was stored: a ``None`` falls back to the derived default, all ``None`` removes
        the config. Other stores see it within ``CONFIG_TTL`` of their clocks, the scheduler's
        fires at once. Jobs already queued keep their attempts and priority; their next claim,
        retry and heartbeat use the new lease and curve (ADR 016), and their acks from then on keep
        (or stop keeping) their outcomes as ``keep_results`` says (ADR 042).
        """
        return self._kernel.configure(self.name, check_queue_config(self.name, **settings))

    def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Store a job now (its own transaction); return its id (with a ``unique_key``, perhaps the id of the
        job already holding it: ``JobId.created`` says which)."""
        return (self._kernel.enqueue(self.name, (payload,), opts))[0]

    def enqueue_many(self, payloads: Iterable[Any], opts: EnqueueOpts | None = None) -> list[JobId]:
        """Store one job per payload, all with ``opts``, in one transaction of their own; the ids in order.

        All or nothing, as ``enqueue_many_tx``: bad input anywhere rejects the batch before I/O.
        """
        return self._kernel.enqueue(self.name, batch(payloads), opts)

    def pause(self) -> None:
        """Stop every worker, on every host, claiming this queue's jobs (within ``CONFIG_TTL``, 2 s; ADR 033).

        Enqueues and schedule fires into it still succeed, and running jobs finish.
        """
        self._kernel.set_paused(self.name, True)

    def resume(self) -> None:
        """Let workers claim this queue's jobs again (within ``CONFIG_TTL``)."""
        self._kernel.set_paused(self.name, False)

    def claim(
        self,
        worker_id: str,
        *,
        wait: float | timedelta | None = None,
        poll_interval: float = 1.0,
        stop: StopToken | None = None,
    ) -> Job | None:
        """Lease the next job to ``worker_id``, or ``None``.

        With ``wait`` (seconds of the store's clock), park until a job arrives, the wait ends
        or ``stop`` is cancelled, looking again at least every ``poll_interval`` wall seconds
        (a lost wake-up costs at most that). A parked claim is woken by the enqueue's
        notification; in the async runtime, cancelling the task that awaits it ends it too.
        """
        validate_label(worker_id, "worker id")
        kernel = self._kernel
        if wait is None:  # the common, non-blocking claim: no deadline to read the clock for
            if poll_interval != 1.0:
                check_poll_interval(poll_interval)
            jobs = (kernel.claim(self.name, worker_id, 1))[1]
            return jobs[0] if jobs else None
        span = check_wait(wait)
        interval = check_poll_interval(poll_interval)
        if stop is not None and not isinstance(stop, StopToken):
            raise InvalidArgument(f"stop must be an alkstore.StopToken, not {type(stop).__name__}")
        deadline = kernel.clock.now() + span
        jobs = (kernel.claim(self.name, worker_id, 1))[1]
        if jobs or not span:
            return jobs[0] if jobs else None
        with kernel.live().waiter(self.name) as waiter:
            while stop is None or not stop.is_cancelled():
                jobs = (kernel.claim(self.name, worker_id, 1))[1]
                if jobs:
                    return jobs[0]
                pause = claim_wait(deadline, kernel.clock.now(), interval)
                if pause is None:
                    return None
                waiter.wait(pause, stop)
        return None

    def claim_many(self, worker_id: str, limit: int) -> list[Job]:
        """Lease up to ``limit`` jobs to ``worker_id`` in one round trip, best first; empty when none is ready."""
        validate_label(worker_id, "worker id")
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidArgument(f"limit must be an int, not {type(limit).__name__}")
        if not 1 <= limit <= MAX_CLAIM:
            raise InvalidOptions(f"limit must be between 1 and {MAX_CLAIM}, not {limit}")
        return (self._kernel.claim(self.name, worker_id, limit))[1]
