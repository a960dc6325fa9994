"""How the engine's statements and their arrays are sent: statements in the server's own positional
form, made once per statement, and integer and instant arrays as literals (ADR 071)."""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Dumper

__all__ = ["FixedIntArray", "InstantArray", "IntArray", "Positional", "positional"]


class IntArray(list[int]):
    """Integers sent as one ``bigint[]`` literal. psycopg's own list dumper looks for each list's
    element type and size at every call: six small arrays cost a claim more than its run (ADR 071)."""


class FixedIntArray(tuple[int, ...]):
    """Integers sent as one ``bigint[]`` literal made once, with the array: one the engine sends unchanged
    at call after call (the claim's segments of priorities, ADR 061) is not written out again at each."""

    literal: bytes

    def __new__(cls, values: Iterable[int]) -> FixedIntArray:
        made = super().__new__(cls, values)
        made.literal = ("{" + ",".join(map(int.__repr__, made)) + "}").encode()
        return made


class InstantArray(list[datetime]):
    """Instants sent as one ``timestamptz[]`` literal, each with its offset (ISO 8601, whatever the DateStyle)."""


class _IntArrayDumper(Dumper):
    oid = psycopg.postgres.types["int8"].array_oid

    def dump(self, obj: IntArray) -> Buffer:
        return ("{" + ",".join(map(int.__repr__, obj)) + "}").encode()


class _FixedIntArrayDumper(Dumper):
    oid = psycopg.postgres.types["int8"].array_oid

    def dump(self, obj: FixedIntArray) -> Buffer:
        return obj.literal


#: Each instant's element of an ``InstantArray`` literal as last written, for at most ``_ELEMENTS_KEPT`` instants:
#: a claim's instants (its bands' bounds, its probe's start) come again claim after claim, and ``isoformat``
#: is most of what writing one costs. Equal instants are one instant to ``timestamptz``, whatever their offset.
_ELEMENTS: dict[datetime, str] = {}
_ELEMENTS_KEPT = 256


class _InstantArrayDumper(Dumper):
    oid = psycopg.postgres.types["timestamptz"].array_oid

    def dump(self, obj: InstantArray) -> Buffer:
        elements = _ELEMENTS
        texts = []
        for instant in obj:
            text = elements.get(instant)
            if text is None:
                if len(elements) >= _ELEMENTS_KEPT:
                    elements.clear()
                text = elements[instant] = f'"{instant.isoformat()}"'
            texts.append(text)
        return ("{" + ",".join(texts) + "}").encode()


psycopg.adapters.register_dumper(IntArray, _IntArrayDumper)
psycopg.adapters.register_dumper(FixedIntArray, _FixedIntArrayDumper)
psycopg.adapters.register_dumper(InstantArray, _InstantArrayDumper)


@dataclasses.dataclass(frozen=True)
class Positional:
    """A statement in the server's own ``$1, $2, …`` form, and the names of its parameters in that order."""

    query: bytes
    names: tuple[str, ...]
    #: Reads the values of the names, in their order, in one call.
    _get: Callable[[Mapping[str, object]], Any] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_get", operator.itemgetter(*self.names) if self.names else None)

    def values(self, params: Mapping[str, object]) -> tuple[object, ...]:
        """The values of ``params`` in the statement's order."""
        if len(self.names) > 1:
            return self._get(params)  # type: ignore[no-any-return]
        return tuple(params[name] for name in self.names)


_PLACEHOLDER = re.compile(r"%\((\w+)\)([sb])|%%|\$")
_POSITIONAL: dict[str, Positional | None] = {}


def positional(statement: str) -> Positional | None:
    """``statement`` (``%(name)s`` placeholders) made positional once, or ``None`` where it cannot be.

    psycopg converts a named statement at every execution, and caches the conversion only for a
    statement of at most 4 KiB: the claims after ADR 061 are longer, so each claim paid the
    conversion again in Python. A positional statement runs on a raw cursor, which sends it as is.
    ``None`` for a statement that asks for a binary parameter (``%(name)b``: a raw cursor dumps
    every value in the automatic format) or holds a ``$`` of its own.
    """
    try:
        return _POSITIONAL[statement]
    except KeyError:
        pass
    names: list[str] = []
    kept: Positional | None = None

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(0) == "$" or match.group(2) == "b":
            raise ValueError(match.group(0))
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    try:
        kept = Positional(_PLACEHOLDER.sub(number, statement).encode(), tuple(names))
    except ValueError:
        kept = None
    _POSITIONAL[statement] = kept
    return kept
