"""Least privilege: an application role without DDL rights runs a migrated schema, and keeps its grants (ADR 019).

The schema's owner migrates (``migrate=True`` or ``alkstore migrate``) and names the
application roles with ``grant``; every later migration renews what each of them needs. The
roles here are made for each test, log in (trust, or the server's password), may not create
anything in the database, and are dropped afterwards.
"""

from __future__ import annotations

import inspect
import logging
import secrets
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

import alkstore
from alkstore import (
    CancelOutcome,
    DatabaseError,
    EnqueueOpts,
    InvalidOptions,
    Job,
    Lock,
    ManualClock,
    Outbox,
    Queue,
    StopToken,
    Store,
)
from alkstore.adapters.cli import EXIT_OK, main
from alkstore.adapters.postgres import _migrate
from alkstore.adapters.postgres._sql import Statements
from alkstore.store._kernel import kernel_of
from alkstore.worker import _upkeep
from alkstore.worker._maintenance import Maintenance
from tests._claimer import Claimer
from tests.support import must_claim, wait_until

from .conftest import PATIENCE, T0, engine_of

pytestmark = pytest.mark.postgres

#: The facades whose every public method a least-privilege role must be able to call.
FACADES: tuple[type, ...] = (Store, Queue, Job, Lock, Outbox)


class Role:
    """A login role with no privileges of its own, and the URL that logs in as it."""

    def __init__(self, dsn: str, name: str, password: str) -> None:
        self.name = name
        self.password = password
        parts = urlsplit(dsn)
        host = parts.netloc.rpartition("@")[2]
        netloc = f"{quote(name, safe='')}:{quote(password, safe='')}@{host}"
        self.url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


@pytest.fixture
def new_role(pg_dsn: str) -> Iterator[Callable[[], Role]]:
    """Make login roles without privileges (``NOCREATEDB``, ``NOCREATEROLE``); dropped after the test."""
    made: list[Role] = []

    def make() -> Role:
        role = Role(pg_dsn, f"alk_app_{secrets.token_hex(6)}", secrets.token_hex(12))
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
                    sql.Identifier(role.name), sql.Literal(role.password)
                )
            )
        made.append(role)
        return role

    yield make
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for role in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role.name)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role.name)))


@pytest.fixture
def app(new_role: Callable[[], Role]) -> Role:
    return new_role()


def migrate_as_owner(pg_dsn: str, schema: str, **options: Any) -> None:
    alkstore.open(pg_dsn, schema=schema, migrate=True, min_size=0, max_size=1, **options).close()


def open_as(role: Role, schema: str, **options: Any) -> Store:
    options.setdefault("max_size", 2)
    options.setdefault("listen_max_size", 2)
    return alkstore.open(role.url, schema=schema, **options)


# -- no DDL for an up-to-date schema --------------------------------------------------------


def test_the_application_role_may_not_create_anything_in_the_database(app: Role, pg_schema: str) -> None:
    with psycopg.connect(app.url, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(pg_schema)))


def test_an_up_to_date_schema_opens_with_migrate_for_a_role_without_ddl_rights(
    pg_dsn: str, pg_schema: str, app: Role
) -> None:
    migrate_as_owner(pg_dsn, pg_schema, grant=app.name)

    with open_as(app, pg_schema, migrate=True) as store:
        store.migrate()
        job_id = store.queue("q").enqueue("hello")
        assert store.get_job(job_id) is not None


def test_a_role_without_ddl_rights_cannot_migrate_a_schema_that_needs_it(
    pg_dsn: str, pg_schema: str, app: Role
) -> None:
    with pytest.raises(DatabaseError, match="permission denied"):
        open_as(app, pg_schema, migrate=True)


def test_a_role_never_granted_anything_cannot_open_the_schema(
    pg_dsn: str, pg_schema: str, app: Role, new_role: Callable[[], Role]
) -> None:
    migrate_as_owner(pg_dsn, pg_schema, grant=app.name)
    stranger = new_role()
    with pytest.raises(DatabaseError, match="permission denied"):
        open_as(stranger, pg_schema)


# -- every public call ------------------------------------------------------------------------


def public_methods(cls: type) -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and callable(member) and not isinstance(member, type)
    }


