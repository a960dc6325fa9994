"""The transactional outbox: messages written with the caller's data, delivered by a courier.

An outbox is a queue under a reserved name (``_names.outbox_queue``) with its own derived
defaults (60 s lease, 5 attempts, 5 s backoff base); ``run_once`` delivers one message and
``run`` is the courier loop around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Unpack

from alkstore.errors import DatabaseUnavailable, LeaseLost
from alkstore.port._time import StopToken
from alkstore.rules._args import check_callable, check_stop
from alkstore.rules._lifecycle import Backoff, failure
from alkstore.rules._names import outbox_queue
from alkstore.rules._options import EnqueueOpts, QueueDefaults, QueueSettings
from alkstore.rules._records import JobId

from ._job_async import AsyncJob
from ._queue_async import AsyncQueue

if TYPE_CHECKING:
    from ._kernel_async import AsyncKernel

__all__ = ["AsyncDelivery", "AsyncOutbox"]

log = logging.getLogger("alkstore")

#: An outbox delivery: called with the decoded payload and its job; raising means failure. In the
#: async runtime an ``async def`` delivery is awaited on the loop and a plain one runs on a thread.
AsyncDelivery = Callable[[Any, AsyncJob], object]

#: How long one park of the courier loop lasts before it looks again (it also ends with the stop token).
_COURIER_WAIT = timedelta(seconds=60)


class AsyncOutbox:
    """A transactional outbox: messages enqueued with your data, delivered by ``run_once``."""

    __slots__ = ("_kernel", "_queue", "name")

    def __init__(self, kernel: AsyncKernel, name: str) -> None:
        self._kernel = kernel
        self.name = name
        self._queue = AsyncQueue(kernel, outbox_queue(name))

    def __repr__(self) -> str:
        return f"<alkstore.{type(self).__name__} {self.name!r}>"

    @property
    def queue(self) -> str:
        """The reserved backing queue's name (reachable only through this outbox)."""
        return self._queue.name

    async def enqueue(self, payload: Any, opts: EnqueueOpts | None = None) -> JobId:
        """Add a message in its own transaction (60 s lease, 5 attempts, 5 s backoff base, unless configured)."""
        return await self._queue.enqueue(payload, opts)

    async def configure(self, **settings: Unpack[QueueSettings]) -> QueueDefaults:
        """Configure the backing queue as ``configure`` of a queue does (its derived defaults: 60/5/5)."""
        return await self._queue.configure(**settings)

    async def run_once(
        self,
        worker_id: str,
        delivery: AsyncDelivery,
        *,
        wait: float | timedelta | None = None,
        poll_interval: float = 1.0,
        stop: StopToken | None = None,
    ) -> bool:
        """Deliver one message: ack on success, retry on the curve on error; ``False`` when empty.

        With ``wait``, park until a message arrives, the wait ends or ``stop`` is cancelled (as a
        queue's ``claim`` does). No heartbeat runs during ``delivery``; a slow delivery may call
        ``job.heartbeat()``.
        """
        check_callable(delivery, "delivery")
        job = await self._queue.claim(worker_id, wait=wait, poll_interval=poll_interval, stop=stop)
        if job is None:
            return False
        kernel = self._kernel
        try:
            if kernel.telemetry is None:
                await kernel.calls.call(delivery, job.payload, job)
            else:
                with kernel.telemetry.run(kernel.record_of(job), kernel.clock):
                    await kernel.calls.call(delivery, job.payload, job)
        except Exception as exc:
            log.info("outbox %r: delivery of job %s failed: %s", self.name, job.id, failure(exc).error)
            await job.retry(exc)
        else:
            await job.ack()
        return True

    async def run(self, worker_id: str, delivery: AsyncDelivery, stop: StopToken, *, poll_interval: float = 1.0) -> int:
        """The courier loop: deliver messages as they come until ``stop`` is cancelled; return how many.

        Parks on the outbox between messages. A transient database failure is logged and
        waited out (it backs off up to ten seconds); a ``LeaseLost`` from a delivery that outlived
        its lease is logged (another courier has the message) and the loop goes on.
        """
        check_stop(stop)
        delivered = 0
        backoff = Backoff()
        while not stop.is_cancelled():
            try:
                if await self.run_once(worker_id, delivery, wait=_COURIER_WAIT, poll_interval=poll_interval, stop=stop):
                    delivered += 1
                backoff.reset()
            except LeaseLost as exc:
                log.warning("outbox %r: %s", self.name, exc)
            except DatabaseUnavailable as exc:
                pause = backoff.next()
                log.warning("outbox %r: database unavailable (%s); retrying in %.1f s", self.name, exc, pause)
                await stop.wait_async(pause)
        return delivered
