"""Job dependencies on PostgreSQL: who is woken for the dependents a parent's ack made ready, what a
burial keeps, the result a late link gets, and a dependent's enqueue in the caller's transaction.

The promotion runs in the ack's transaction (ADR 073); its ``NOTIFY`` is sent at commit, only for a
child still pending then (migration 18): the claim a worker's ack carries may have taken it. These
tests listen on the queues' channels, or park a claim that only a notice can wake.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from alkstore import EnqueueOpts, ManualClock, ParentFailure, Store, UnknownParent
from alkstore.engine import ClaimRequest, Done, Handed, Held
from tests._claimer import Claimer
from tests.support import must_get

from .conftest import PATIENCE, OpenStore, engine_of, table, wait_until

pytestmark = pytest.mark.postgres

HOUR = 3600.0
MARKER = "marker"


def unique(prefix: str) -> str:
    """A queue name no other test of the module uses (the module shares one schema)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock() -> ManualClock:
    """A frozen clock a day behind the server's: a promoted child is pending at once (its run_at has
    come by the database's clock), and a parked claim ends only when something wakes it."""
    return ManualClock(datetime.now(UTC) - timedelta(days=1))


@pytest.fixture
def store(open_store: OpenStore, clock: ManualClock) -> Store:
    return open_store(clock=clock, claim_backstop=HOUR)


def channel(db: psycopg.Connection[Any], schema: str, queue: str) -> str:
    row = db.execute(sql.SQL("SELECT {}.channel(%s, %s)").format(sql.Identifier(schema)), [schema, queue]).fetchone()
    assert row is not None
    return str(row[0])


def heard_before_the_marker(db: psycopg.Connection[Any], listener: psycopg.Connection[Any], name: str) -> int:
    """How many notices ``name``'s channel got before a marker sent now: notices of committed transactions
    arrive in commit order, so the marker closes the count without waiting for an absence."""
    db.execute("SELECT pg_notify(%s, %s)", [name, MARKER])
    heard = 0
    for note in listener.notifies(timeout=PATIENCE):
        if note.channel == name and note.payload == MARKER:
            return heard
        heard += note.channel == name
    raise AssertionError("the marker never arrived")


def ack_carrying_a_claim(store: Store, clock: ManualClock, parent: Held, queue: str, limit: int = 1) -> list[int]:
    """A worker's ack of ``parent`` carrying its next claim on ``queue`` (the pipelined ack, then claim)."""
    request = ClaimRequest(queue=queue, worker_id="w", now=clock.now(), lease=timedelta(seconds=300), limit=limit)
    stale, claimed = engine_of(store).ack_and_claim([parent], request)
    assert stale == []
    return [int(job.id) for job in claimed]


def test_a_child_the_acking_workers_claim_takes_is_announced_to_nobody(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str
) -> None:
    name = unique("chain")
    queue = store.queue(name)
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", EnqueueOpts(after=[parent]))
    held = queue.claim_many("w", 1)[0]
    heard = channel(db, pg_module_schema, name)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(heard)))
        assert ack_carrying_a_claim(store, clock, Held(held.id, held.fence), name) == [child]
        assert heard_before_the_marker(db, listener, heard) == 0


def test_a_child_in_another_queue_wakes_a_worker_parked_there(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str
) -> None:
    here, there = unique("parent"), unique("child")
    parent = store.queue(here).enqueue("parent")
    child = store.queue(there).enqueue("child", EnqueueOpts(after=[parent]))
    held = store.queue(here).claim_many("w", 1)[0]
    parked = Claimer(store, there)
    assert ack_carrying_a_claim(store, clock, Held(held.id, held.fence), here) == []
    assert parked.acked().id == child


def test_a_child_the_acking_workers_full_claim_leaves_wakes_a_worker_parked_on_its_queue(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str
) -> None:
    name = unique("fan")
    queue = store.queue(name)
    parent = queue.enqueue("parent")
    children = [queue.enqueue(n, EnqueueOpts(after=[parent])) for n in range(2)]
    held = queue.claim_many("w", 1)[0]
    parked = Claimer(store, name)
    taken = ack_carrying_a_claim(store, clock, Held(held.id, held.fence), name, limit=1)
    assert len(taken) == 1
    assert sorted([*taken, int(parked.acked().id)]) == children


