"""The lifecycle's decisions (``alkstore.rules._lifecycle``), each a pure function of the record and now."""

from __future__ import annotations

import traceback
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alkstore import InvalidArgument, InvalidOptions, JsonCodec
from alkstore.engine import Burial, JobRecord, JobState, Retry
from alkstore.rules._codec import Codec
from alkstore.rules._lifecycle import (
    MAX_TRACEBACK,
    Decoded,
    Failure,
    HandBack,
    Undecodable,
    check_poll_interval,
    check_wait,
    claim_wait,
    decode_claimed,
    failure,
    last_attempt,
    lease_until,
    on_failure,
)
from alkstore.rules._options import queue_defaults
from tests.support import MIDNIGHT

NOW = MIDNIGHT
DEFAULTS = queue_defaults("emails")


def record(**changes: Any) -> JobRecord:
    base = JobRecord(
        id=7,
        queue="emails",
        payload=b'{"to":"ada"}',
        state=JobState.RUNNING,
        priority=0,
        run_at=NOW,
        expires_at=None,
        attempts=1,
        max_attempts=3,
        last_error=None,
        schedule=None,
        boundary=None,
        enqueued_at=NOW,
        worker_id="w",
        lease_until=NOW + timedelta(seconds=300),
        died_at=None,
        fence=4,
    )
    return replace(base, **changes)


class _StackTooDeep(Codec):
    def encode(self, payload: Any) -> bytes:
        return b""

    def decode(self, data: bytes) -> Any:
        raise RecursionError("maximum recursion depth exceeded")


def test_a_decodable_payload_is_run() -> None:
    assert decode_claimed(record(), JsonCodec()) == Decoded({"to": "ada"})


def test_a_payload_that_is_not_the_codecs_is_buried_with_the_reason() -> None:
    outcome = decode_claimed(record(payload=b"{not json"), JsonCodec())
    assert isinstance(outcome, Undecodable)
    assert outcome.error.startswith("undecodable payload: ")


def test_a_decode_failure_that_is_not_the_payloads_hands_the_job_back() -> None:
    outcome = decode_claimed(record(), _StackTooDeep())
    assert isinstance(outcome, HandBack)
    assert isinstance(outcome.cause, RecursionError)


def test_a_failure_keeps_a_string_as_given_and_an_exception_as_its_text() -> None:
    assert failure("SMTP timeout").error == "SMTP timeout"
    assert failure("SMTP timeout").traceback is None
    assert failure(ValueError("bad")).error == "bad"
    assert failure(ValueError()).error == "ValueError"


class Halt(BaseException):
    """A ``BaseException`` of an application's own, which is no ``Exception``."""


def test_a_base_exception_that_is_no_exception_leads_its_text_with_its_type() -> None:
    assert failure(SystemExit(1)).error == "SystemExit: 1"
    assert failure(SystemExit("shutting down")).error == "SystemExit: shutting down"
    assert failure(SystemExit()).error == "SystemExit"
    assert failure(KeyboardInterrupt()).error == "KeyboardInterrupt"
    assert failure(Halt("stop here")) == Failure("Halt: stop here", exception=f"{__name__}.Halt")
    assert failure(ValueError("bad")).error == "bad", "an Exception's text is its own"


def test_a_raised_exception_keeps_its_traceback_ending_with_its_type_and_message() -> None:
    try:
        raise KeyError("missing")
    except KeyError as exc:
        kept, raised = failure(exc), exc
    assert kept.error == "'missing'"
    assert kept.traceback is not None
    assert kept.traceback.startswith("Traceback (most recent call last):")
    assert kept.traceback.rstrip().endswith("KeyError: 'missing'")
    assert kept.traceback == "".join(traceback.format_exception(raised))


def test_an_exception_whose_text_raises_is_named_by_its_type() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    assert failure(Unprintable()).error == "Unprintable"


def test_a_very_long_traceback_keeps_its_end() -> None:
    message = "the bottom " * 4000
    try:
        raise ValueError(message)
    except ValueError as exc:
        kept = failure(exc)
    assert kept.traceback is not None
    assert len(kept.traceback) <= MAX_TRACEBACK + 100
    assert kept.traceback.startswith("[")
    assert "characters of the traceback left out" in kept.traceback
    assert kept.traceback.rstrip().endswith(message.rstrip()[-1000:])  # the end, where the error is
    assert kept.error == message


@pytest.mark.parametrize("error", [123, None, b"bytes", ["x"]])
def test_an_error_that_is_neither_text_nor_an_exception_is_refused(error: object) -> None:
    with pytest.raises(InvalidArgument, match=rf"^error must be a str or an exception, not {type(error).__name__}$"):
        failure(error)


def _raised() -> ValueError:
    try:
        raise ValueError("boom")
    except ValueError as exc:
        return exc