@pytest.fixture
def called(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """``"Class.method"`` for every public facade method called during the test."""
    seen: set[str] = set()
    for cls in FACADES:
        for name in public_methods(cls):
            function = inspect.getattr_static(cls, name)
            assert inspect.isfunction(function), f"{cls.__name__}.{name}: teach this recorder its kind"
            monkeypatch.setattr(cls, name, _recording(function, f"{cls.__name__}.{name}", seen))
    return seen


def _recording(function: Callable[..., Any], key: str, seen: set[str]) -> Callable[..., Any]:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.add(key)
        return function(*args, **kwargs)

    return recorded


def every_public_call(store: Store, clock: ManualClock) -> None:
    """Each public method of each facade at least once, each as it is used."""
    queue = store.queue("emails")
    assert queue.defaults().max_attempts >= 1  # reads the queue's stored configuration
    assert queue.configure(visibility_timeout=120).visibility_timeout == timedelta(seconds=120)  # writes it

    # The queue controls: a pause, a limit, keys (the promotion trigger), a cancel request.
    controls = store.queue("controls")
    controls.pause()
    controls.resume()
    assert controls.configure(concurrency=2).concurrency == 2  # the limited claim locks the queue's row
    unique = controls.enqueue("unique", EnqueueOpts(unique_key="u"))
    assert not controls.enqueue("again", EnqueueOpts(unique_key="u")).created
    head, behind = (controls.enqueue(n, EnqueueOpts(ordering_key="k")) for n in range(2))
    claimed = controls.claim_many("w0", 10)
    assert sorted(job.id for job in claimed) == sorted([unique, head])
    assert store.cancel(unique) is CancelOutcome.CANCELLING
    store.ack_many(claimed)  # the head's delete promotes the next of its key
    promoted = must_claim(controls, "w0")
    assert promoted.id == behind
    promoted.ack()

    # Enqueue and claim, finish every way.
    first, second, third = (queue.enqueue({"n": n}) for n in range(3))
    job = must_claim(queue, "w1")
    assert job.id == first
    assert job.heartbeat() > clock.now()
    job.ack()
    job = must_claim(queue, "w1")
    job.retry("try again", delay=0)
    job = must_claim(queue, "w1")
    assert job.id == second
    job.fail("dead")
    assert store.requeue_dead(second)
    job = must_claim(queue, "w1")
    assert job.id == second
    job.release()  # handed back unfinished: pending again, its attempt not spent
    many = queue.claim_many("w1", 5)
    assert sorted(claimed.id for claimed in many) == [second, third]
    assert store.ack_many(many) == []
    assert store.get_job(first) is None

    # Kept results (ADR 042): an ack that keeps the outcome, a retry that logs the attempt, the reads
    # and the purge.
    kept = store.queue("kept")
    kept.configure(keep_results=60)
    done = kept.enqueue("done")
    must_claim(kept, "w1").retry("once more", delay=0)
    must_claim(kept, "w1").ack(result={"ok": True})
    result = store.result(done)
    assert result is not None
    assert (result.result, len(result.errors)) == ({"ok": True}, 1)
    assert [each.id for each in store.results("kept").results] == [done]
    clock.advance(60)
    assert store.purge_results("kept") == 1

    # Batches: several jobs in one call, on their own and in the caller's transaction.
    batch = queue.enqueue_many([{"n": 10}, {"n": 11}])
    with store.transaction() as tx:
        batch += store.enqueue_many_tx(tx, "emails", [{"n": 12}])
    claimed = queue.claim_many("w1", 5)
    assert [job.id for job in claimed] == batch
    assert store.ack_many(claimed) == []

    # The caller's transaction: the store's, and the caller's own connection (as this role).
    with store.transaction() as tx:
        in_tx = store.enqueue_tx(tx, "emails", "in tx")
        store.outbox_enqueue_tx(tx, "webhooks", {"event": "paid"})
    with psycopg.connect(engine_url(store)) as own:
        own_tx = store.enqueue_tx(own, "emails", "own tx")
    claimed = queue.claim_many("w1", 5)
    assert sorted(job.id for job in claimed) == sorted([in_tx, own_tx])
    store.ack_many(claimed)

    # Steps, a transactional step, a sleep, an event's wait and its emits (ADR 069), a step skipped (ADR 077).
    flows = store.queue("flows")
    flow_id = flows.enqueue("order")
    assert store.skip_step(flow_id, "verify", "ok") is alkstore.JobState.PENDING
    job = must_claim(flows, "w1")
    assert job.step("charge", lambda: "ch_1") == "ch_1"
    with job.step_tx("invoice") as step:
        step.result = store.enqueue_tx(step.tx, "invoices", "invoice")
    with pytest.raises(alkstore.JobSuspended):
        job.sleep(1)
    clock.advance(1)
    job = must_claim(flows, "w1")
    job.sleep_until(clock.now())
    with pytest.raises(alkstore.JobSuspended):
        job.wait_for("paid", timeout=60)
    assert store.emit("paid", {"amount": 1})
    with store.transaction() as tx:
        assert not store.emit_tx(tx, "paid", "second")
    job = must_claim(flows, "w1")
    assert job.wait_for("paid", timeout=60) == {"amount": 1}
    job.ack()
    assert store.get_job(flow_id) is None
    assert store.ack_many(store.queue("invoices").claim_many("w1", 5)) == []

    # The outbox.
    outbox = store.outbox("webhooks")
    assert outbox.configure(backoff_base=1).backoff_base == timedelta(seconds=1)
    outbox.enqueue({"event": "shipped"})
    delivered: list[Any] = []
    while outbox.run_once("courier", lambda payload, job: delivered.append(payload)):
        pass
    assert delivered == [{"event": "paid"}, {"event": "shipped"}]
    outbox.enqueue({"event": "refunded"})
    courier_stop = StopToken()

    def deliver(payload: Any, job: Any) -> None:
        delivered.append(payload)
        courier_stop.cancel()

    assert outbox.run("courier", deliver, courier_stop, poll_interval=0.05) == 1
    assert delivered[-1] == {"event": "refunded"}

    # A waiting claim, woken through LISTEN on this role's listening connection.
    claimer = Claimer(store, "emails")
    woken_id = queue.enqueue("wake up")
    assert claimer.acked().id == woken_id
    assert engine_of(store).listening_works is True

    # Locks.
    lock = store.try_lock("nightly", owner="host-a", ttl=30)
    assert lock is not None
    assert store.try_lock("nightly", owner="host-b", ttl=30) is None
    lock.renew(60)
    assert lock.release()

    # Schedules, the tick, and the leader loop.
    store.schedule("beat", "@every 1s", "beats")
    store.schedule_many([alkstore.ScheduleEntry("spare", "@every 1h", "beats")])
    assert store.unschedule("spare")
    assert [schedule.name for schedule in store.schedules()] == ["beat"]
    clock.advance(1)
    assert [fire.schedule for fire in store.tick()] == ["beat"]
    clock.advance(1)
    stop = StopToken()
    fires: list[Any] = []

    def on_fire(fire: Any) -> None:
        fires.append(fire)
        stop.cancel()

    runner = threading.Thread(target=store.run_schedules, args=(stop, on_fire), daemon=True)
    runner.start()
    runner.join(PATIENCE)
    assert not runner.is_alive(), "the leader loop did not stop"
    assert [fire.schedule for fire in fires] == ["beat"]
    assert store.fire_now("beat") is not None
    assert len(store.queue("beats").claim_many("w1", 10)) == 3

    # Inspection and the operator's actions (reads only, then fenced changes).
    (emails,) = store.queue_stats("emails")
    assert emails.queue == "emails"
    assert [stats.queue for stats in store.queue_stats()] == ["beats"]  # the queues holding a job now
    assert store.jobs("emails", "ready").jobs == ()
    doomed = queue.enqueue("never mind")
    assert [info.id for info in store.jobs("emails", "ready").jobs] == [doomed]
    assert store.cancel(doomed) == "cancelled"
    dying = queue.enqueue("dies")
    job = must_claim(queue, "w1")
    assert job.id == dying
    job.fail("dead")
    assert store.requeue_dead_many([dying]) == [dying]
    job = must_claim(queue, "w1")
    job.fail("dead again")
    assert store.requeue_dead_queue("emails") == 1
    job = must_claim(queue, "w1")
    job.fail("dead for good")
    assert store.purge_dead_many([dying]) == [dying]
    dying = queue.enqueue("dies at last")
    job = must_claim(queue, "w1")
    job.fail("dead at last")
    assert store.purge_dead("emails") == 1
    assert store.leader() is None  # the leader loop above gave its lease up
    assert store.locks() == []  # released, so not listed; read as this role
    logged = store.log_action("pause", "emails", "paused", role="full", address="127.0.0.1")
    assert [entry.id for entry in store.actions()] == [logged]  # the action log, written and read as this role
    clock.advance(1)
    assert store.purge_actions(0) == 1  # and pruned as this role (alkstore prune)
    assert store.actions() == []
    assert store.workers() == []

    # The worker runtime: it claims, acks, heartbeats and reports itself as this role.
    tasks = alkstore.Tasks()
    ran: list[int] = []
    worker_stop = StopToken()

    @tasks.task("note", queue="emails")
    def note(n: int) -> None:
        ran.append(n)
        assert [seen.id for seen in store.workers()] == ["role-worker"]
        worker_stop.cancel()

    note.enqueue(store, n=1)
    worker = alkstore.Worker(store, tasks, worker_id="role-worker", poll_interval=0.05, dead_retention=60)
    stats = worker.run(worker_stop)  # its maintenance (prune, the vacuum check) runs as this role too
    assert (ran, stats.succeeded) == ([1], 1)
    assert store.workers() == []
    minute = clock.now().replace(second=0, microsecond=0)
    assert store.throughput() == [alkstore.ThroughputInfo("emails", minute, 1, 0)], "counted as this role too"
    figures = [(f.queue, f.task, f.minute, f.done, f.failed) for f in store.task_figures()]
    assert figures == [("emails", "note", minute, 1, 0)], "the task's figures likewise (ADR 075)"

    # Dependencies (ADR 073): a graph, in the role's own transaction too, and a child reading its parent's result.
    graph = store.graph()
    graph.add("first", "emails", "first")
    graph.add("then", "emails", "then", after=["first"])
    ids = store.enqueue_graph(graph)
    with store.transaction() as tx:
        assert store.enqueue_graph_tx(tx, store.graph()) == {}
    must_claim(queue, "w1").ack("sent")
    then = must_claim(queue, "w1")
    assert then.parent_results() == {ids["first"]: "sent"}
    then.ack()

    store.migrate()


def engine_url(store: Store) -> str:
    return engine_of(store)._options.url


def test_a_least_privilege_role_runs_every_public_call(
    pg_dsn: str, pg_schema: str, app: Role, called: set[str]
) -> None:
    migrate_as_owner(pg_dsn, pg_schema, grant=[app.name])
    clock = ManualClock(T0)
    with open_as(app, pg_schema, migrate=True, clock=clock) as store:
        every_public_call(store, clock)

    wanted = {f"{cls.__name__}.{name}" for cls in FACADES for name in public_methods(cls)}
    assert wanted - called == set()


def test_a_role_that_may_not_vacuum_is_told_once_and_the_duty_stops_trying(
    pg_dsn: str, pg_schema: str, app: Role, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    migrate_as_owner(pg_dsn, pg_schema, grant=[app.name])
    monkeypatch.setattr(_upkeep, "VACUUM_DEAD_ROWS", 100)
    monkeypatch.setattr(_upkeep, "BEHIND_DEAD_ROWS", 100)
    with open_as(app, pg_schema) as store:
        ids = store.queue("jobs").enqueue_many(["doomed"] * 200)
        assert store.engine.cancel(ids) == ids

        def jobs() -> Any:
            return next(stats for stats in store.engine.table_stats() if stats.table == "jobs")

        wait_until(lambda: jobs().dead_rows >= 200, "the server to count the dead rows")
        assert not jobs().vacuumable  # PostgreSQL 15: only the owner (of the table or database) or a superuser
        assert store.engine.vacuum(["jobs"]) == []  # the server skips it with a warning
        duty = Maintenance(kernel_of(store), ["jobs"], dead_retention=None, label="w1")
        with caplog.at_level(logging.WARNING, logger="alkstore.worker"):
            assert duty.vacuum() == []
            assert duty.vacuum() == []
    warnings = [record.getMessage() for record in caplog.records if record.name == "alkstore.worker"]
    assert len(warnings) == 1, warnings
    assert "table jobs holds " in warnings[0]
    assert "may not VACUUM it" in warnings[0]
    assert "alkstore stops trying" in warnings[0]


# -- grants that survive an upgrade -----------------------------------------------------------


def test_a_migration_renews_every_application_roles_grants_on_what_it_creates(
    pg_dsn: str, pg_schema: str, app: Role, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The schema at version 1, with the role granted what it needed then.
    every_migration = _migrate.migrations()
    monkeypatch.setattr(_migrate, "migrations", lambda: every_migration[:1])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _migrate.apply(conn, Statements.for_schema(pg_schema), pg_schema, [app.name])
    monkeypatch.undo()

    migrate_as_owner(pg_dsn, pg_schema)  # the upgrade, naming no role

    clock = ManualClock(T0)
    with open_as(app, pg_schema, clock=clock) as store:  # later versions' tables and functions are its too
        every_public_call(store, clock)


def test_a_migration_renews_the_grants_of_the_roles_that_may_write_jobs_and_of_no_other(
    pg_dsn: str, pg_schema: str, new_role: Callable[[], Role], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The roles an upgrade grants again are those that may insert jobs: not one that may only read them,
    nor one that may write another table (here the version table)."""
    app, reader = new_role(), new_role()
    every_migration = _migrate.migrations()
    monkeypatch.setattr(_migrate, "migrations", lambda: every_migration[:1])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _migrate.apply(conn, Statements.for_schema(pg_schema), pg_schema, [app.name])
        schema, role = sql.Identifier(pg_schema), sql.Identifier(reader.name)
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role))
        conn.execute(sql.SQL("GRANT SELECT ON {}.jobs TO {}").format(schema, role))
        conn.execute(sql.SQL("GRANT INSERT ON {}.schema_version TO {}").format(schema, role))
    monkeypatch.undo()

    migrate_as_owner(pg_dsn, pg_schema)  # the upgrade, naming no role

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(Statements.for_schema(pg_schema).data_tables, {"schema": pg_schema})]
        assert "workers" in tables, "a table of a later version, made by the upgrade"

        def may_insert(who: Role) -> list[bool]:
            query = (
                "SELECT pg_catalog.has_table_privilege(%s, pg_catalog.format('%%I.%%I', %s::text, %s::text), 'INSERT')"
            )
            return [conn.execute(query, (who.name, pg_schema, table)).fetchone() == (True,) for table in tables]

        assert may_insert(app) == [True] * len(tables)
        assert may_insert(reader) == [False] * len(tables)


def test_alkstore_migrate_grant_makes_a_role_an_application_role(
    pg_dsn: str, pg_schema: str, app: Role, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", "--url", pg_dsn, "--schema", pg_schema]) == EXIT_OK
    with pytest.raises(DatabaseError, match="permission denied"):
        open_as(app, pg_schema)
    capsys.readouterr()

    assert main(["migrate", "--url", pg_dsn, "--schema", pg_schema, "--grant", app.name]) == EXIT_OK

    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(f"alkstore: granted {app.name!r} what an application role needs on schema {pg_schema!r}")
    with open_as(app, pg_schema) as store:
        job_id = store.queue("q").enqueue(1)
        assert store.get_job(job_id) is not None


def test_the_version_table_is_read_only_for_an_application_role(pg_dsn: str, pg_schema: str, app: Role) -> None:
    migrate_as_owner(pg_dsn, pg_schema, grant=app.name)
    version_table = sql.SQL("{}.schema_version").format(sql.Identifier(pg_schema))
    with psycopg.connect(app.url, autocommit=True) as conn:
        assert conn.execute(sql.SQL("SELECT max(version) FROM {}").format(version_table)).fetchone() == (
            _migrate.current_version(),
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql.SQL("DELETE FROM {}").format(version_table))


@pytest.mark.parametrize(
    ("grant", "message"),
    [
        (7, "grant must be a role name or a list of them"),
        (["app", 7], "grant must name roles as str"),
        ("", "a role name in grant must be 1 to 63 bytes"),
        ("r" * 64, "a role name in grant must be 1 to 63 bytes"),
        ("nul\x00", "contains a NUL"),
    ],
)
def test_a_bad_grant_is_refused_before_connecting(grant: object, message: str) -> None:
    with pytest.raises(InvalidOptions, match=message):
        alkstore.open("postgresql://nobody@127.0.0.1:1/nothing", grant=grant)
