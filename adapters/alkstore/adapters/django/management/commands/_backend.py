"""The alkstore backend a command works with, named by its ``TASKS`` alias."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django.tasks import task_backends
from django.tasks.exceptions import InvalidTaskBackend

from alkstore.adapters.django.backend import AlkstoreBackend

__all__ = ["alkstore_backend"]


def alkstore_backend(alias: str) -> Any:
    """``TASKS[alias]``, which must be an ``AlkstoreBackend`` that passes its checks."""
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as exc:
        raise CommandError(f"no task backend {alias!r} in TASKS: {exc}") from exc
    if not isinstance(backend, AlkstoreBackend):
        raise CommandError(f"TASKS[{alias!r}] is {type(backend).__name__}, not alkstore's AlkstoreBackend")
    errors = backend.check()
    if errors:
        raise CommandError("; ".join(f"{error.id}: {error.msg}" for error in errors))
    return backend
