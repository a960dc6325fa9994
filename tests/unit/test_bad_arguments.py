"""Arguments of the wrong kind to the store's constructor and the codec: named errors, not bare ones."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidArgument, InvalidPayload, JsonCodec, Store


@pytest.mark.parametrize("engine", [None, 123, "memory://", object()])
def test_a_store_needs_an_engine(engine: Any) -> None:
    with pytest.raises(InvalidArgument, match="engine"):
        Store(engine)


@pytest.mark.parametrize("data", [None, 5, "[1]", [1], 1.5])
def test_the_json_codec_decodes_bytes_only(data: Any) -> None:
    with pytest.raises(InvalidPayload, match="bytes"):
        JsonCodec().decode(data)
    buffer: Any = bytearray(b"[1]")  # a buffer of bytes is still bytes to the codec
    assert JsonCodec().decode(buffer) == [1]
