"""The runtimes under contract: every scenario runs on the sync runtime and on the async one.

The suite is written once, in blocking calls. On the sync runtime they are the runtime's own; on
the async runtime each object of the async API (``AsyncStore``, its handles and jobs, the engine,
a worker) is seen through ``Blocking``, which runs every call that returns an awaitable to its
end on the ``Portal``'s event loop, a thread of its own, and hands back what it returns seen the
same way. So each test drives the real async code, awaited on a real loop (its waits parked
there, its workers' slots tasks of that loop), while the scenario reads as the sync one does.
A plain function the suite hands the async runtime (a delivery, a handler) runs on a thread of
that runtime's, as any plain callback does, and sees its arguments through ``Blocking`` too.

``worker_of``, ``store_of`` and ``maintenance_of`` build the runtime's own kind for the store (or
engine) they are given, so a scenario never names a runtime.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import alkstore
from alkstore.store._kernel import kernel_of
from alkstore.store._kernel_async import kernel_of as async_kernel_of
from alkstore.worker._maintenance import Maintenance as SyncMaintenance
from alkstore.worker._maintenance_async import AsyncMaintenance

__all__ = [
    "RUNTIMES",
    "Blocking",
    "Portal",
    "is_async",
    "maintenance_of",
    "portal",
    "store_of",
    "target_of",
    "task_call",
    "worker_of",
    "wrap",
]

#: The runtimes every contract scenario runs on.
RUNTIMES = ("sync", "async")

_T = TypeVar("_T")


class Portal:
    """An event loop on a daemon thread that runs, to their end, the awaitables other threads hand it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="contract-portal", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable`` on the loop, in a copy of the calling thread's context; its result or exception."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a blocking call from the portal's own loop would never end")
        context = contextvars.copy_context()
        done: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def start() -> None:
            task = self.loop.create_task(_awaited(awaitable), context=context)
            task.add_done_callback(functools.partial(_settle, done))

        self.loop.call_soon_threadsafe(start)
        return done.result()

    def call(self, func: Callable[..., _T], /, *args: Any, **kwargs: Any) -> _T:
        """Call a plain function on the loop's thread (what must be made where the loop runs)."""

        async def on_loop() -> _T:
            return func(*args, **kwargs)

        return self.run(on_loop())


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


