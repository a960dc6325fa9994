"""The payload codec port and its JSON default (bytes pass through untouched)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from .errors import InvalidPayload

__all__ = ["Codec", "JsonCodec"]


class Codec(ABC):
    """Turns payloads into the bytes an engine stores, and back. Raises ``InvalidPayload``."""

    @abstractmethod
    def encode(self, payload: Any) -> bytes:
        """Encode ``payload``; raise ``InvalidPayload`` if it cannot be (before any I/O)."""

    @abstractmethod
    def decode(self, data: bytes) -> Any:
        """Decode bytes produced by ``encode``; raise ``InvalidPayload`` if they are not."""


class JsonCodec(Codec):
    """JSON text (UTF-8, no NaN) for JSON values; ``bytes`` stay ``bytes``.

    Raw bytes are stored behind a NUL byte, which no JSON text starts with, so JSON
    payloads stay readable in the database and the two kinds never collide.
    """

    _RAW = b"\x00"
    _ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    def encode(self, payload: Any) -> bytes:
        if isinstance(payload, bytes | bytearray | memoryview):
            return self._RAW + bytes(payload)
        try:
            text = self._ENCODER.encode(payload)
            return text.encode("utf-8")  # a lone surrogate fails here (UnicodeEncodeError is a ValueError)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidPayload(f"payload is not JSON-encodable: {exc}") from exc

    def decode(self, data: bytes) -> Any:
        data = bytes(data)
        if data.startswith(self._RAW):
            return data[1:]
        try:
            return _DECODER.decode(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise InvalidPayload(f"stored payload is not valid JSON: {exc}") from exc

    def __repr__(self) -> str:
        return "<alkstore.JsonCodec>"


def _reject_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON: refuse them on decode as ``encode`` does."""
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
