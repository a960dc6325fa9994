"""The SQLite engine's own promises: WAL and a schema version on open, a locked file past the busy timeout as
a named error, a missing directory, a corrupt or read-only file refused with nothing written, the caller's
own ``sqlite3.Connection`` as a transaction, a waiter hearing another connection's commit, and job ids taken in
blocks never reused."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import engine as port
from alkstore.adapters.sqlite._statements import MIGRATIONS
from alkstore.adapters.sqlite._tables import SCHEMA_VERSION
from alkstore.errors import DatabaseError, DatabaseUnavailable, InvalidOptions, InvalidTransaction, SchemaOutOfDate
from tests.support import PATIENCE


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}{query}"


def test_a_new_file_is_in_wal_mode_at_the_current_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    alkstore.open(url_of(path)).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT max(version) FROM alkstore_schema").fetchone() == (SCHEMA_VERSION,)
    alkstore.open(url_of(path)).close()  # reopening changes nothing
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM alkstore_schema").fetchone() == (SCHEMA_VERSION,)


def test_a_file_left_unmigrated_or_from_newer_code_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SchemaOutOfDate, match="migrate"):
        alkstore.open(url_of(tmp_path / "new.db"), migrate=False)
    path = tmp_path / "jobs.db"
    alkstore.open(url_of(path)).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO alkstore_schema (version) VALUES (99)")
    with pytest.raises(SchemaOutOfDate, match="newer"):
        alkstore.open(url_of(path))


#: What versions 8 (ADR 075) and 7 (ADR 073) made, undone first, so that the columns version 7 names can go.
UNDO = [
    "DROP TABLE alkstore_task_figures",
    "DROP TRIGGER alkstore_jobs_unlink",
    "DROP TABLE alkstore_job_dependencies",
    "ALTER TABLE alkstore_jobs DROP COLUMN dependents",
    "ALTER TABLE alkstore_jobs DROP COLUMN on_parent_failure",
]


def test_a_file_of_version_1_migrates_in_place_and_keeps_its_jobs(tmp_path: Path) -> None:
    """Version 2 (ADR 064) adds the jobs' ``claimed_at``, version 3 the action log (ADR 068), version 4
    makes the jobs' state indexes partial: a file of version 1 is refused unmigrated, then migrated on
    open with its jobs, which a claim then stamps."""
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as store:
        job_id = store.queue("jobs").enqueue("kept")
    with sqlite3.connect(path) as db:  # the file as version 1 left it
        for later in UNDO:
            db.execute(later)
        db.execute("ALTER TABLE alkstore_jobs DROP COLUMN claimed_at")
        db.execute("DROP TABLE alkstore_action_log")  # and what later versions made (ADR 068, ADR 069)
        for table in ("alkstore_steps", "alkstore_waits", "alkstore_events"):
            db.execute(f"DROP TABLE {table}")
        for statement in MIGRATIONS[0]:
            if statement.startswith("CREATE INDEX alkstore_jobs_"):
                db.execute(f"DROP INDEX {statement.split()[2]}")
                db.execute(statement)
        db.execute("ALTER TABLE alkstore_jobs DROP COLUMN rate_key")  # and what version 6 added (ADR 070)
        for column in ("rate_count", "rate_per", "key_rate_count", "key_rate_per"):
            db.execute(f"ALTER TABLE alkstore_queues DROP COLUMN {column}")
        db.execute("DROP TABLE alkstore_rate_starts")
        db.execute("DELETE FROM alkstore_schema WHERE version > 1")
    with pytest.raises(SchemaOutOfDate, match="version 1"):
        alkstore.open(url_of(path), migrate=False)
    with alkstore.open(url_of(path)) as store:
        job = store.get_job(job_id)
        assert job is not None
        assert (job.payload, job.claimed_at) == ("kept", None)
        claimed = store.queue("jobs").claim("w1")
        assert claimed is not None
        job = store.get_job(job_id)
        assert job is not None
        assert job.claimed_at is not None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT max(version) FROM alkstore_schema").fetchone() == (SCHEMA_VERSION,)
        ready = db.execute("SELECT sql FROM sqlite_master WHERE name = 'alkstore_jobs_ready'").fetchone()[0]
        assert ready.endswith("WHERE state = 'pending'")


def test_a_file_locked_by_another_writer_past_the_busy_timeout_is_database_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path, "?busy_timeout=0.2")) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(DatabaseUnavailable, match="locked") as raised:
                store.queue("jobs").enqueue("blocked")
            assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
            holder.execute("ROLLBACK")
        finally:
            holder.close()
        job_id = store.queue("jobs").enqueue("once free")
        assert store.get_job(job_id) is not None


def test_a_missing_directory_is_refused_and_not_created(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="does not exist"):
        alkstore.open(url_of(tmp_path / "nowhere" / "jobs.db"))
    assert not (tmp_path / "nowhere").exists()


def test_a_corrupt_file_is_refused_with_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    garbage = b"this is no database, " * 400
    path.write_bytes(garbage)
    with pytest.raises(DatabaseError, match="not a sound database"):
        alkstore.open(url_of(path))
    with pytest.raises(DatabaseError, match="not a sound database"):
        asyncio.run(alkstore.open_async(url_of(path)))
    assert path.read_bytes() == garbage
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["jobs.db"]


def test_a_read_only_file_is_refused_with_nothing_written(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as store:
        store.queue("jobs").enqueue("kept")
    path.chmod(0o444)
    before = {entry.name: entry.read_bytes() for entry in tmp_path.iterdir()}
    with pytest.raises(DatabaseError, match="read-only"):
        alkstore.open(url_of(path))
    assert {entry.name: entry.read_bytes() for entry in tmp_path.iterdir()} == before
    path.chmod(0o644)
    with alkstore.open(url_of(path)) as store:
        job = store.queue("jobs").claim("w1")
        assert job is not None
        assert job.payload == "kept"


def test_the_url_and_options_are_checked_before_the_file_is_touched(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    for bad in ("?synchronous=off", "?busy_timeout=-1", "?poll_interval=soon", "?nope=1"):
        with pytest.raises(InvalidOptions):
            alkstore.open(url_of(path, bad))
    with pytest.raises(InvalidOptions):
        alkstore.open("sqlite://relative.db")
    assert not path.exists()
    with alkstore.open(url_of(path, "?synchronous=full&busy_timeout=1")) as store:
        assert store.queue("jobs").enqueue("durable") > 0


def test_an_enqueue_on_the_callers_own_connection_commits_with_it_or_not_at_all(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as store:
        db = sqlite3.connect(path)
        try:
            db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
            db.commit()
            db.execute("INSERT INTO orders (item) VALUES ('book')")
            kept = store.enqueue_tx(db, "mail", {"order": "book"})
            assert store.get_job(kept) is None, "not visible before the caller's commit"
            db.commit()
            db.execute("INSERT INTO orders (item) VALUES ('pen')")
            dropped = store.enqueue_tx(db, "mail", {"order": "pen"})
            db.rollback()
            assert db.execute("SELECT item FROM orders").fetchall() == [("book",)]
        finally:
            db.close()
        job = store.queue("mail").claim("w1")
        assert job is not None
        assert (job.id, job.payload) == (kept, {"order": "book"})
        assert store.get_job(dropped) is None
        assert store.queue("mail").claim("w1") is None
        other = sqlite3.connect(tmp_path / "other.db")
        try:
            with pytest.raises(InvalidTransaction, match="not to this store's file"):
                store.enqueue_tx(other, "mail", "elsewhere")
        finally:
            other.close()


def test_a_waiter_hears_a_commit_of_another_connection_through_the_data_version(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as listening, alkstore.open(url_of(path)) as other:
        woke = threading.Event()
        with listening.engine.waiter("jobs") as waiter:
            assert waiter.hears

            def park() -> None:
                waiter.wait(PATIENCE * 4)
                woke.set()

            parked = threading.Thread(target=park)
            parked.start()
            other.queue("jobs").enqueue("wake up")
            assert woke.wait(PATIENCE), "the other connection's commit woke the waiter before its timeout"
            parked.join()
        job = listening.queue("jobs").claim("w1")
        assert job is not None
        assert job.payload == "wake up"


def test_an_enqueue_in_a_sqlalchemy_session_or_connection_on_the_file_commits_with_it_or_not_at_all(
    tmp_path: Path,
) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as store:
        engine = sqlalchemy.create_engine(f"sqlite:///{path}")
        try:
            with engine.begin() as connection:
                connection.execute(sqlalchemy.text("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)"))
            with Session(engine) as session:
                session.execute(sqlalchemy.text("INSERT INTO orders (item) VALUES ('book')"))
                kept = store.enqueue_tx(session, "mail", "book")
                assert store.get_job(kept) is None
                session.commit()
            with Session(engine) as session:
                session.execute(sqlalchemy.text("INSERT INTO orders (item) VALUES ('pen')"))
                dropped = store.enqueue_tx(session, "mail", "pen")
                session.rollback()
            assert store.get_job(dropped) is None
            with engine.connect() as connection:
                also = store.enqueue_tx(connection, "mail", "by connection")
                connection.commit()
                assert connection.execute(sqlalchemy.text("SELECT item FROM orders")).all() == [("book",)]
        finally:
            engine.dispose()
        claimed = [store.queue("mail").claim("w1") for _ in range(3)]
        assert [(job.id, job.payload) if job else None for job in claimed] == [
            (kept, "book"),
            (also, "by connection"),
            None,
        ]


def test_a_file_on_a_network_filesystem_is_told_apart_by_its_mount() -> None:
    from alkstore.adapters.sqlite._options import NETWORK_FILESYSTEMS, filesystem_of

    mounts = "\n".join(
        [
            "overlay / overlay rw 0 0",
            "server:/export /mnt/shared nfs4 rw 0 0",
            "//host/share /mnt/my\\040share cifs rw 0 0",
            "tmpfs /mnt/shared/tmp tmpfs rw 0 0",
        ]
    )
    assert filesystem_of("/srv/app", mounts) == "overlay"
    assert filesystem_of("/mnt/shared/app", mounts) == "nfs4"
    assert filesystem_of("/mnt/shared", mounts) == "nfs4"
    assert filesystem_of("/mnt/sharedx", mounts) == "overlay"
    assert filesystem_of("/mnt/my share/app", mounts) == "cifs"
    assert filesystem_of("/mnt/shared/tmp/app", mounts) == "tmpfs"
    assert {"nfs4", "cifs"} <= NETWORK_FILESYSTEMS
    assert "tmpfs" not in NETWORK_FILESYSTEMS


def test_an_enqueue_a_busy_claim_and_an_ack_each_run_one_short_transaction(tmp_path: Path) -> None:
    """The hot path's statements, counted (the floor's are three each): an enqueue takes its id and inserts, a
    claim of a busy queue takes its jobs in one ``UPDATE … RETURNING`` that checks for sweeps too, an ack deletes in
    one ``DELETE`` (a job nothing needs after: not read back). An idle claim reads without the write lock, after
    at most one claim that found the queue emptied."""
    with alkstore.open(url_of(tmp_path / "jobs.db")) as store:
        ran: list[str] = []
        store.engine._tables._db.set_trace_callback(ran.append)  # type: ignore[attr-defined]
        queue = store.queue("jobs")
        queue.enqueue_many(["a", "b", "c"])

        def counted(call: Callable[[], object]) -> list[str]:
            ran.clear()
            call()
            # SQLite traces a statement again when a trigger on its table starts (the ack's DELETE, ADR 073),
            # though it runs once: one entry per statement run
            once = [statement for i, statement in enumerate(ran) if i == 0 or ran[i - 1] != statement]
            return [" ".join(statement.split()[:2]) for statement in once]

        # its id from the block the first enqueue took (``_ids``): the counter's page is not in its commit
        assert counted(lambda: queue.enqueue("d")) == ["BEGIN IMMEDIATE", "INSERT INTO", "COMMIT"]
        job = queue.claim("w1")  # reads first: the queue was not busy here
        assert job is not None
        assert counted(lambda: queue.claim("w1")) == ["BEGIN IMMEDIATE", "UPDATE alkstore_jobs", "COMMIT"]
        assert counted(job.ack) == ["BEGIN IMMEDIATE", "DELETE FROM", "COMMIT"]
        assert not any("RETURNING" in statement for statement in ran)  # nothing needed of the row: not read back
        pair = queue.claim_many("w1", 10)
        assert len(pair) == 2
        # one short fenced delete each, not read back
        assert counted(lambda: store.ack_many(pair)) == ["BEGIN IMMEDIATE", "DELETE FROM", "DELETE FROM", "COMMIT"]
        assert "BEGIN IMMEDIATE" in counted(lambda: queue.claim("w1"))  # the claim that finds it emptied
        assert counted(lambda: queue.claim("w1")) == ["SELECT EXISTS"]  # idle: no write lock
        assert counted(lambda: queue.claim("w1")) == ["SELECT EXISTS"]


def test_job_ids_taken_in_blocks_are_unique_across_engines_rising_in_each_and_never_reused(tmp_path: Path) -> None:
    """Two engines on one file take their ids in blocks (``_ids``): every id distinct, each engine's rising in
    its order of enqueue, the caller's own transaction's too, and a reopened file's above every id before."""
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as one, alkstore.open(url_of(path)) as two:
        taken: dict[str, list[int]] = {"one": [], "two": []}
        for round_ in range(100):
            taken["one"].append(one.queue("jobs").enqueue(round_))
            taken["two"].extend(two.queue("jobs").enqueue_many([round_, round_]))
        db = sqlite3.connect(path)
        try:
            taken["one"].append(one.enqueue_tx(db, "jobs", "in the caller's transaction"))
            db.commit()
        finally:
            db.close()
        taken["one"].append(one.queue("jobs").enqueue("after it"))
        for ids in taken.values():
            assert ids == sorted(ids)
        everything = taken["one"] + taken["two"]
        assert len(set(everything)) == len(everything) == 302
    with alkstore.open(url_of(path)) as again:
        assert again.queue("jobs").enqueue("later") > max(everything)


