"""The rate limit record (ADR 070): what a queue's ``rate`` and ``key_rate`` hold, checked when it is made.

Core's rule of when a limited job may start is ``alkstore.rules._rates``'; this is the value it
reads, which crosses the port in ``QueueConfig`` and ``ClaimRequest``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from alkstore.errors import InvalidOptions

__all__ = ["MAX_RATE_COUNT", "RateLimit"]

#: The most starts a rate limit may allow per period.
MAX_RATE_COUNT = 1_000_000
#: The longest period a rate limit may have: a hundred years, as every duration of a queue's settings.
_MAX_PERIOD = timedelta(days=36500)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` starts in any window of ``per`` (seconds or ``timedelta``), spaced evenly (ADR 070).

    Checked when made: ``count`` an int from 1 to 1,000,000, ``per`` finite, above zero and at most
    a century, and at least a microsecond per start; else ``InvalidOptions``.
    """

    count: int
    per: timedelta

    def __init__(self, count: int, per: float | timedelta = 1.0) -> None:
        if not isinstance(count, int) or isinstance(count, bool):
            raise InvalidOptions(f"a rate limit's count must be an int, not {type(count).__name__}")
        if not 1 <= count <= MAX_RATE_COUNT:
            raise InvalidOptions(f"a rate limit's count must be between 1 and {MAX_RATE_COUNT:,}, not {count}")
        if isinstance(per, timedelta):
            period = per
        elif isinstance(per, int | float) and not isinstance(per, bool):
            if not math.isfinite(per) or not 0 < per <= _MAX_PERIOD.total_seconds():
                raise InvalidOptions(f"a rate limit's period must be above 0 s and at most a century, not {per!r}")
            period = timedelta(seconds=per)
        else:
            raise InvalidOptions(f"a rate limit's period must be seconds or a timedelta, not {type(per).__name__}")
        if not timedelta(0) < period <= _MAX_PERIOD:
            raise InvalidOptions(f"a rate limit's period must be above 0 s and at most a century, not {period}")
        if period < count * _MICROSECOND:
            raise InvalidOptions(f"{count} starts per {period} leaves less than a microsecond per start")
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "per", period)

    @property
    def interval(self) -> timedelta:
        """The least time between two starts: ``per / count``, rounded up to the microsecond (never faster)."""
        micros = -(-(self.per // _MICROSECOND) // self.count)
        return timedelta(microseconds=micros)

    def __str__(self) -> str:
        seconds = self.per.total_seconds()
        return f"{self.count}/{seconds:g}s"
