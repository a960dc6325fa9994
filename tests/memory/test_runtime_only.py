"""An engine that stops at the runtime port (ADR 062): it opens, serves and works; operators' calls are not offered.

``RuntimeOnly`` (and its async twin) is the memory engine seen through the runtime port alone: each
of the port's methods is the memory engine's, and nothing else is there. Opened through an entry
point as any engine, it serves enqueues, claims, a worker with its schedules, locks and an
outbox; each of the store's calls that needs the operations port raises ``NotOffered`` naming the
call and the engine, and the worker's own reports and upkeep are skipped without a word.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

import pytest

import alkstore
from alkstore import AsyncWorker, ManualClock, NotOffered, StopToken, Store, Tasks, Worker
from alkstore.adapters.cli import EXIT_ERROR, main
from alkstore.adapters.memory import AsyncMemoryEngine, MemoryEngine
from alkstore.engine import AsyncEngine, AsyncRuntimePort, Engine, RuntimePort
from tests.support import MIDNIGHT, wait_until

SCHEME = "runtimeonly"


def _delegate(name: str) -> Callable[..., Any]:
    """The port method ``name``, answered by the wrapped memory engine (a coroutine, a context manager or a
    value: whatever it returns is returned as it is)."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.inner, name)(*args, **kwargs)

    call.__name__ = name
    return call


def _runtime_only(port: type[Any], engine: type[Any]) -> type[Any]:
    """A class of ``port`` whose every abstract method is ``engine``'s, and which has nothing more."""

    def __init__(self: Any) -> None:
        self.inner = engine()

    namespace: dict[str, Any] = {name: _delegate(name) for name in port.__abstractmethods__}
    namespace["__init__"] = __init__
    return type(f"RuntimeOnly{engine.__name__}", (port,), namespace)


RuntimeOnly: type[RuntimePort] = _runtime_only(RuntimePort, MemoryEngine)
AsyncRuntimeOnly: type[AsyncRuntimePort] = _runtime_only(AsyncRuntimePort, AsyncMemoryEngine)


def open_engine(url: str, **options: Any) -> RuntimePort:
    """The entry point of ``runtimeonly://`` in the sync runtime."""
    return RuntimeOnly()


async def open_async_engine(url: str, **options: Any) -> AsyncRuntimePort:
    """The entry point of ``runtimeonly://`` in the async runtime."""
    return AsyncRuntimeOnly()


@pytest.fixture(autouse=True)
def entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """``runtimeonly`` among the installed engines' entry points, as a package of its own would put it."""
    installed = metadata.entry_points
    ours = {
        "alkstore.engines": f"{__name__}:open_engine",
        "alkstore.async_engines": f"{__name__}:open_async_engine",
    }

    def entry_points(**selection: Any) -> Any:
        group = selection.get("group")
        if group in ours and selection.get("name") == SCHEME:
            return [metadata.EntryPoint(SCHEME, ours[group], group)]
        return installed(**selection)

    monkeypatch.setattr(metadata, "entry_points", entry_points)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(MIDNIGHT)


@pytest.fixture
def store(clock: ManualClock) -> Iterator[Store]:
    store = alkstore.open(f"{SCHEME}://", clock=clock)
    yield store
    store.close()


def test_the_engine_offers_the_runtime_port_only() -> None:
    engine = RuntimeOnly()
    assert not isinstance(engine, Engine)
    assert not hasattr(engine, "list_jobs")
    assert not isinstance(AsyncRuntimeOnly(), AsyncEngine)


def test_it_opens_through_its_entry_point_and_serves_jobs(store: Store) -> None:
    assert "RuntimeOnlyMemoryEngine" in repr(store)
    queue = store.queue("q")
    job_id = queue.enqueue({"n": 1})
    info = store.get_job(job_id)
    assert info is not None
    assert info.payload == {"n": 1}
    job = queue.claim("w")
    assert job is not None
    assert job.id == job_id
    job.ack()
    assert store.get_job(job_id) is None


OPERATIONS: dict[str, Callable[[Store], object]] = {
    "jobs": lambda store: store.jobs("q"),
    "queue_stats": lambda store: store.queue_stats(),
    "cancel": lambda store: store.cancel(1),
    "result": lambda store: store.result(1),
    "results": lambda store: store.results("q"),
    "purge_results": lambda store: store.purge_results(),
    "requeue_dead": lambda store: store.requeue_dead(1),
    "requeue_dead_many": lambda store: store.requeue_dead_many([1]),
    "requeue_dead_queue": lambda store: store.requeue_dead_queue("q"),
    "purge_dead": lambda store: store.purge_dead("q"),
    "purge_dead_many": lambda store: store.purge_dead_many([1]),
    "leader": lambda store: store.leader(),
    "workers": lambda store: store.workers(),
    "throughput": lambda store: store.throughput(),
    "task_figures": lambda store: store.task_figures(),
    "locks": lambda store: store.locks(),
    "log_action": lambda store: store.log_action("pause", "q", "paused", role="full", address="127.0.0.1"),
    "actions": lambda store: store.actions(),
    "purge_actions": lambda store: store.purge_actions(0),
}


@pytest.mark.parametrize("call", sorted(OPERATIONS))
def test_each_operators_call_raises_not_offered_naming_the_call_and_the_engine(store: Store, call: str) -> None:
    with pytest.raises(NotOffered) as raised:
        OPERATIONS[call](store)
    assert f"Store.{call}()" in str(raised.value)
    assert "RuntimeOnlyMemoryEngine" in str(raised.value)