def test_a_block_of_ids_taken_by_a_rolled_back_enqueue_is_given_up_not_reused(tmp_path: Path) -> None:
    """An enqueue that fails after taking a block rolls the counter back: the engine gives the block up, so
    the ids another engine then takes are never handed out twice."""
    path = tmp_path / "jobs.db"
    with alkstore.open(url_of(path)) as one, alkstore.open(url_of(path)) as two:
        with sqlite3.connect(path) as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON alkstore_jobs WHEN NEW.priority = 7"
                " BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        with pytest.raises(DatabaseError, match="refused"):
            one.queue("jobs").enqueue("refused", alkstore.EnqueueOpts(priority=7))
        theirs = two.queue("jobs").enqueue_many(["a", "b"])
        mine = one.queue("jobs").enqueue("c")
        assert mine not in theirs
        assert sorted(job.payload for job in (one.get_job(i) for i in (*theirs, mine)) if job) == ["a", "b", "c"]


def test_an_ack_that_reads_no_row_back_still_tells_stale_acks_and_moves_lines_and_dependents(tmp_path: Path) -> None:
    """An ack deletes a job nothing needs after without reading it back (ADR 063); one of the same call with a
    key's line or dependents is read back as before, a stale one (gone, an old fence, twice in a call) stays
    stale, one at a time and many at once."""
    with alkstore.open(url_of(tmp_path / "jobs.db")) as store:
        engine = store.engine
        queue = store.queue("jobs")
        queue.enqueue_many(["plain", "other", "third"])
        queue.enqueue("first", alkstore.EnqueueOpts(ordering_key="k"))
        queue.enqueue("second", alkstore.EnqueueOpts(ordering_key="k"))  # waits for "first"
        parent = queue.enqueue("parent")
        child = queue.enqueue("child", alkstore.EnqueueOpts(after=[parent]))
        claimed = queue.claim_many("w1", 10)
        assert sorted(job.payload for job in claimed) == ["first", "other", "parent", "plain", "third"]
        held = {job.payload: port.Held(job.id, job._record.fence) for job in claimed}
        old = port.Held(held["other"].job_id, held["other"].fence - 1)
        assert engine.ack([held["plain"], held["first"], old, held["parent"]]) == [old]
        assert engine.ack([held["plain"]]) == [held["plain"]]  # gone: stale, one at a time
        assert engine.ack([held["plain"], held["other"]]) == [held["plain"]]  # and many at once
        assert engine.ack([held["third"], held["third"]]) == [held["third"]]  # the second finds it gone
        assert sorted(job.payload for job in queue.claim_many("w1", 10)) == ["child", "second"]
        assert queue.claim("w1") is None
        assert store.get_job(child) is not None


