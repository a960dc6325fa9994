"""The engine's statements (ADR 030): each one used, each one parsed by the server, and the claim's
and the listings' orders the ones core declares (``alkstore.engine.ORDERS``)."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import random
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import pq, sql

import alkstore
from alkstore import EnqueueOpts, ManualClock, Store
from alkstore.adapters.postgres import _engine, _positional, _rows, _sql
from alkstore.adapters.postgres._sql import Statements
from alkstore.engine import (
    CLAIM_ORDER,
    ORDERS,
    Alike,
    ClaimRequest,
    Done,
    Existing,
    Held,
    JobPhase,
    JobQuery,
    JobRecord,
    NewJob,
    after_key,
    claim_order,
    key_of,
    listing_order,
)

from .conftest import engine_of

pytestmark = pytest.mark.postgres

ADAPTER = Path(_sql.__file__).parent
FIELDS = [field.name for field in dataclasses.fields(Statements)]
#: Statements the engine never runs alone: each is included in one it runs, and kept for inspection.
INCLUDED_ONLY = {"lease_probe": "claim"}  # bench/churn.py explains the claim's lease probe alone
#: The listing statement of each phase.
LISTINGS = {
    JobPhase.READY: "list_ready",
    JobPhase.DELAYED: "list_delayed",
    JobPhase.WAITING: "list_waiting",
    JobPhase.RUNNING: "list_running",
    JobPhase.DEAD: "list_dead",
}
#: The column of each order field, as this test knows the tables.
COLUMNS = {"priority": "priority", "run_at": "run_at", "died_at": "died_at", "id": "id"}


@pytest.fixture(autouse=True)
def expanded_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here reads the statements as ``_sql`` expands the files when the test runs, not the
    copy made at import: so what these tests check is the expansion itself (the orders, the keysets)."""
    templates, per_call = _sql._templates()
    monkeypatch.setattr(_sql, "_TEMPLATES", templates)
    monkeypatch.setattr(_sql, "_PER_CALL_TEMPLATES", per_call)


def engine_sources() -> Iterator[Path]:
    """The adapter's modules but ``_sql``: the async sources, never the sync twins generated from them."""
    for path in sorted(ADAPTER.glob("*.py")):
        generated = path.with_name(path.stem + "_async.py").exists()
        if path.name != "_sql.py" and not generated:
            yield path


def named_by_the_engine() -> set[str]:
    """The attributes the engine's code reads from its statements (``self._sql.x``, ``statements.x``)."""
    named = set()
    for path in engine_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                holder = node.value
                name = holder.attr if isinstance(holder, ast.Attribute) else getattr(holder, "id", None)
                if name in {"_sql", "statements"}:
                    named.add(node.attr)
    return named


def test_every_statement_is_run_by_the_engine() -> None:
    named = named_by_the_engine()
    assert "claim" in named, "the scan found none of the engine's statements"
    unused = [name for name in FIELDS if name not in named and name not in INCLUDED_ONLY]
    assert not unused, f"statements the engine never runs: {unused}"
    assert not named & set(INCLUDED_ONLY), "the engine runs it now: take it out of INCLUDED_ONLY"
    for name, includer in INCLUDED_ONLY.items():
        assert includer in named
        assert flat(_sql._TEMPLATES[name]) in flat(_sql._TEMPLATES[includer]), f"{includer} no longer includes {name}"


def expanded(text: str) -> dict[str, str]:
    """The statements of a statements file holding ``text``, expanded as ``_sql`` expands its own."""
    sections = dict(_sql._sections("t.sql", text))
    return {key: _sql._expand(part.text, sections, {}, (key,)) for key, part in sections.items() if part.statement}


def test_a_fragment_continues_at_its_holes_indent_and_an_argument_fills_its_parameter() -> None:
    text = "-- fragment: pick(column)\n-- a comment\nSELECT {column}\nFROM {s}.t\n\n"
    text += "-- name: a\nWITH x AS (\n    {pick: c.id})\nSELECT 1"
    assert expanded(text) == {"a": "WITH x AS (\n    SELECT c.id\n    FROM {s}.t)\nSELECT 1"}


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("-- name:a\nSELECT 1", "t.sql:1: not a header: '-- name:a' (write '-- name: key' or '-- fragment: key')"),
        (
            "-- name: a\nSELECT 1\n  -- name: b",
            "t.sql:3: not a header: '-- name: b' (write '-- name: key' or '-- fragment: key')",
        ),
        ("\nSELECT 1", "t.sql:2: SQL before the first '-- name:' or '-- fragment:'"),
        ("-- name: a\nSELECT 1 -- one", "t.sql:2: a comment beside SQL would reach the server; give it a line"),
        ("-- name: a\n-- nothing but a comment", "t.sql:1: a has no SQL"),
        ("-- name: a\nSELECT 1\n\n-- name: b\n\n-- c\n", "t.sql:4: b has no SQL"),
        ("-- name: z\nSELECT 1\n-- name: a(x)\nSELECT {x}", "t.sql:3: only a fragment takes a parameter, never 'x'"),
        ("-- fragment: b(s)\nSELECT 1", "t.sql:1: only a fragment takes a parameter, never 's'"),
        ("-- name: a\nSELECT {b}", "a: {b} names no statement or fragment"),
        ("-- fragment: b\n{c}\n-- name: a\nSELECT {b}", "b in a: {c} names no statement or fragment"),
        ("-- name: a\nSELECT {a}", "a: a includes itself"),
        ("-- fragment: b(x)\n{x}\n-- name: a\nSELECT {b}", "a: {b} does not match the header of b (t.sql:1)"),
        ("\n-- fragment: b\nx\n-- name: a\nSELECT {b: y}", "a: {b: y} does not match the header of b (t.sql:2)"),
    ],
)
def test_a_statements_file_that_would_go_wrong_quietly_is_refused_with_its_place(text: str, refusal: str) -> None:
    """The whole message, place first: a refusal names the file and line, or the sections it is in."""
    with pytest.raises(RuntimeError) as refused:
        expanded(text)
    assert str(refused.value) == refusal


