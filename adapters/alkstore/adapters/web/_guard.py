"""The checks every request passes before the dashboard sees it (ADR 060), as one ASGI middleware.

In order: the ``Host`` must be an allowed host (400), then the access token, when one is
configured, must be presented (401). A refusal is plain text and reads nothing from the store.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ._security import AllowedHosts, authorized

__all__ = ["Guard"]


class Guard:
    """Refuse a request to a host not allowed (400), or without the access token when one is set (401)."""

    def __init__(self, app: ASGIApp, *, hosts: AllowedHosts, token: str | None) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.hosts.allows(host):
            allowed = ", ".join(self.hosts.names())
            refusal = PlainTextResponse(
                f"this dashboard does not answer to the host {host!r} (it answers to {allowed}); "
                "to serve it under another name, start it with --allowed-host NAME "
                "(create_app(allowed_hosts=[...]) when mounted)\n",
                status_code=400,
            )
            await refusal(scope, receive, send)
            return
        if self.token is not None and not authorized(headers.get("authorization"), self.token):
            challenge = PlainTextResponse(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="alkstore", charset="UTF-8"'},
            )
            await challenge(scope, receive, send)
            return
        await self.app(scope, receive, send)
