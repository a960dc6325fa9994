"""Keyed order (ADR 032): the jobs of one ordering key run one at a time, in the order they were enqueued.

A job waits while an earlier job of its key is unfinished (pending, delayed, waiting or running);
a retried job keeps its place, so the later ones wait for it; a dead, acked or cancelled one lets
the next run. Jobs of other keys, and jobs without a key, run beside them. For an outbox this is
per-aggregate ordered delivery.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from alkstore import EnqueueOpts, JobPhase, ManualClock, Store
from alkstore.engine import JOB_EXPIRED_ERROR
from tests.support import T0, must_claim, must_get

from ._engines import EngineTarget
from ._profiles import sized
from .test_concurrency import run_together


def keyed(key: str, **options: object) -> EnqueueOpts:
    return EnqueueOpts(ordering_key=key, **options)  # type: ignore[arg-type]


def drain(store: Store, queue: str) -> list[object]:
    """Claim and ack until nothing is claimable; the payloads in the order they ran."""
    ran = []
    while (job := store.queue(queue).claim("w")) is not None:
        ran.append(job.payload)
        job.ack()
    return ran


def test_one_keys_jobs_run_one_at_a_time_in_enqueue_order_beside_other_keys(store: Store) -> None:
    queue = store.queue("accounts")
    for n in range(3):
        queue.enqueue(f"seven-{n}", keyed("account:7"))
        queue.enqueue(f"eight-{n}", keyed("account:8"))
    queue.enqueue("unkeyed")
    first = queue.claim_many("w", 10)
    assert sorted(job.payload for job in first) == ["eight-0", "seven-0", "unkeyed"]  # one per key, and the rest
    assert queue.claim("w") is None
    stats = store.queue_stats("accounts")[0]
    assert (stats.running, stats.waiting, stats.ready) == (3, 4, 0)
    waiting = store.jobs("accounts", JobPhase.WAITING).jobs
    assert [job.payload for job in waiting] == ["seven-1", "eight-1", "seven-2", "eight-2"]
    assert all(job.waiting for job in waiting)
    for job in first:
        job.ack()
    assert sorted(drain_one_each(store)) == ["eight-1", "seven-1"]


def drain_one_each(store: Store) -> list[str]:
    jobs = store.queue("accounts").claim_many("w", 10)
    for job in jobs:
        job.ack()
    return [str(job.payload) for job in jobs]


def test_a_retried_job_keeps_its_place_and_the_later_ones_wait_for_it(store: Store, clock: ManualClock) -> None:
    queue = store.queue("accounts")
    first = queue.enqueue("first", keyed("k"))
    second = queue.enqueue("second", keyed("k"))
    must_claim(queue).retry("failed once")  # delayed on the curve: still the key's head
    assert queue.claim("w") is None, "the second waits for the retried first"
    assert must_get(store, second).waiting
    clock.advance(60)
    job = must_claim(queue)
    assert job.id == first
    job.ack()
    assert must_claim(queue).id == second


def test_a_dead_or_cancelled_job_lets_the_next_one_of_its_key_run(store: Store) -> None:
    queue = store.queue("accounts")
    queue.enqueue("dies", keyed("k"))
    cancelled = queue.enqueue("cancelled while waiting", keyed("k"))
    third = queue.enqueue("third", keyed("k"))
    fourth = queue.enqueue("fourth", keyed("k"))
    assert store.cancel(cancelled).value == "cancelled"  # a waiting job leaves the line; the head stays
    must_claim(queue).fail("dead")
    job = must_claim(queue)
    assert job.id == third
    assert queue.claim("w") is None
    assert store.cancel(third).value == "cancelling"  # running: it ends cancelled, and lets the next run
    job.ack()
    assert must_claim(queue).id == fourth


def test_a_job_waiting_behind_its_key_expires_while_it_waits(store: Store, clock: ManualClock) -> None:
    queue = store.queue("accounts")
    queue.enqueue("head", keyed("k", delay=3600))
    brief = queue.enqueue("brief", keyed("k", expires=60))
    last = queue.enqueue("last", keyed("k"))
    clock.advance(600)  # past the waiting job's expiry, the head still delayed: a claim's sweep buries it
    assert queue.claim("w") is None
    expired = must_get(store, brief)
    assert (expired.state.value, expired.last_error) == ("dead", JOB_EXPIRED_ERROR)
    clock.advance(3600)
    assert drain(store, "accounts") == ["head", "last"]
    assert store.get_job(last) is None


def test_a_delayed_head_keeps_its_key_until_it_runs(store: Store, clock: ManualClock) -> None:
    queue = store.queue("accounts")
    queue.enqueue("later", keyed("k", delay=30))
    queue.enqueue("due now, but second", keyed("k"))
    assert queue.claim("w") is None
    clock.advance(30)
    assert drain(store, "accounts") == ["later", "due now, but second"]


def test_an_outbox_delivers_one_aggregates_messages_in_commit_order(store: Store) -> None:
    for order in range(3):
        with store.transaction() as tx:
            for event in ("created", "paid"):
                store.outbox_enqueue_tx(tx, "webhooks", {"order": order, "event": event}, keyed(f"order:{order}"))
    delivered: list[object] = []
    while store.outbox("webhooks").run_once("courier", lambda payload, job: delivered.append(payload)):
        pass
    for order in range(3):
        mine = [message for message in delivered if message["order"] == order]  # type: ignore[index]
        assert [message["event"] for message in mine] == ["created", "paid"]  # type: ignore[index]


def test_two_workers_on_one_key_never_run_two_of_its_jobs_at_once(store: Store) -> None:
    queue = store.queue("accounts")
    for n in range(40):
        queue.enqueue(n, keyed("one"))
    order: list[object] = []
    running: set[int] = set()
    overlaps: list[tuple[int, int]] = []

    def work(name: str) -> None:
        idle = 0
        while idle < 50:
            job = store.queue("accounts").claim(name)
            if job is None:
                idle += 1
                continue
            idle = 0
            if running:
                overlaps.append((job.id, next(iter(running))))
            running.add(job.id)
            order.append(job.payload)
            running.discard(job.id)
            job.ack()

    run_together([lambda: work("w1"), lambda: work("w2")])
    assert overlaps == []
    assert order == list(range(40))


@sized(0.25)
@given(
    script=st.lists(
        st.tuples(st.sampled_from(["a", "b", None]), st.sampled_from(["ack", "retry", "fail"])), min_size=1, max_size=12
    )
)
def test_each_keys_runs_follow_its_enqueue_order_whatever_the_outcomes(
    engine: EngineTarget, script: list[tuple[str | None, str]]
) -> None:
    """Keyed-order linearisation: however runs end, no key's job starts before every earlier one of its key
    is finished (acked or dead), and every job ends."""
    with engine.store(ManualClock(T0)) as store:
        queue = store.queue("prop")
        enqueued: dict[str, list[int]] = defaultdict(list)
        outcomes = {}
        for n, (key, outcome) in enumerate(script):
            job_id = queue.enqueue(n, EnqueueOpts(ordering_key=key, max_attempts=2))
            outcomes[job_id] = outcome
            if key is not None:
                enqueued[key].append(job_id)
        finished: set[int] = set()
        started: list[int] = []
        attempts: dict[int, int] = defaultdict(int)
        for _ in range(4 * len(script) + 4):
            jobs = queue.claim_many("w", 5)
            if not jobs:
                break
            for job in jobs:
                started.append(job.id)
                key = next((k for k, ids in enqueued.items() if job.id in ids), None)
                if key is not None:
                    earlier = enqueued[key][: enqueued[key].index(job.id)]
                    assert set(earlier) <= finished, f"job {job.id} of key {key} ran before {earlier}"
                attempts[job.id] += 1
                outcome = outcomes[job.id]
                if outcome == "ack" or (outcome == "retry" and attempts[job.id] > 1):
                    job.ack()
                    finished.add(job.id)
                elif outcome == "retry":
                    job.retry("again", delay=0)
                else:
                    job.fail("dead")
                    finished.add(job.id)
        assert finished == set(outcomes), "every job ended"


def test_requeued_dead_jobs_of_a_key_line_up_behind_its_unfinished_jobs_and_each_other(store: Store) -> None:
    """A requeued job of an ordering key is ready only if no unfinished job of its key is in its queue
    and no job of its key requeued with it has a lower id; a job of another key or none is ready."""
    queue = store.queue("requeued")

    def dead(payload: str, key: str | None) -> int:
        job_id = queue.enqueue(payload, EnqueueOpts(ordering_key=key, max_attempts=1))
        must_claim(queue).fail("boom")
        return int(job_id)

    k1, k2 = dead("k1", "k"), dead("k2", "k")
    j1, m1, plain = dead("j1", "j"), dead("m1", "m"), dead("plain", None)
    store.queue("elsewhere").enqueue("m elsewhere", EnqueueOpts(ordering_key="m"))  # another queue's key
    j2 = int(queue.enqueue("j2", EnqueueOpts(ordering_key="j")))  # unfinished: j1 comes back behind it
    assert sorted(store.requeue_dead_many([k1, k2, j1, m1, plain])) == sorted([k1, k2, j1, m1, plain])

    def listed(phase: JobPhase) -> set[int]:
        return {job.id for job in store.jobs("requeued", phase).jobs}

    assert listed(JobPhase.READY) == {k1, m1, plain, j2}
    assert listed(JobPhase.WAITING) == {k2, j1}