def test_a_claimed_job_is_the_row_as_stored_though_the_take_reads_back_only_what_the_claim_did_not_set(
    tmp_path: Path,
) -> None:
    """A take returns only the columns the claim does not know (ADR 063): the queue, worker, state, lease and
    claim instant come from the claim itself. Each claimed record, one or many, in the claim's order, equals
    the job read back from the file, whatever its fields (its own visibility, an expiry, a priority, keys)."""
    with alkstore.open(url_of(tmp_path / "jobs.db")) as store:
        engine = store.engine
        queue = store.queue("jobs")
        now = datetime.now(UTC)
        ids = queue.enqueue_many(["plain", "other"])
        ids.append(queue.enqueue("second", alkstore.EnqueueOpts(priority=2)))
        ids.append(queue.enqueue("urgent", alkstore.EnqueueOpts(priority=5, visibility_timeout=timedelta(seconds=7))))
        ids.append(queue.enqueue("keyed", alkstore.EnqueueOpts(unique_key="u", unique_running=True, ordering_key="o")))
        ids.append(queue.enqueue("expiring", alkstore.EnqueueOpts(expires=now + timedelta(hours=1), rate_key="r")))
        lease = timedelta(seconds=42)
        for limit in (1, 10):
            request = port.ClaimRequest("jobs", f"w{limit}", datetime.now(UTC), lease, limit)
            claimed = engine.claim(request)
            assert claimed, limit
            assert [job.id for job in claimed] == [job.id for job in sorted(claimed, key=port.claim_order)]
            for job in claimed:
                stored = engine.get_job(job.id)
                assert stored is not None
                assert job == replace(stored, attempt_log=()), job.payload
                assert job.lease_until == request.now + (job.visibility or lease)
                assert (job.worker_id, job.claimed_at, job.queue) == (request.worker_id, request.now, "jobs")
            engine.ack([port.Held(job.id, job.fence) for job in claimed])
        assert all(engine.get_job(job_id) is None for job_id in ids)


