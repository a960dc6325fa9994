"""Resumable steps and durable sleep (ADR 069): a step runs once per job, its checkpoint fenced by the claim.

A job's code runs again from its start on every attempt and after every sleep; ``job.step`` finds
a finished step by name and returns its stored result instead of running it again. ``step_tx``
commits a step's own writes with its checkpoint. ``sleep``/``sleep_until`` end the run without
spending an attempt (``JobSuspended``), the job stored pending and shown ``sleeping`` by
``get_job`` until its due time. Time moves only through the store's ``ManualClock``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore import (
    EnqueueOpts,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    JobHeld,
    JobState,
    JobSuspended,
    LeaseLost,
    ManualClock,
    ReservedName,
    StepInfo,
    Store,
    UnknownJob,
    WaitInfo,
)
from alkstore.engine import AsyncStepsPort, StepsPort
from tests.support import must_claim, must_get, wait_until

from ._engines import T0, EngineTarget
from ._runtimes import is_async, worker_of
from .test_completeness import adapter_classes
from .test_worker import BASE_EXCEPTIONS, POLL, Running, is_at


@pytest.mark.parametrize("runtime", ["sync", "async"])
@pytest.mark.parametrize("scheme", ["memory", "postgresql", "sqlite"])
def test_every_bundled_engine_offers_the_whole_steps_port(scheme: str, runtime: str) -> None:
    port = StepsPort if runtime == "sync" else AsyncStepsPort
    classes = adapter_classes(scheme, runtime)
    assert classes
    for cls in classes:
        assert issubclass(cls, port), f"{cls.__qualname__} does not offer the steps port"
        for name in sorted(getattr(port, "__abstractmethods__")):  # noqa: B009 - an ABC's own set
            implementation = getattr(cls, name)
            assert implementation is not getattr(port, name), f"{cls.__qualname__}.{name} is the port's own"
            wanted, mine = inspect.signature(getattr(port, name)), inspect.signature(implementation)
            assert len(mine.parameters) == len(wanted.parameters), f"{cls.__qualname__}.{name}{mine} vs {wanted}"
            assert inspect.iscoroutinefunction(implementation) == inspect.iscoroutinefunction(getattr(port, name))


class Counted:
    """A step function that counts its calls."""

    def __init__(self, value: Any = "done") -> None:
        self.calls = 0
        self.value = value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.value if not args and not kwargs else [self.value, list(args), kwargs]


def test_a_step_runs_once_and_a_later_attempt_gets_its_stored_result(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue({"order": 7})
    charge = Counted({"charge": "ch_1"})
    job = must_claim(queue)
    assert job.step("charge", charge) == {"charge": "ch_1"}
    job.retry("later", delay=0)
    again = must_claim(queue)
    assert again.attempts == 2
    assert again.step("charge", charge) == {"charge": "ch_1"}
    assert charge.calls == 1
    info = must_get(store, job_id)
    assert [(step.name, step.result) for step in info.steps] == [("charge", {"charge": "ch_1"})]
    assert isinstance(info.steps[0], StepInfo)
    assert info.steps[0].at == T0
    again.ack()


def test_a_step_passes_its_arguments_and_returns_its_result_as_the_codec_round_trips_it(store: Store) -> None:
    queue = store.queue("jobs")
    queue.enqueue(None)
    job = must_claim(queue)
    assert job.step("shape", Counted((1, 2)), 3, key="k") == [[1, 2], [3], {"key": "k"}]
    assert job.step("tuple", lambda: (1, 2)) == [1, 2]  # what a resumed run would get, from the first run on


def test_a_stale_holders_checkpoint_is_refused_with_lease_lost_and_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None, EnqueueOpts(max_attempts=5))
    stale = must_claim(queue)
    stale.step("first", Counted(1))
    clock.advance(301)  # the lease lapses; another claim takes the job
    fresh = must_claim(queue)
    late = Counted(2)
    with pytest.raises(LeaseLost):
        stale.step("second", late)
    assert [step.name for step in must_get(store, job_id).steps] == ["first"]
    assert fresh.step("second", Counted(3)) == 3
    assert fresh.step("first", Counted(9)) == 1


def test_a_step_name_is_checked_before_anything_runs(store: Store) -> None:
    queue = store.queue("jobs")
    queue.enqueue(None)
    job = must_claim(queue)
    never = Counted()
    for name, error in (("", InvalidName), (" padded", InvalidName), ("__alkstore_wait:1", ReservedName)):
        with pytest.raises(error):
            job.step(name, never)
    assert never.calls == 0


def test_a_result_the_codec_cannot_encode_stores_no_step(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    with pytest.raises(InvalidPayload):
        job.step("bad", lambda: object())
    assert must_get(store, job_id).steps == ()


def test_an_acked_job_leaves_no_steps_behind(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    job.step("one", Counted())
    job.ack()
    assert store.get_job(job_id) is None
    engine: Any = store.engine  # every engine of the suite offers the steps port
    assert engine.purge_steps(100) <= 1  # an upkeep pass (memory deletes them with the job)
    assert engine.job_steps(job_id) == ([], None)


def test_a_dead_job_keeps_its_steps_and_a_requeued_one_resumes_after_them(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    first = Counted("once")
    job = must_claim(queue)
    job.step("one", first)
    job.fail("gave up")
    engine: Any = store.engine
    engine.purge_steps(100)  # an upkeep pass leaves a dead job's steps
    assert [step.name for step in must_get(store, job_id).steps] == ["one"]
    assert store.requeue_dead(job_id)
    assert must_claim(queue).step("one", first) == "once"
    assert first.calls == 1


# -- an operator's skipped step (ADR 077) -------------------------------------------------------


def test_a_skipped_step_is_not_run_and_its_next_run_gets_the_operators_result(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue({"order": 7})
    assert store.skip_step(job_id, "charge", {"charge": "by hand"}) is JobState.PENDING
    charge, mail = Counted("charged"), Counted("mailed")
    job = must_claim(queue)
    assert job.step("charge", charge) == {"charge": "by hand"}
    assert job.step("mail", mail) == "mailed"
    assert (charge.calls, mail.calls) == (0, 1)
    steps = must_get(store, job_id).steps
    assert [(step.name, step.result) for step in steps] == [("charge", {"charge": "by hand"}), ("mail", "mailed")]
    job.ack()


def test_a_skipped_step_replaces_a_stored_one_of_a_dead_job_and_its_requeued_run_gets_it(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None, EnqueueOpts(max_attempts=1))
    fetch, charge = Counted("fetched"), Counted("charged")
    job = must_claim(queue)
    job.step("fetch", fetch)
    job.step("charge", charge)
    job.fail("the card was declined")
    assert store.skip_step(job_id, "charge", None) is JobState.DEAD
    assert store.requeue_dead(job_id)
    again = must_claim(queue)
    assert again.step("fetch", fetch) == "fetched"
    assert again.step("charge", charge) is None
    assert (fetch.calls, charge.calls) == (1, 1)


def test_a_step_of_a_job_never_claimed_is_skipped_and_its_first_claim_reads_it(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    assert store.skip_step(job_id, "first", [1, 2]) is JobState.PENDING
    assert store.skip_step(job_id, "first", [3]) is JobState.PENDING  # the operator's second word wins
    first = Counted()
    assert must_claim(queue).step("first", first) == [3]
    assert first.calls == 0


def test_skipping_a_step_of_a_running_job_is_refused_and_writes_nothing(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    with pytest.raises(JobHeld):
        store.skip_step(job_id, "charge", "by hand")
    assert must_get(store, job_id).steps == ()
    charge = Counted("charged")
    assert job.step("charge", charge) == "charged"  # the holder's own run is untouched
    assert charge.calls == 1
    job.ack()


def test_skipping_a_step_of_a_job_stored_nowhere_is_refused(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    must_claim(queue).ack()
    for gone in (job_id, job_id + 1000, 2**63 - 1, 0, -5):
        with pytest.raises(UnknownJob):
            store.skip_step(gone, "charge", "by hand")
    engine: Any = store.engine
    assert engine.job_steps(job_id) == ([], None)


def test_a_bad_step_name_or_result_is_refused_before_anything_is_written(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    bad: tuple[tuple[Any, Any, type[Exception]], ...] = (
        ("", 1, InvalidName),
        (" padded", 1, InvalidName),
        ("__alkstore_wait:1", 1, ReservedName),
        (7, 1, InvalidName),
        ("charge", object(), InvalidPayload),
        ("charge", float("nan"), InvalidPayload),
    )
    for name, result, error in bad:
        with pytest.raises(error):
            store.skip_step(job_id, name, result)
    with pytest.raises(InvalidArgument):
        store.skip_step("7", "charge", 1)  # type: ignore[arg-type]
    assert must_get(store, job_id).steps == ()
    assert must_claim(queue).fence == 1  # no skip took a fence: the job's first claim


# -- transactional steps -----------------------------------------------------------------------


def test_a_transactional_steps_writes_commit_with_its_checkpoint(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    with job.step_tx("invoice") as step:
        assert not step.done
        written = store.enqueue_tx(step.tx, "invoices", {"for": job_id})
        step.result = {"invoice": written}
    assert step.result == {"invoice": written}
    assert must_get(store, written).queue == "invoices"
    job.retry("again", delay=0)
    again = must_claim(queue)
    with again.step_tx("invoice") as step:
        assert step.done
    assert step.result == {"invoice": written}
    invoices = store.queue("invoices")
    assert must_claim(invoices).id == written
    assert invoices.claim("w") is None  # the block did not run again


def test_a_transactional_step_that_raises_writes_neither_its_effects_nor_its_checkpoint(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    written: list[int] = []

    def declined() -> None:
        with job.step_tx("invoice") as step:
            written.append(store.enqueue_tx(step.tx, "invoices", "never"))
            raise RuntimeError("card declined")

    with pytest.raises(RuntimeError):
        declined()
    assert store.get_job(written[0]) is None
    assert must_get(store, job_id).steps == ()


def test_a_stale_holders_transactional_step_rolls_its_writes_back(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    stale = must_claim(queue)
    written: list[int] = []

    def overtaken() -> None:
        with stale.step_tx("invoice") as step:
            written.append(store.enqueue_tx(step.tx, "invoices", "twice?"))
            clock.advance(301)  # meanwhile its lease lapses and another claim takes the job
            must_claim(queue)
            step.result = 1

    with pytest.raises(LeaseLost):
        overtaken()
    assert store.get_job(written[0]) is None
    assert must_get(store, job_id).steps == ()


def test_a_transactional_step_in_the_callers_transaction_commits_with_it(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    with store.transaction() as tx, job.step_tx("ship", tx) as step:
        shipped = store.enqueue_tx(step.tx, "shipments", "box")
        step.result = "shipped"
    assert [s.name for s in must_get(store, job_id).steps] == ["ship"]
    assert must_get(store, shipped).queue == "shipments"


# -- durable sleep ----------------------------------------------------------------------------


def test_sleep_ends_the_run_without_spending_an_attempt_and_resumes_at_its_due_time(
    store: Store, clock: ManualClock
) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None, EnqueueOpts(max_attempts=1))
    charge = Counted("paid")

    def run(job: Any) -> None:
        job.step("charge", charge)
        job.sleep(timedelta(minutes=5))
        job.step("mail", Counted("sent"))
        job.ack()

    job = must_claim(queue)
    with pytest.raises(JobSuspended):
        run(job)
    info = must_get(store, job_id)
    assert (info.state, info.attempts, info.sleeping) == (JobState.PENDING, 0, True)
    assert info.waits_for == WaitInfo(T0 + timedelta(minutes=5), None)
    assert info.run_at == T0 + timedelta(minutes=5)
    clock.advance(299)
    assert queue.claim("w") is None
    clock.advance(1)
    again = must_claim(queue)
    assert (again.attempts, again.sleeping) == (1, False)  # a claimed job runs: it does not sleep
    assert not must_get(store, job_id).sleeping
    run(again)  # max_attempts=1 and it still runs: the sleep spent none
    assert charge.calls == 1
    assert store.get_job(job_id) is None


def test_sleep_until_an_instant_already_past_returns_at_once(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    job.sleep_until(T0 - timedelta(seconds=1))
    job.sleep(0)
    assert must_get(store, job_id).state is JobState.RUNNING


def test_sleep_bounds_are_checked_before_any_io(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = must_claim(queue)
    for bad in (-1, timedelta(days=36501), float("nan")):
        with pytest.raises(InvalidOptions):
            job.sleep(bad)
    with pytest.raises(InvalidOptions):
        job.sleep_until(T0.replace(tzinfo=None))
    assert must_get(store, job_id).state is JobState.RUNNING


def test_a_stale_holders_sleep_is_refused(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    stale = must_claim(queue)
    clock.advance(301)
    fresh = must_claim(queue)
    with pytest.raises(LeaseLost):
        stale.sleep(60)
    assert must_get(store, job_id).state is JobState.RUNNING
    fresh.ack()


def test_two_sleeps_of_one_run_are_told_apart_by_their_place(store: Store, clock: ManualClock) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    seen: list[str] = []

    def run(job: Any) -> None:
        seen.append("start")
        job.sleep(10)
        seen.append("after first")
        job.sleep(20)
        seen.append("after second")
        job.ack()

    with pytest.raises(JobSuspended):
        run(must_claim(queue))
    clock.advance(10)
    with pytest.raises(JobSuspended):
        run(must_claim(queue))
    assert must_get(store, job_id).waits_for == WaitInfo(T0 + timedelta(seconds=30), None)
    clock.advance(20)
    run(must_claim(queue))
    assert seen == ["start", "start", "after first", "start", "after first", "after second"]


# -- a property: however a job is failed and put to sleep, no finished step runs again --------------


class Failed(Exception):
    """A planned failure of one run."""


@settings(max_examples=15, deadline=None)
@given(plan=st.lists(st.sampled_from(["fail", "sleep", "step"]), min_size=1, max_size=8))
def test_a_resumed_job_never_reruns_a_finished_step_and_sleeping_spends_no_attempt(
    engine: EngineTarget, plan: list[str]
) -> None:
    with engine.store(ManualClock(T0)) as store:
        clock = store.clock
        queue = store.queue("jobs")
        job_id = queue.enqueue(None, EnqueueOpts(max_attempts=len(plan) + 1))
        calls: dict[str, int] = {}
        failed: set[int] = set()

        def count(name: str) -> str:
            calls[name] = calls.get(name, 0) + 1
            return name

        def program(job: Any) -> None:
            """The job's code, run again from its start by every claim."""
            for index, action in enumerate(plan):
                assert job.step(f"s{index}", count, f"s{index}") == f"s{index}"
                if action == "sleep":
                    job.sleep_until(T0 + timedelta(seconds=10 * (index + 1)))
                elif action == "fail" and index not in failed:
                    failed.add(index)
                    raise Failed(index)
            job.ack()

        for _ in range(3 * len(plan) + 1):
            job = must_claim(queue)
            assert job.attempts == len(failed) + 1  # sleeps spent none
            try:
                program(job)
            except JobSuspended:
                clock.set(must_get(store, job_id).run_at)
            except Failed as exc:
                job.retry(exc, delay=0)
            else:
                break
        assert store.get_job(job_id) is None
        assert calls == {f"s{index}": 1 for index in range(len(plan))}