def test_steps_sleeps_waits_and_emits_are_not_offered_without_the_steps_port(store: Store) -> None:
    queue = store.queue("jobs")
    job_id = queue.enqueue(None)
    job = queue.claim("w")
    assert job is not None
    calls: list[Callable[[], object]] = [
        lambda: job.step("s", lambda: 1),
        lambda: job.step_tx("s"),
        lambda: job.sleep(1),
        lambda: job.wait_for("e", timeout=1),
        lambda: store.emit("e"),
    ]
    for call in calls:
        with pytest.raises(NotOffered, match="steps port"):
            call()
    info = store.get_job(job_id)  # get_job still answers, without steps
    assert info is not None
    assert (info.steps, info.waits_for) == ((), None)


def test_an_engine_that_does_not_offer_dependencies_refuses_them_before_any_io(store: Store) -> None:
    """The port's ``offers_dependencies`` is false unless an engine says otherwise (ADR 073): a job is never
    stored by an engine that would let it run before its parents."""
    parent = store.queue("q").enqueue("parent")
    with pytest.raises(NotOffered, match=r"enqueue\(after=…\).*RuntimeOnlyMemoryEngine"):
        store.queue("q").enqueue("child", alkstore.EnqueueOpts(after=[parent]))
    graph = store.graph()
    graph.add("a", "q", 1)
    with pytest.raises(NotOffered, match="enqueue_graph"):
        store.enqueue_graph(graph)
    job = store.queue("q").claim("w")
    assert job is not None
    assert job.id == parent
    assert store.queue("q").claim("w") is None


def test_the_store_engine_is_not_offered_as_a_full_engine(store: Store) -> None:
    with pytest.raises(NotOffered, match="RuntimeOnlyMemoryEngine"):
        store.engine  # noqa: B018


def test_a_closed_store_says_closed_before_not_offered(clock: ManualClock) -> None:
    store = alkstore.open(f"{SCHEME}://", clock=clock)
    store.close()
    with pytest.raises(alkstore.StoreClosed):
        store.jobs("q")


def test_a_worker_runs_jobs_locks_a_schedule_and_an_outbox_and_says_nothing_of_what_is_missing(
    store: Store, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = Tasks()
    done: list[int] = []
    locked: list[bool] = []
    fired: list[str] = []

    @tasks.task("count", queue="work")
    def count(n: int) -> None:
        lock = store.try_lock("counter", owner=f"job-{n}", ttl=30)
        locked.append(lock is not None)
        if lock is not None:
            lock.release()
        done.append(n)

    @tasks.periodic("@every 1m", queue="work", name="tick")
    def tick() -> None:
        fired.append("tick")

    for n in range(5):
        count.enqueue(store, n=n)
    worker = Worker(store, tasks, schedules=True, poll_interval=0.05, ack_delay=0)
    stop = StopToken()
    caplog.set_level(logging.INFO, logger="alkstore")
    thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: sorted(done) == list(range(5)), "the five jobs to run")
        wait_until(lambda: [s.name for s in store.schedules()] == ["tick"], "the schedule to be registered")
        clock.wait_for_sleepers(2, timeout=30)  # the worker's heartbeat and the scheduler's leader
        for _ in range(60):  # a second at a time, so the leader renews its lease as it goes
            clock.advance(1)
            clock.wait_for_sleepers(2, timeout=30)
        wait_until(lambda: fired == ["tick"], "the schedule's fire to run")
        outbox = store.outbox("mail")
        outbox.enqueue({"to": "ada"})
        delivered: list[object] = []
        assert outbox.run_once("courier", lambda payload, job: delivered.append(payload))
        assert delivered == [{"to": "ada"}]
    finally:
        stop.cancel()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert locked == [True] * 5
    assert worker.stats.succeeded == 6
    complaints = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert complaints == []


def test_the_async_runtime_opens_it_and_names_the_async_call() -> None:
    async def body() -> None:
        store = await alkstore.open_async(f"{SCHEME}://")
        try:
            job_id = await store.queue("q").enqueue("x")
            job = await store.queue("q").claim("w")
            assert job is not None
            assert job.id == job_id
            await job.ack()
            with pytest.raises(NotOffered, match=r"AsyncStore\.jobs\(\).*RuntimeOnlyAsyncMemoryEngine"):
                await store.jobs("q")
        finally:
            await store.close()

    asyncio.run(body())


def test_an_async_worker_on_it_runs_its_jobs_without_a_word_of_what_is_missing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="alkstore")

    async def body() -> None:
        store = await alkstore.open_async(f"{SCHEME}://")
        done: list[int] = []
        try:
            for n in range(3):
                await store.queue("q").enqueue(n)
            worker = AsyncWorker(store, handlers={"q": lambda payload, job: done.append(payload)}, ack_delay=0)
            stop = StopToken()
            running = asyncio.create_task(worker.run(stop))
            for _ in range(3000):  # up to a generous minute of wall time, in small naps
                if len(done) == 3:
                    break
                await asyncio.sleep(0.02)
            stop.cancel()
            stats = await running
            assert sorted(done) == [0, 1, 2]
            assert stats.succeeded == 3
        finally:
            await store.close()

    asyncio.run(body())
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []


def test_alkstore_status_on_it_says_what_is_not_offered(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--url", f"{SCHEME}://"]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("alkstore: Store.")
    assert "operations port" in captured.err
    assert "RuntimeOnlyMemoryEngine" in captured.err


def test_the_dashboard_on_it_answers_501_with_what_is_not_offered(store: Store) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from alkstore.adapters.web import create_app

    with TestClient(create_app(store), base_url="http://127.0.0.1") as client:  # an answer, not a crash
        response = client.get("/")
    assert response.status_code == 501
    assert "operations port" in response.text
    assert "RuntimeOnlyMemoryEngine" in response.text