def test_bytes_and_nulls_bind_through_identity_adapters_and_an_applications_own_adapter_is_kept(
    tmp_path: Path,
) -> None:
    """The engine registers the adapters ``sqlite3`` falls back to anyway for ``bytes`` and ``None`` (the value
    itself: a miss of the adapters' lookup costs more than the bind), never one an application registered."""
    keys: list[tuple[type[Any], type[Any]]] = [(bytes, sqlite3.PrepareProtocol), (type(None), sqlite3.PrepareProtocol)]
    saved = {key: sqlite3.adapters.pop(key) for key in keys if key in sqlite3.adapters}

    def own(value: bytes) -> bytes:
        return value

    try:
        sqlite3.register_adapter(bytes, own)
        with alkstore.open(url_of(tmp_path / "one.db")) as store:
            assert sqlite3.adapters[keys[0]] is own
            assert sqlite3.adapters[keys[1]](None) is None
            job_id = store.queue("jobs").enqueue({"a": 1})
            stored = store.engine.get_job(job_id)
            assert stored is not None
            assert (stored.payload, stored.expires_at, stored.task) == (b'{"a":1}', None, None)
        del sqlite3.adapters[keys[0]]
        alkstore.open(url_of(tmp_path / "two.db")).close()
        assert sqlite3.adapters[keys[0]](b"\x00x") == b"\x00x"
    finally:
        for key in keys:
            sqlite3.adapters.pop(key, None)
        sqlite3.adapters.update(saved)