# -- through the worker -----------------------------------------------------------------------------


def test_a_worker_runs_a_job_of_steps_and_a_sleep_charging_once_and_sleeping_without_a_slot(
    store: Store, clock: ManualClock
) -> None:
    charges: list[int] = []
    mails: list[str] = []

    def charge(order: int) -> str:
        charges.append(order)
        return f"ch_{order}"

    handle: Any
    if is_async(store):

        async def handle_async(payload: Any, job: Any) -> None:
            receipt = await job.step("charge", charge, payload)
            await job.sleep(timedelta(minutes=10))
            mails.append(await job.step("mail", lambda: f"sent {receipt}"))

        handle = handle_async
    else:

        def handle_sync(payload: Any, job: Any) -> None:
            receipt = job.step("charge", charge, payload)
            job.sleep(timedelta(minutes=10))
            mails.append(job.step("mail", lambda: f"sent {receipt}"))

        handle = handle_sync

    orders = store.queue("orders")
    job_id = orders.enqueue(7, EnqueueOpts(max_attempts=1))
    runner = Running(worker_of(store, handlers={"orders": handle}, poll_interval=POLL))
    try:
        wait_until(lambda: must_get(store, job_id).sleeping, "the job to sleep")
        other = orders.enqueue(8, EnqueueOpts(max_attempts=1))  # the sleeper holds no slot: the next one runs
        wait_until(lambda: must_get(store, other).sleeping, "the next job to run meanwhile, and sleep")
        assert charges == [7, 8]
        clock.advance(600)
        wait_until(lambda: store.get_job(job_id) is None and store.get_job(other) is None, "both jobs to finish")
    finally:
        stats = runner.finish()
    assert charges == [7, 8]
    assert mails == ["sent ch_7", "sent ch_8"]
    assert stats.succeeded == 2


