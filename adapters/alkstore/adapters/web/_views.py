"""How the dashboard shows values: counts, durations, instants, payloads and dead letters' groups.

Plain functions of public records, free of any web framework (``markupsafe``, Jinja's, marks markup);
the templates call them as filters, and every value they show passes ``visible_controls``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from alkstore import JobInfo
from alkstore.display import span

__all__ = [
    "BIDI_CONTROLS",
    "MESSAGE_CHARS",
    "DeadGroup",
    "DeadGroups",
    "capped",
    "error_class",
    "error_message",
    "group_dead",
    "group_key",
    "instant",
    "key_of",
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


#: What masking turns into a placeholder, in this order: uuids, hex numbers (``0x``-led, or 8 or more hex
#: digits holding a digit and a letter), then any other number.
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.IGNORECASE)
_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*")
_SPACE = re.compile(r"\s+")
_CLASS = re.compile(r"[A-Za-z_][\w.]{0,127}")
#: The characters of an error a group's message is made of (the rest of a long error tells kinds apart
#: no better, and masking it would cost a long error's length per job).
MESSAGE_CHARS = 300


def error_class(error: str | None) -> str | None:
    """The exception class an error names before its first ``": "`` (``KeyError`` of ``KeyError: 'x'``), if any."""
    if error is None:
        return None
    head, colon, _ = error.partition(": ")
    return head if colon and _CLASS.fullmatch(head) else None


def error_message(error: str | None) -> str:
    """An error's message with what differs from one job to the next masked: uuids as ``<uuid>``, hex numbers
    as ``<hex>``, other numbers as ``#``, runs of white space as one space; its class left off, and cut at
    ``MESSAGE_CHARS`` (``…`` says where)."""
    if error is None:
        return "(no error recorded)"
    kind = error_class(error)
    text = error[len(kind) + 2 :] if kind else error
    text = _SPACE.sub(" ", text[: MESSAGE_CHARS * 4]).strip()
    text = _NUMBER.sub("#", _HEX.sub("<hex>", _UUID.sub("<uuid>", text)))
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def group_key(task: str | None, kind: str | None, message: str) -> str:
    """A group's name in links and forms: a digest of its task, error class and masked message."""
    whole = "\x00".join((task or "", kind or "", message)).encode()
    return hashlib.sha256(whole).hexdigest()[:20]


@dataclass(slots=True)
class DeadGroup:
    """Dead jobs of one queue whose task, error class and masked message (``error_message``) are the same:
    how many, the first ``shown`` of their ids in the listing's order (newest death first), the first's
    error in full, and when the newest and oldest of them died."""

    queue: str
    task: str | None
    kind: str | None
    message: str
    key: str
    count: int = 0
    ids: list[int] = field(default_factory=list)
    sample: str | None = None
    sample_id: int | None = None
    newest: datetime | None = None
    oldest: datetime | None = None


def key_of(job: JobInfo) -> tuple[str | None, str | None, str]:
    """A dead job's group: its task, its error's class and its masked message."""
    return job.task, error_class(job.last_error), error_message(job.last_error)


class DeadGroups:
    """Dead jobs of ``queue`` folded into groups by ``key_of`` one at a time (a queue's may be many: only each
    group's figures and first ``shown`` ids are kept)."""

    def __init__(self, queue: str, shown: int) -> None:
        self.queue = queue
        self.shown = shown
        self.read = 0
        self._groups: dict[tuple[str | None, str | None, str], DeadGroup] = {}

    def add(self, job: JobInfo) -> DeadGroup:
        """Fold ``job`` (dead, read newest death first) into its group, and return that group."""
        self.read += 1
        task, kind, message = found = key_of(job)
        group = self._groups.get(found)
        if group is None:
            group = self._groups[found] = DeadGroup(self.queue, task, kind, message, group_key(task, kind, message))
            group.sample, group.sample_id = job.last_error, job.id
        group.count += 1
        if len(group.ids) < self.shown:
            group.ids.append(job.id)
        if job.died_at is not None:
            group.newest = job.died_at if group.newest is None else max(group.newest, job.died_at)
            group.oldest = job.died_at if group.oldest is None else min(group.oldest, job.died_at)
        return group

    def ordered(self) -> list[DeadGroup]:
        """The groups, the biggest first (then by task, class and message)."""
        return sorted(self._groups.values(), key=lambda g: (-g.count, g.task or "", g.kind or "", g.message))


def group_dead(queue: str, jobs: Iterable[JobInfo], shown: int) -> list[DeadGroup]:
    """``jobs`` (dead, newest death first) grouped by ``key_of``, the biggest group first (then by task and message)."""
    groups = DeadGroups(queue, shown)
    for job in jobs:
        groups.add(job)
    return groups.ordered()
