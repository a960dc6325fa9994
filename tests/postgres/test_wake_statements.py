"""What an idle worker's wake (the peer table's D) and a draining worker (its C) send, counted rather
than timed.

From the enqueue to its handler's start: the producer's one statement (the enqueue, whose commit
sends the NOTIFY), then one statement of the worker's claim loop, the claim itself (no read of the
queue's state, no ack of its own, no second claim), and the handler on the slot's thread, one
hand-off from the claim loop. Either side may also read the queue's config first, once its cached
copy is older than ``CONFIG_TTL`` (ADR 016): at most one wake in a dozen of the peer table's. The
2026-12-06 code sent the same; a second round trip on this path is what the idle wake's latency
would pay first, whatever the machine's load.

A drain by four slots sends claims only, each carrying the acks waiting: no statement of a run's
own, and at most one claim a job (but for the last rounds, which find the queue empty).
"""

from __future__ import annotations

import dataclasses
import threading
from functools import partial
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore import Job, StopToken, Store
from alkstore.adapters.postgres._positional import positional
from tests.support import PATIENCE, wait_until

from .conftest import OpenStore, engine_of

pytestmark = pytest.mark.postgres

QUEUE = "wake"
#: The thread the test runs the worker's claim loop on (``Worker.run``).
CLAIM_LOOP = "claim-loop"
#: Wakes counted, each after the worker parked again.
WAKES = 3


@dataclasses.dataclass
class Sent:
    """The statements sent through psycopg since the test began: (thread name, statement name), in order."""

    names: dict[bytes, str]
    log: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def record(self, query: Any) -> None:
        text = bytes(query) if isinstance(query, bytes | bytearray | memoryview) else str(query).encode()
        name = self.names.get(text, "other: " + text[:40].decode(errors="replace"))
        with self.lock:
            self.log.append((threading.current_thread().name, name))

    def mark(self) -> int:
        with self.lock:
            return len(self.log)

    def sent(self, name: str, mark: int, thread: str) -> bool:
        """Whether ``thread`` sent the statement ``name`` since ``mark``."""
        return name in self.since(mark, thread)

    def since(self, mark: int, thread: str | None = None) -> list[str]:
        with self.lock:
            return [name for who, name in self.log[mark:] if thread is None or who == thread]


def statement_names(store: Store) -> dict[bytes, str]:
    """Each of the engine's statements, as sent (named or positional form), by its name."""
    statements = engine_of(store)._sql
    names: dict[bytes, str] = {}
    for field in dataclasses.fields(statements):
        text = getattr(statements, field.name)
        if isinstance(text, str):
            names[text.encode()] = field.name
            made = positional(text)
            if made is not None:
                names[made.query] = field.name
    return names


def uncached(window: list[tuple[str, str]], thread: str) -> list[str]:
    """The statements ``thread`` sent in ``window`` but the read of the queue's config, which each store
    makes at most once a ``CONFIG_TTL`` (ADR 016), on whichever call comes first after it lapsed."""
    names = [name for who, name in window if who == thread]
    assert names.count("queue_config") <= 1, window
    return [name for name in names if name != "queue_config"]


@pytest.fixture
def sent(open_store: OpenStore, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, Sent]:
    store = open_store()
    recorder = Sent(statement_names(store))
    execute = psycopg.Cursor.execute

    def recording(self: psycopg.Cursor[Any], query: Any, params: Any = None, **kwargs: Any) -> Any:
        recorder.record(query)
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    return store, recorder