def _swallowing_handler(store: Store, place: str, returned: list[int]) -> Any:
    """A handler whose sleep or wait is caught (``except BaseException``) and which then returns normally."""
    if is_async(store):

        async def handle_async(payload: Any, job: Any) -> str:
            try:
                if place == "sleep":
                    await job.sleep(600)
                else:
                    await job.wait_for("never:emitted", timeout=600)
            except BaseException:  # the mistake under test: a catch-all that swallows the sleep
                pass
            returned.append(job.attempts)
            return "returned"

        return handle_async

    def handle_sync(payload: Any, job: Any) -> str:
        try:
            if place == "sleep":
                job.sleep(600)
            else:
                job.wait_for("never:emitted", timeout=600)
        except BaseException:  # the mistake under test: a catch-all that swallows the sleep
            pass
        returned.append(job.attempts)
        return "returned"

    return handle_sync


@pytest.mark.parametrize("place", ["sleep", "wait_for"])
def test_a_run_that_swallows_its_sleep_and_returns_still_sleeps_and_is_not_acked(
    store: Store, clock: ManualClock, place: str
) -> None:
    returned: list[int] = []
    orders = store.queue("orders")
    orders.configure(keep_results=timedelta(hours=1))
    job_id = orders.enqueue(7, EnqueueOpts(max_attempts=1))
    runner = Running(
        worker_of(store, handlers={"orders": _swallowing_handler(store, place, returned)}, poll_interval=POLL)
    )
    try:
        wait_until(lambda: must_get(store, job_id).sleeping, "the job to sleep though its run returned")
        info = must_get(store, job_id)
        assert info.waits_for is not None
        assert info.waits_for.until == T0 + timedelta(seconds=600)
        assert (info.state, info.attempts, info.last_error) == (JobState.PENDING, 0, None)  # no attempt spent
        assert store.result(job_id) is None  # what the early return returned is not kept
        clock.advance(600)
        wait_until(lambda: store.get_job(job_id) is None, "the woken job to run to its end")
    finally:
        stats = runner.finish()
    assert len(returned) == 2
    assert (stats.slept, stats.succeeded) == (1, 1)