def test_an_indented_comment_stays_out_of_the_sql() -> None:
    assert expanded("-- name: a\nSELECT 1\n  -- why\nFROM t") == {"a": "SELECT 1\nFROM t"}


#: A statement's header in the packaged files, and the line it is on.
def header_line(file: str, key: str) -> int:
    lines = (ADAPTER / "statements" / file).read_text(encoding="utf-8").splitlines()
    return lines.index(f"-- name: {key}") + 1


@pytest.mark.parametrize(
    ("file", "change", "refusal"),
    [
        ("zz.sql", "-- name: claim\nSELECT 1", "zz.sql:1: claim is already named at claim.sql:{claim}"),
        ("zz.sql", "-- fragment: job_columns\nid", "zz.sql:1: job_columns is made in _sql.py"),
        (
            "zz.sql",
            "-- name: spare\nSELECT {job_columns: id}",
            "spare: {job_columns: id} does not match the header of job_columns (_sql.py)",
        ),
        (
            "zz.sql",
            "-- fragment: spare\nSELECT 1\n-- fragment: unread\nSELECT 2",
            "fragments no statement uses: spare, unread",
        ),
        (
            "zz.sql",
            "-- name: spare\nSELECT 1",
            "statements unknown to Statements: ['spare']; missing from the files: []",
        ),
        (
            "schema.sql",
            "-- name: server_time=-- name: server_clock",
            "statements unknown to Statements: ['server_clock']; missing from the files: ['server_time']",
        ),
        (
            "schema.sql",
            "-- name: server_time\n=-- name: server_time\nSELECT {role}\n",
            "server_time leaves ['role'] unfilled",
        ),
    ],
    ids=["named-twice", "made-here", "made-fragment-argument", "unused-fragment", "unknown", "missing", "unfilled"],
)
def test_a_fault_across_the_statements_files_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, file: str, change: str, refusal: str
) -> None:
    """What only the files together can get wrong (a name twice, a made fragment, a fragment no statement
    uses, statements ``Statements`` does not know or misses, a hole left): ``_templates`` refuses it, with
    the place, when the package's statements hold it."""
    folder = tmp_path / "statements"
    folder.mkdir()
    for source in (ADAPTER / "statements").glob("*.sql"):
        (folder / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    target = folder / file
    if "=" in change and target.exists():
        old, new = change.split("=", 1)
        text = target.read_text(encoding="utf-8")
        assert old in text
        target.write_text(text.replace(old, new, 1), encoding="utf-8")
    else:
        target.write_text(change, encoding="utf-8")
    monkeypatch.setattr("importlib.resources.files", lambda package: tmp_path)
    with pytest.raises(RuntimeError) as refused:
        _sql._templates()
    assert str(refused.value) == refusal.replace("{claim}", str(header_line("claim.sql", "claim")))


def test_the_ready_listing_refuses_a_ready_order_of_one_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``list_ready`` reads its order as a first run and the rest (its index ranges); an order of one run
    would leave it without its second part, so the expansion refuses it."""
    monkeypatch.setattr(_sql, "ORDERS", {**ORDERS, JobPhase.READY: (("run_at", False), ("id", False))})
    with pytest.raises(RuntimeError) as refused:
        dict(_sql._order_fragments())
    assert str(refused.value) == "list_ready reads the ready order as its first run and the rest; this one has one run"


def flat(text: str) -> str:
    return " ".join(text.split())


def order_by(order: tuple[tuple[str, bool], ...]) -> str:
    return ", ".join(COLUMNS[field] + (" DESC" if descending else "") for field, descending in order)


@pytest.mark.parametrize("phase", list(LISTINGS))
def test_a_listing_sorts_every_part_in_its_phases_declared_order(phase: JobPhase) -> None:
    text = flat(_sql._TEMPLATES[LISTINGS[phase]])
    orders = re.findall(r"ORDER BY (.*?) LIMIT %\(limit\)s", text)
    assert orders, text
    assert set(orders) == {order_by(ORDERS[phase])}, LISTINGS[phase]


@pytest.mark.parametrize(
    ("name", "reads"),
    # A full claim's read from the left end; a claim from the cursor's read of each segment and the best of the
    # segments (ADR 061). Each statement carries only its own read (ADR 061, amended 2026-12-07).
    [
        ("claim", 2),
        ("ack_and_claim", 2),
        ("ack_keeping_and_claim", 2),
        ("claim_full", 1),
        ("ack_and_claim_full", 1),
        ("ack_keeping_and_claim_full", 1),
        ("claim_waking", 2),
        ("claim_waking_full", 1),
    ],
)
def test_the_claim_takes_jobs_in_the_declared_claim_order(name: str, reads: int) -> None:
    text = flat(_sql._TEMPLATES[name])
    limit = r"\(SELECT n FROM allowed\)"
    found = re.findall(rf"ORDER BY ([^()]*?) LIMIT {limit}(?: FOR UPDATE SKIP LOCKED)?", text)
    # A claim from the cursor reads each segment in the claim order and takes the segments in theirs (the
    # order cut into segments, highest priorities first: ADR 061, amended "the segments in their order").
    assert found == ([order_by(CLAIM_ORDER), "b.segment"] if reads == 2 else [order_by(CLAIM_ORDER)])
    assert ("band_his" in text) == (reads == 2), "a full claim sends no segments; one from the cursor reads them"


# -- on the server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def migrated(pg_dsn: str, pg_module_schema: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection beside the module's schema, migrated."""
    alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True).close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)[sbt]|%")