def test_a_parent_acked_through_the_store_wakes_a_worker_parked_on_its_childs_queue(store: Store) -> None:
    name = unique("store-ack")
    queue = store.queue(name)
    parent = queue.enqueue("parent")
    child = queue.enqueue("child", EnqueueOpts(after=[parent]))
    held = queue.claim_many("w", 1)[0]
    parked = Claimer(store, name)
    held.ack()
    assert parked.acked().id == child


def test_a_workers_pipelined_ack_leaves_nothing_that_silences_the_next_ack_on_its_connection(
    open_store: OpenStore, clock: ManualClock, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str
) -> None:
    # The pipelined ack tells the trigger that a claim follows for its transaction only: a plain ack on
    # the same pooled connection afterwards notifies at once again.
    store = open_store(clock=clock, claim_backstop=HOUR, min_size=1, max_size=1)
    parents, children = unique("parents"), unique("children")
    first, second = (store.queue(parents).enqueue(n) for n in range(2))
    taken = store.queue(children).enqueue("taken", EnqueueOpts(after=[first]))
    store.queue(children).enqueue("left", EnqueueOpts(after=[second]))
    one, two = store.queue(parents).claim_many("w", 2)
    assert int(one.id) == first
    heard = channel(db, pg_module_schema, children)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(heard)))
        assert ack_carrying_a_claim(store, clock, Held(one.id, one.fence), children) == [taken]
        assert heard_before_the_marker(db, listener, heard) == 0
        two.ack()
        assert heard_before_the_marker(db, listener, heard) == 1


def test_a_fan_in_child_is_announced_once_its_last_parent_is_acked(
    store: Store, clock: ManualClock, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str
) -> None:
    name, other = unique("fan-in"), unique("parents")
    parents = [store.queue(other).enqueue(n) for n in range(2)]
    store.queue(name).enqueue("child", EnqueueOpts(after=parents))
    first, last = store.queue(other).claim_many("w", 2)
    heard = channel(db, pg_module_schema, name)
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(heard)))
        first.ack()
        assert heard_before_the_marker(db, listener, heard) == 0
        last.ack()
        assert heard_before_the_marker(db, listener, heard) == 1


def test_a_burial_writes_the_rate_key_and_the_policy_into_the_dead_row(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    name = unique("buried")
    queue = store.queue(name)
    parent = queue.enqueue("parent", EnqueueOpts(rate_key="customer:a", max_attempts=1))
    dying = queue.enqueue("dying", EnqueueOpts(after=[parent], on_parent_failure=ParentFailure.DIE, rate_key="k"))
    queue.claim_many("w", 1)[0].fail("no")
    dead = db.execute(
        sql.SQL("SELECT id, rate_key, on_parent_failure FROM {} WHERE id = ANY(%s) ORDER BY id").format(
            table(pg_module_schema, "dead_jobs")
        ),
        [[parent, dying]],
    ).fetchall()
    assert dead == [(parent, "customer:a", None), (dying, "k", "die")]


def test_no_row_trigger_on_jobs_writes_dead_jobs_after_an_ack(
    db: psycopg.Connection[Any], store: Store, pg_module_schema: str
) -> None:
    # An ack of a job with a rate_key or parents runs jobs_settle's WHEN and nothing that updates dead_jobs.
    triggers = db.execute(
        "SELECT t.tgname, p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
        " WHERE t.tgrelid = %s::regclass AND NOT t.tgisinternal ORDER BY 1",
        [f'"{pg_module_schema}".jobs'],
    ).fetchall()
    assert ("jobs_keep_on_death", "keep_on_death_17") not in triggers
    assert ("jobs_settle", "settle_21") in triggers


def test_no_deferred_trigger_wakes_a_dependents_queue_at_commit(
    db: psycopg.Connection[Any], store: Store, pg_module_schema: str
) -> None:
    # Migration 20: the ack's transaction notifies (settle_20, or the claim it carries); no event per link.
    found = db.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
        [f'"{pg_module_schema}".job_dependencies'],
    ).fetchone()
    assert found == (0,)


