"""Which public facade members the contract suite exercises, recorded as the suite runs.

While the suite runs, every public method, property and field of the facades is wrapped
so that touching it on an instance records ``"Class.member"``. The completeness test then
asserts that every public member (as ``dir()`` lists it today) was touched: a new public
method without a contract test fails the suite.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import alkstore

__all__ = ["DESELECTED", "EXERCISED", "FACADES", "public_members", "recording"]

#: The facades whose whole public surface the suite must exercise, in both runtimes.
FACADES: tuple[type, ...] = (
    alkstore.Store,
    alkstore.Queue,
    alkstore.Job,
    alkstore.JobInfo,
    alkstore.Lock,
    alkstore.Outbox,
    alkstore.AsyncStore,
    alkstore.AsyncQueue,
    alkstore.AsyncJob,
    alkstore.AsyncLock,
    alkstore.AsyncOutbox,
    alkstore.Schedule,
    alkstore.QueueStats,
    alkstore.JobPage,
    alkstore.Leader,
    alkstore.WorkerInfo,
    alkstore.LockInfo,
    alkstore.ActionInfo,
    alkstore.JobResult,
    alkstore.ResultPage,
    alkstore.AttemptFailure,
)
#: Protocol methods that are part of a facade's public surface when it defines them.
_PROTOCOL = ("__enter__", "__exit__", "__aenter__", "__aexit__")

#: ``"Class.member"`` for every public member touched on an instance of a facade so far.
EXERCISED: set[str] = set()
#: Node ids of contract tests deselected in this run (the completeness check needs the whole suite).
DESELECTED: list[str] = []


def public_members(cls: type) -> set[str]:
    """The public surface of ``cls``: every non-underscore name ``dir()`` shows, plus context-manager methods."""
    names = {name for name in dir(cls) if not name.startswith("_")}
    names.update(name for name in _PROTOCOL if getattr(cls, name, None) is not getattr(object, name, None))
    return names


def _note(instance: object, name: str) -> None:
    EXERCISED.add(f"{type(instance).__name__}.{name}")


class _RecordedField:
    """A data descriptor around a slot (or other data descriptor) that notes every read."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner = inner
        self._name = name
        self.__doc__ = getattr(inner, "__doc__", None)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        _note(instance, self._name)
        return self._inner.__get__(instance, owner)

    def __set__(self, instance: object, value: Any) -> None:
        self._inner.__set__(instance, value)

    def __delete__(self, instance: object) -> None:
        self._inner.__delete__(instance)


def _wrap_function(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def recorded_async(self: object, *args: Any, **kwargs: Any) -> Any:
            _note(self, name)
            return await function(self, *args, **kwargs)

        return recorded_async

    @functools.wraps(function)
    def recorded(self: object, *args: Any, **kwargs: Any) -> Any:
        _note(self, name)
        return function(self, *args, **kwargs)

    return recorded


def _wrap_property(prop: property, name: str) -> property:
    getter = prop.fget

    def recorded(self: object) -> Any:
        _note(self, name)
        assert getter is not None
        return getter(self)

    return property(recorded, prop.fset, prop.fdel, prop.__doc__)


def _wrapped(raw: Any, name: str) -> Any:
    if isinstance(raw, types.FunctionType):
        return _wrap_function(raw, name)
    if isinstance(raw, property):
        return _wrap_property(raw, name)
    if isinstance(raw, types.MemberDescriptorType) or hasattr(raw, "__set__"):
        return _RecordedField(raw, name)
    raise TypeError(f"cannot record facade member {name!r} of kind {type(raw).__name__}; teach contract_tests")


@contextmanager
def recording() -> Iterator[set[str]]:
    """Record facade use for the duration of the block; restores the classes afterwards."""
    originals: dict[tuple[type, str], Any] = {}
    for cls in FACADES:
        for name in public_members(cls):
            owner = next(klass for klass in cls.__mro__ if name in vars(klass))
            if owner is object or (owner, name) in originals:
                continue
            raw = vars(owner)[name]
            originals[(owner, name)] = raw
            setattr(owner, name, _wrapped(raw, name))
    try:
        yield EXERCISED
    finally:
        for (owner, name), raw in originals.items():
            setattr(owner, name, raw)
