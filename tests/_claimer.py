"""A claim parked in ``queue.claim(worker, wait=…)`` on its own thread, for wake-up tests of any engine."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from alkstore import Job, Queue, StopToken, Store
from alkstore.engine import AsyncEngine, AsyncWaiter, Waiter
from contract_tests._runtimes import target_of
from tests.support import PATIENCE

NO_POLLING = 3600.0  # a poll interval no test waits out


class _SpyWaiter(Waiter):
    def __init__(self, inner: Waiter, parked: threading.Event) -> None:
        self._inner = inner
        self._parked = parked

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        self._parked.set()
        self._inner.wait(timeout, stop)


class _AsyncSpyWaiter(AsyncWaiter):
    def __init__(self, inner: AsyncWaiter, parked: threading.Event) -> None:
        self._inner = inner
        self._parked = parked

    async def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        self._parked.set()
        await self._inner.wait(timeout, stop)


class Claimer:
    """A thread in ``queue.claim(worker, wait=…)``; the constructor returns once it is parked.

    The store's clock should be frozen, so the claim can only return through a wake-up, the
    end of ``wait`` (on the store's clock) or its wall-clock ``poll_interval`` (by default far
    beyond any test's patience, so polling cannot mask a missing wake-up).
    """

    def __init__(self, store: Store, queue: str, *, wait: float = 3600.0, poll_interval: float = NO_POLLING) -> None:
        self.parked = threading.Event()
        self.result: Job | None = None
        self.error: BaseException | None = None
        engine: Any = target_of(store.engine)  # the engine itself, in either runtime
        real_waiter = engine.waiter

        @contextmanager
        def spying_waiter(name: str) -> Iterator[Waiter]:
            with real_waiter(name) as inner:
                yield _SpyWaiter(inner, self.parked)

        @asynccontextmanager
        async def spying_async_waiter(name: str) -> AsyncIterator[AsyncWaiter]:
            async with real_waiter(name) as inner:
                yield _AsyncSpyWaiter(inner, self.parked)

        engine.waiter = spying_async_waiter if _is_async_engine(engine) else spying_waiter
        try:
            args = (store.queue(queue), wait, poll_interval)
            self._thread = threading.Thread(target=self._run, args=args, daemon=True)
            self._thread.start()
            assert self.parked.wait(PATIENCE), "the claim never parked"
        finally:
            del engine.waiter  # the instance attribute goes; the method is back

    def _run(self, queue: Queue, wait: float, poll_interval: float) -> None:
        try:
            self.result = queue.claim("parked-worker", wait=wait, poll_interval=poll_interval)
        except BaseException as exc:
            self.error = exc

    def finished(self, timeout: float = PATIENCE) -> bool:
        """Whether the claim returned within ``timeout`` wall seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def returned(self) -> Job | None:
        """Wait (generously) for the claim to return and give its result; fail if it does not."""
        assert self.finished(), "the parked claim was not woken"
        if self.error is not None:
            raise self.error
        return self.result

    def acked(self) -> Job:
        """The job the claim returned (failing if none), acked."""
        job = self.returned()
        assert job is not None, "the parked claim returned no job"
        job.ack()
        return job


def _is_async_engine(engine: object) -> bool:
    return isinstance(engine, AsyncEngine)
