"""How the dashboard shows values: counts, durations, instants, payloads and error groups.

Plain functions of public records, free of any web framework (``markupsafe``, Jinja's, marks markup);
the templates call them as filters, and every value they show passes ``visible_controls``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from alkstore import JobInfo
from alkstore.display import span

__all__ = [
    "BIDI_CONTROLS",
    "ErrorGroup",
    "capped",
    "error_groups",
    "instant",
    "payload_text",
    "span",
    "visible_controls",
]

#: The characters that reorder the text around them (Unicode's Bidi_Control): shown live, U+202E makes
#: ``evil\u202eexe.txt`` read ``eviltxt.exe``. Every value a page shows has them spelled out instead.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SPELLED = {ord(char): f"<U+{ord(char):04X}>" for char in BIDI_CONTROLS}
_SPELLED_ESCAPED = {ord(char): f"&lt;U+{ord(char):04X}&gt;" for char in BIDI_CONTROLS}


def visible_controls(value: Any) -> Any:
    """``value`` with each bidirectional control character spelled out (``<U+202E>``), so text written to
    mislead reads as written. Markup (what ``join`` makes of escaped names, say) gets the spelling
    escaped; anything but a string is returned as it is."""
    if not isinstance(value, str) or BIDI_CONTROLS.isdisjoint(value):
        return value
    if isinstance(value, Markup):
        return Markup(str(value).translate(_SPELLED_ESCAPED))
    return value.translate(_SPELLED)


def capped(value: int, cap: int | None) -> str:
    """A queue's count as ``alkstore status`` shows it: ``10,000+`` where counting stopped at the cap."""
    return f"{value:,}+" if cap is not None and value >= cap else f"{value:,}"


def instant(at: datetime | None) -> str:
    """An instant in UTC to the second, ``—`` for none."""
    if at is None:
        return "—"
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _plain(value: Any) -> Any:
    """``value`` with every ``bytes`` inside it replaced by its Python literal, for JSON."""
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<bytes {bytes(value)!r}>"
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def payload_text(payload: Any) -> str:
    """A payload for reading: bytes (a payload the codec could not decode) as a bytes literal with its
    length, anything else as indented JSON (or its ``repr`` when not JSON)."""
    if isinstance(payload, bytes | bytearray | memoryview):
        data = bytes(payload)
        return f"{len(data)} bytes: {data!r}"
    try:
        return json.dumps(_plain(payload), indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return repr(payload)


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Dead jobs of one queue and task (``None``: a plain job) that died of exactly the same error text."""

    queue: str
    task: str | None
    error: str | None
    jobs: tuple[JobInfo, ...]

    @property
    def ids(self) -> list[int]:
        return [job.id for job in self.jobs]


def error_groups(queue: str, jobs: Iterable[JobInfo]) -> list[ErrorGroup]:
    """``jobs`` grouped by task and the exact text of their last error, the biggest group first (then by
    task and error). Errors that differ in any character, a line or a trailing space, are two groups."""
    groups: dict[tuple[str | None, str | None], list[JobInfo]] = {}
    for job in jobs:
        groups.setdefault((job.task, job.last_error), []).append(job)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0][0] or "", item[0][1] or ""))
    return [ErrorGroup(queue, task, error, tuple(members)) for (task, error), members in ordered]
