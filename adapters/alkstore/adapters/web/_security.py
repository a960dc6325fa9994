"""The dashboard's security model (ADR 038): who may bind where, who may read, and who may act.

* Binding: a loopback address needs nothing; any other address needs authentication configured
  (a token in ``$ALKSTORE_WEB_TOKEN``) or the explicit ``--insecure``.
* Authentication: with a token, every request carries it, as HTTP basic auth (any user name,
  the token as the password, which a browser asks for) or as ``Authorization: Bearer``.
* Actions: every action is a POST carrying the session's CSRF token in a form field, equal to the
  one in the session's cookie (``SameSite=Strict``, ``HttpOnly``); a read-only dashboard has no
  action routes at all.

This module imports no web framework, so the command line can check a bind without one.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "TOKEN_VARIABLE",
    "authorized",
    "bind_refusal",
    "is_loopback",
    "new_csrf_token",
    "same_token",
]

#: Where the dashboard finds its access token; when set, every request must present it.
TOKEN_VARIABLE = "ALKSTORE_WEB_TOKEN"
#: The cookie holding the session's CSRF token, and the form field that must repeat it.
CSRF_COOKIE = "alkstore_csrf"
CSRF_FIELD = "csrf_token"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only ever accepts connections from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def bind_refusal(host: str, *, token: str | None, insecure: bool) -> str | None:
    """Why the dashboard must not listen on ``host``, or ``None`` when it may."""
    if is_loopback(host) or token or insecure:
        return None
    return (
        f"refusing to listen on {host}, which other machines can reach, without authentication: "
        f"set {TOKEN_VARIABLE} to an access token, or pass --insecure to serve it to anyone who can connect"
    )


def same_token(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def authorized(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header presents ``token`` (basic auth's password, or a bearer token)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme == "bearer":
        return same_token(value.strip(), token)
    if scheme == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return False
        _, colon, password = decoded.partition(":")
        return bool(colon) and same_token(password, token)
    return False


def new_csrf_token() -> str:
    """A fresh session's CSRF token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)
