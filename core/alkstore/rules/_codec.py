"""The payload codec port and its JSON default (bytes pass through untouched)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from alkstore.errors import InvalidPayload

__all__ = ["MAX_DEPTH", "Codec", "JsonCodec"]

#: The deepest nesting of lists and objects a JSON payload may have. Checked when encoding, so a
#: payload that is accepted decodes in any claimer, however deep its own stack (Python's parser
#: recurses once per level and shares the interpreter's recursion limit with its caller).
MAX_DEPTH = 256


class Codec(ABC):
    """Turns payloads into the bytes an engine stores, and back.

    ``encode`` raises ``InvalidPayload`` for a payload it cannot encode, before any I/O.
    ``decode`` raises ``InvalidPayload`` for bytes that are not a valid encoding (the job is
    then buried); any other exception it raises is taken as no fault of the payload (the job
    is handed back, not buried).
    """

    @abstractmethod
    def encode(self, payload: Any) -> bytes:
        """Encode ``payload``; raise ``InvalidPayload`` if it cannot be (before any I/O)."""

    @abstractmethod
    def decode(self, data: bytes) -> Any:
        """Decode bytes produced by ``encode``; raise ``InvalidPayload`` if they are not an encoding."""


class JsonCodec(Codec):
    """JSON text (UTF-8, no NaN, at most ``MAX_DEPTH`` levels deep) for JSON values; ``bytes`` stay ``bytes``.

    Raw bytes are stored behind a NUL byte, which no JSON text starts with, so JSON
    payloads stay readable in the database and the two kinds never collide.
    """

    _RAW = b"\x00"
    _ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def encode(self, payload: Any) -> bytes:
        if isinstance(payload, _RAW_TYPES):
            return self._RAW + bytes(payload)
        try:
            _check_depth(payload)
            # The encoder's own encode, less its building a C encoder on every call.
            text = self._ENCODER.encode(payload) if _ONE_SHOT is None else "".join(_ONE_SHOT(payload, 0))
            return text.encode("utf-8")  # a lone surrogate fails here (UnicodeEncodeError is a ValueError)
        except InvalidPayload:
            raise
        except Exception as exc:  # whatever a value's own methods raise (a mapping whose items() fails)
            raise InvalidPayload(f"payload is not JSON-encodable: {type(exc).__name__}: {exc}") from exc

    def decode(self, data: bytes) -> Any:
        if not isinstance(data, _RAW_TYPES):
            raise InvalidPayload(f"the JSON codec decodes bytes, not {type(data).__name__}")
        data = bytes(data)
        if data.startswith(self._RAW):
            return data[1:]
        try:
            text = data.decode("utf-8")
            # What encode wrote is one value, no space around it: read as is (raw_decode), less the
            # decoder's two whitespace matches around the value (per claimed job). Anything else (space,
            # something after the value, or no value) goes through the full decode, which names the fault.
            try:
                value, end = _SCAN(text, 0)  # ``raw_decode``'s own scan, less its Python call
            except StopIteration:
                return _DECODER.decode(text)
            return value if end == len(text) else _DECODER.decode(text)
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise InvalidPayload(f"stored payload is not valid JSON: {exc}") from exc
        except RecursionError:
            # Too deep for this thread's stack right now: the payload's fault only if it is
            # deeper than any payload encode accepts.
            if _text_depth(text) > MAX_DEPTH:
                raise InvalidPayload(f"stored payload is nested deeper than {MAX_DEPTH} levels") from None
            raise

    def __repr__(self) -> str:
        return "<alkstore.JsonCodec>"


#: What the codec stores raw, and what JSON nests (tuples, not unions: ``isinstance`` is several times faster).
_RAW_TYPES = (bytes, bytearray, memoryview)
_NESTING = (dict, list, tuple)


def _one_shot_encoder() -> Any:
    """The C encoder ``JsonCodec._ENCODER`` would build for each call, built once (``None`` without it).

    It keeps no markers of its own: ``_check_depth`` runs first and refuses every cycle (as too
    deep), so a payload this encoder sees nests at most ``MAX_DEPTH`` levels.
    """
    make = getattr(json.encoder, "c_make_encoder", None)  # CPython's accelerator, when built
    if make is None:
        return None
    encoder = JsonCodec._ENCODER
    return make(
        None,
        encoder.default,
        json.encoder.encode_basestring,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )


def _check_depth(payload: Any) -> None:
    """Refuse a payload nested deeper than ``MAX_DEPTH`` (walked without recursion; cycles end here too)."""
    if not isinstance(payload, _NESTING):
        return
    for item in payload.values() if isinstance(payload, dict) else payload:
        if isinstance(item, _NESTING):
            break
    else:  # the common payload: flat, so no stack to build
        return
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidPayload(f"payload is nested deeper than {MAX_DEPTH} levels")
        for item in value.values() if isinstance(value, dict) else value:
            if isinstance(item, _NESTING):
                stack.append((item, depth + 1))


def _text_depth(text: str) -> int:
    """The deepest nesting of JSON text, brackets inside strings aside (a slow path, for diagnosis)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _reject_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON: refuse them on decode as ``encode`` does."""
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
#: The decoder's scanner (``raw_decode`` calls it, and names its ``StopIteration`` "Expecting value").
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_ONE_SHOT = _one_shot_encoder()