def _settle(done: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        done.cancel()
    elif task.exception() is not None:
        done.set_exception(task.exception())
    else:
        done.set_result(task.result())


_PORTAL: list[Portal] = []
# A forked child (mutmut runs each mutant in one) has none of its parent's threads: a portal made
# before the fork would take calls and never answer them, so the child starts its own.
os.register_at_fork(after_in_child=_PORTAL.clear)


def portal() -> Portal:
    """The suite's one portal, started on first use."""
    if not _PORTAL:
        _PORTAL.append(Portal())
    return _PORTAL[0]


_COROUTINES: dict[type, bool] = {}


def _has_coroutines(cls: type) -> bool:
    """Whether instances of ``cls`` have methods to await (they are then seen through ``Blocking``)."""
    found = _COROUTINES.get(cls)
    if found is None:
        names = [name for name in dir(cls) if not name.startswith("__")]
        found = _COROUTINES[cls] = any(inspect.iscoroutinefunction(getattr(cls, name, None)) for name in names)
    return found


def wrap(value: Any, *, items: bool = True) -> Any:
    """``value`` as the suite sees it: an object of the async API through ``Blocking``; a list or tuple of
    them item by item (one level: payloads are never walked)."""
    if items and isinstance(value, list):
        return [wrap(item, items=False) for item in value]
    if items and type(value) is tuple:
        return tuple(wrap(item, items=False) for item in value)
    if isinstance(value, Blocking | alkstore.StopToken | alkstore.Clock) or value is None:
        return value  # the ports both runtimes share are used as they are
    if _has_coroutines(type(value)) or (hasattr(value, "__aenter__") and not hasattr(value, "__enter__")):
        return Blocking(value)
    return value


def target_of(value: Any) -> Any:
    """What a ``Blocking`` stands for (anything else as it is)."""
    return object.__getattribute__(value, "_target") if isinstance(value, Blocking) else value


def _unwrap(value: Any, *, items: bool = True) -> Any:
    """An argument of a call into the async API: the object a ``Blocking`` stands for, a plain callback seeing
    its own arguments through ``Blocking``; a list or tuple item by item (one level: payloads are never walked)."""
    if isinstance(value, Blocking):
        return target_of(value)
    if items and isinstance(value, list) and any(isinstance(item, Blocking) for item in value):
        return [_unwrap(item, items=False) for item in value]
    if items and type(value) is tuple and any(isinstance(item, Blocking) for item in value):
        return tuple(_unwrap(item, items=False) for item in value)
    if items and isinstance(value, Iterator) and not isinstance(value, Blocking):
        return map(target_of, value)  # as lazily as it was given
    if inspect.isfunction(value) or inspect.ismethod(value) or isinstance(value, functools.partial):
        if inspect.iscoroutinefunction(value):
            return value
        return _seeing_blocking(value)
    return value


def _seeing_blocking(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        return func(*(wrap(arg) for arg in args), **{key: wrap(arg) for key, arg in kwargs.items()})

    return call


class Blocking:
    """A blocking view of an object of the async runtime (see the module's docstring).

    ``isinstance`` sees it as the sync twin's class (``Blocking(AsyncJob)`` is an ``alkstore.Job``),
    equality and hashing are its object's.
    """

    __slots__ = ("_target",)

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance() asks this of a proxy
        cls = type(object.__getattribute__(self, "_target"))
        twin = getattr(alkstore, cls.__name__.removeprefix("Async"), None)
        return twin if isinstance(twin, type) and cls.__name__.startswith("Async") else Blocking

    def __getattr__(self, name: str) -> Any:
        value = getattr(object.__getattribute__(self, "_target"), name)
        if callable(value) and not isinstance(value, type) and not isinstance(value, Blocking):
            return _blocking_call(value)
        return wrap(value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_target"), name, _unwrap(value))

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "_target"), name)

    def __repr__(self) -> str:
        return f"<blocking {object.__getattribute__(self, '_target')!r}>"

    def __eq__(self, other: object) -> bool:
        return bool(object.__getattribute__(self, "_target") == target_of(other))

    def __hash__(self) -> int:
        return hash(object.__getattribute__(self, "_target"))

    def __enter__(self) -> Any:
        target = object.__getattribute__(self, "_target")
        return wrap(portal().run(target.__aenter__()))

    def __exit__(self, *exc: Any) -> Any:
        target = object.__getattribute__(self, "_target")
        return portal().run(target.__aexit__(*exc))


def _blocking_call(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        result = func(*(_unwrap(arg) for arg in args), **{key: _unwrap(arg) for key, arg in kwargs.items()})
        if inspect.isawaitable(result):
            result = portal().run(result)
        return wrap(result)

    return call


def is_async(store: object) -> bool:
    """Whether ``store`` (a store, or its engine) is of the async runtime, seen through ``Blocking``."""
    return isinstance(store, Blocking)


# -- the runtime's own kinds, for whatever store the scenario holds ------------------------


def worker_of(store: Any, *args: Any, **kwargs: Any) -> Any:
    """``alkstore.Worker`` for a sync store, ``alkstore.AsyncWorker`` (seen through ``Blocking``) for an async one."""
    if not is_async(store):
        return alkstore.Worker(store, *args, **kwargs)
    handlers: Mapping[str, Any] | None = kwargs.get("handlers")
    if isinstance(handlers, Mapping):
        kwargs["handlers"] = {name: _unwrap(handler) for name, handler in handlers.items()}
    return Blocking(alkstore.AsyncWorker(target_of(store), *(_unwrap(arg) for arg in args), **kwargs))


def store_of(engine: Any, **kwargs: Any) -> Any:
    """A store of ``engine``'s runtime over it (another process's view of the same storage)."""
    if not is_async(engine):
        return alkstore.Store(engine, **kwargs)
    return Blocking(portal().call(alkstore.AsyncStore, target_of(engine), **kwargs))


def maintenance_of(store: Any, queues: Any, **kwargs: Any) -> Any:
    """A worker's storage duty over ``store``, in its runtime."""
    if not is_async(store):
        return SyncMaintenance(kernel_of(store), queues, **kwargs)
    return Blocking(AsyncMaintenance(async_kernel_of(target_of(store)), queues, **kwargs))


def task_call(method: Callable[..., Any], store: Any, /, *args: Any, **kwargs: Any) -> Any:
    """``task.enqueue(store, …)`` (or ``enqueue_tx``, ``enqueue_many``, ``enqueue_many_tx``) in the store's
    runtime: the bound sync method as written, its ``a``-prefixed twin awaited for an async store."""
    if not is_async(store):
        return method(store, *args, **kwargs)
    twin = getattr(getattr(method, "__self__"), "a" + method.__name__)  # noqa: B009 - a bound method's owner
    return portal().run(twin(target_of(store), *(_unwrap(arg) for arg in args), **kwargs))


def run(store: Any, coroutine: Callable[..., Coroutine[Any, Any, _T]], *args: Any) -> _T:
    """Run an ``async def`` the scenario wrote for the async runtime's store (``store`` as the async one sees it)."""
    return portal().run(coroutine(target_of(store), *args))