def numbered(text: str) -> str:
    """``text`` as psycopg sends it: each ``%(name)s`` (or ``b``) a ``$n`` (the same n for the same
    name), ``%%`` a ``%``."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            raise AssertionError(f"a % that is no placeholder: …{text[match.start() - 30 : match.end() + 30]}…")
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    return _PLACEHOLDER.sub(number, text)


def statement_texts(name: str, schema: str) -> list[str]:
    if name == "grants":
        return _sql.grants(schema, "alkstore_app", ["jobs", "dead_jobs"])
    if name == "vacuum":
        return [_sql.vacuum(schema, "jobs")]
    return [getattr(Statements.for_schema(schema), name)]


@pytest.mark.parametrize("name", [*FIELDS, "grants", "vacuum"])
def test_every_statement_parses_on_the_server(
    migrated: psycopg.Connection[Any], pg_module_schema: str, name: str
) -> None:
    # A Parse message with untyped parameters, as psycopg's own prepared statements send it: the
    # server parses the statement and, for a query, resolves every name and infers every
    # parameter's type against the migrated schema, without running it (a utility statement,
    # such as SET or VACUUM, it only parses).
    for text in statement_texts(name, pg_module_schema):
        result = migrated.pgconn.prepare(b"", numbered(text).encode())
        message = (result.error_message or b"").decode()
        assert result.status == pq.ExecStatus.COMMAND_OK, f"{name}: {message}\n{text}"


@pytest.fixture
def filled(open_store: Any, clock: ManualClock) -> Store:
    """A store whose queue ``orders`` has jobs in every phase, with ties in every order field."""
    store: Store = open_store(clock=clock)
    queue = store.queue("orders")
    for n in range(9):
        queue.enqueue(n, EnqueueOpts(priority=n % 3 - 1))
    clock.advance(1)
    for n in range(6):
        queue.enqueue(n, EnqueueOpts(priority=n % 2))
        queue.enqueue(n, EnqueueOpts(priority=n % 2, delay=1))  # due by the listing, still stored 'delayed'
    for n in range(6):
        queue.enqueue(n, EnqueueOpts(delay=600 * (n % 2 + 1)))
    for instant in range(2):
        for job in queue.claim_many(f"w{instant}", 3):
            job.fail("dead")
        clock.advance(1)
    queue.claim_many("w", 4)
    for n in range(6):  # one head per key (pending) and the rest waiting behind it
        queue.enqueue(n, EnqueueOpts(ordering_key=f"key-{n % 2}"))
    return store


def listing(
    store: Store,
    phase: JobPhase,
    limit: int,
    after: JobRecord | None = None,
    reverse: bool = False,
    queue: str = "orders",
) -> list[JobRecord]:
    engine = engine_of(store)
    key = None if after is None else key_of(after, phase)
    return engine.list_jobs(JobQuery(queue, phase, store.clock.now(), limit, key, reverse=reverse))


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reversed"])
@pytest.mark.parametrize("phase", list(LISTINGS))
def test_each_page_of_a_listing_follows_its_key_in_the_order_core_declares(
    filled: Store, phase: JobPhase, reverse: bool
) -> None:
    everything = listing(filled, phase, 1000, reverse=reverse)
    assert len(everything) >= 4, [job.id for job in everything]
    expected = sorted(everything, key=listing_order(phase, reverse))
    assert [job.id for job in everything] == [job.id for job in expected]
    for job in everything:
        after = [other.id for other in expected if after_key(other, key_of(job, phase), phase, reverse)]
        assert [other.id for other in listing(filled, phase, 3, job, reverse)] == after[:3], job


def test_due_jobs_still_stored_delayed_are_paged_by_priority_first_whatever_their_ids(
    open_store: Any, clock: ManualClock
) -> None:
    """The ready listing's branch of due jobs still stored ``'delayed'`` pages by the whole ready order:
    a later job of a higher priority comes first, and the page after it holds the earlier, lower one
    (and the other way round reversed), which ordering by instant and id alone would lose."""
    store: Store = open_store(clock=clock)
    queue = store.queue("stored-delayed")
    low = queue.enqueue("low", EnqueueOpts(priority=0, delay=1))
    high = queue.enqueue("high", EnqueueOpts(priority=1, delay=1))
    clock.advance(2)  # both due; no claim has swept them, so both are stored 'delayed'
    both = listing(store, JobPhase.READY, 10, queue=queue.name)
    assert [job.id for job in both] == [high, low]
    assert [job.id for job in listing(store, JobPhase.READY, 3, both[0], queue=queue.name)] == [low]
    assert [job.id for job in listing(store, JobPhase.READY, 3, both[1], True, queue.name)] == [high]


def test_claims_take_the_ready_jobs_one_by_one_in_the_declared_claim_order(filled: Store) -> None:
    engine = engine_of(filled)
    ready = sorted(listing(filled, JobPhase.READY, 1000), key=claim_order)
    claimed: list[int] = []
    request = ClaimRequest("orders", "w", filled.clock.now(), timedelta(minutes=5))
    while jobs := engine.claim(request):
        claimed.extend(job.id for job in jobs)
    assert claimed == [job.id for job in ready]


@pytest.mark.parametrize("keeping", [False, True], ids=["acks", "acks-keeping-results"])
def test_claims_with_acks_take_the_ready_jobs_one_by_one_in_the_declared_claim_order(
    filled: Store, keeping: bool
) -> None:
    """The claim that carries a worker's acks (the outcome kept or not) takes what the plain claim
    takes: a ready job (or one its acks let out of waiting behind its ordering key), first in the
    declared claim order, never one it acks; until none is ready."""
    engine = engine_of(filled)
    request = ClaimRequest("orders", "w", filled.clock.now(), timedelta(minutes=5))
    held = engine.claim(request)
    while held:
        now = filled.clock.now()
        acks = [
            Done(job.id, job.fence, b"1", now, now, now + timedelta(days=1)) if keeping else Held(job.id, job.fence)
            for job in held
        ]
        takeable = {job.id for phase in (JobPhase.READY, JobPhase.WAITING) for job in listing(filled, phase, 1000)}
        stale, held = engine.ack_and_claim(acks, request)
        assert stale == []
        left = listing(filled, JobPhase.READY, 1000)
        for job in held:
            assert job.id in takeable
            assert job.id not in {ack.job_id for ack in acks}
            assert all(claim_order(job) < claim_order(other) for other in left), job
    assert listing(filled, JobPhase.READY, 1000) == []


@pytest.mark.parametrize("keeping", [False, True], ids=["acks", "acks-keeping-results"])
@pytest.mark.parametrize("due", ["a lapsed lease", "an expired job", "a due delayed job"])
def test_a_claim_with_acks_sweeps_first_what_the_plain_claim_sweeps_first(
    open_store: Any, clock: ManualClock, due: str, keeping: bool
) -> None:
    """Each thing the claim sweeps before it claims (lapsed leases, expired jobs, due delayed
    ones), alone in its queue: acking (the outcome kept or not) and then claiming, or both at once,
    leaves the queue alike."""
    store: Store = open_store(clock=clock)
    engine = engine_of(store)
    outcomes = []
    for with_acks in (False, True):
        name = f"swept-{due.replace(' ', '-')}-{keeping}-{with_acks}"
        queue = store.queue(name)
        queue.enqueue("held")
        request = ClaimRequest(name, "w", clock.now(), timedelta(minutes=5), limit=10)
        [held] = engine.claim(dataclasses.replace(request, limit=1))
        # Two of each, due exactly at the claim's instant.
        if due == "a lapsed lease":
            queue.enqueue_many(["lapsing", "lapsing"])
            assert len(engine.claim(dataclasses.replace(request, limit=2, lease=timedelta(seconds=20)))) == 2
        elif due == "an expired job":
            queue.enqueue_many(["expiring", "expiring"], EnqueueOpts(expires=20))
        else:
            queue.enqueue_many(["delayed", "delayed"], EnqueueOpts(delay=20))
        clock.advance(20)
        request = dataclasses.replace(request, now=clock.now())
        now = clock.now()
        acks = [
            Done(held.id, held.fence, b"1", now, now, now + timedelta(days=1)) if keeping else Held(held.id, held.fence)
        ]
        if with_acks:
            stale, claimed = engine.ack_and_claim(acks, request)
        else:
            stale = engine.ack(acks)
            claimed = engine.claim(request)
        assert stale == []
        phases = {phase: sorted(job.payload for job in listing_of(store, name, phase)) for phase in LISTINGS}
        outcomes.append((sorted(job.payload for job in claimed), phases))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0] != ([], {phase: [] for phase in LISTINGS}), "the queue had something to sweep"


@pytest.mark.parametrize("acks", ["none", "acks", "acks-keeping-results"])
def test_a_claim_with_nothing_to_sweep_is_one_statement(
    open_store: Any, clock: ManualClock, acks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's probe sweeps only when something is due to be swept: a queue holding live leases,
    jobs that expire later and ready jobs (each what one of its clauses looks at, none due) is
    claimed in one statement, not swept first and claimed again."""
    store: Store = open_store(clock=clock)
    engine = engine_of(store)
    queue = store.queue(f"probed-{acks}")  # the schema is the module's
    queue.enqueue_many(["held", "held"])
    request = ClaimRequest(queue.name, "w", clock.now(), timedelta(minutes=5), limit=2)
    held = engine.claim(request)  # two live leases: one acked below, one still held
    assert len(held) == 2
    queue.enqueue_many(["expires later", "ready"], EnqueueOpts(expires=3600))
    queue.enqueue("delayed", EnqueueOpts(delay=3600))
    clock.advance(1)
    now = clock.now()
    request = dataclasses.replace(request, now=now, limit=1)
    executed: list[str] = []
    run = engine._connections.all

    def counted(statement: str, *args: Any, **kwargs: Any) -> Any:
        executed.append(statement)
        return run(statement, *args, **kwargs)

    monkeypatch.setattr(engine._connections, "all", counted)
    if acks == "none":
        claimed = engine.claim(request)
    else:
        done = Done(held[0].id, held[0].fence, b"1", now, now, now + timedelta(days=1))
        stale, claimed = engine.ack_and_claim(
            [done if acks == "acks-keeping-results" else Held(held[0].id, held[0].fence)], request
        )
        assert stale == []
    assert [job.payload for job in claimed] == [b'"expires later"']
    assert len(executed) == 1, "the claim swept first, with nothing to sweep"


