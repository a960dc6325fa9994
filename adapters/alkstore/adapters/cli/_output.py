"""What the inspection commands print: instants, spans, counts cut to fit, tables, payloads and JSON.

Text output fits 80 columns, except for the names of queues and schedules, which are shown
whole (their columns widen to the longest); instants in it are UTC to the second. JSON output
writes instants in ISO 8601 and durations in seconds (the shapes are in ``docs/operations.md``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from alkstore.display import span

__all__ = ["Column", "capped", "count", "dump", "fit", "iso", "payload_json", "payload_text", "span", "table", "when"]

#: The suffixes of large counts in tables.
_UNITS = (("k", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12), ("P", 10**15))


def iso(instant: datetime | None) -> str | None:
    """An instant in JSON output: ISO 8601, or ``None``."""
    return None if instant is None else instant.isoformat()


def when(instant: datetime | None) -> str:
    """An instant as a table shows it: UTC to the second."""
    return "-" if instant is None else instant.strftime("%Y-%m-%d %H:%M:%S")


def count(value: int, width: int) -> str:
    """A count in at most ``width`` characters where it fits: as is, else in its unit (k, M, G, T, P)."""
    text = str(value)
    if len(text) <= width:
        return text
    suffix, scale = next((unit for unit in reversed(_UNITS) if value >= unit[1]), _UNITS[0])
    short = f"{value / scale:.1f}{suffix}"
    return short if len(short) <= width else f"{value // scale}{suffix}"


def capped(value: int, cap: int | None) -> str:
    """A queue table's count: ``10000+`` where counting stopped at the cap."""
    return count(value, 8) + "+" if cap is not None and value >= cap else count(value, 9)


def fit(text: str, width: int | None) -> str:
    """``text`` on one line (an error's line breaks and tabs become spaces), cut to ``width`` characters
    (``None``: whole), an ellipsis marking a cut."""
    if not text.isprintable():
        text = "".join(char if char.isprintable() else " " for char in text)
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class Column:
    """A table's column: its header, its width, whether its cells are right-aligned, and whether it
    widens to its longest cell (``whole``: a name, which a cut could make another's) instead of cutting."""

    header: str
    width: int
    right: bool = False
    whole: bool = False


def table(columns: Sequence[Column], rows: Sequence[Sequence[object]], gap: int = 1) -> list[str]:
    """Lines of a table: a header, then a row per row, each cell cut to its column (or, in a ``whole``
    column, the column widened to it), ``gap`` spaces apart."""
    cells = [[fit(str(cell), None) for cell in row] for row in rows]
    widths = [
        max([column.width, *(len(row[i]) for row in cells)]) if column.whole else column.width
        for i, column in enumerate(columns)
    ]

    def line(texts: Sequence[str]) -> str:
        parts = []
        for column, width, text in zip(columns, widths, texts, strict=True):
            text = fit(text, width)
            parts.append(text.rjust(width) if column.right else text.ljust(width))
        return (" " * gap).join(parts).rstrip()

    return [line([column.header for column in columns]), *(line(row) for row in cells)]


def payload_json(payload: Any) -> dict[str, Any]:
    """A payload in JSON output: the value, or (bytes, or what did not decode) its base64."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return {"payload": None, "payload_base64": base64.b64encode(bytes(payload)).decode("ascii")}
    return {"payload": payload, "payload_base64": None}


def payload_text(payload: Any) -> str:
    """A payload in a table cell: compact JSON, or the size and first bytes of binary."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return f"<{len(payload)} bytes> {bytes(payload)[:24].hex()}"
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=repr)


def dump(value: Any, out: TextIO, *, compact: bool = False) -> None:
    """Print ``value`` as JSON: indented, or (``compact``) on one line, as ``status --watch --json`` does."""
    if compact:
        print(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr), file=out, flush=True)
    else:
        print(json.dumps(value, ensure_ascii=False, indent=2, default=repr), file=out, flush=True)
