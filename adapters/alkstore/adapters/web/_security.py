"""The dashboard's security model (ADR 038, ADR 060): who may bind where, who may read, and who may act.

* Binding: a loopback address needs nothing; any other address needs authentication configured
  (a token of at least ``MIN_TOKEN_LENGTH`` characters in ``$ALKSTORE_WEB_TOKEN``) or the explicit
  ``--insecure``, with ``--read-only`` or, to let anyone act, ``--insecure-actions`` too (then
  every page says so).
* Hosts: a request whose ``Host`` is not an allowed host is refused before anything else, so a
  page whose name was re-pointed at this machine (DNS rebinding) reads nothing.
* Roles (ADR 068): beside the full token, a read token (``$ALKSTORE_WEB_READ_TOKEN``) reads every
  page and may do nothing: the guard refuses its every POST (403) before a handler runs.
* Authentication: with a token, every request carries it, as HTTP basic auth (any user name,
  the token as the password, which a browser asks for) or as ``Authorization: Bearer``; a client
  address that failed ``LOGIN_FAILURES`` times within ``LOGIN_WINDOW`` seconds is refused until
  the oldest failure ages out.
* Actions: every action is a POST from one of the dashboard's own origins (its ``Origin``, or
  else its ``Referer``) carrying the session's form token: an HMAC of the session's cookie under
  the dashboard's secret, which a planted cookie cannot come with. A read-only dashboard has no
  action routes at all.

This module imports no web framework, so the command line can check a bind without one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import math
import secrets
from collections import deque
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from alkstore.errors import InvalidOptions

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "FULL",
    "LOGIN_FAILURES",
    "LOGIN_WINDOW",
    "LOOPBACK_NAMES",
    "MIN_TOKEN_LENGTH",
    "OPEN",
    "READ",
    "READ_TOKEN_VARIABLE",
    "ROLE_KEY",
    "TOKEN_VARIABLE",
    "AllowedHosts",
    "LoginThrottle",
    "allowed_hosts",
    "authorized",
    "bind_refusal",
    "form_token",
    "insecure_warning",
    "is_loopback",
    "new_session",
    "role_of",
    "same_token",
    "valid_form_token",
]

#: Where the dashboard finds its access token; when set, every request must present it.
TOKEN_VARIABLE = "ALKSTORE_WEB_TOKEN"
#: Where the dashboard finds its read-only token (ADR 068): it reads every page, and acts on nothing.
READ_TOKEN_VARIABLE = "ALKSTORE_WEB_READ_TOKEN"
#: The roles a request acts in: the full token's, the read token's, and a dashboard's without a token.
FULL, READ, OPEN = "full", "read", "open"
#: Where the guard leaves a request's role in its ASGI scope.
ROLE_KEY = "alkstore.role"
#: The cookie holding the session's random id, and the form field carrying its signed form token.
CSRF_COOKIE = "alkstore_csrf"
CSRF_FIELD = "csrf_token"
#: The names a browser uses for this machine; a rebinding page's name is never one of them.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The shortest access token that may guard an address beyond loopback (16 URL-safe random characters: 96 bits).
MIN_TOKEN_LENGTH = 16
#: Failed logins one client address may make within ``LOGIN_WINDOW`` seconds before it is refused (429).
LOGIN_FAILURES = 10
LOGIN_WINDOW = 60.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only ever accepts connections from this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def bind_refusal(
    host: str, *, token: str | None, insecure: bool, read_only: bool = False, insecure_actions: bool = False
) -> str | None:
    """Why the dashboard must not listen on ``host``, or ``None`` when it may. Without a token beyond
    loopback, ``insecure`` serves reading to anyone; acting too takes ``insecure_actions`` as well."""
    if insecure_actions and not insecure:
        return "--insecure-actions goes with --insecure (it lets anyone act, on top of reading)"
    if is_loopback(host):
        return None
    if token:
        return _weak(token, host)
    if insecure and (read_only or insecure_actions):
        return None
    if insecure:
        return (
            f"refusing to let anyone who can reach {host} requeue, purge, pause and cancel without authentication: "
            "add --read-only to serve reading alone, or --insecure-actions to mean it"
        )
    return (
        f"refusing to listen on {host}, which other machines can reach, without authentication: "
        f"set {TOKEN_VARIABLE} to an access token, or pass --insecure to serve it to anyone who can connect"
    )


def insecure_warning(host: str, port: int) -> str:
    """What every page and the start-up say of a dashboard whose actions anyone who can connect may use."""
    return (
        f"No authentication: anyone who can reach {host}:{port} can requeue, purge, pause and cancel here "
        "(--insecure --insecure-actions)."
    )


def _weak(token: str, host: str) -> str | None:
    """Why ``token`` is too weak to guard ``host``, an address other machines reach, or ``None``."""
    if len(token) >= MIN_TOKEN_LENGTH and len(set(token)) >= MIN_TOKEN_LENGTH // 2:
        return None
    return (
        f"refusing to listen on {host}, which other machines can reach, behind a weak token: {TOKEN_VARIABLE} "
        f"has {len(token)} characters, {len(set(token))} of them different; it needs at least {MIN_TOKEN_LENGTH}, "
        f"at least {MIN_TOKEN_LENGTH // 2} different (make one with: "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
    )


def _authority(text: str) -> tuple[str, int | None]:
    """``name`` or ``name:port`` (an IPv6 address bracketed, or bare without a port), lower-cased, split.

    Raises ``InvalidOptions`` (a ``ValueError``) for a port that is not a number from 0 to 65535, or an
    empty name.
    """
    text = text.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise InvalidOptions(f"an unclosed IPv6 bracket: {text!r}")
        name, rest = text[: end + 1], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise InvalidOptions(f"not a host[:port]: {text!r}")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 address, which cannot carry a port
        name, port_text = f"[{text}]", None
    else:
        name, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    name = name.rstrip(".")
    if not name:
        raise InvalidOptions(f"no host name in {text!r}")
    if port_text is None:
        return name, None
    if not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidOptions(f"not a port in {text!r}")
    return name, int(port_text)


class AllowedHosts:
    """The ``Host`` values a dashboard answers to, and the origins whose pages may act through it.

    An entry ``name:port`` allows that name on that port alone; ``name`` allows it on any port.
    An action's ``Origin`` must be the request's own (its ``Host``), or a configured entry's
    (``trusted``: the names a proxy in front serves the dashboard under), port and all.
    """

    def __init__(self, entries: Iterable[str], trusted: Iterable[str] = ()) -> None:
        self.trusted = [_authority(entry) for entry in trusted]
        self.entries = [_authority(entry) for entry in entries] + self.trusted

    def __repr__(self) -> str:
        return f"AllowedHosts({self.names()!r})"

    def names(self) -> list[str]:
        """The entries as given, each once, for messages."""
        shown = [name if port is None else f"{name}:{port}" for name, port in self.entries]
        return list(dict.fromkeys(shown))

    def allows(self, host: str | None) -> bool:
        """Whether a request's ``Host`` header names an allowed host."""
        if not host:
            return False
        try:
            name, port = _authority(host)
        except ValueError:
            return False
        return any(name == allowed and (want is None or want == port) for allowed, want in self.entries)

    def allows_origin(self, origin: str | None, host: str | None, scheme: str) -> bool:
        """Whether ``origin`` (an ``Origin`` header or a ``Referer`` URL) is the request's own origin or a
        trusted entry's, for a request to ``host`` over ``scheme``. ``null``, or none, is no origin."""
        if not origin or not host:
            return False
        parts = urlsplit(origin.strip())
        if parts.scheme not in _DEFAULT_PORTS or not parts.netloc or "@" in parts.netloc:
            return False
        try:
            name, port = _authority(parts.netloc)
            own = _authority(host)
        except ValueError:
            return False
        if port == _DEFAULT_PORTS[parts.scheme]:
            port = None
        if own[1] == _DEFAULT_PORTS.get(scheme):
            own = (own[0], None)
        return (name, port) == own or (name, port) in self.trusted