def test_a_batch_alike_but_for_its_payloads_is_one_insert_of_its_payloads(
    open_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch whose jobs differ in their payloads only is inserted by ``enqueue_alike`` (its options bound
    once); a batch differing in anything else by ``enqueue_many`` (every field an array)."""
    store: Store = open_store()
    engine = engine_of(store)
    executed: list[str] = []
    execute = psycopg.Cursor.execute

    def recorded(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(query)
        return execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recorded)
    now = store.clock.now()

    def job(queue: str = "alike", priority: int = 0, payload: bytes = b"1") -> NewJob:
        return NewJob(queue, payload, priority, now, None, 3)

    batches = {
        "alike": ([job(payload=b"1"), job(payload=b"2")], engine._sql.enqueue_alike),
        "queues differ": ([job(), job("other")], engine._sql.enqueue_many),
        "priorities differ": ([job(), job(priority=1)], engine._sql.enqueue_many),
    }
    for name, (jobs, statement) in batches.items():
        executed.clear()
        assert len(engine.enqueue(jobs, now)) == 2
        inserts = [query for query in executed if query in (engine._sql.enqueue_alike, engine._sql.enqueue_many)]
        assert inserts == [statement], name


def test_an_alike_batch_takes_its_first_jobs_path_with_no_job_compared(
    open_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch core hands as ``Alike`` is inserted by ``enqueue_alike`` and takes its first job's path
    (here its unique key's: the second job finds the first holding it) without a scan of its jobs."""
    store: Store = open_store()
    engine = engine_of(store)

    def compared(*args: Any) -> bool:
        raise AssertionError("an Alike batch was compared job by job")

    monkeypatch.setattr(_rows, "alike", compared)
    monkeypatch.setattr(_engine, "has_parents", compared)
    now = store.clock.now()
    plain = Alike([NewJob("alike-hint", payload, 2, now, None, 3) for payload in (b"1", b"2", b"3")])
    records = [engine.get_job(job_id) for job_id in engine.enqueue(plain, now)]
    assert [(record.payload, record.priority) for record in records if record is not None] == [
        (b"1", 2),
        (b"2", 2),
        (b"3", 2),
    ]
    keyed = Alike([NewJob("alike-hint", payload, 0, now, None, 3, unique_key="once") for payload in (b"4", b"5")])
    first, second = engine.enqueue(keyed, now)
    assert isinstance(second, Existing)
    assert int(second) == first


def listing_of(store: Store, queue: str, phase: JobPhase) -> list[JobRecord]:
    return engine_of(store).list_jobs(JobQuery(queue, phase, store.clock.now(), 1000))


def test_the_lease_probe_alone_finds_its_queues_first_lapsed_lease(
    open_store: Any, clock: ManualClock, pg_module_schema: str
) -> None:
    """``lease_probe`` runs inside the claim, and alone where its cost is inspected (bench/churn.py):
    alone, it answers the lease of its queue's running jobs that lapsed first, one lapsing at ``now``
    included, and nothing of another queue or of a job not running."""
    store: Store = open_store(clock=clock)
    engine = engine_of(store)
    for queue in ("probed", "probed-other"):
        store.queue(queue).enqueue_many([1, 2, 3, 4])
    start = clock.now()

    def claim(queue: str, seconds: int) -> None:
        assert engine.claim(ClaimRequest(queue, "w", clock.now(), timedelta(seconds=seconds)))

    claim("probed-other", 1)  # lapsed first, in another queue
    claim("probed", 10)
    claim("probed", 10)  # two leases lapse at the same instant: one row says so
    clock.advance(5)
    claim("probed", 10)  # lapses after now, and one job stays pending
    lease_probe = Statements.for_schema(pg_module_schema).lease_probe
    with engine.pool.connection() as conn:
        params = {"queue": "probed", "now": start + timedelta(seconds=10), "probed_after": start}
        found = conn.execute(lease_probe, params).fetchall()
        assert found == [(start + timedelta(seconds=10),)]
        # From where the last probe looked up to (ADR 061): a lease that ended before is not looked at again.
        params["probed_after"] = start + timedelta(seconds=10, microseconds=1)
        assert conn.execute(lease_probe, params).fetchall() == []


def test_the_workers_claim_is_planned_once_and_not_at_every_call(pg_dsn: str, pg_module_schema: str) -> None:
    """The claim that carries a worker's acks runs thousands of times a second: after its first five runs
    the server must reuse a generic plan rather than plan it again each time, which cost more than the
    claim itself. A limit the planner could fold into each custom plan made every custom plan look
    cheaper than the generic one (whose limit it guesses as a tenth of the rows) once the table held
    some thousands of jobs, so none was ever reused; and a custom plan that knew its queue was
    empty looked cheaper than one for a queue of average size."""
    store = alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True, min_size=1, max_size=1)
    try:
        for name in ("planned", "other", "third"):
            store.queue(name).enqueue_many(list(range(6000)))
        engine = engine_of(store)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{pg_module_schema}".jobs')
        request = ClaimRequest("planned", "w", store.clock.now(), timedelta(minutes=5))
        held = [engine.claim(request)[0]]
        for _ in range(20):  # psycopg prepares it at its sixth run; the server plans it generically after five more
            _, held = engine.ack_and_claim([Held(job.id, job.fence) for job in held], request)
        with engine.pool.connection() as conn:
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH acked AS%'"
            ).fetchall()
        assert plans, "the claim with acks is a prepared statement"
        assert all(generic >= 5 and custom <= 5 for generic, custom in plans), plans
        idle = ClaimRequest("empty", "w", store.clock.now(), timedelta(minutes=5))
        for _ in range(20):  # an idle worker's claims, and the first after its wake, find a queue (nearly) empty
            assert engine.claim(idle) == []
        with engine.pool.connection() as conn:
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH sweep AS%'"
            ).fetchall()
        assert plans, "the claim is a prepared statement"
        assert all(generic >= 5 and custom <= 5 for generic, custom in plans), plans
    finally:
        store.close()