@pytest.mark.parametrize("kept", [False, True], ids=["handed to a sibling", "kept, no sibling"])
def test_a_dependent_whose_link_commits_while_its_parents_ack_waits_still_gets_the_parents_result(
    store: Store, db: psycopg.Connection[Any], pg_dsn: str, pg_module_schema: str, kept: bool
) -> None:
    # The ack's statement hands the result over with its own snapshot, taken before the late link
    # committed; the promotion's statement (a snapshot of its own) hands it over too (ADR 073).
    name = unique("late-link")
    queue = store.queue(name)
    parent = queue.enqueue("parent")
    early = [] if kept else [queue.enqueue("early", EnqueueOpts(after=[parent]))]
    held = queue.claim_many("w", 1)[0]
    now = datetime.now(UTC)
    ack = Done(held.id, held.fence, b'"paid"', None, now, now + timedelta(hours=1)) if kept else None
    with psycopg.connect(pg_dsn) as enqueuing:
        enqueuing.execute("SELECT 1")  # the caller's transaction, begun with other work
        late = store.enqueue_tx(enqueuing, name, "late", EnqueueOpts(after=[parent]))  # holds the parent's row
        acks: list[Any] = []
        acking = threading.Thread(
            target=lambda: acks.append(engine_of(store).ack([ack or Handed(held.id, held.fence, b'"paid"')]))
        )
        acking.start()
        wait_until(
            lambda: bool(
                db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
                    ["WITH acked%"],
                ).fetchone()[0]  # type: ignore[index]
            ),
            "the ack to wait for the enqueue's row lock",
        )
        enqueuing.commit()
        acking.join(PATIENCE)
    assert acks == [[]]
    links = db.execute(
        sql.SQL("SELECT child, state, result FROM {} WHERE parent = %s ORDER BY child").format(
            table(pg_module_schema, "job_dependencies")
        ),
        [parent],
    ).fetchall()
    assert [(child, state, None if result is None else bytes(result)) for child, state, result in links] == [
        (child, "succeeded", b'"paid"') for child in [*early, late]
    ]


def test_a_dependent_enqueued_first_in_the_callers_transaction_goes_with_its_rollback(
    store: Store, pg_dsn: str
) -> None:
    name = unique("caller-tx")
    parent = store.queue(name).enqueue("parent")
    with psycopg.connect(pg_dsn) as conn:
        rolled_back = store.enqueue_tx(conn, name, "rolled back", EnqueueOpts(after=[parent]))
        conn.rollback()
        with pytest.raises(UnknownParent):  # first in its transaction: what it began is rolled back
            store.enqueue_tx(conn, name, "refused", EnqueueOpts(after=[parent, rolled_back]))
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        kept = store.enqueue_tx(conn, name, "kept", EnqueueOpts(after=[parent]))
        with pytest.raises(UnknownParent):  # in a transaction: its savepoint only
            store.enqueue_tx(conn, name, "refused", EnqueueOpts(after=[rolled_back]))
        conn.commit()
    assert store.get_job(rolled_back) is None
    assert must_get(store, kept).parents == (parent,)


@pytest.mark.parametrize("parents", [1, 3])
@pytest.mark.parametrize("due", [True, False], ids=["run_at come", "run_at to come"])
def test_a_parents_success_and_a_run_dependents_parent_death_promote_it_alike(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str, parents: int, due: bool
) -> None:
    # A dependent is promoted by the settle trigger's statement (settle_21's since migration 21) for a
    # parent that succeeded, by promote_19 for a 'run' dependent's parent that died; both take the rule
    # from promoted_19 (ADR 073, amendment of 2026-12-07, the promotion rule). Three dependents of one
    # shape, whose parents all succeed, all die, or take turns, must stand alike after each parent's
    # end: waiting with one parent fewer to go, then pending (its run_at has come by the server's
    # clock) or delayed (not yet).
    name = unique("rule")
    queue = store.queue(name)
    delay = None if due else timedelta(days=2)  # the store's clock is a day behind the server's
    groups = {
        "succeed": ["ack"] * parents,
        "die": ["fail"] * parents,
        "take turns": [("ack", "fail")[n % 2] for n in range(parents)],
    }
    ends = {
        kind: [queue.enqueue(f"{kind} {n}", EnqueueOpts(max_attempts=1)) for n in range(parents)] for kind in groups
    }
    children = {
        kind: queue.enqueue(kind, EnqueueOpts(after=ids, on_parent_failure=ParentFailure.RUN, delay=delay))
        for kind, ids in ends.items()
    }
    held = {job.id: job for job in queue.claim_many("w", 3 * parents)}
    assert set(held) == {parent for ids in ends.values() for parent in ids}

    def standing() -> dict[str, tuple[str, int]]:
        rows = db.execute(
            sql.SQL("SELECT id, state, parents_left FROM {} WHERE id = ANY(%s)").format(
                table(pg_module_schema, "jobs")
            ),
            [list(children.values())],
        ).fetchall()
        by_id = {row[0]: (row[1], row[2]) for row in rows}
        return {kind: by_id[child] for kind, child in children.items()}

    for step in range(parents):
        for kind, how in groups.items():
            job = held[ends[kind][step]]
            if how[step] == "ack":
                job.ack()
            else:
                job.fail("no")
        left = parents - step - 1
        expected = ("waiting", left) if left else ("pending" if due else "delayed", 0)
        assert standing() == dict.fromkeys(groups, expected), f"after {step + 1} of {parents} parents ended"


