"""How the drivers show the store's values to people (``alkstore`` commands, the dashboard): one
spelling of a duration, so a lease reads the same in a terminal and in a browser; and the minute a
throughput count belongs to (``minute_of``, ADR 048), so a chart lines its points up with the store's."""

from __future__ import annotations

from datetime import timedelta

from .rules._operations import hour_of, minute_of

__all__ = ["hour_of", "minute_of", "span"]


def span(delta: timedelta) -> str:
    """A duration in at most 7 characters: ``0s``, ``12.3s``, ``4m05s``, ``3h12m``, ``2d04h``, ``140d``
    (a negative one shows as ``0s``)."""
    seconds = max(delta.total_seconds(), 0.0)
    if seconds < 60:
        return "0s" if seconds == 0 else f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    days = whole // 86400
    return f"{days}d{whole % 86400 // 3600:02d}h" if days < 100 else f"{days}d"