def _plans_per_connection(engine: Any, size: int, prefix: str) -> list[tuple[int, int]]:
    """Each of the pool's ``size`` connections' (generic, custom) plans of the statement starting ``prefix``."""
    taken = [engine.pool.getconn() for _ in range(size)]
    try:
        found = []
        for conn in taken:
            row = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
                [prefix + "%"],
            ).fetchone()
            found.append((0, 0) if row is None else (int(row[0]), int(row[1])))
        return found
    finally:
        for conn in taken:
            engine.pool.putconn(conn)


def test_one_caller_at_a_time_claims_on_one_connection_its_claim_prepared_at_the_first_run(
    pg_dsn: str, pg_module_schema: str
) -> None:
    """An idle worker claims one statement at a time: each claim on the connection given back last, the
    statement prepared at its first run there, generic after the server's five custom plans. Lent
    longest-idle first, as psycopg_pool does, seven claims spread over four connections and none was
    prepared (each parsed and planned anew, more than the claim's own run: ADR 053)."""
    store = alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True, min_size=4, max_size=4)
    try:
        engine = engine_of(store)
        engine.pool.wait(10.0)
        idle = ClaimRequest("idle-one", "w", store.clock.now(), timedelta(minutes=5))
        for _ in range(7):
            assert engine.claim(idle) == []
        plans = _plans_per_connection(engine, 4, "WITH sweep AS")
        assert sorted(plans, reverse=True)[0] == (2, 5), plans  # seven runs: five custom, then generic
        assert sorted(plans)[:3] == [(0, 0)] * 3, plans
    finally:
        store.close()


