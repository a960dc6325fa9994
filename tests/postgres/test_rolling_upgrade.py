"""Rolling upgrades from every older schema version: old and new workers on one database across ``alkstore migrate``.

For each schema version below the current one, the code of that version (from git, ``_old_code``)
creates and fills a schema, an old worker runs on it, the new code's ``alkstore migrate`` runs
under it, a new worker joins, both keep producing, and the old one is stopped with SIGTERM.
Every job then ran exactly once or is where it should be (each side ran jobs the other code
enqueued), the schedule kept its phase, the old worker kept working after the migration, and
an old process started after it was refused by name (ADR 041).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

import alkstore
from alkstore import JobState, SchemaOutOfDate
from alkstore.adapters.postgres._migrations import migrations
from tests._proc import ALKSTORE, LiveProcess, run
from tests.support import under_ci

from . import _old_code
from ._rolling_client import GRAVES, HOOKS, LONG, ONLY, PRODUCE, WORK
from .conftest import PATIENCE, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CLIENT = Path(__file__).with_name("_rolling_client.py")
#: Every schema version the migrations take a database from: all but the newest.
OLD_VERSIONS = [migration.version for migration in migrations()[:-1]]

Events = list[dict[str, Any]]
T = TypeVar("T")


def from_history(get: Callable[[], T]) -> T:
    """``get()``; without the git history it needs, a skip (a failure under CI=true, where the
    rolling-upgrade test must run)."""
    try:
        return get()
    except _old_code.HistoryMissing as exc:
        if under_ci():
            pytest.fail(f"{exc} (CI=true: the rolling-upgrade test must run)", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], _old_code.OldCode]:
    """The old code of a schema version, extracted once per session."""
    trees: dict[int, _old_code.OldCode] = {}
    into = tmp_path_factory.mktemp("old-code")

    def get(version: int) -> _old_code.OldCode:
        if version not in trees:
            trees[version] = from_history(lambda: _old_code.extract(version, into))
        return trees[version]

    return get


class Run:
    """One upgrade's processes and journal: the old code's and the new code's sides of one schema."""

    def __init__(self, dsn: str, schema: str, run_dir: Path, old: _old_code.OldCode) -> None:
        self.dsn, self.schema, self.dir, self.old = dsn, schema, run_dir, old
        self.journal = run_dir / "journal.jsonl"
        self.workers: list[LiveProcess] = []
        self.stopped: list[LiveProcess] = []

    def env(self, side: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        return {**env, "PYTHONPATH": self.old.pythonpath} if side == "old" else env

    def args(self, role: str, side: str) -> list[str]:
        return [sys.executable, str(CLIENT), role, self.dsn, self.schema, str(self.dir), side]

    def client(self, role: str, side: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.args(role, side), capture_output=True, text=True, timeout=PATIENCE * 2, env=self.env(side), check=False
        )

    def start(self, role: str, side: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.args(role, side), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env(side)
        )

    def worker(self, side: str) -> LiveProcess:
        process = LiveProcess(self.args("work", side), env=self.env(side))
        self.workers.append(process)
        process.wait_for(lambda name, line: name == "stdout" and line == "ready\n", PATIENCE)
        return process

    def stop(self, process: LiveProcess) -> None:
        """SIGTERM, then the exit status: 0, with no traceback on the way out."""
        self.stopped.append(process)
        process.proc.send_signal(signal.SIGTERM)
        code = process.finish(timeout=PATIENCE)
        log = "".join(process.stderr)
        assert code == 0, log
        assert "Traceback" not in log, log

    def wait(self, predicate: Callable[[], object], what: str) -> None:
        """``wait_until``, failing at once (with its log) if a worker exits before it is stopped."""

        def done() -> object:
            for process in self.workers:
                if process not in self.stopped and process.proc.poll() is not None:
                    process.close()
                    pytest.fail(f"a worker exited waiting for {what}: {''.join(process.stderr)}", pytrace=False)
            return predicate()

        wait_until(done, what)

    def record(self, event: str, side: str, **fields: Any) -> None:
        """Journal an event of this process, as the client's processes do theirs."""
        with self.journal.open("a") as out:
            out.write(json.dumps({"ev": event, "side": side, **fields}) + "\n")

    def events(self, event: str | None = None) -> Events:
        text = self.journal.read_text() if self.journal.exists() else ""
        # whole lines only: a client process may be halfway through writing its last one
        found = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]
        return [found_event for found_event in found if event is None or found_event["ev"] == event]

    def produced(self, side: str) -> int:
        return sum(1 for event in self.events("enq") if event["side"] == side and "post" in event)

    def fired(self, *, post: bool) -> Events:
        return [fire for fire in self.events("fire") if fire["post"] == post]

    def ran(self, side: str, *, post: bool | None = None) -> list[str]:
        return [
            event["tag"]
            for event in self.events("ran")
            if event["side"] == side and (post is None or event["post"] == post)
        ]


@pytest.fixture
def upgrade(
    pg_dsn: str, pg_schema: str, tmp_path: Path, old_code: Callable[[int], _old_code.OldCode]
) -> Callable[[int], Run]:
    """A ``Run`` from a schema version, on a fresh schema."""
    return lambda version: Run(pg_dsn, pg_schema, tmp_path, old_code(version))


