"""The harness's pieces: the final snapshot read from a store, and a run directory checked end to end."""

from __future__ import annotations

from pathlib import Path

import pytest

import alkstore
from alkstore import EnqueueOpts

from .harness import main, read_snapshot
from .history import HistoryWriter, Kind, Snapshot


def test_the_snapshot_holds_each_job_under_its_state() -> None:
    with alkstore.open("memory://") as store:
        queue = store.queue("q")
        running, dead, ready = queue.enqueue("a"), queue.enqueue("b"), queue.enqueue("c")
        delayed = queue.enqueue("d", EnqueueOpts(delay=3600))
        done = store.queue("other").enqueue("e")
        claimed = queue.claim("w")
        assert claimed is not None
        assert claimed.id == running
        buried = queue.claim("w")
        assert buried is not None
        buried.fail("boom")
        finished = store.queue("other").claim("w")
        assert finished is not None
        finished.ack()
        snapshot = read_snapshot(store, ["q", "other"], ["m1"])
    assert snapshot == Snapshot(
        pending=frozenset({ready, delayed}),
        running=frozenset({running}),
        dead=frozenset({dead}),
        delivered=frozenset({"m1"}),
    )
    assert done not in snapshot.pending | snapshot.running | snapshot.dead


def test_checking_a_run_directory_exits_one_and_prints_each_anomaly_with_its_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with HistoryWriter(tmp_path / "history", "producer") as producer:
        producer.log(Kind.ENQUEUE_COMMITTED, job=7, queue="q", tag="t7", max_attempts=3)
    (tmp_path / "snapshot.json").write_text(Snapshot().to_json())
    assert main([str(tmp_path), "--ttl", "2", "--catch-up", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "lost: job 7"
    assert '"job": 7' in out[1]


def test_checking_a_clean_run_directory_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with HistoryWriter(tmp_path / "history", "producer") as producer:
        producer.log(Kind.ENQUEUE_COMMITTED, job=7, queue="q", tag="t7", max_attempts=3)
    (tmp_path / "snapshot.json").write_text(Snapshot(pending=frozenset({7})).to_json())
    assert main([str(tmp_path), "--ttl", "2", "--catch-up", "1"]) == 0
    assert capsys.readouterr().out == "no anomaly\n"