def test_the_pool_lends_the_connection_given_back_last(pg_dsn: str, pg_module_schema: str) -> None:
    """Most recent first, in both runtimes; a connection given back long ago is still lent when the rest are out."""

    def order(pool: Any) -> None:
        first, second, third = pool.getconn(), pool.getconn(), pool.getconn()
        for conn in (second, first, third):
            pool.putconn(conn)
        again = [pool.getconn() for _ in range(3)]
        assert again == [third, first, second]
        for conn in again:
            pool.putconn(conn)

    store = alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True, min_size=3, max_size=3)
    try:
        engine_of(store).pool.wait(10.0)
        order(engine_of(store).pool)
    finally:
        store.close()

    async def in_async() -> None:
        astore = await alkstore.open_async(pg_dsn, schema=pg_module_schema, min_size=3, max_size=3)
        try:
            pool = astore.engine.pool  # type: ignore[attr-defined]
            await pool.wait(10.0)
            first, second, third = await pool.getconn(), await pool.getconn(), await pool.getconn()
            for conn in (second, first, third):
                await pool.putconn(conn)
            again = [await pool.getconn() for _ in range(3)]
            assert again == [third, first, second]
            for conn in again:
                await pool.putconn(conn)
        finally:
            await astore.close()

    asyncio.run(in_async())


class _Result:
    """What a row factory reads of a cursor's result: its column names."""

    def __init__(self, names: list[str]) -> None:
        self.nfields = len(names)
        self._names = [name.encode() for name in names]

    def fname(self, at: int) -> bytes:
        return self._names[at]


class _Cursor:
    def __init__(self, names: list[str] | None) -> None:
        self.pgresult = None if names is None else _Result(names)


_AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
#: One value of each column a job is read from, each telling its field apart.
_COLUMNS: dict[str, Any] = {
    "id": 7, "queue": "q", "payload": b"p", "state": "running", "priority": 3, "run_at": _AT,
    "expires_at": _AT + timedelta(hours=1), "attempts": 2, "max_attempts": 5, "last_error": b"err",
    "last_traceback": b"tb", "schedule": "s", "boundary": _AT - timedelta(hours=1),
    "enqueued_at": _AT - timedelta(hours=2), "worker_id": "w", "lease_until": _AT + timedelta(minutes=1),
    "lease": 4, "visibility_us": 1_500_000, "task": "t", "trace": "tr", "unique_key": "u",
    "unique_running": True, "ordering_key": "o", "cancel_requested": True, "claimed_at": _AT - timedelta(seconds=5),
    "rate_key": "r",
    "dependents": 6,
}  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_row_makers_built_afresh_read_each_column_by_its_name_whatever_the_statements_order(seed: int) -> None:
    """The job row factories are built here, not taken from the module (whose makers are made once per
    result shape and kept): each reads a job's columns by name in any order, a dead job's ``died_at``,
    and the claim's ``swept`` and ``acked`` markers."""
    died = _AT + timedelta(hours=3)
    job = _rows._job(tuple(_COLUMNS[name] for name in _rows.JOB_READ))
    dead = _rows._job(tuple(_COLUMNS[name] for name in _rows.JOB_READ), died)
    assert job.died_at is None
    assert dead.died_at == died

    def made(make: Any, extra: dict[str, Any]) -> Any:
        names = [*_COLUMNS, *extra]
        random.Random(seed).shuffle(names)
        values = {**_COLUMNS, **extra}
        factory: Any = _rows._job_rows(make)  # a factory of its own: its makers are made here
        maker = factory(_Cursor(names))
        assert factory(_Cursor(list(names))) is maker, "made once per result shape"
        return maker(tuple(values[name] for name in names))

    assert made(_rows._job_or_died, {}) == job
    assert made(_rows._job_or_died, {"died_at": died}) == dead
    logged = made(_rows._job_or_died, {"died_at": died, "attempt_log": [b"first", b"last"]})
    assert logged == dataclasses.replace(dead, attempt_log=(b"first", b"last"))
    assert made(_rows._job_or_swept, {"swept": False}) == job
    assert made(_rows._job_or_swept, {"swept": True}) is None
    assert made(_rows._claim_row, {"swept": False, "acked": None}) == job
    assert made(_rows._claim_row, {"swept": True, "acked": None}) is None
    assert made(_rows._claim_row, {"swept": False, "acked": 9}) == 9
    empties: list[list[str] | None] = [None, []]
    for empty in empties:
        nothing: Any = _rows._job_rows(_rows._job_or_died)
        maker = nothing(_Cursor(empty))
        with pytest.raises(AssertionError, match="without columns"):
            maker(())


def test_a_schema_named_with_a_percent_sign_works_every_statement_it_names(pg_dsn: str) -> None:
    """The schema is composed into every statement as an identifier, its ``%`` doubled so that psycopg's
    placeholders are not confused by it."""
    schema = f"per%cent_{uuid.uuid4().hex[:8]}"
    store = alkstore.open(pg_dsn, schema=schema, migrate=True)
    try:
        queue = store.queue("q")
        job_id = queue.enqueue({"n": 1})
        job = queue.claim("w")
        assert job is not None
        assert job.id == job_id
        job.ack()
        assert store.get_job(job_id) is None
    finally:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


