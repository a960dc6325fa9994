"""The JSON codec: round trips, bytes kept as bytes, readable JSON, and InvalidPayload for the rest."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore import Codec, InvalidPayload, JsonCodec
from alkstore.rules._codec import MAX_DEPTH

codec = JsonCodec()


def test_the_json_codec_is_a_codec_with_a_public_repr() -> None:
    assert isinstance(codec, Codec)
    assert repr(codec) == "<alkstore.JsonCodec>"


@pytest.mark.parametrize(
    "payload",
    [
        None,
        True,
        False,
        0,
        -1,
        2**70,
        1.5,
        -0.0,
        "",
        "text",
        "ünïcödé 名前 🎉",
        [],
        {},
        [1, "a", None],
        {"a": {"b": []}},
    ],
)
def test_json_values_round_trip(payload: Any) -> None:
    decoded = codec.decode(codec.encode(payload))
    assert decoded == payload
    assert type(decoded) is type(payload)


def test_json_payloads_are_stored_as_readable_compact_utf8_json() -> None:
    data = codec.encode({"to": "zoë@example.com", "n": [1, 2]})
    assert data == '{"to":"zoë@example.com","n":[1,2]}'.encode()
    assert json.loads(data) == {"to": "zoë@example.com", "n": [1, 2]}


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xfe binary", b'{"looks": "like json"}', bytes(range(256))])
def test_bytes_stay_bytes(raw: bytes) -> None:
    decoded = codec.decode(codec.encode(raw))
    assert decoded == raw
    assert type(decoded) is bytes


def test_bytearray_and_memoryview_come_back_as_bytes() -> None:
    assert codec.decode(codec.encode(bytearray(b"ab"))) == b"ab"
    assert codec.decode(codec.encode(memoryview(b"cd"))) == b"cd"


def test_bytes_and_json_never_collide() -> None:
    assert codec.decode(codec.encode('{"a":1}')) == '{"a":1}'
    assert codec.decode(codec.encode(b'{"a":1}')) == b'{"a":1}'
    assert codec.decode(codec.encode("\x00")) == "\x00"
    assert codec.encode("\x00") != codec.encode(b"")


def _self_referencing() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _nested(depth: int) -> list[Any]:
    payload: list[Any] = []
    for _ in range(depth):
        payload = [payload]
    return payload


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="inf"),
        pytest.param({"x": -math.inf}, id="nested-inf"),
        pytest.param({1, 2}, id="set"),
        pytest.param(object(), id="object"),
        pytest.param(Decimal("1.5"), id="decimal"),
        pytest.param({"k": {1, 2}}, id="nested-set"),
        pytest.param({(1, 2): "tuple key"}, id="tuple-key"),
        pytest.param(_self_referencing(), id="cycle"),
        pytest.param(_nested(100_000), id="deep-recursion"),
        pytest.param(10**5000, id="int-too-long-for-text"),
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param({"\udfff": 1}, id="lone-surrogate-key"),
    ],
)
def test_an_unencodable_payload_raises_invalid_payload(payload: Any) -> None:
    with pytest.raises(InvalidPayload):
        codec.encode(payload)


def test_invalid_payload_is_raised_from_the_underlying_error() -> None:
    with pytest.raises(InvalidPayload) as info:
        codec.encode({1, 2})
    assert isinstance(info.value.__cause__, TypeError)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"{", id="truncated"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-recursion"),
    ],
)
def test_undecodable_data_raises_invalid_payload(data: bytes) -> None:
    with pytest.raises(InvalidPayload):
        codec.decode(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_every_json_value_round_trips(payload: Any) -> None:
    assert codec.decode(codec.encode(payload)) == payload


@settings(max_examples=50, deadline=None)
@given(st.binary())
def test_every_byte_string_round_trips(payload: bytes) -> None:
    assert codec.decode(codec.encode(payload)) == payload


#: The stdlib's encoder with the codec's settings: what every JSON payload must encode to, byte for byte.
_STDLIB = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
json_payloads = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8) | st.integers() | st.booleans() | st.none(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_payloads)
def test_a_payload_encodes_as_the_stdlib_encoder_writes_it(payload: Any) -> None:
    assert codec.encode(payload) == _STDLIB.encode(payload).encode("utf-8")


@pytest.mark.parametrize(
    "wrap", [lambda inner: [inner], lambda inner: (inner,), lambda inner: {"k": inner}, lambda inner: [1, "x", inner]]
)
def test_the_depth_limit_holds_at_any_level(wrap: Any) -> None:
    # One level of wrapping around a payload MAX_DEPTH - 1 deep is at the limit; around one more, past it.
    assert codec.decode(codec.encode(wrap(_nested(MAX_DEPTH - 2)))) is not None
    with pytest.raises(InvalidPayload, match="deeper"):
        codec.encode(wrap(_nested(MAX_DEPTH - 1)))


def _stdlib_decoded(data: bytes) -> Any:
    """What the stdlib's decoder makes of ``data`` (NaN and the infinities refused), or the error it raises."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(data.decode("utf-8"), parse_constant=refuse)
    except ValueError as exc:
        return type(exc)


@settings(max_examples=200, deadline=None)
@given(
    json_values,
    st.sampled_from([(",", ":"), (", ", ": ")]),
    st.sampled_from(["", " ", "\n\t "]),
    st.sampled_from(["", " ", "\n", " x", "1", "{}", "]"]),
)
def test_a_stored_text_decodes_as_the_stdlib_decoder_reads_it(
    payload: Any, separators: Any, before: str, after: str
) -> None:
    # The codec scans its own compact texts directly; any other text (space around the value, something
    # after it) must still decode, or fail, exactly as the full decoder has it.
    data = (before + json.dumps(payload, ensure_ascii=False, separators=separators) + after).encode("utf-8")
    expected = _stdlib_decoded(data)
    if isinstance(expected, type):
        with pytest.raises(InvalidPayload):
            codec.decode(data)
    else:
        assert codec.decode(data) == expected