def test_a_run_that_swallows_one_sleep_and_asks_for_another_sleeps_as_first_asked(
    store: Store, clock: ManualClock
) -> None:
    if is_async(store):

        async def handle_async(payload: Any, job: Any) -> None:
            with contextlib.suppress(BaseException):  # the mistake under test: the sleep swallowed
                await job.sleep(600)
            await job.sleep(1200)

        handle: Any = handle_async
    else:

        def handle_sync(payload: Any, job: Any) -> None:
            with contextlib.suppress(BaseException):  # the mistake under test: the sleep swallowed
                job.sleep(600)
            job.sleep(1200)

        handle = handle_sync

    job_id = store.queue("orders").enqueue(7, EnqueueOpts(max_attempts=1))
    runner = Running(worker_of(store, handlers={"orders": handle}, poll_interval=POLL))
    try:
        wait_until(lambda: must_get(store, job_id).sleeping, "the job to sleep")
        first = must_get(store, job_id).waits_for
        assert first is not None
        assert first.until == T0 + timedelta(seconds=600)  # the first sleep asked, not the second
        clock.advance(600)
        again = T0 + timedelta(seconds=1800)  # the woken run passes the first sleep and asks for the second

        def sleeps_again() -> bool:
            info = must_get(store, job_id)  # one read: the job's state and its wait as of one instant
            return info.sleeping and info.waits_for is not None and info.waits_for.until == again

        wait_until(sleeps_again, "the second sleep, asked by the woken run")
        assert must_get(store, job_id).attempts == 0
        clock.advance(1200)
        wait_until(lambda: store.get_job(job_id) is None, "the job to run to its end")
    finally:
        stats = runner.finish()
    assert (stats.slept, stats.succeeded) == (2, 1)


