"""Showing a database URL without its secret: the one rule, used by every adapter's messages."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["redact"]


def redact(url: str) -> str:
    """``url`` with any password (in the user part or a ``password=`` parameter) shown as ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    if password is None and "password=" not in parts.query:
        return url
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostinfo = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(key, "***" if key == "password" else value) for key, value in pairs], safe="*/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
