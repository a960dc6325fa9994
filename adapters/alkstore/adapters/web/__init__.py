"""A web dashboard over the public API (``pip install 'alkstore[web]'``; ADR 038).

``create_app(store)`` is an ASGI application (Starlette) to serve or mount in a service:
server-rendered pages of the queues, their jobs, dead letters and schedules, with requeue and
purge actions unless ``read_only``. ``alkstore web --url ...`` serves one with uvicorn. It reads
and acts through ``AsyncStore`` alone, never through an engine.

The app's names load on first use, so the command line (which imports ``_command`` from here to
list ``web``) works without the extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._security import CSRF_COOKIE, CSRF_FIELD, TOKEN_VARIABLE, bind_refusal, is_loopback

if TYPE_CHECKING:
    from ._app import DEAD_GROUP_PAGE, PAGE_SIZE, REFRESH_SECONDS, WORKERS_WITHIN, create_app

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "DEAD_GROUP_PAGE",
    "PAGE_SIZE",
    "REFRESH_SECONDS",
    "TOKEN_VARIABLE",
    "WORKERS_WITHIN",
    "bind_refusal",
    "create_app",
    "is_loopback",
]

_FROM_APP = frozenset({"DEAD_GROUP_PAGE", "PAGE_SIZE", "REFRESH_SECONDS", "WORKERS_WITHIN", "create_app"})


def __getattr__(name: str) -> Any:
    """The app's names, imported (with Starlette and Jinja2) when first asked for."""
    if name in _FROM_APP:
        from . import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