# -- what no task should raise, raised in a step or as a sleep or a wait unwinds: the worker serves on ----------

#: Where the task raises: in a step's function, or in a ``finally`` as its sleep or wait unwinds the run.
PLACES = ("step", "sleep", "wait_for")


def _hostile_handler(store: Store, place: str, raise_it: Callable[[], None], done: list[str]) -> Any:
    """A handler that runs a step, then raises ``raise_it``'s exception at ``place``; payload ``"next"`` just runs."""
    if is_async(store):

        async def handle_async(payload: Any, job: Any) -> None:
            if payload == "next":
                done.append(payload)
                return
            await job.step("first", lambda: "kept")
            if place == "step":
                await job.step("exits", raise_it)
            try:
                if place == "sleep":
                    await job.sleep(600)
                else:
                    await job.wait_for("never:emitted", timeout=600)
            finally:
                raise_it()

        return handle_async

    def handle_sync(payload: Any, job: Any) -> None:
        if payload == "next":
            done.append(payload)
            return
        job.step("first", lambda: "kept")
        if place == "step":
            job.step("exits", raise_it)
        try:
            if place == "sleep":
                job.sleep(600)
            else:
                job.wait_for("never:emitted", timeout=600)
        finally:
            raise_it()

    return handle_sync


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", BASE_EXCEPTIONS)
def test_a_base_exception_in_a_step_or_as_a_sleep_unwinds_fails_the_attempt_and_the_worker_serves_on(
    store: Store, kind: str, place: str
) -> None:
    raise_it, error, last_line = BASE_EXCEPTIONS[kind]
    done: list[str] = []
    orders = store.queue("orders")
    job_id = orders.enqueue("exits", EnqueueOpts(max_attempts=2))
    orders.enqueue("next")
    runner = Running(
        worker_of(store, handlers={"orders": _hostile_handler(store, place, raise_it, done)}, poll_interval=POLL)
    )
    try:
        wait_until(is_at(store, job_id, JobState.PENDING, 1), "the attempt to fail, to be retried")
        wait_until(lambda: done == ["next"], "the next job to run")
        info = must_get(store, job_id)
        assert runner.thread.is_alive(), "the worker serves on"
    finally:
        stats = runner.finish()
    assert info.last_error == error
    assert info.last_traceback is not None
    assert info.last_traceback.rstrip().endswith(last_line)
    assert [step.name for step in info.steps] == ["first"]  # the step before it kept; the one that raised not
    assert info.waits_for is None  # the sleep it unwound was not stored: the attempt failed instead
    assert (stats.retried, stats.succeeded, stats.slept) == (1, 1, 0)