def test_an_alike_batch_is_judged_by_its_first_job_and_a_plain_list_job_by_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch core hands as ``Alike`` takes the first job's insert (here the bare one, its options bound
    once) after one look; a plain list of the same jobs is looked at job by job, and both store every job."""
    from alkstore.adapters.sqlite import _rows, _tables

    looked: list[bytes] = []

    def bare(job: port.NewJob) -> bool:
        looked.append(job.payload)
        return _rows.bare(job)

    monkeypatch.setattr(_tables, "bare", bare)
    store = alkstore.open(url_of(tmp_path / "jobs.db"))
    try:
        engine = store.engine
        now = store.clock.now()
        jobs = [port.NewJob("alike", payload, 1, now, None, 3) for payload in (b"1", b"2", b"3")]
        alike_ids = engine.enqueue(port.Alike(jobs), now)
        assert looked == [b"1"]
        listed_ids = engine.enqueue(list(jobs), now)
        assert looked == [b"1", b"1", b"2", b"3"]
        stored = [engine.get_job(job_id) for job_id in [*alike_ids, *listed_ids]]
        assert [(job.payload, job.priority) for job in stored if job is not None] == [
            (b"1", 1),
            (b"2", 1),
            (b"3", 1),
        ] * 2
    finally:
        store.close()
