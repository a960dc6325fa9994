"""The facades' argument checks, shared by both runtimes: each refuses bad input before any I/O."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from alkstore.errors import InvalidArgument, InvalidOptions
from alkstore.port._time import StopToken

from ._options import EnqueueOpts, ScheduleOpts

__all__ = [
    "MAX_JOB_ID",
    "batch",
    "check_call",
    "check_callable",
    "check_opts",
    "check_stop",
    "ids_of",
    "signature_of",
    "valid_id",
]

MAX_JOB_ID = 2**63 - 1

_T = TypeVar("_T", EnqueueOpts, ScheduleOpts)


def check_opts(opts: _T | None, kind: type[_T]) -> _T:
    """``opts`` if it is a ``kind`` (``None``: the defaults); ``InvalidOptions`` for anything else."""
    if opts is None:
        return kind()
    if not isinstance(opts, kind):
        raise InvalidOptions(f"opts must be {kind.__name__}, not {type(opts).__name__}")
    return opts


def check_stop(stop: object, what: str = "stop") -> StopToken:
    """``stop`` if it is a ``StopToken``; ``InvalidArgument`` for anything else."""
    if not isinstance(stop, StopToken):
        raise InvalidArgument(f"{what} must be an alkstore.StopToken, not {type(stop).__name__}")
    return stop


def check_callable(value: object, what: str, *, optional: bool = False) -> None:
    """Refuse a ``value`` that cannot be called (``None`` too, unless ``optional``)."""
    if optional and value is None:
        return
    if not callable(value):
        raise InvalidArgument(f"{what} must be callable{' or None' if optional else ''}, not {type(value).__name__}")


def batch(payloads: Iterable[Any]) -> list[Any]:
    """The payloads of a batch enqueue as a list; a string, bytes or a mapping is one payload, not a batch."""
    if isinstance(payloads, str | bytes | bytearray | Mapping) or not isinstance(payloads, Iterable):
        raise InvalidArgument(
            f"payloads must be an iterable of payloads (a list, a generator), not {type(payloads).__name__}"
        )
    return list(payloads)


def valid_id(job_id: object) -> bool:
    """Whether ``job_id`` can name a stored job (an int in range); ``InvalidArgument`` for a non-int."""
    if not isinstance(job_id, int) or isinstance(job_id, bool):
        raise InvalidArgument(f"job id must be an int, not {type(job_id).__name__}")
    return 0 < job_id <= MAX_JOB_ID


def ids_of(job_ids: Iterable[int]) -> list[int]:
    """The valid ids among ``job_ids``, ascending and each once (``InvalidArgument`` for a non-iterable)."""
    if isinstance(job_ids, str | bytes | Mapping) or not isinstance(job_ids, Iterable):
        raise InvalidArgument(f"job_ids must be an iterable of job ids, not {type(job_ids).__name__}")
    return sorted({job_id for job_id in job_ids if valid_id(job_id)})


def signature_of(func: Callable[..., Any]) -> inspect.Signature | None:
    """``func``'s signature, or ``None`` when Python cannot read one (some builtins): its calls are then
    not checked here, and a run that cannot bind fails as any failing run does."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def check_call(task: str, signature: inspect.Signature | None, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """Refuse a run of ``task`` whose arguments do not bind to its function's ``signature`` (ADR 055).

    ``InvalidArgument`` names the task and the argument (a missing one, an unexpected keyword, too
    many positional), before any I/O: a run that cannot bind would fail every attempt and end dead.
    """
    if signature is None:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidArgument(f"task {task!r} cannot be called with these arguments: {exc}") from None