@pytest.mark.parametrize("length", [MAX_TRACEBACK, MAX_TRACEBACK + 1])
def test_a_traceback_of_the_longest_kept_length_is_kept_whole_and_a_longer_one_cut(
    monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    monkeypatch.setattr(traceback, "format_exception", lambda exc: ["t" * length])
    kept = failure(_raised()).traceback
    if length == MAX_TRACEBACK:
        assert kept == "t" * length
    else:
        assert kept == "[1 characters of the traceback left out]\n" + "t" * MAX_TRACEBACK


def test_a_traceback_that_cannot_be_formatted_leaves_the_error_text(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(exc: BaseException) -> list[str]:
        raise RuntimeError("cannot format")

    monkeypatch.setattr(traceback, "format_exception", broken)
    assert failure(_raised()) == Failure("boom", exception="builtins.ValueError")


def test_a_failed_attempt_with_attempts_left_retries_on_the_queues_curve() -> None:
    for attempt, wait in [(1, 5), (2, 10)]:
        outcome = on_failure(record(attempts=attempt), failure("x"), DEFAULTS, None, NOW)
        assert outcome == Retry(7, 4, "x", NOW + timedelta(seconds=wait))


def test_an_explicit_delay_replaces_the_curve() -> None:
    outcome = on_failure(record(), failure("x"), DEFAULTS, timedelta(minutes=7), NOW)
    assert outcome == Retry(7, 4, "x", NOW + timedelta(minutes=7))


def test_the_last_attempt_buries_whatever_the_delay() -> None:
    for delay in (None, 0, 60):
        outcome = on_failure(record(attempts=3), failure("gave up"), DEFAULTS, delay, NOW)
        assert outcome == Burial(7, 4, "gave up", None)


def test_the_last_attempt_is_the_one_whose_failure_buries() -> None:
    for attempts in (1, 2, 3):
        claim = record(attempts=attempts)
        buried = isinstance(on_failure(claim, failure("x"), DEFAULTS, None, NOW), Burial)
        assert last_attempt(claim) is buried is (attempts == 3)


@pytest.mark.parametrize("delay", [-1, float("nan"), "5", timedelta(days=-1)])
def test_a_bad_delay_is_refused_even_on_the_last_attempt(delay: object) -> None:
    for attempts in (1, 3):
        with pytest.raises(InvalidOptions, match=r"^delay must be "):
            on_failure(record(attempts=attempts), failure("x"), DEFAULTS, delay, NOW)


def test_a_buried_job_keeps_the_traceback_of_its_last_failure_and_a_retried_one_too() -> None:
    failed = Failure("boom", "Traceback (most recent call last):\n  ...\nValueError: boom\n")
    assert on_failure(record(attempts=3), failed, DEFAULTS, None, NOW) == Burial(7, 4, "boom", failed.traceback)
    assert on_failure(record(attempts=1), failed, DEFAULTS, 0, NOW) == Retry(7, 4, "boom", NOW, failed.traceback)


def test_a_retry_past_the_last_representable_instant_is_refused_naming_the_delay() -> None:
    late = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
    with pytest.raises(
        InvalidOptions, match=r"^a retry delay of 2 days, 0:00:00 from 9999-12-30T23:59:59\.999999\+00:00 is out"
    ):
        on_failure(record(attempts=1), failure("x"), DEFAULTS, timedelta(days=2), late)


def test_a_heartbeat_extends_by_the_jobs_own_visibility_or_else_the_queues() -> None:
    assert lease_until(record(), DEFAULTS, NOW) == NOW + timedelta(seconds=300)
    assert lease_until(record(visibility=timedelta(seconds=30)), DEFAULTS, NOW) == NOW + timedelta(seconds=30)


def test_a_waiting_claim_parks_for_the_rest_of_its_wait_at_most_one_poll_interval() -> None:
    deadline = NOW + timedelta(seconds=10)
    assert claim_wait(deadline, NOW, 1.0) == 1.0
    assert claim_wait(deadline, deadline - timedelta(seconds=0.25), 1.0) == 0.25
    assert claim_wait(deadline, deadline, 1.0) is None
    assert claim_wait(deadline, deadline + timedelta(seconds=1), 1.0) is None


@pytest.mark.parametrize("interval", [0, -1, 0.0, float("nan"), float("inf"), "x", None, True])
def test_a_poll_interval_must_be_a_positive_finite_number_of_seconds(interval: object) -> None:
    with pytest.raises(InvalidOptions, match=r"^poll_interval must be "):
        check_poll_interval(interval)
    assert check_poll_interval(0.05) == 0.05


@pytest.mark.parametrize(("wait", "says"), [(-1, ">= 0, not -1"), ("x", "seconds or a timedelta, not str")])
def test_a_claim_wait_must_be_a_non_negative_duration_and_the_refusal_names_it(wait: object, says: str) -> None:
    with pytest.raises(InvalidOptions, match=rf"^wait must be {says}$"):
        check_wait(wait)
    assert check_wait(0) == timedelta(0)
