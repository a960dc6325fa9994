"""``alkstore prune``: every queue's dead jobs past the retention, a batch at a time (ADR 023)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from alkstore import ManualClock, Store
from alkstore.adapters.cli import EXIT_OK, EXIT_USAGE, main

from .conftest import Prepared


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
    }
    assert store.get_job(recent) is None
    assert cli(capsys, "prune")[1] == "pruned 0 dead jobs in all\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--older-than=-1d"], "not a duration"), (["--queue", " q"], "leading or trailing whitespace")],
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