#: The fenced calls that find held jobs by id (ADR 066), and the claims that ack first.
FENCED = (
    "ack_one", "ack_many", "retry", "release", "heartbeat", "request_cancel", "cancel_requested",
    "ack_keeping", "ack_keeping_one",
)  # fmt: skip


@pytest.mark.parametrize("name", FENCED)
def test_a_fenced_call_finds_its_jobs_through_the_primary_key_whatever_the_planner_knows(
    migrated: psycopg.Connection[Any], pg_module_schema: str, name: str
) -> None:
    # Planned generically on a table the server knows nothing of (a worker's first minutes), the
    # fenced call with the running state written as a constant went through jobs_lease and filtered
    # on id, reading every dead entry a pinned horizon keeps there, at every call. The call must not
    # be able to use that index at all, whatever the table's statistics say.
    text = numbered(getattr(Statements.for_schema(pg_module_schema), name))
    parameters = len(set(re.findall(r"\$(\d+)", text)))
    with migrated.transaction(force_rollback=True):
        migrated.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        migrated.execute(f"PREPARE fenced AS {text}")
        try:
            arguments = ", ".join(["NULL"] * parameters)
            plan = "\n".join(row[0] for row in migrated.execute(f"EXPLAIN EXECUTE fenced({arguments})"))
        finally:
            migrated.execute("DEALLOCATE fenced")
    assert "jobs_lease" not in plan, f"{name} reads jobs_lease:\n{plan}"


#: Every statement that finds jobs by a list of ids: the fenced calls and the dependents' parents.
BY_IDS = (*(name for name in FENCED if name not in ("ack_one", "ack_keeping_one")), "lock_parents")


def _generic_plan(conn: psycopg.Connection[Any], text: str) -> str:
    """The generic plan the server makes for ``text`` (psycopg's placeholders), every argument NULL."""
    text = numbered(text)
    parameters = len(set(re.findall(r"\$(\d+)", text)))
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE by_ids AS {text}")
        try:
            arguments = ", ".join(["NULL"] * parameters)
            return "\n".join(row[0] for row in conn.execute(f"EXPLAIN EXECUTE by_ids({arguments})"))
        finally:
            conn.execute("DEALLOCATE by_ids")


@pytest.fixture(scope="module")
def dead_head(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[Any], str]]:
    """A schema whose jobs table holds 20,000 finished jobs' rows that a pinned horizon keeps, vacuumed:
    what the server knows of it after a worker's upkeep under a pin (few live rows, many pages)."""
    schema = f"deadhead_{uuid.uuid4().hex[:8]}"
    store = alkstore.open(pg_dsn, schema=schema, migrate=True)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn, psycopg.connect(pg_dsn) as pin:
            pin.execute("SELECT txid_current()")  # held open until the plans are read
            for start in range(0, 20_000, 1_000):
                store.queue("q").enqueue_many(range(start, start + 1_000))
            conn.execute(sql.SQL("DELETE FROM {}.jobs").format(sql.Identifier(schema)))
            store.queue("q").enqueue_many(range(3))
            conn.execute(sql.SQL("VACUUM {}.jobs").format(sql.Identifier(schema)))
            yield conn, schema
            pin.rollback()
    finally:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize("name", BY_IDS)
def test_a_statement_that_finds_jobs_by_ids_looks_each_one_up_under_a_pinned_horizon(
    dead_head: tuple[psycopg.Connection[Any], str], name: str
) -> None:
    # On a table with few live rows and a pinned dead head, the batched fenced calls were planned as
    # a walk of the whole primary key (or the whole heap) joined to the ids afterwards: under a pin
    # every ack read every finished job's entries (5,531 a completed job in a 2-minute pin at 300
    # jobs/s). The ids as the scan's own condition (id = ANY) make every plan look them up.
    conn, schema = dead_head
    plan = _generic_plan(conn, getattr(Statements.for_schema(schema), name))
    lines = plan.splitlines()
    assert not any(re.search(r"Seq Scan on jobs\b", line) for line in lines), f"{name}:\n{plan}"
    for at, line in enumerate(lines):
        if re.search(r"Index (Only )?Scan using \w+ on jobs\b", line):
            assert "Index Cond" in lines[at + 1], f"{name} walks an index of jobs whole:\n{plan}"


def test_the_ids_as_the_scans_own_condition_have_one_owner_that_every_statement_by_ids_includes() -> None:
    # The condition the plans above rely on is the fragment held_ids: each statement that finds jobs
    # by a list of ids includes it (through another section or directly), and no other section writes
    # the condition out, so a change to it (or a statement that forgets it) is made in one place.
    sections = _sql._read()

    def includes(key: str) -> set[str]:
        named = {hole.group(1) for hole in _sql._HOLE.finditer(sections[key].text)}
        named -= {*_sql._IDENTIFIERS, sections[key].parameter}
        return named.union(*(includes(name) for name in named))

    assert [name for name in BY_IDS if "held_ids" not in includes(name)] == []
    written = [key for key, section in sections.items() if re.search(r"\bj\.id\s*=\s*ANY\(", section.text)]
    assert written == ["held_ids"]


def test_a_named_statement_made_positional_numbers_each_name_once_and_keeps_a_literal_percent() -> None:
    """``%(name)s`` becomes ``$n`` (a repeated name keeps its number), ``%%`` a single ``%``; a binary
    placeholder or a ``$`` of the statement's own leaves it to psycopg's conversion (``None``)."""
    made = _positional.positional("SELECT %(a)s, %(b)s, %(a)s FROM t WHERE x LIKE 'p%%' AND y = %(c)s")
    assert made is not None
    assert made.query == b"SELECT $1, $2, $1 FROM t WHERE x LIKE 'p%' AND y = $3"
    assert made.values({"c": 3, "a": 1, "b": 2, "unused": 0}) == (1, 2, 3)
    assert _positional.positional("SELECT %(a)b") is None
    assert _positional.positional('SELECT %(a)s FROM "odd$name".t') is None


