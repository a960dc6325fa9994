"""Payloads pass the store's codec at the seam: JSON by default, any ``Codec`` when given."""

from __future__ import annotations

import codecs
from typing import Any

import pytest

from alkstore import Codec, InvalidPayload, JobState, JsonCodec, ManualClock, Store
from tests.support import must_claim, must_get

from ._engines import T0, EngineTarget


class Rot13Codec(Codec):
    """Text only, stored rot13 behind a marker byte; refuses to decode the word poison."""

    def encode(self, payload: Any) -> bytes:
        if not isinstance(payload, str):
            raise InvalidPayload(f"text only, not {type(payload).__name__}")
        return b"!" + codecs.encode(payload, "rot13").encode()

    def decode(self, data: bytes) -> Any:
        text = bytes(data).decode()
        if not text.startswith("!") or text == "!cbvfba":
            raise InvalidPayload(f"cannot read {text!r}")
        return codecs.decode(text[1:], "rot13")


@pytest.fixture
def custom(engine: EngineTarget) -> Any:
    with engine.store(ManualClock(T0), Rot13Codec()) as store:
        yield store


def test_a_store_speaks_json_unless_told_otherwise(store: Store) -> None:
    assert isinstance(store.codec, JsonCodec)


def test_a_custom_codec_encodes_every_payload_and_decodes_it_back(custom: Store) -> None:
    assert isinstance(custom.codec, Rot13Codec)
    job_id = custom.queue("jobs").enqueue("hello")
    info = must_get(custom, job_id)
    assert info.payload == "hello"
    job = must_claim(custom.queue("jobs"), "w1")
    assert job.payload == "hello"
    job.ack()
    assert custom.schedule("nightly", "@every 1m", "jobs", "from a schedule").payload == "from a schedule"
    delivered: list[object] = []
    custom.outbox("mail").enqueue("letter")
    custom.outbox("mail").run_once("w1", lambda payload, job: delivered.append(payload))
    assert delivered == ["letter"]


def test_a_payload_the_custom_codec_refuses_is_invalid_before_anything_is_stored(custom: Store) -> None:
    with pytest.raises(InvalidPayload):
        custom.queue("jobs").enqueue({"not": "text"})
    with pytest.raises(InvalidPayload):
        custom.schedule("nightly", "@every 1m", "jobs", 42)
    assert custom.queue("jobs").claim("w1") is None
    assert custom.schedules() == []


def test_a_job_whose_payload_cannot_be_decoded_is_buried_by_the_claim_that_meets_it(custom: Store) -> None:
    poison = custom.queue("jobs").enqueue("poison")
    good = custom.queue("jobs").enqueue("fine")
    job = must_claim(custom.queue("jobs"), "w1")
    assert (job.id, job.payload) == (good, "fine")
    dead = must_get(custom, poison)
    assert dead.state is JobState.DEAD
    assert (dead.last_error or "").startswith("undecodable payload")
    assert dead.payload == b"!cbvfba"  # get_job shows what it cannot decode as the stored bytes
