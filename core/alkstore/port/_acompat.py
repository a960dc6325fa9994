"""What the async source of a runtime calls where the two runtimes wait, spawn and block differently.

Each async name here has a sync twin of the same shape, and ``tools/async_to_sync.py`` maps one to
the other (``AQueue`` → ``Queue``, ``aspawn`` → ``spawn``, …; ADR 026), so a module written once
against the async names runs as threads and blocking calls in its generated twin. ``ASYNC`` marks
the rare statement that must differ: ``if ASYNC: …  else: …`` keeps only its ``else`` side in
the twin. Nothing here is public.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import queue as threadqueue
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeAlias, TypeVar

__all__ = [
    "ASYNC",
    "ACondition",
    "AHelper",
    "AQueue",
    "AThreads",
    "Condition",
    "Helper",
    "Queue",
    "Threads",
    "acall",
    "agather",
    "asleep",
    "aspawn",
    "call",
    "gather",
    "is_async",
    "sleep",
    "spawn",
]

#: True where the async source runs; its generated twin keeps the ``else`` side of ``if ASYNC:``.
ASYNC: bool = True

_T = TypeVar("_T")

#: Wait some wall seconds (not on a store's clock: for pauses between retries).
sleep = time.sleep
asleep = asyncio.sleep

#: A background helper (a heartbeat loop, a worker's slot): a thread in the sync runtime, a task in the async one.
Helper: TypeAlias = threading.Thread
AHelper: TypeAlias = "asyncio.Task[Any]"


def spawn(target: Callable[..., object], *args: Any, name: str) -> threading.Thread:
    """Run ``target(*args)`` on a daemon thread of its own, started now."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


def aspawn(target: Callable[..., Coroutine[Any, Any, object]], *args: Any, name: str) -> asyncio.Task[Any]:
    """Run ``target(*args)`` as a task of the running loop, started now."""
    return asyncio.get_running_loop().create_task(target(*args), name=name)


def gather(*workers: threading.Thread) -> None:
    """Wait for every worker thread to end."""
    for thread in workers:
        thread.join()


async def agather(*workers: asyncio.Task[Any]) -> None:
    """Wait for every worker task to end (their own exceptions are theirs: each logs what it meets)."""
    await asyncio.gather(*workers, return_exceptions=True)


#: A condition variable: ``with cond:``, ``cond.wait(timeout)``, ``cond.notify_all()``.
Condition = threading.Condition


class ACondition(asyncio.Condition):
    """``Condition`` on the running loop: ``async with cond:``, ``await cond.wait(timeout)``."""

    async def wait(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        """Wait (holding the condition) until notified or ``timeout`` seconds passed; whether it was notified."""
        try:
            return await asyncio.wait_for(super().wait(), timeout)
        except TimeoutError:
            return False


#: An unbounded queue between threads (``put_nowait`` never blocks, ``get`` waits for an item), and
#: its twin between the tasks of one loop.
Queue = threadqueue.SimpleQueue
AQueue = asyncio.Queue


class Threads:
    """How the sync runtime calls user code: on the calling thread, which is already the run's own."""

    __slots__ = ()

    def __init__(self, size: int) -> None:
        del size

    def call(self, func: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        return func(*args, **kwargs)

    def close(self) -> None:
        """Nothing to release: the sync runtime's threads are its workers'."""


class AThreads:
    """How the async runtime calls user code: a coroutine function on the loop, a plain one on a thread.

    Plain calls run on daemon threads of this pool, each in a copy of the caller's context (so
    ``current_job()`` answers there too), a new thread whenever none is idle, up to ``size`` plus
    ``SPARE``: a call that never returns keeps its thread (Python cannot stop one), and the spares
    keep such calls from starving the others.
    """

    __slots__ = ("_idle", "_kinds", "_limit", "_lock", "_threads", "_work")

    SPARE = 32
    #: Callables whose kind (``is_async``) is remembered: a worker's few tasks and handlers are told once, not
    #: at every run; past this many, further ones are told at each call.
    KINDS = 256

    def __init__(self, size: int) -> None:
        self._work: threadqueue.SimpleQueue[_Call | None] = threadqueue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._limit = size + self.SPARE
        self._kinds: dict[Any, bool] = {}

    def _is_async(self, func: Callable[..., Any]) -> bool:
        """``is_async(func)``, remembered for the first ``KINDS`` hashable callables."""
        kinds = self._kinds
        try:
            return kinds[func]
        except KeyError:
            kind = is_async(func)
            if len(kinds) < self.KINDS:
                kinds[func] = kind
            return kind
        except TypeError:  # an unhashable callable object
            return is_async(func)

    async def call(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if self._is_async(func):
            return await func(*args, **kwargs)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        call = functools.partial(func, *args, **kwargs) if kwargs else func
        self._work.put(_Call(contextvars.copy_context(), call, args if not kwargs else (), loop, future))
        with self._lock:
            start = self._idle == 0 and self._threads < self._limit
            if start:
                self._threads += 1
            else:
                self._idle -= 1  # this call takes an idle thread (or waits for the first one free)
        if start:
            threading.Thread(target=self._serve, name="alkstore-call", daemon=True).start()
        result = await future
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            return await result
        return result

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                with self._lock:
                    self._threads -= 1
                return
            item.run()
            with self._lock:
                self._idle += 1

    def close(self) -> None:
        """Let idle threads end (a hung call's thread ends when it returns, or with the process)."""
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)


class _Call:
    """One plain call handed to a thread of ``AThreads``, settled on its caller's loop."""

    __slots__ = ("args", "context", "func", "future", "loop")

    def __init__(
        self,
        context: contextvars.Context,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.context, self.func, self.args, self.loop, self.future = context, func, args, loop, future

    def run(self) -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (self.context.run(self.func, *self.args), None)
        except BaseException as exc:  # handed to the awaiting task, which decides
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits the outcome
            self.loop.call_soon_threadsafe(_settle, self.future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if future.cancelled():
        return
    result, error = outcome
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


def is_async(func: object) -> bool:
    """Whether calling ``func`` makes a coroutine to await (an ``async def`` function or callable)."""
    return inspect.iscoroutinefunction(func) or (
        callable(func) and not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)
    )


def call(func: Callable[..., object], /, *args: Any) -> None:
    """Call a short callback of the caller's (an ``on_fire``) where the runtime runs."""
    func(*args)


async def acall(func: Callable[..., object], /, *args: Any) -> None:
    """``call`` on the loop: a callback that returns an awaitable is awaited."""
    outcome = func(*args)
    if inspect.isawaitable(outcome):
        await outcome
