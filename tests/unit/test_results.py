"""Kept results' rules (ADR 042): when an ack keeps, how a failed attempt is logged and read back."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from alkstore import InvalidPayload, JsonCodec
from alkstore.engine import Burial, Done, Held, Retry
from alkstore.rules._lifecycle import failure, on_failure
from alkstore.rules._results import AttemptFailure, JobResult, decode_attempt, done, encode_attempt
from tests.support import MIDNIGHT

from .test_lifecycle import DEFAULTS, record

HELD = Held(7, 4)
HOUR = timedelta(hours=1)


def test_an_ack_keeps_only_while_its_queue_keeps_results() -> None:
    assert done(HELD, JsonCodec(), object(), None, MIDNIGHT, None) is HELD  # the value is not even encoded
    kept = done(HELD, JsonCodec(), {"n": 1}, HOUR, MIDNIGHT, MIDNIGHT - timedelta(seconds=3))
    assert kept == Done(7, 4, b'{"n":1}', MIDNIGHT - timedelta(seconds=3), MIDNIGHT, MIDNIGHT + HOUR)


def test_a_result_that_cannot_be_encoded_is_a_named_error() -> None:
    with pytest.raises(InvalidPayload, match="the result of job 7 cannot be kept: payload is not JSON-encodable"):
        done(HELD, JsonCodec(), {1j}, HOUR, MIDNIGHT, None)


def test_a_retry_logs_its_attempt_only_when_the_queue_keeps_results() -> None:
    claimed = record(worker_id="w1")
    plain = on_failure(claimed, failure("x"), DEFAULTS, 0, MIDNIGHT)
    assert isinstance(plain, Retry)
    assert plain.attempt is None
    logged = on_failure(claimed, failure(ValueError("x")), replace(DEFAULTS, keep_results=HOUR), 0, MIDNIGHT)
    assert isinstance(logged, Retry)
    assert logged.attempt is not None
    assert decode_attempt(logged.attempt) == AttemptFailure("x", "builtins.ValueError", None, "w1", MIDNIGHT)


def test_an_attempt_survives_any_text_and_foreign_bytes_read_as_themselves() -> None:
    entry = encode_attempt("nul \x00 é ☃", "pkg.Err", "Traceback\n  line", None, MIDNIGHT)
    assert decode_attempt(entry) == AttemptFailure("nul \x00 é ☃", "pkg.Err", "Traceback\n  line", None, MIDNIGHT)
    assert decode_attempt(b"\xffnot json") == AttemptFailure(repr(b"\xffnot json"), None, None, None, None)
    assert decode_attempt(b'[3,"from","a","later","version","x","y"]').error.startswith("b'[3,")
    assert decode_attempt(b'[2,"six","items","are","version","1"]').error.startswith("b'[2,")


def test_an_attempt_keeps_its_start_and_entries_of_version_1_still_read() -> None:
    entry = encode_attempt("x", None, None, "w1", MIDNIGHT + HOUR, MIDNIGHT)
    assert decode_attempt(entry) == AttemptFailure("x", None, None, "w1", MIDNIGHT + HOUR, MIDNIGHT)
    old = b'[1,"x",null,null,"w1","' + MIDNIGHT.isoformat().encode() + b'"]'
    assert decode_attempt(old) == AttemptFailure("x", None, None, "w1", MIDNIGHT, None)


def test_a_burial_logs_its_attempt_only_when_the_queue_keeps_results() -> None:
    last = record(worker_id="w1", attempts=3, max_attempts=3)
    plain = on_failure(last, failure("x"), DEFAULTS, 0, MIDNIGHT)
    assert isinstance(plain, Burial)
    assert plain.attempt is None
    logged = on_failure(last, failure("x"), replace(DEFAULTS, keep_results=HOUR), 0, MIDNIGHT + HOUR, MIDNIGHT)
    assert isinstance(logged, Burial)
    assert logged.attempt is not None
    assert decode_attempt(logged.attempt) == AttemptFailure("x", None, None, "w1", MIDNIGHT + HOUR, MIDNIGHT)


def test_worker_ids_name_each_worker_once_in_the_order_of_its_attempts() -> None:
    def failed(worker: str | None) -> AttemptFailure:
        return AttemptFailure("x", None, None, worker, MIDNIGHT)

    result = JobResult(
        1, "q", None, None, None, 4, 5, MIDNIGHT, None, MIDNIGHT, MIDNIGHT, "w1",
        (failed("w2"), failed(None), failed("w1")),
    )  # fmt: skip
    assert result.worker_ids == ("w2", "w1")
