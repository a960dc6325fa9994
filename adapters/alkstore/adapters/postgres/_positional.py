"""How the engine's statements and their arrays are sent: statements in the server's own positional
form, made once per statement, and integer and instant arrays in the server's binary array form (ADR 071)."""

from __future__ import annotations

import dataclasses
import operator
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

import psycopg
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["FixedIntArray", "InstantArray", "IntArray", "Positional", "positional"]


class IntArray(list[int]):
    """Integers sent as one binary ``bigint[]``. psycopg's own list dumper looks for each list's
    element type and size at every call: six small arrays cost a claim more than its run (ADR 071)."""


#: The binary ``bigint[]`` and ``timestamptz[]`` types (an array's header names its element type).
_INT8 = psycopg.postgres.types["int8"]
_TIMESTAMPTZ = psycopg.postgres.types["timestamptz"]
#: An array's header: dimensions, a flag for NULL elements (never here), the element type; then per dimension
#: its length and lower bound (1); then each element as its length (8) and its value.
_HEADER = struct.Struct("!iiIii")
_ELEMENT = struct.Struct("!iq")
_EMPTY = {oid: struct.pack("!iiI", 0, 0, oid) for oid in (_INT8.oid, _TIMESTAMPTZ.oid)}
#: A whole ``bigint[]`` of n elements in one ``pack``, per n up to ``_SHAPES_KEPT`` (a claim's acks and segments
#: are a few): cheaper for the client than writing the text literal was; a longer array packs element by element.
_SHAPES: dict[int, struct.Struct] = {}
_SHAPES_KEPT = 64
_ONE = struct.Struct(_HEADER.format + "iq")


def _binary_int8s(values: Sequence[int]) -> bytes:
    """``values`` as the server's binary ``bigint[]`` (one dimension; empty: no dimension)."""
    count = len(values)
    if count == 1:  # the commonest: a one-slot worker's ack
        return _ONE.pack(1, 0, _INT8.oid, 1, 1, 8, values[0])
    shape = _SHAPES.get(count)
    if shape is None:
        if not count:
            return _EMPTY[_INT8.oid]
        if count > _SHAPES_KEPT:
            return _HEADER.pack(1, 0, _INT8.oid, count, 1) + b"".join(map(_ELEMENT.pack, repeat(8), values))
        shape = _SHAPES[count] = struct.Struct(_HEADER.format + "iq" * count)
    fields = [8] * (2 * count)
    fields[1::2] = values
    return shape.pack(1, 0, _INT8.oid, count, 1, *fields)


class FixedIntArray(tuple[int, ...]):
    """Integers sent as one binary ``bigint[]`` made once, with the array: one the engine sends unchanged
    at call after call (the claim's segments of priorities, ADR 061) is not written out again at each."""

    literal: bytes

    def __new__(cls, values: Iterable[int]) -> FixedIntArray:
        made = super().__new__(cls, values)
        made.literal = _binary_int8s(made)
        return made


class InstantArray(list[datetime]):
    """Instants sent as one binary ``timestamptz[]`` (microseconds since 2000-01-01 UTC; a naive instant is UTC,
    as the engine's sessions read one)."""


class _IntArrayDumper(Dumper):
    """The server parses a text array's every element (``array_in``): a claim's six arrays cost it more than
    their binary form costs the client to write (2026-12-07)."""

    format = Format.BINARY
    oid = _INT8.array_oid

    def dump(self, obj: IntArray) -> Buffer:
        return _binary_int8s(obj)


class _FixedIntArrayDumper(Dumper):
    format = Format.BINARY
    oid = _INT8.array_oid

    def dump(self, obj: FixedIntArray) -> Buffer:
        return obj.literal


#: PostgreSQL's epoch: a binary ``timestamptz`` counts microseconds from it.
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: Each instant's element of an ``InstantArray`` as last written, for at most ``_ELEMENTS_KEPT`` instants: a
#: claim's instants (its bands' bounds, its probe's start) come again claim after claim. Equal instants are
#: one instant to ``timestamptz``, whatever their offset, and one element.
_ELEMENTS: dict[datetime, bytes] = {}
_ELEMENTS_KEPT = 256


class _InstantArrayDumper(Dumper):
    format = Format.BINARY
    oid = _TIMESTAMPTZ.array_oid

    def dump(self, obj: InstantArray) -> Buffer:
        elements = _ELEMENTS
        packed = []
        for instant in obj:
            element = elements.get(instant)
            if element is None:
                if len(elements) >= _ELEMENTS_KEPT:
                    elements.clear()
                aware = instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)
                element = elements[instant] = _ELEMENT.pack(8, (aware - _PG_EPOCH) // _MICROSECOND)
            packed.append(element)
        if not packed:
            return _EMPTY[_TIMESTAMPTZ.oid]
        return _HEADER.pack(1, 0, _TIMESTAMPTZ.oid, len(packed), 1) + b"".join(packed)


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