def allowed_hosts(bind: str | None = None, port: int | None = None, configured: Iterable[str] = ()) -> AllowedHosts:
    """The hosts a dashboard listening on ``bind``:``port`` answers to: the loopback names, the bind
    address when it is one a client can name (not ``0.0.0.0`` or ``::``), and ``configured`` (each
    also trusted as an origin). Without a port, any port is allowed (a mounted dashboard's case).
    """
    names: list[str] = list(LOOPBACK_NAMES)
    if bind is not None:
        host = bind.strip()
        wildcard = host.strip("[]") in {"0.0.0.0", "::", ""}
        if not wildcard:
            names.append(f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host)
    suffix = f":{port}" if port else ""
    return AllowedHosts([name + suffix for name in names], configured)


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


def role_of(header: str | None, token: str, read_token: str | None) -> str | None:
    """The role an ``Authorization`` header presents: ``FULL`` for ``token``, ``READ`` for ``read_token``."""
    if authorized(header, token):
        return FULL
    if read_token is not None and authorized(header, read_token):
        return READ
    return None


def new_session() -> str:
    """A fresh session's id, the cookie's value: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def form_token(secret: bytes, session: str) -> str:
    """The form token of ``session``: its HMAC-SHA256 under ``secret``, which only the dashboard can make,
    so a cookie planted by another page (on another port of the same host, say) comes with no token."""
    digest = hmac.new(secret, b"alkstore-csrf\x00" + session.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def valid_form_token(secret: bytes, session: str | None, given: str | None) -> bool:
    """Whether ``given`` is the form token of ``session`` (both present), compared in constant time."""
    return bool(session) and given is not None and same_token(given, form_token(secret, session or ""))


class LoginThrottle:
    """Failed logins per client address: after ``limit`` within ``window`` seconds, that address is refused
    until the oldest of them is ``window`` old. ``now`` gives seconds (the store's clock's instant).

    At most ``capacity`` addresses are remembered: past that, the one whose latest failure is oldest
    is forgotten, so a flood of addresses costs bounded memory.
    """

    def __init__(
        self,
        now: Callable[[], float],
        limit: int = LOGIN_FAILURES,
        window: float = LOGIN_WINDOW,
        capacity: int = 10_000,
    ) -> None:
        self.now = now
        self.limit = limit
        self.window = window
        self.capacity = capacity
        self._failures: dict[str, deque[float]] = {}

    def wait(self, address: str) -> int:
        """Whole seconds ``address`` must wait before its next try (0: it may try now)."""
        failures = self._recent(address)
        if len(failures) < self.limit:
            return 0
        return max(1, math.ceil(failures[0] + self.window - self.now()))

    def failed(self, address: str) -> None:
        """Count a failed login from ``address``."""
        failures = self._recent(address)
        failures.append(self.now())
        self._failures.pop(address, None)  # re-inserted last: the dict is ordered by latest failure
        self._failures[address] = failures
        while len(self._failures) > self.capacity:
            del self._failures[next(iter(self._failures))]

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address, deque())
        cutoff = self.now() - self.window
        while failures and failures[0] <= cutoff:
            failures.popleft()
        return failures