def test_an_idle_workers_wake_sends_one_statement_the_claim_and_hands_the_job_to_its_slot(
    sent: tuple[Store, Sent], open_store: OpenStore
) -> None:
    store, recorder = sent
    producer = open_store(max_size=1).queue(QUEUE)
    started: dict[int, tuple[str, int]] = {}  # job id: the handler's thread, the statements sent before it
    done = threading.Condition()

    def handler(payload: object, job: Job) -> None:
        mark = recorder.mark()
        with done:
            started[job.id] = (threading.current_thread().name, mark)
            done.notify_all()

    worker = alkstore.Worker(store, handlers={QUEUE: handler}, concurrency=1, worker_id="waker")
    stop = StopToken()
    loop = threading.Thread(target=worker.run, args=(stop,), name=CLAIM_LOOP, daemon=True)
    loop.start()
    counted = unparked = 0
    try:
        for wake in range(3 * WAKES + 1):  # the first is a warm-up: the worker's start, its first claims
            if counted == WAKES:
                break
            parked = recorder.mark()
            # Parked: its last run's ack written (riding on a claim that found nothing), then the idle
            # read of the soonest due instant, after which it waits for a notification.
            wait_until(partial(recorder.sent, "soonest_due", parked, CLAIM_LOOP), "the worker parking")
            before = recorder.mark()
            job_id = producer.enqueue({"wake": wake})
            with done:
                assert done.wait_for(partial(started.__contains__, job_id), PATIENCE), "its handler never started"
            thread, at = started[job_id]
            if wake == 0:
                continue
            window = recorder.log[before:at]
            if uncached(window, CLAIM_LOOP)[:1] == ["soonest_due"]:
                # Its idle wait lapsed on its own (its periodic re-read) as the job came: not a wake from
                # the park. Counted again, a bounded number of times: a wake that always reads first fails.
                unparked += 1
                continue
            counted += 1
            assert uncached(window, CLAIM_LOOP) == ["claim"], window
            assert uncached(window, threading.current_thread().name) == ["enqueue_one"], window
            assert [name for who, name in window if who == thread] == [], window  # the slot only runs it
            assert thread.startswith("alkstore-worker-waker-"), thread  # one hand-off: claim loop to slot
        assert counted == WAKES, f"{unparked} of {counted + unparked} wakes read the soonest due instant first"
    finally:
        stop.cancel()
        loop.join(PATIENCE)
    assert not loop.is_alive()


#: Jobs drained by four slots.
DRAINED = 60
#: What a draining worker's claim loop and slots may send: claims, each carrying the acks waiting
#: (ADRs 021, 022, 049), from the cursor or in full (ADR 061); the queue's config read once a
#: ``CONFIG_TTL``; the idle read once the queue is empty.
CLAIMS = {"claim", "claim_full", "ack_and_claim", "ack_and_claim_full"}
DRAIN_STATEMENTS = CLAIMS | {"queue_config", "soonest_due"}


def test_a_draining_worker_sends_at_most_one_statement_a_job_each_claim_carrying_the_acks(
    sent: tuple[Store, Sent], open_store: OpenStore
) -> None:
    store, recorder = sent
    producer = open_store(max_size=1).queue(QUEUE)
    handled: list[int] = []
    lock = threading.Lock()

    def handler(payload: object, job: Job) -> None:
        with lock:
            handled.append(job.id)

    worker = alkstore.Worker(store, handlers={QUEUE: handler}, concurrency=4, worker_id="drainer")
    stop = StopToken()
    started = recorder.mark()
    loop = threading.Thread(target=worker.run, args=(stop,), name=CLAIM_LOOP, daemon=True)
    loop.start()
    try:
        wait_until(partial(recorder.sent, "soonest_due", started, CLAIM_LOOP), "the worker parking")
        begin = recorder.mark()  # its start (its report, its listening) left out: the drain alone
        producer.enqueue_many([{"n": n} for n in range(DRAINED)])
        wait_until(lambda: worker.stats.succeeded == DRAINED, "the drain, its acks written")
        end = recorder.mark()
    finally:
        stop.cancel()
        loop.join(PATIENCE)
    assert not loop.is_alive()
    ours = [
        (who, name) for who, name in recorder.log[begin:end] if who == CLAIM_LOOP or who.startswith("alkstore-worker-")
    ]
    names = [name for _, name in ours]
    assert set(names) <= DRAIN_STATEMENTS, ours  # no ack of its own, no statement of a run's own
    claims = sum(1 for name in names if name in CLAIMS)
    # Each claim takes one job at least, but for the rounds that find the queue empty: the last
    # ones, carrying the last acks (one per slot at most, and the claim loop's).
    assert claims <= DRAINED + 5, ours
