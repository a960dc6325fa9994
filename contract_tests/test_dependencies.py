"""Job dependencies (ADR 073): a job waits until every parent succeeded; a dead parent's dependents follow
their own policy, transitively; a graph is enqueued in one call, cycles refused; a child reads what its
parents returned.

An engine that does not offer dependencies (``offers_dependencies`` false) is skipped with that reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from alkstore import (
    CancelOutcome,
    DependencyCycle,
    EnqueueOpts,
    InvalidOptions,
    JobPhase,
    JobState,
    ManualClock,
    Store,
    Tasks,
    UnknownParent,
    Worker,
    chain,
    chord,
    group,
)
from alkstore.engine import JOB_EXPIRED_ERROR, parent_failed_error
from tests.support import must_claim, must_get

from ._engines import T0, EngineTarget
from ._profiles import MACHINE_EXAMPLES, sized
from ._runners import wait_until
from ._runtimes import worker_of
from .test_worker import POLL, Running, started

__all__ = ["started"]  # the fixture, shared with test_worker


@pytest.fixture
def deps(store: Store) -> Store:
    """``store``, or a skip when its engine does not offer dependencies."""
    if not store.engine.offers_dependencies:
        pytest.skip(f"the {type(store.engine).__name__} engine does not offer job dependencies")
    return store


def after(*ids: int, policy: str = "cancel") -> EnqueueOpts:
    return EnqueueOpts(after=ids, on_parent_failure=policy)


def test_a_child_waits_until_every_parent_succeeded_then_runs(deps: Store) -> None:
    charge = deps.queue("payments").enqueue("charge")
    stock = deps.queue("stock").enqueue("reserve")
    ship = deps.queue("shipping").enqueue("ship", after(charge, stock))
    waiting = must_get(deps, ship)
    assert (waiting.state, waiting.waiting, waiting.parents, waiting.waiting_on) == (
        JobState.PENDING,
        True,
        (charge, stock),
        (charge, stock),
    )
    assert must_get(deps, charge).children == (ship,)
    assert deps.queue("shipping").claim("w") is None
    assert [job.id for job in deps.jobs("shipping", JobPhase.WAITING).jobs] == [ship]
    must_claim(deps.queue("payments")).ack()
    assert must_get(deps, ship).waiting_on == (stock,)
    assert deps.queue("shipping").claim("w") is None
    must_claim(deps.queue("stock")).ack()
    ready = must_get(deps, ship)
    assert (ready.waiting, ready.waiting_on) == (False, ())
    assert must_claim(deps.queue("shipping")).id == ship


def test_a_retried_parent_still_holds_its_child_until_it_succeeds(deps: Store, clock: ManualClock) -> None:
    parent = deps.queue("q").enqueue("parent")
    child = deps.queue("q").enqueue("child", after(parent))
    must_claim(deps.queue("q")).retry("flaky", delay=0)
    assert must_get(deps, child).waiting
    job = must_claim(deps.queue("q"))
    assert job.id == parent
    job.ack()
    assert must_claim(deps.queue("q")).id == child


def test_a_child_enqueued_long_before_is_claimed_at_the_first_claim_after_its_parents_ack(
    deps: Store, clock: ManualClock
) -> None:
    # The claims since the child's enqueue took newer jobs: the child, ready now, stands behind them in
    # claim order, where a claim reading on from the jobs it took last would not look (ADR 061).
    queue = deps.queue("q")
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", after(parent))
    clock.advance(120)
    newer = queue.enqueue("newer")
    held = must_claim(queue)
    assert held.id == parent
    assert must_claim(queue).id == newer
    held.ack()
    assert must_claim(queue).id == child


def test_enqueue_refuses_an_unknown_parent_and_writes_nothing(deps: Store) -> None:
    known = deps.queue("q").enqueue("known")
    with pytest.raises(UnknownParent, match="999999"):
        deps.queue("q").enqueue_many(["a", "b"], after(known, 999999))
    assert [job.id for job in deps.queue("q").claim_many("w", 10)] == [known]
    with pytest.raises(InvalidOptions):
        EnqueueOpts(after=[0])
    with pytest.raises(InvalidOptions):
        EnqueueOpts(after=[known], ordering_key="k")
    with pytest.raises(InvalidOptions):
        EnqueueOpts(on_parent_failure="ignore")


def test_a_parent_that_succeeded_and_was_not_kept_is_unknown_one_kept_counts_as_succeeded(deps: Store) -> None:
    deps.queue("kept").configure(keep_results=3600)
    gone = deps.queue("q").enqueue("gone")
    kept = deps.queue("kept").enqueue("kept")
    must_claim(deps.queue("q")).ack()
    must_claim(deps.queue("kept")).ack({"total": 12})
    with pytest.raises(UnknownParent):
        deps.queue("q").enqueue("late", after(gone))
    child = deps.queue("q").enqueue("late", after(kept))
    job = must_claim(deps.queue("q"))
    assert job.id == child
    assert job.parent_results() == {kept: {"total": 12}}


def test_a_dead_parents_dependents_follow_their_own_policies_transitively(deps: Store) -> None:
    q = deps.queue("q")
    parent = q.enqueue("parent")
    cancelled = q.enqueue("cancel", after(parent))
    runs = q.enqueue("run", after(parent, policy="run"))
    dies = q.enqueue("die", after(parent, policy="die"))
    under_cancelled = q.enqueue("under cancel", after(cancelled, policy="run"))
    under_dead = q.enqueue("under die", after(dies))
    bystander = q.enqueue("bystander")
    job = must_claim(q)
    assert job.id == parent
    job.fail("card declined")
    assert deps.get_job(cancelled) is None
    assert deps.get_job(under_dead) is None
    dead = must_get(deps, dies)
    assert (dead.state, dead.last_error) == (JobState.DEAD, parent_failed_error(parent))
    assert [job.id for job in q.claim_many("w", 10)] == [runs, under_cancelled, bystander]


def test_a_dependent_keeps_its_rate_key_waiting_running_and_dead(deps: Store) -> None:
    q = deps.queue("q")
    parent = q.enqueue("parent")
    child = q.enqueue("child", EnqueueOpts(after=[parent], on_parent_failure="die", rate_key="customer:a"))
    assert must_get(deps, child).rate_key == "customer:a"
    must_claim(q).fail("no")
    dead = must_get(deps, child)
    assert (dead.state, dead.rate_key) == (JobState.DEAD, "customer:a")


def test_a_cancelled_parent_cancels_its_waiting_dependents(deps: Store) -> None:
    parent = deps.queue("q").enqueue("parent")
    child = deps.queue("q").enqueue("child", after(parent))
    grandchild = deps.queue("q").enqueue("grandchild", after(child, policy="die"))
    assert deps.cancel(parent) is CancelOutcome.CANCELLED
    assert deps.get_job(child) is None
    assert must_get(deps, grandchild).last_error == parent_failed_error(child)
    assert deps.queue("q").claim("w") is None


def test_a_waiting_dependent_expires_while_it_waits_and_its_own_dependents_follow(
    deps: Store, clock: ManualClock
) -> None:
    q = deps.queue("q")
    parent = q.enqueue("parent", EnqueueOpts(delay=7200))
    child = q.enqueue("child", EnqueueOpts(after=[parent], expires=60))
    grandchild = q.enqueue("grandchild", after(child, policy="die"))
    patient = q.enqueue("patient", after(parent))
    clock.advance(3600)  # past the child's expiry, the parent still delayed: a claim's sweep finds it
    assert q.claim("w") is None
    expired = must_get(deps, child)
    assert (expired.state, expired.last_error) == (JobState.DEAD, JOB_EXPIRED_ERROR)
    assert must_get(deps, grandchild).last_error == parent_failed_error(child)
    assert must_get(deps, patient).waiting  # a dependent without an expiry waits on
    clock.advance(3600)
    job = must_claim(q)
    assert job.id == parent
    job.ack()
    assert must_claim(q).id == patient


def test_a_requeued_dead_dependent_waits_again_on_its_parents_as_they_are_then(deps: Store, clock: ManualClock) -> None:
    q = deps.queue("q")
    slow = q.enqueue("slow", EnqueueOpts(delay=3600))
    flaky = q.enqueue("flaky", EnqueueOpts(max_attempts=1))
    done = q.enqueue("done")
    child = q.enqueue("child", EnqueueOpts(after=[slow, flaky, done], on_parent_failure="die"))
    first = must_claim(q)
    assert first.id == flaky
    first.fail("flaky")
    assert must_get(deps, child).state is JobState.DEAD
    must_claim(q).ack()  # done
    assert deps.requeue_dead(child)  # its parent flaky is dead still: it dies again at once
    again = must_get(deps, child)
    assert (again.state, again.last_error) == (JobState.DEAD, parent_failed_error(flaky))
    assert deps.requeue_dead(flaky)
    assert deps.requeue_dead(child)
    waiting = must_get(deps, child)
    assert (waiting.state, waiting.waiting, waiting.waiting_on) == (JobState.PENDING, True, (slow, flaky))
    job = must_claim(q)
    assert job.id == flaky
    job.ack()
    assert q.claim("w") is None  # slow still holds it
    assert must_get(deps, child).waiting_on == (slow,)
    clock.advance(3600)
    job = must_claim(q)
    assert job.id == slow
    job.ack()
    assert must_claim(q).id == child


def test_a_dead_parent_and_its_dead_dependent_requeued_in_one_call_run_in_their_order(deps: Store) -> None:
    q = deps.queue("q")
    parent = q.enqueue("parent", EnqueueOpts(max_attempts=1))
    child = q.enqueue("child", after(parent, policy="die"))
    must_claim(q).fail("no")
    assert must_get(deps, child).state is JobState.DEAD
    assert deps.requeue_dead_many([child, parent]) == [parent, child]
    assert must_get(deps, child).waiting_on == (parent,)
    job = must_claim(q)
    assert job.id == parent
    assert q.claim("w") is None
    job.ack()
    assert must_claim(q).id == child


def test_a_child_of_a_parent_already_dead_follows_its_policy_at_enqueue(deps: Store) -> None:
    parent = deps.queue("q").enqueue("parent")
    must_claim(deps.queue("q")).fail("no")
    dies = deps.queue("q").enqueue("die", after(parent, policy="die"))
    runs = deps.queue("q").enqueue("run", after(parent, policy="run"))
    cancelled = deps.queue("q").enqueue("cancel", after(parent))
    assert must_get(deps, dies).state is JobState.DEAD
    assert deps.get_job(cancelled) is None
    assert must_claim(deps.queue("q")).id == runs


def test_an_order_pipeline_graph_fans_out_and_in_and_the_report_reads_its_parents_results(deps: Store) -> None:
    graph = deps.graph()
    graph.add("report", "reports", {"order": 7}, after=["email", "invoice"])
    graph.add("email", "mail", {"order": 7}, after=["charge"])
    graph.add("invoice", "invoices", {"order": 7}, after=["charge"])
    graph.add("charge", "payments", {"order": 7, "cents": 1250})
    ids = deps.enqueue_graph(graph)
    assert sorted(ids) == ["charge", "email", "invoice", "report"]
    assert ids["charge"] < ids["email"] < ids["invoice"] < ids["report"]  # parents first
    assert must_get(deps, ids["report"]).parents == (ids["email"], ids["invoice"])
    must_claim(deps.queue("payments")).ack("ch_1")
    email = must_claim(deps.queue("mail"))
    assert email.parent_results() == {ids["charge"]: "ch_1"}
    email.ack("sent")
    assert deps.queue("reports").claim("w") is None
    must_claim(deps.queue("invoices")).ack({"invoice": "INV-7"})
    report = must_claim(deps.queue("reports"))
    assert report.parent_results() == {ids["email"]: "sent", ids["invoice"]: {"invoice": "INV-7"}}


def test_a_graph_with_a_cycle_or_a_missing_key_is_refused_and_writes_nothing(deps: Store) -> None:
    graph = deps.graph()
    graph.add("a", "q", 1, after=["c"])
    graph.add("b", "q", 2, after=["a"])
    graph.add("c", "q", 3, after=["b"])
    graph.add("free", "q", 4)
    with pytest.raises(DependencyCycle, match=r"a -> c -> b -> a|c -> b -> a -> c|b -> a -> c -> b"):
        deps.enqueue_graph(graph)
    missing = deps.graph()
    missing.add("a", "q", 1, after=["nowhere"])
    with pytest.raises(InvalidOptions, match="nowhere"):
        deps.enqueue_graph(missing)
    with pytest.raises(DependencyCycle):
        deps.graph().add("self", "q", 1, after=["self"])
    repeated = deps.graph()
    repeated.add("a", "q")
    with pytest.raises(InvalidOptions, match="already"):
        repeated.add("a", "q")
    assert deps.queue("q").claim("w") is None
    assert deps.enqueue_graph(deps.graph()) == {}


def test_a_graph_in_a_callers_transaction_is_published_at_commit_and_gone_on_rollback(deps: Store) -> None:
    outside = deps.queue("q").enqueue("outside")
    graph = deps.graph()
    graph.add("first", "q", 1, after=[outside])
    graph.add("second", "q", 2, after=["first"], on_parent_failure="run")
    with deps.transaction() as tx:
        ids = deps.enqueue_graph_tx(tx, graph)
        assert deps.get_job(ids["first"]) is None
    assert must_get(deps, ids["second"]).waiting_on == (ids["first"],)

    class Abort(Exception):
        pass

    lost: dict[str, int] = {}

    def rolled_back() -> None:
        with deps.transaction() as tx:
            lost.update(deps.enqueue_graph_tx(tx, graph))
            raise Abort

    with pytest.raises(Abort):
        rolled_back()
    assert deps.get_job(lost["first"]) is None
    must_claim(deps.queue("q")).ack()
    assert must_claim(deps.queue("q")).id == ids["first"]


def test_a_graphs_job_with_an_ordering_key_keeps_its_place_behind_the_keys_earlier_jobs(deps: Store) -> None:
    q = deps.queue("q")
    q.enqueue("first", EnqueueOpts(ordering_key="k"))
    graph = deps.graph()
    graph.add("keyed", "q", "keyed", EnqueueOpts(ordering_key="k"))
    graph.add("after", "q", "after", after=["keyed"])
    deps.enqueue_graph(graph)
    ran = []
    while jobs := q.claim_many("w", 10):
        ran.append(sorted(str(job.payload) for job in jobs))
        for job in jobs:
            job.ack()
    assert ran == [["first"], ["keyed"], ["after"]]


def has_cycle(edges: dict[int, set[int]]) -> bool:
    """Whether the graph ``edges`` (node -> the nodes it waits on) has a circle: depth first, by colour."""
    colour: dict[int, int] = {}

    def visit(node: int) -> bool:
        colour[node] = 1
        for parent in edges[node]:
            if colour.get(parent) == 1 or (parent not in colour and visit(parent)):
                return True
        colour[node] = 2
        return False

    return any(node not in colour and visit(node) for node in edges)


@given(data=st.data())
@sized(0.2)
def test_a_random_graph_is_stored_with_its_links_or_refused_whole_when_it_has_a_circle(
    engine: EngineTarget, data: st.DataObject
) -> None:
    size = data.draw(st.integers(1, 7), label="jobs")
    edges = {
        node: set(data.draw(st.lists(st.integers(0, size - 1), max_size=3), label=f"parents of {node}"))
        for node in range(size)
    }
    with engine.store(ManualClock(T0)) as store:
        if not store.engine.offers_dependencies:
            pytest.skip("this engine does not offer job dependencies")
        graph = store.graph()
        for node, parents in edges.items():
            if node in parents:
                with pytest.raises(DependencyCycle):
                    graph.add(f"n{node}", "q", node, after=[f"n{p}" for p in sorted(parents)])
                parents.discard(node)
            graph.add(f"n{node}", "q", node, after=[f"n{p}" for p in sorted(parents)])
        if has_cycle(edges):
            with pytest.raises(DependencyCycle):
                store.enqueue_graph(graph)
            assert store.queue_stats() == []
            return
        ids = store.enqueue_graph(graph)
        for node, parents in edges.items():
            info = must_get(store, ids[f"n{node}"])
            assert set(info.parents) == {ids[f"n{p}"] for p in parents}
            assert info.waiting == bool(parents)


# -- the model: random graphs, random outcomes ---------------------------------------------------

QUEUES = ("a", "b")


@dataclass
class Node:
    """What the model believes of one job: ``state`` is waiting, ready, running, done, dead or cancelled."""

    queue: str
    parents: tuple[int, ...]
    policy: str
    state: str
    left: set[int] = field(default_factory=set)
    died_of: set[int] = field(default_factory=set)


class DependencyMachine(RuleBasedStateMachine):
    """Jobs enqueued after random earlier ones, claimed, acked, failed and cancelled at random; after every
    step each job's state, what it waits for and what may be claimed agree with the model."""

    def __init__(self, engine: EngineTarget) -> None:
        super().__init__()
        self._opened = engine.store(ManualClock(T0))
        self.store = self._opened.__enter__()
        if not self.store.engine.offers_dependencies:
            self.teardown()
            pytest.skip("this engine does not offer job dependencies")
        self.nodes: dict[int, Node] = {}
        self.held: dict[int, Any] = {}

    def teardown(self) -> None:
        self._opened.__exit__(None, None, None)

    @rule(
        data=st.data(),
        queue=st.sampled_from(QUEUES),
        policy=st.sampled_from(["cancel", "run", "die"]),
    )
    def enqueue(self, data: st.DataObject, queue: str, policy: str) -> None:
        known = sorted(self.nodes)
        parents = tuple(data.draw(st.lists(st.sampled_from(known), max_size=3, unique=True))) if known else ()
        gone = [p for p in parents if self.nodes[p].state in ("done", "cancelled")]
        if gone:
            with pytest.raises(UnknownParent):
                self.store.queue(queue).enqueue("job", EnqueueOpts(after=parents, on_parent_failure=policy))
            return
        job_id = self.store.queue(queue).enqueue("job", EnqueueOpts(after=parents, on_parent_failure=policy))
        node = self.nodes[job_id] = Node(queue, parents, policy, "ready")
        node.left = {p for p in parents if self.nodes[p].state in ("waiting", "ready", "running")}
        died = [p for p in parents if self.nodes[p].state == "dead"]
        node.state = "waiting" if node.left else "ready"
        if died and policy != "run":
            self._follow(job_id, died[0])

    @rule(queue=st.sampled_from(QUEUES))
    def claim(self, queue: str) -> None:
        job = self.store.queue(queue).claim("w")
        ready = sorted(i for i, n in self.nodes.items() if n.queue == queue and n.state == "ready")
        if not ready:
            assert job is None
            return
        assert job is not None
        assert job.id == ready[0]
        self.nodes[job.id].state = "running"
        self.held[job.id] = job

    @precondition(lambda self: self.held)
    @rule(data=st.data(), succeed=st.booleans())
    def finish(self, data: st.DataObject, succeed: bool) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.held)))
        job = self.held.pop(job_id)
        if succeed:
            job.ack()
            self.nodes[job_id].state = "done"
            for child in self.nodes.values():
                if child.state == "waiting" and job_id in child.left:
                    child.left.discard(job_id)
                    if not child.left:
                        child.state = "ready"
        else:
            job.fail("boom")
            self._died(job_id, "dead")

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        pending = sorted(i for i, n in self.nodes.items() if n.state in ("ready", "waiting"))
        if not pending:
            return
        job_id = data.draw(st.sampled_from(pending))
        assert self.store.cancel(job_id) is CancelOutcome.CANCELLED
        self._died(job_id, "cancelled")

    def _died(self, job_id: int, state: str) -> None:
        self.nodes[job_id].state = state
        for child_id in sorted(self.nodes):
            child = self.nodes[child_id]
            if child.state == "waiting" and job_id in child.left:
                child.left.discard(job_id)
                self._follow(child_id, job_id)

    def _follow(self, child_id: int, parent: int) -> None:
        child = self.nodes[child_id]
        if child.policy == "run":
            if not child.left:
                child.state = "ready"
            return
        child.died_of.add(parent)
        self._died(child_id, "cancelled" if child.policy == "cancel" else "dead")

    @invariant()
    def every_job_stands_where_the_model_says(self) -> None:
        for job_id, node in self.nodes.items():
            info = self.store.get_job(job_id)
            if node.state in ("done", "cancelled"):
                assert info is None, (job_id, node)
                continue
            assert info is not None, (job_id, node)
            expected = {"waiting": JobState.PENDING, "ready": JobState.PENDING, "running": JobState.RUNNING}
            if node.state == "dead":
                assert info.state is JobState.DEAD, (job_id, node, info)
                if node.died_of and node.policy == "die":
                    assert info.last_error in {parent_failed_error(p) for p in node.died_of}
                continue
            assert info.state is expected[node.state], (job_id, node, info)
            assert info.waiting == (node.state == "waiting"), (job_id, node, info)
            assert info.parents == node.parents
            assert set(info.waiting_on) == (node.left if node.state == "waiting" else set()), (job_id, node, info)
            waiting_children = sorted(i for i, n in self.nodes.items() if n.state == "waiting" and job_id in n.left)
            assert list(info.children) == waiting_children, (job_id, node, info)


