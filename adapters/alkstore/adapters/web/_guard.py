"""The checks every request passes before the dashboard sees it (ADR 060), as one ASGI middleware.

Every response it passes on, refusals and static files included, carries ``SECURITY_HEADERS``.
In order: the ``Host`` must be an allowed host (400); a body must not be larger than the limit
(413: a ``Content-Length`` over it is refused unread, and a body streamed without one is cut off
as it passes the limit, so no handler ever parses more); then the access token, when one is
configured, must be presented (401), by a client address that has not failed too often of late
(429); a request with the read token may not POST (403, ADR 068). The request's role is left in its
scope (``ROLE_KEY``). A refusal is plain text and reads nothing from the store.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._security import OPEN, READ, ROLE_KEY, AllowedHosts, LoginThrottle, role_of

__all__ = ["SECURITY_HEADERS", "BodyTooLarge", "Guard"]

#: On every response: scripts, styles and images from the dashboard alone (no inline script: the pages
#: have none), no framing, no sniffing a type, and a Referer only to the dashboard itself (not
#: ``no-referrer``, under which a browser sends a form's POST ``Origin: null``).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_ENCODED = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS.items()]


class BodyTooLarge(HTTPException):
    """A request's body went past the limit as it streamed in (the app's error page says so: 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"a request body is at most {limit:,} bytes")


class Guard:
    """Refuse a request to a host not allowed (400), with too large a body (413), or without the access token
    when one is set (401; 429 for an address that failed too often)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: AllowedHosts,
        token: str | None,
        max_body: int,
        throttle: LoginThrottle,
        read_token: str | None = None,
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token
        self.read_token = read_token
        self.max_body = max_body
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
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
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            too_large = PlainTextResponse(
                f"a request body is at most {self.max_body:,} bytes\n", status_code=413 if length.isdigit() else 400
            )
            await too_large(scope, receive, send)
            return
        role: str | None = OPEN
        if self.token is not None:
            role = await self._authenticated(self.token, scope, headers, receive, send)
            if role is None:
                return
        if role == READ and scope["method"] not in {"GET", "HEAD"}:
            refused = PlainTextResponse("refused: the read-only token reads; acting takes the full token\n", 403)
            await refused(scope, receive, send)
            return
        scope[ROLE_KEY] = role
        await self.app(scope, self._limited(receive), send)

    async def _authenticated(
        self, token: str, scope: Scope, headers: Headers, receive: Receive, send: Send
    ) -> str | None:
        """The role of the token the request presents; with none, its refusal is sent: 429 while its client
        address is throttled (even with a right token: guessing on learns nothing), else 401."""
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        wait = self.throttle.wait(address)
        if wait:
            throttled = PlainTextResponse(
                f"too many failed logins from {address}: try again in {wait} s\n",
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
            await throttled(scope, receive, send)
            return None
        header = headers.get("authorization")
        role = role_of(header, token, self.read_token)
        if role is None:
            if header:  # a browser's first request carries none: only a wrong token counts
                self.throttle.failed(address)
            challenge = PlainTextResponse(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="alkstore", charset="UTF-8"'},
            )
            await challenge(scope, receive, send)
            return None
        return role

    def _limited(self, receive: Receive) -> Receive:
        """``receive``, raising ``BodyTooLarge`` once the body it has passed on goes over the limit."""
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge(self.max_body)
            return message

        return limited


def _with_headers(send: Send) -> Send:
    """``send``, adding each of ``SECURITY_HEADERS`` a response does not set itself."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            added = [(name, value) for name, value in _ENCODED if name not in present]
            message = {**message, "headers": [*message.get("headers", []), *added]}
        await send(message)

    return sending