def test_a_workers_claims_are_sent_as_they_are_and_not_converted_at_every_call(
    pg_dsn: str, pg_module_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg converts a named statement at every execution and caches the conversion only up to
    4 KiB; the claim that acks first is longer, so a one-slot worker paid the conversion at every
    job. The hot statements run positional on a raw cursor: nothing is converted while a queue drains."""
    from psycopg import _queries

    converted: list[int] = []

    def counting(real: Any) -> Any:
        def convert(*args: Any) -> Any:
            converted.append(len(args[0]))
            return real(*args)

        return convert

    store = alkstore.open(pg_dsn, schema=pg_module_schema, migrate=True)
    try:
        queue = store.queue("as-is")
        queue.enqueue_many([{"n": n} for n in range(20)])
        engine = engine_of(store)
        assert len(engine._sql.ack_and_claim.encode()) > _queries.MAX_CACHED_STATEMENT_LENGTH
        monkeypatch.setattr(_queries, "_query2pg", counting(_queries._query2pg))
        monkeypatch.setattr(_queries, "_query2pg_nocache", counting(_queries._query2pg_nocache))
        request = ClaimRequest("as-is", "w", store.clock.now(), timedelta(minutes=5))
        _, held = engine.ack_and_claim([], request)
        for _ in range(19):
            request = dataclasses.replace(request, now=store.clock.now())
            _, held = engine.ack_and_claim([Held(job.id, job.fence) for job in held], request)
            assert len(held) == 1
        # (the pool's own housekeeping, a short statement of a connection it opens meanwhile, is not a claim)
        assert [length for length in converted if length > 200] == []
    finally:
        store.close()


def test_integer_and_instant_arrays_reach_the_server_as_the_values_they_hold(pg_dsn: str) -> None:
    """The arrays the hot statements take are sent as literals of their own type (ADR 071): the
    extremes of bigint and of the claim's bands, an int subclass, the earliest instant and one with
    microseconds come back as they went, and an empty array is an empty array of that type."""
    from alkstore.adapters.postgres._positional import InstantArray, IntArray

    class Sub(int):
        def __str__(self) -> str:
            return "not a number"

    now = datetime(2026, 12, 6, 22, 31, 29, 622434, tzinfo=UTC)
    earliest = datetime.min.replace(tzinfo=UTC)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT %s::bigint[], %s::integer[], %s::timestamptz[], %s::bigint[], pg_typeof(%s), pg_typeof(%s)",
            [IntArray([1, 2**63 - 1, -(2**63), Sub(7)]), IntArray([-(2**31), 2**31 - 1]),
             InstantArray([now, earliest]), IntArray(), IntArray([1]), InstantArray([now])],
        ).fetchone()  # fmt: skip
    assert row is not None
    assert row[0] == [1, 2**63 - 1, -(2**63), 7]
    assert row[1] == [-(2**31), 2**31 - 1]
    assert [value.astimezone(UTC) for value in row[2]] == [now, earliest]
    assert row[3] == []
    assert row[4:] == ("bigint[]", "timestamp with time zone[]")


def test_the_claims_arrays_reach_the_server_in_binary_and_a_naive_instant_as_utc(pg_dsn: str) -> None:
    """The server parses a text array's every element (``array_in``, a timestamptz's the dearest): the claim's
    arrays go in the server's binary form instead (ADR 071, amended 2026-12-07), each a bigint[] or a
    timestamptz[] as psycopg's automatic choice dumps it; a naive instant is UTC, as the engine's sessions read."""
    from psycopg.adapt import PyFormat, Transformer

    from alkstore.adapters.postgres._positional import FixedIntArray, InstantArray, IntArray

    now = datetime(2026, 12, 7, 16, 5, 1, 7, tzinfo=UTC)
    longer = IntArray(range(-50, 50))  # past the lengths packed whole
    arrays = [IntArray([1, -2]), FixedIntArray([2**31 - 1, 0]), InstantArray([now]), IntArray(), InstantArray(), longer]
    transformer = Transformer()
    dumpers = [transformer.get_dumper(array, PyFormat.AUTO) for array in arrays]
    assert [dumper.format for dumper in dumpers] == [pq.Format.BINARY] * len(arrays)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT %s, %s, %s, %s, %s, %s, %s", [*arrays, InstantArray([now.replace(tzinfo=None)])]
        ).fetchone()
    assert row is not None
    assert row[0] == [1, -2]
    assert row[1] == [2**31 - 1, 0]
    assert [value.astimezone(UTC) for value in row[2]] == [now]
    assert row[3] == []
    assert row[4] == []
    assert row[5] == list(range(-50, 50))
    assert [value.astimezone(UTC) for value in row[6]] == [now]


def test_an_instant_array_writes_each_instant_as_it_is_whether_written_before_or_not(pg_dsn: str) -> None:
    """An instant's element is kept once written (ADR 071): one written again, the same instant at another
    offset, and another instant after the kept ones were dropped all come back as they went."""
    from alkstore.adapters.postgres._positional import InstantArray

    now = datetime(2026, 12, 7, 12, 40, 1, 5, tzinfo=UTC)
    elsewhere = now.astimezone(timezone(timedelta(hours=5, minutes=30)))
    later = [now + timedelta(microseconds=n) for n in range(1, _positional._ELEMENTS_KEPT + 2)]
    sent = [InstantArray([now]), InstantArray([now, elsewhere, now]), InstantArray(later), InstantArray([now])]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for instants in sent:
            row = conn.execute("SELECT %s::timestamptz[]", [instants]).fetchone()
            assert row is not None
            assert [value.astimezone(UTC) for value in row[0]] == [instant.astimezone(UTC) for instant in instants]
    assert len(_positional._ELEMENTS) <= _positional._ELEMENTS_KEPT