def drain(run_: Run, store: alkstore.Store) -> None:
    """Run what is left with the new code in this process, journalled as the ``drain`` side."""
    for name in (WORK, GRAVES, LONG, *ONLY.values()):
        while (job := store.queue(name).claim("drain")) is not None:
            tag = job.payload["tag"]
            if tag == "beat":
                assert job.boundary is not None
                tag = f"beat@{job.boundary.isoformat()}"
            run_.record("ran", "drain", tag=tag, id=job.id, post=True, at=time.time(), run_at=job.run_at.timestamp())
            job.ack()
    assert not store.outbox(HOOKS).run_once("drain", lambda payload, job: pytest.fail(f"undelivered {payload}"))


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_a_rolling_upgrade_from_schema_version(version: int, upgrade: Callable[[int], Run]) -> None:
    run_ = upgrade(version)
    filled = run_.client("fill", "old")
    assert filled.returncode == 0, filled.stderr
    with pytest.raises(SchemaOutOfDate, match=f"is at version {version}, and this alkstore needs"):
        alkstore.open(run_.dsn, schema=run_.schema, min_size=0, max_size=1)

    with run_.worker("old") as old:
        # Six runs, six claims and acks: past psycopg's five executions, the old code's statements are
        # prepared, and must survive the migration's DDL on their tables.
        run_.wait(lambda: len(run_.ran("old")) >= 6, "the old worker runs jobs before the migration")
        migrated = run([ALKSTORE, "migrate", "--url", run_.dsn, "--schema", run_.schema], timeout=PATIENCE * 2)
        assert migrated.returncode == 0, migrated.stderr
        (run_.dir / "migrated").touch()
        late = run_.start("probe", "old")  # an old process started after the migration, beside the rest
        with alkstore.open(run_.dsn, schema=run_.schema, min_size=0, max_size=1) as store:
            for dead in run_.events("dead"):
                info = store.get_job(dead["id"])
                assert info is not None
                assert info.state is JobState.DEAD, info
                assert (info.payload, info.last_error) == ({"tag": dead["tag"]}, "buried before the upgrade")
                assert store.requeue_dead(dead["id"])
            for n in range(2):  # jobs the new code enqueues, for the old worker alone to claim
                tag = f"test-for-old-{n}"
                run_.record("enq", "test", tag=tag, id=store.queue(ONLY["old"]).enqueue({"tag": tag}))
            with run_.worker("new") as new:
                out, err = late.communicate(timeout=PATIENCE)
                assert out.startswith("refused DatabaseError:"), out + err
                assert "upgrade alkstore" in out
                run_.wait(lambda: len(run_.ran("old", post=True)) >= 3, "the old worker keeps working after migrate")
                run_.wait(lambda: len(run_.ran("new")) >= 2, "the new worker runs jobs")
                run_.wait(lambda: {"test-for-old-0", "test-for-old-1"} <= set(run_.ran("old")), "old runs new jobs")
                run_.wait(lambda: run_.produced("old") == PRODUCE, "the old worker produces")
                run_.stop(old)
                run_.wait(lambda: run_.produced("new") == PRODUCE, "the new worker produces")
                run_.wait(lambda: len(run_.fired(post=True)) >= 2, "the schedule fires after the migration")
                enqueued = {event["tag"] for event in run_.events("enq")}
                run_.wait(lambda: enqueued <= set(run_.ran("new") + run_.ran("old")), "every job runs")
                [beat] = [schedule for schedule in store.schedules() if schedule.name == "beat"]
                assert store.unschedule("beat")
                run_.stop(new)
            drain(run_, store)
    check(run_.events(), beat.next_boundary)


def check(events: Events, next_boundary: datetime) -> None:
    """Nothing lost or doubled, delayed jobs not early, the long job acked by the old code after the
    migration, and the schedule's boundaries one a second in the phase it was registered with."""
    enqueued = [event["tag"] for event in events if event["ev"] == "enq"]
    ran = Counter(event["tag"] for event in events if event["ev"] == "ran")
    fires = [event for event in events if event["ev"] == "fire"]
    beats = {f"beat@{fire['boundary']}" for fire in fires}
    assert len(set(enqueued)) == len(enqueued)
    assert {tag: count for tag, count in ran.items() if count != 1} == {}, "run more than once"
    assert set(ran) == set(enqueued) | beats, "lost, or run without being enqueued"
    assert Counter(fire["id"] for fire in fires) == Counter(
        event["id"] for event in events if event["ev"] == "ran" and event["tag"].startswith("beat@")
    )
    for event in events:
        if event["ev"] == "ran" and event["run_at"]:
            assert event["at"] >= event["run_at"] - 0.05, f"{event['tag']} ran before its run_at"
    sides = {event["tag"]: event["side"] for event in events if event["ev"] == "ran"}
    assert {sides[f"test-for-old-{n}"] for n in range(2)} == {"old"}, "the old code runs what the new enqueued"
    assert {sides[f"fill-for-new-{n}"] for n in range(2)} == {"new"}, "the new code runs what the old enqueued"
    [long] = [event for event in events if event["ev"] == "ran" and event["tag"] == "long"]
    assert long["side"] == "old", long
    assert long["post"], long
    [registered] = [event for event in events if event["ev"] == "schedule"]
    first = datetime.fromisoformat(registered["next"])
    boundaries = sorted(datetime.fromisoformat(fire["boundary"]) for fire in fires)
    assert boundaries == [first + timedelta(seconds=n) for n in range(len(boundaries))], "a boundary skipped or moved"
    assert (next_boundary - first) % timedelta(seconds=1) == timedelta(0), "the schedule's phase moved"


@pytest.mark.parametrize("version", sorted(_old_code.PINNED))
def test_a_pinned_old_code_is_that_versions_code_from_this_history(version: int) -> None:
    """A pin replaces the computed commit by another of the same version: after migration ``version``
    was added, before migration ``version + 1`` was, on this history."""
    commit = from_history(lambda: _old_code.old_commit(version))
    added, superseded = _old_code.adder(version), _old_code.adder(version + 1)
    assert commit == _old_code.PINNED[version]
    assert _old_code.newest_migration(commit) == version
    assert _old_code.is_ancestor(added, commit)
    assert _old_code.is_ancestor(commit, superseded)