def test_random_graphs_run_each_job_after_its_parents_and_a_dead_parents_dependents_follow_their_policy(
    engine: EngineTarget, request: pytest.FixtureRequest
) -> None:
    runs = 0

    def machine() -> DependencyMachine:
        nonlocal runs
        runs += 1
        return DependencyMachine(engine)

    try:
        run_state_machine_as_test(machine, settings=sized(0.5))  # type: ignore[arg-type]
    finally:
        MACHINE_EXAMPLES[request.node.nodeid] = runs


def test_chains_groups_and_chords_of_tasks_run_in_their_order_through_a_worker(
    deps: Store, started: Callable[[Worker], Running]
) -> None:
    tasks = Tasks()
    ran: list[str] = []
    lock = threading.Lock()

    def note(step: str) -> None:
        with lock:
            ran.append(step)

    charge = tasks.task("charge", queue="orders")(note)
    send = tasks.task("send", queue="mail")(note)
    report = tasks.task("report", queue="reports")(note)
    pipeline = chain(
        charge.s(step="charge"), chord(group(send.s(step="email"), send.s(step="invoice")), report.s(step="report"))
    )
    ids = deps.enqueue_graph(pipeline)
    assert sorted(ids) == ["0.charge", "1.0.0.send", "1.0.1.send", "1.1.report"]
    assert must_get(deps, ids["1.1.report"]).parents == (ids["1.0.0.send"], ids["1.0.1.send"])
    assert must_get(deps, ids["1.0.1.send"]).parents == (ids["0.charge"],)
    running = started(worker_of(deps, tasks, concurrency=1, poll_interval=POLL))
    wait_until(lambda: len(ran) == 4, "the four runs")
    running.finish()
    assert ran[0] == "charge"
    assert sorted(ran[1:3]) == ["email", "invoice"]
    assert ran[3] == "report"
    with pytest.raises(InvalidOptions, match="graphs"):
        chain(charge.s(step="x"), "not a graph")  # type: ignore[arg-type]
