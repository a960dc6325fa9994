"""A web dashboard over the public API (``pip install 'alkstore[web]'``; ADR 038).

``create_app(store)`` is an ASGI application (Starlette) to serve or mount in a service:
server-rendered pages of the queues, their jobs, dead letters and schedules, with requeue and
purge actions unless ``read_only``. ``alkstore web --url ...`` serves one with uvicorn. It reads
and acts through ``AsyncStore`` alone, never through an engine.
"""

from __future__ import annotations

from ._app import DEAD_GROUP_PAGE, PAGE_SIZE, REFRESH_SECONDS, WORKERS_WITHIN, create_app
from ._security import CSRF_COOKIE, CSRF_FIELD, TOKEN_VARIABLE, bind_refusal, is_loopback

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
