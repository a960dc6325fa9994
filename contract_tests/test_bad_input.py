"""Each case of bad input the issue lists, on every engine: a named ``AlkstoreError``, nothing stored,
the store still usable (``test_validation`` covers names, specs, payload kinds and option ranges).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from types import FrameType
from typing import Any

import pytest

import alkstore
from alkstore import (
    EnqueueOpts,
    InvalidArgument,
    InvalidOptions,
    InvalidPayload,
    InvalidTransaction,
    Job,
    JobState,
    ManualClock,
    StopToken,
    Store,
)
from alkstore.rules._codec import MAX_DEPTH
from tests.support import must_claim, must_get

from ._engines import EngineTarget
from .test_validation import assert_nothing_stored, not_refused

AHEAD, BEHIND = timezone(timedelta(hours=5)), timezone(timedelta(hours=-5))
FIRST, LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


def nested(depth: int) -> Any:
    """A list ``depth`` levels deep."""
    payload: Any = []
    for _ in range(depth - 1):
        payload = [payload]
    return payload


def assert_usable(store: Store) -> None:
    """A round trip through the queue still works after the refusals."""
    queue = store.queue("usable")
    job_id = queue.enqueue({"still": "usable"})
    job = must_claim(queue, "probe")
    assert (job.id, job.payload) == (job_id, {"still": "usable"})
    job.ack()


@pytest.fixture
def running(store: Store) -> tuple[Job, Callable[[], None]]:
    """A claimed job of the queue ``jobs``, and a check that it is still running untouched."""
    store.queue("jobs").enqueue("work")
    job = must_claim(store.queue("jobs"), "w1")
    before = store.get_job(job.id)

    def untouched() -> None:
        assert store.get_job(job.id) == before

    return job, untouched


# -- payloads -----------------------------------------------------------------------------------


def test_a_payload_nested_deeper_than_the_codec_allows_is_refused_at_encode_everywhere(store: Store) -> None:
    entries: dict[str, Callable[[Any], object]] = {
        "queue.enqueue": lambda payload: store.queue("jobs").enqueue(payload),
        "outbox.enqueue": lambda payload: store.outbox("mail").enqueue(payload),
        "schedule": lambda payload: store.schedule("nightly", "@every 1m", "jobs", payload),
        "enqueue_tx": lambda payload: _in_transaction(store, lambda tx: store.enqueue_tx(tx, "jobs", payload)),
    }
    cases = [(entry, depth) for entry in entries for depth in (MAX_DEPTH + 1, 989)]
    assert not_refused(InvalidPayload, cases, lambda case: entries[case[0]](nested(case[1]))) == []
    assert_nothing_stored(store)
    assert_usable(store)


def _in_transaction(store: Store, call: Callable[[Any], object]) -> object:
    with store.transaction() as tx:
        return call(tx)


def test_a_payload_at_the_depth_limit_is_handed_back_not_buried_by_a_claimer_short_of_stack(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = store.queue("jobs").enqueue(nested(MAX_DEPTH))
    limit = sys.getrecursionlimit()
    depth = len(_frames())
    sys.setrecursionlimit(depth + 150)  # enough for the claim, not for 256 levels of JSON
    try:
        with caplog.at_level(logging.WARNING, logger="alkstore"):
            outcome: object = store.queue("jobs").claim("w1")
    except RecursionError as exc:
        outcome = exc
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(outcome, RecursionError):
        pytest.skip(f"this Python's JSON decoder does not share the recursion limit: {outcome!r}")
    assert f"handing job {job_id}" in caplog.text
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 0, None)
    job = store.queue("jobs").claim("w1")  # with its stack back, any claimer decodes it
    assert job is not None
    assert (job.id, job.attempts, job.payload) == (job_id, 1, nested(MAX_DEPTH))


def _frames() -> list[FrameType]:
    frames: list[FrameType] = []
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def test_a_mapping_whose_items_raise_is_an_invalid_payload(store: Store) -> None:
    class Broken(dict[str, int]):
        def items(self) -> Any:
            raise RuntimeError("items() is broken")

    with pytest.raises(InvalidPayload, match="items"):
        store.queue("jobs").enqueue(Broken(a=1))
    with pytest.raises(InvalidPayload):
        store.schedule("nightly", "@every 1m", "jobs", {"inner": Broken(a=1)})
    assert_nothing_stored(store)
    assert_usable(store)


# -- claims, instants, options -------------------------------------------------------------------


@pytest.mark.parametrize("interval", [0, -1, "x", None, float("nan"), float("inf")])
def test_a_waiting_claims_poll_interval_must_be_a_positive_number_of_seconds(store: Store, interval: Any) -> None:
    job_id = store.queue("jobs").enqueue("waiting")
    with pytest.raises(InvalidOptions, match="poll_interval"):
        store.queue("jobs").claim("w1", wait=1, poll_interval=interval)
    with pytest.raises(InvalidOptions, match="poll_interval"):
        store.queue("jobs").claim("w1", poll_interval=interval)
    info = must_get(store, job_id)
    assert (info.state, info.attempts) == (JobState.PENDING, 0)  # nothing was claimed


OUT_OF_RANGE: dict[str, Callable[[], EnqueueOpts]] = {
    "run_at at the first day, ahead of UTC": lambda: EnqueueOpts(run_at=datetime.min.replace(tzinfo=AHEAD)),
    "run_at at the last day, behind UTC": lambda: EnqueueOpts(run_at=datetime.max.replace(tzinfo=BEHIND)),
    "expires at the first day, ahead of UTC": lambda: EnqueueOpts(expires=datetime.min.replace(tzinfo=AHEAD)),
    "expires at the last day, behind UTC": lambda: EnqueueOpts(expires=datetime.max.replace(tzinfo=BEHIND)),
}


def test_instants_with_no_utc_equivalent_are_invalid_options_and_the_edges_themselves_round_trip(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    assert not_refused(InvalidOptions, OUT_OF_RANGE, lambda case: queue.enqueue("x", OUT_OF_RANGE[case]())) == []
    assert_nothing_stored(store)
    last = store.queue("edges").enqueue("never due", EnqueueOpts(run_at=LAST))
    first = store.queue("edges").enqueue("long due", EnqueueOpts(run_at=FIRST, expires=LAST))
    last_info, first_info = store.get_job(last), store.get_job(first)
    assert last_info is not None
    assert first_info is not None
    assert (last_info.run_at, first_info.run_at, first_info.expires_at) == (LAST, FIRST, LAST)
    job = must_claim(store.queue("edges"), "w1")
    assert job.id == first
    assert store.queue("edges").claim("w1") is None


def test_a_job_that_would_be_dead_on_arrival_is_refused(store: Store, clock: ManualClock) -> None:
    now = clock.now()
    doomed = EnqueueOpts(run_at=now - timedelta(hours=2), expires=now - timedelta(hours=1))
    with pytest.raises(InvalidOptions, match="dead on arrival"):
        store.queue("jobs").enqueue("doomed", doomed)
    with pytest.raises(InvalidOptions, match="dead on arrival"):
        _in_transaction(store, lambda tx: store.enqueue_tx(tx, "jobs", "doomed", doomed))
    assert_nothing_stored(store)
    assert_usable(store)


# -- transactions and arguments of the wrong type -----------------------------------------------


def test_a_transaction_that_already_ended_or_none_is_an_invalid_transaction(store: Store) -> None:
    with store.transaction() as committed:
        pass
    ended = [committed]

    def roll_back() -> None:
        with store.transaction() as rolled_back:
            ended.append(rolled_back)
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        roll_back()
    for tx in (*ended, None, object()):
        with pytest.raises(InvalidTransaction):  # the text is the engine's own (what it accepts)
            store.enqueue_tx(tx, "jobs", "late")
        with pytest.raises(InvalidTransaction):  # the text is the engine's own (what it accepts)
            store.outbox_enqueue_tx(tx, "mail", "late")
    assert_nothing_stored(store)
    assert_usable(store)


def test_job_ids_of_the_wrong_type_are_invalid_arguments(store: Store) -> None:
    job_id = store.queue("jobs").enqueue("x")
    for bad in ("1", True, 1.0, None, str(job_id)):
        with pytest.raises(InvalidArgument, match=rf"^job id must be an int, not {type(bad).__name__}$"):
            store.get_job(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=rf"^job id must be an int, not {type(bad).__name__}$"):
            store.requeue_dead(bad)  # type: ignore[arg-type]
    info = must_get(store, job_id)
    assert info.state is JobState.PENDING


def test_a_retry_or_failure_with_an_error_of_the_wrong_type_changes_nothing(
    store: Store, running: tuple[Job, Callable[[], None]]
) -> None:
    job, untouched = running
    bad: Any
    for bad in (123, None, b"bytes", ["list"]):
        with pytest.raises(InvalidArgument, match=rf"^error must be a str or an exception, not {type(bad).__name__}$"):
            job.retry(bad)
        with pytest.raises(InvalidArgument, match=rf"^error must be a str or an exception, not {type(bad).__name__}$"):
            job.fail(bad)
    untouched()
    job.ack()


def test_an_exception_whose_text_raises_is_kept_by_its_type_name_and_the_retry_happens(
    store: Store, running: tuple[Job, Callable[[], None]]
) -> None:
    job, _ = running

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    job.retry(Unprintable())
    info = must_get(store, job.id)
    assert (info.state, info.last_error) == (JobState.PENDING, "Unprintable")


def test_ack_many_takes_an_iterable_of_claimed_jobs_only(store: Store, running: tuple[Job, Callable[[], None]]) -> None:
    job, untouched = running
    bad: Any
    for bad in (None, 1, [1], [job, "job"]):
        with pytest.raises(InvalidArgument, match="claimed jobs"):
            store.ack_many(bad)
    untouched()
    assert store.ack_many(iter([job])) == []


def test_a_runner_needs_a_stop_token_and_a_callable_on_fire(store: Store, clock: ManualClock) -> None:
    store.schedule("beat", "@every 1s", "jobs")
    clock.advance(5)
    stop = StopToken()
    stop.cancel()
    for bad_stop in (None, 1, stop.is_cancelled):
        with pytest.raises(InvalidArgument, match="stop"):
            store.run_schedules(bad_stop)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="on_fire"):
        store.run_schedules(stop, on_fire=1)  # type: ignore[arg-type]
    assert store.queue("jobs").claim("probe") is None  # nothing fired
    store.run_schedules(stop)  # the lease is free: it leads and returns


def test_an_outbox_delivery_must_be_callable_and_the_message_stays(store: Store) -> None:
    outbox = store.outbox("mail")
    message = outbox.enqueue("hello")
    for bad in (None, "deliver", 42):
        with pytest.raises(InvalidArgument, match="delivery"):
            outbox.run_once("courier", bad)  # type: ignore[arg-type]
    info = must_get(store, message)
    assert (info.state, info.attempts) == (JobState.PENDING, 0)


def test_open_refuses_a_codec_or_clock_that_is_not_one_before_touching_the_engine(engine: EngineTarget) -> None:
    url = f"{engine.scheme}://"  # never reached: the arguments are judged first
    with pytest.raises(InvalidOptions, match="codec"):
        alkstore.open(url, codec="json")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptions, match="clock"):
        alkstore.open(url, clock=123)  # type: ignore[arg-type]


def test_bulk_calls_take_an_iterable_and_refuse_anything_else(store: Store) -> None:
    job_id = store.queue("kept").enqueue("x")
    bad: Any
    for bad in (None, 1, "12", {1: 2}):
        with pytest.raises(InvalidArgument, match=r"^job_ids must be an iterable"):
            store.requeue_dead_many(bad)
        with pytest.raises(InvalidArgument, match=r"^job_ids must be an iterable"):
            store.purge_dead_many(bad)
        with pytest.raises(InvalidArgument, match=r"^payloads must be an iterable"):
            store.queue("jobs").enqueue_many(bad)
        with pytest.raises(InvalidArgument, match=r"^entries must be an iterable"):
            store.schedule_many(bad)
    assert_nothing_stored(store)
    info = must_get(store, job_id)
    assert (info.state, info.attempts) == (JobState.PENDING, 0)
