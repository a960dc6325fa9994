"""The schedule spec grammar: exactly ``@every <n><unit>``, nothing else (ADR 002)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from alkstore.errors import InvalidSpec

__all__ = ["MAX_INTERVAL_SECONDS", "UNIT_SECONDS", "Every", "parse_spec"]

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: Ten years: fits a 32-bit integer column and keeps every boundary far inside datetime's range.
MAX_INTERVAL_SECONDS = 3650 * 86400
_MAX_SPEC_LENGTH = 32
#: The grammar, and a count of zero besides, so that ``@every 0s`` is told its interval is too short.
_GRAMMAR = re.compile(r"@every (0|[1-9][0-9]*)([smhd])", re.ASCII)
#: What a cron-like spec is told: the grammar's way to fire at a chosen time is an anchor (ADR 034).
_CRON_HINT = (
    " (cron expressions are not supported: for set times, anchor an @every schedule;"
    " '@every 1d' with ScheduleOpts(anchor=<an aware datetime at 02:00>) fires at 02:00 every day)"
)


@dataclass(frozen=True, slots=True)
class Every:
    """A parsed ``@every`` spec: ``count`` units of ``unit``."""

    count: int
    unit: str

    #: Seconds per unit of the grammar.
    UNIT_SECONDS: ClassVar[Mapping[str, int]] = MappingProxyType(UNIT_SECONDS)

    @property
    def seconds(self) -> int:
        """The interval in whole seconds."""
        return self.count * UNIT_SECONDS[self.unit]

    def __str__(self) -> str:
        return f"@every {self.count}{self.unit}"


def parse_spec(spec: object) -> Every:
    """Parse ``spec`` or raise ``InvalidSpec``.

    The accepted surface is exactly ``@every``, one ASCII space, a positive decimal
    integer without leading zeros, and one lower-case unit of ``s``, ``m``, ``h`` or
    ``d``; no other whitespace, no upper case, at most ten years. ``str(parse_spec(s))
    == s`` for every accepted ``s``.
    """
    if not isinstance(spec, str):
        raise InvalidSpec(f"spec must be a str, not {type(spec).__name__}")
    match = _GRAMMAR.fullmatch(spec) if len(spec) <= _MAX_SPEC_LENGTH else None
    if match is None:
        hint = _CRON_HINT if _looks_like_cron(spec) else ""
        raise InvalidSpec(f"spec {spec[:64]!r} is not of the form '@every <n><s|m|h|d>'{hint}")
    every = Every(int(match.group(1)), match.group(2))
    if every.count == 0:
        raise InvalidSpec(f"spec {spec!r}: the interval must be at least 1s")
    if every.seconds > MAX_INTERVAL_SECONDS:
        raise InvalidSpec(f"spec {spec!r} exceeds the longest interval, {MAX_INTERVAL_SECONDS // 86400}d")
    return every


def _looks_like_cron(spec: str) -> bool:
    fields = spec.split()
    return (spec.startswith("@") and not spec.startswith("@every")) or len(fields) in (5, 6, 7)
