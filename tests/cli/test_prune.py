"""``alkstore prune``: every queue's dead jobs past the retention, a batch at a time (ADR 023), and the action log
past its own (ADR 068); ``alkstore worker --action-retention`` and ``--dead-retention``, the log's and the dead
jobs' retentions in a worker's upkeep."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import alkstore
from alkstore import ManualClock, StopToken, Store, Worker
from alkstore.adapters.cli import EXIT_OK, EXIT_USAGE, _operate, _work, build_parser, main
from tests.support import PATIENCE, wait_until

from .conftest import Prepared

#: The application ``alkstore worker`` runs below: one task that is never enqueued.
APP = alkstore.Tasks()


@APP.task("idle", queue="idle")
def idle() -> None:
    """Never run: the worker is there for its upkeep."""


@pytest.fixture
def store(shared: Prepared) -> Store:
    """The store every command opens (one memory engine, a manual clock at midnight)."""
    return shared.store


def kill(store: Store, queue: str) -> int:
    store.queue(queue).enqueue("doomed")
    job = store.queue(queue).claim("w1")
    assert job is not None
    job.fail("boom")
    return job.id


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--url", "memory://"])
    out, err = capsys.readouterr()
    return code, out, err


def test_prune_deletes_every_queue_s_dead_jobs_kept_longer_than_the_retention(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    old = [kill(store, "emails"), kill(store, "reports")]
    clock.advance(timedelta(days=6))
    recent = kill(store, "emails")
    clock.advance(timedelta(days=1))
    assert cli(capsys, "prune") == (
        EXIT_OK,
        "purged 1 dead job of 'emails' that died at least 7d ago\n"
        "purged 1 dead job of 'reports' that died at least 7d ago\n"
        "pruned 2 dead jobs in all\n",
        "",
    )
    assert [store.get_job(job_id) for job_id in old] == [None, None]
    assert store.get_job(recent) is not None
    assert cli(capsys, "prune", "--queue", "reports", "--older-than", "0")[1] == (
        "purged 0 dead jobs of 'reports'\npruned 0 dead jobs in all\n"
    )
    assert json.loads(cli(capsys, "prune", "--older-than", "1d", "--json")[1]) == {
        "older_than": 86400.0,
        "purged": {"emails": 1},
        "expired_results": 0,
        "actions_older_than": 7776000.0,
        "purged_actions": 0,
    }
    assert store.get_job(recent) is None
    assert cli(capsys, "prune")[1] == "pruned 0 dead jobs in all\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--older-than=-1d"], "not a duration"),
        (["--queue", " q"], "leading or trailing whitespace"),
        (["--actions-older-than", "0"], "must be > 0"),
        (["--actions-older-than", "forever"], "not a duration"),
    ],
)
def test_bad_prune_input_is_refused(
    store: Store, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = cli(capsys, "prune", *argv)
    assert out == ""
    assert message in err
    assert code in (EXIT_USAGE, 1)


def test_prune_deletes_the_kept_results_past_their_retention(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    store.queue("reports").configure(keep_results=timedelta(hours=1))
    kept = store.queue("reports").enqueue("monthly")
    job = store.queue("reports").claim("w1")
    assert job is not None
    job.ack(result={"rows": 3})
    assert cli(capsys, "prune")[1] == "pruned 0 dead jobs in all\n"
    assert store.result(kept) is not None
    clock.advance(timedelta(hours=1))
    assert cli(capsys, "prune") == (EXIT_OK, "pruned 0 dead jobs in all\npruned 1 expired result\n", "")
    assert store.result(kept) is None


# -- the action log ---------------------------------------------------------------------------------------


def logged(store: Store, what: str) -> int:
    return store.log_action("pause", what, "Paused.", role="full", address="10.0.0.7")


def test_prune_deletes_the_action_log_past_the_workers_retention_or_as_told(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    oldest = logged(store, "oldest")
    clock.advance(timedelta(days=30))
    older = logged(store, "older")
    clock.advance(timedelta(days=60, microseconds=1))
    recent = logged(store, "recent")
    assert cli(capsys, "prune", "--actions-older-than", "never")[1] == "pruned 0 dead jobs in all\n"
    assert [entry.id for entry in store.actions()] == [recent, older, oldest]
    assert cli(capsys, "prune") == (
        EXIT_OK,
        "pruned 0 dead jobs in all\npruned 1 action log entry older than 90d\n",
        "",
    )
    assert [entry.id for entry in store.actions()] == [recent, older], "90 days, the workers' default"
    shown = json.loads(cli(capsys, "prune", "--queue", "emails", "--actions-older-than", "1d", "--json")[1])
    assert (shown["actions_older_than"], shown["purged_actions"]) == (86400.0, 1), "--queue does not narrow the log"
    assert [entry.id for entry in store.actions()] == [recent]


def test_the_worker_s_action_retention_flag_reaches_its_upkeep(
    shared: Prepared, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, clock = shared.store, shared.clock
    monkeypatch.setattr(_work, "open_store", _operate.open_store)  # the shared memory engine
    old = logged(store, "old")
    clock.advance(timedelta(days=2))
    recent = logged(store, "recent")

    def supervise(worker: Worker) -> int:
        """Run the worker until its upkeep pruned the log, then stop it (no signal needed)."""
        stop = StopToken()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_until(lambda: [entry.id for entry in store.actions()] == [recent], "the upkeep to prune the log")
        finally:
            stop.cancel()
            thread.join(PATIENCE)
        return EXIT_OK

    monkeypatch.setattr(_work, "_supervise", supervise)
    argv = ["worker", "--app", f"{__name__}:APP", "--url", "memory://", "--runtime", "sync"]
    assert main([*argv, "--action-retention", "1d"]) == EXIT_OK
    assert old not in [entry.id for entry in store.actions()]


@pytest.mark.parametrize(("given", "kept"), [([], 7776000.0), (["--action-retention", "12h"], 43200.0)])
def test_the_worker_keeps_the_action_log_90_days_unless_told(given: list[str], kept: float) -> None:
    args = build_parser().parse_args(["worker", "--app", f"{__name__}:APP", *given])
    assert args.action_retention == kept
    never = build_parser().parse_args(["worker", "--app", f"{__name__}:APP", "--action-retention", "never"])
    assert never.action_retention is None


# -- the dead jobs, in a worker's upkeep ------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def worker_store(
    request: pytest.FixtureRequest, shared: Prepared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Store, ManualClock]]:
    """A store on each engine, on the shared manual clock, which ``alkstore worker`` opens too."""
    clock = shared.clock
    if request.param == "memory":
        monkeypatch.setattr(_work, "open_store", _operate.open_store)  # the shared memory engine
        yield shared.store, clock
        return
    if request.param == "sqlite":
        url, schema = f"sqlite:///{tmp_path / 'jobs.db'}", None
    else:
        from alkstore.adapters.postgres.testing import drop_schema, unique_schema

        url, schema = request.getfixturevalue("pg_dsn"), unique_schema("cli")

    def open_here(_url: str, _schema: str | None, **options: Any) -> Store:
        if schema is not None:
            options["schema"] = schema
        return alkstore.open(url, clock=clock, **options)

    monkeypatch.setattr(_work, "open_store", open_here)
    try:
        with open_here(url, schema, migrate=True) as store:
            yield store, clock
    finally:
        if schema is not None:
            drop_schema(url, schema)


def test_the_worker_s_dead_retention_flag_reaches_its_upkeep(
    worker_store: tuple[Store, ManualClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, clock = worker_store
    old, elsewhere = kill(store, "idle"), kill(store, "emails")
    clock.advance(timedelta(days=2))
    recent = kill(store, "idle")

    def supervise(worker: Worker) -> int:
        """Run the worker until its upkeep pruned its queue's dead jobs, then stop it (no signal needed)."""
        stop = StopToken()
        thread = threading.Thread(target=worker.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_until(lambda: store.get_job(old) is None, "the upkeep to prune the dead jobs")
        finally:
            stop.cancel()
            thread.join(PATIENCE)
        return EXIT_OK

    monkeypatch.setattr(_work, "_supervise", supervise)
    argv = ["worker", "--app", f"{__name__}:APP", "--url", "memory://", "--runtime", "sync"]
    assert main([*argv, "--dead-retention", "1d"]) == EXIT_OK
    assert store.get_job(recent) is not None
    assert store.get_job(elsewhere) is not None, "a queue the worker does not serve keeps its dead jobs"


@pytest.mark.parametrize(("given", "kept"), [([], 604800.0), (["--dead-retention", "12h"], 43200.0)])
def test_the_worker_keeps_dead_jobs_7_days_unless_told(given: list[str], kept: float) -> None:
    args = build_parser().parse_args(["worker", "--app", f"{__name__}:APP", *given])
    assert args.dead_retention == kept
    never = build_parser().parse_args(["worker", "--app", f"{__name__}:APP", "--dead-retention", "never"])
    assert never.dead_retention is None