def test_the_promotion_rule_is_inlined_into_the_updates_that_use_it(
    store: Store, db: psycopg.Connection[Any], pg_module_schema: str
) -> None:
    # promoted_19 is the promotion rule's one statement (migration 19); called once per promoted row it
    # would cost what migration 18 saved by taking promote_15's update into settle_18's statement. The
    # planner inlines a plain SQL function of one expression: a SET clause (search_path), STRICT or a
    # second statement would stop it, and the plan would name the function.
    store.queue(unique("inlined")).enqueue("migrated")
    query = sql.SQL("EXPLAIN (VERBOSE, COSTS OFF) SELECT {}.promoted_19(j.parents_left, 1, j.run_at) FROM {} AS j")
    plan = "\n".join(
        row[0] for row in db.execute(query.format(sql.Identifier(pg_module_schema), table(pg_module_schema, "jobs")))
    )
    assert "promoted_19" not in plan, plan
    assert "CASE WHEN (parents_left > 1) THEN 'waiting'::text" in plan, plan


@pytest.mark.parametrize("handed", [False, True], ids=["plain ack", "result handed over"])
def test_a_chain_steps_pipelined_ack_is_planned_once_not_at_every_step(
    open_store: OpenStore, clock: ManualClock, db: psycopg.Connection[Any], pg_module_schema: str, handed: bool
) -> None:
    # On an analysed table of some thousands of jobs, a custom plan that knew the ack's lists held one id
    # looked cheaper than the generic plan, so the server planned the ack anew at every step: its lists
    # are subqueries now, and after the server's five custom plans it keeps the generic one.
    store = open_store(clock=clock, claim_backstop=HOUR, min_size=1, max_size=1)
    store.queue(unique("ballast")).enqueue_many(range(3000))
    db.execute(sql.SQL("ANALYZE {}").format(table(pg_module_schema, "jobs")))
    name = unique("planned")
    graph = store.graph()
    for n in range(14):
        graph.add(f"j{n}", name, n, after=[f"j{n - 1}"] if n else ())
    store.enqueue_graph(graph)
    request = ClaimRequest(queue=name, worker_id="w", now=clock.now(), lease=timedelta(seconds=300), limit=1)
    (held,) = engine_of(store).claim(request)
    for _ in range(13):
        ack = Handed(held.id, held.fence, b"\x80N.") if handed else Held(held.id, held.fence)
        stale, (held,) = engine_of(store).ack_and_claim([ack], request)
        assert stale == []
    with engine_of(store).pool.connection() as conn:
        plans = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%alkstore.claim_follows%"],
        ).fetchall()
    assert len(plans) == 1
    assert plans[0][0] > 0
    assert plans[0][1] <= 5


def test_the_settle_triggers_statement_promotes_the_children_it_settled_without_grouping_them(
    store: Store, pg_dsn: str, pg_module_schema: str
) -> None:
    # A link's key is (child, parent): one parent's links name each child once, so the settle statement
    # reads the children straight from the links it settled (migration 21), without the hash aggregate
    # that counted them (always 1) at every ack of a job with dependents. Its plan, from auto_explain.
    queue = store.queue(unique("settled"))
    parent = queue.enqueue("parent")
    children = [queue.enqueue(f"child {n}", EnqueueOpts(after=[parent])) for n in range(2)]
    held = queue.claim("w")
    assert held is not None
    assert held.id == parent
    plans: list[str] = []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_level = 'notice'")
        conn.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(table(pg_module_schema, "jobs")), [held.id])
    (settle,) = [plan for plan in plans if "settled AS (" in plan]
    assert "Update on jobs j" in settle, settle
    assert "Aggregate" in settle, settle  # the one that gathers the pending children's ids and queues
    assert "Group Key" not in settle, settle
    assert sorted(job.id for job in queue.claim_many("w", 2)) == sorted(children)
