"""``alkstore prune``: every queue's dead jobs past the retention, a batch at a time (ADR 023), and the action log
past its own (ADR 068); ``alkstore worker --action-retention``, the log's retention in a worker's upkeep."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

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
