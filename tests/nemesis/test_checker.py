"""The nemesis checker: a clean history reports nothing, each planted anomaly is reported with its evidence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .checker import AnomalyKind, check, judged_boundaries
from .history import Event, HistoryWriter, Kind, Snapshot, load_history, load_snapshot
from .model import PARAMS, PLANTS, Recorder, clean_histories


def run_checker(rec: Recorder) -> list[object]:
    return list(check(rec.events, rec.snapshot(), PARAMS))


def test_a_clean_history_of_every_step_reports_nothing() -> None:
    rec = Recorder()
    rec.register("tick", rec.now + 1.0, 1.0)
    done, dead, pending, rolled_back = rec.job(), rec.job(), rec.job(), rec.job()
    rec.enqueue(done)
    rec.enqueue(dead, max_attempts=1)
    rec.enqueue(pending)
    rec.enqueue(rolled_back, committed=False)
    rec.claim(done, 1, "worker-0", lease=1.0)
    rec.run_start(done, 1, "worker-0")
    rec.log(Kind.FAULT, "nemesis", action="stop", target="worker-0")
    rec.advance(1.5)
    rec.claim(done, 2, "worker-1")
    rec.run_start(done, 2, "worker-1")
    rec.run_end(done, 2, "worker-1")
    rec.ack(done, 2, "worker-1")
    rec.log(Kind.FAULT, "nemesis", action="cont", target="worker-0")
    rec.run_end(done, 1, "worker-0")
    rec.ack(done, 1, "worker-0", ok=False)
    rec.claim(dead, 1, "worker-1")
    rec.run_start(dead, 1, "worker-1")
    rec.run_end(dead, 1, "worker-1")
    rec.bury(dead, 1, "worker-1")
    rec.dead.add(dead)
    rec.pending.add(pending)
    rec.fire_due()
    rec.log(Kind.FAULT, "nemesis", action="cut")
    rec.advance(10.0)  # an outage: its boundaries are skipped, and that is not reported
    rec.log(Kind.FAULT, "nemesis", action="heal")
    rec.skip_due()
    for message, key in [("m1", "a"), ("m2", "a")]:
        rec.commit(message, key)
        rec.deliver(message, key)
    rec.finish()
    assert run_checker(rec) == []


@pytest.mark.parametrize("kind", list(AnomalyKind))
def test_a_planted_anomaly_is_reported_alone_with_its_kind_and_evidence(kind: AnomalyKind) -> None:
    rec = Recorder()
    planted = PLANTS[kind](rec)
    rec.finish()
    assert run_checker(rec) == [planted]


def test_every_anomaly_kind_has_a_plant() -> None:
    assert set(PLANTS) == set(AnomalyKind)


def test_a_run_killed_with_its_worker_no_longer_holds_the_job() -> None:
    rec = Recorder()
    job = rec.job()
    rec.enqueue(job)
    rec.claim(job, 1, "worker-0")  # a long lease, but its holder is gone
    rec.run_start(job, 1, "worker-0")
    rec.log(Kind.FAULT, "nemesis", action="kill", target="worker-0")
    rec.claim(job, 2, "worker-1")
    rec.run_start(job, 2, "worker-1")
    rec.run_end(job, 2, "worker-1")
    rec.ack(job, 2, "worker-1")
    rec.finish()
    assert run_checker(rec) == []


def test_a_boundary_near_a_fault_may_go_unfired_but_one_far_from_it_may_not() -> None:
    rec = Recorder()
    grace = PARAMS.ttl + PARAMS.catch_up
    near = rec.now + 0.5
    rec.register("near", near, 1e6, ticking=False)
    rec.log(Kind.FAULT, "nemesis", action="kill", target="scheduler-0")
    rec.advance(grace + 1)
    far = rec.now
    register_far = rec.register("far", far, 1e6, ticking=False)
    rec.finish()
    assert [(a.kind, a.subject, a.evidence) for a in check(rec.events, rec.snapshot(), PARAMS)] == [
        (AnomalyKind.MISSED_FIRE, f"schedule far at {far}", (register_far,))
    ]


def test_only_the_boundaries_far_from_every_fault_are_counted_as_judged() -> None:
    rec = Recorder()
    grace = PARAMS.ttl + PARAMS.catch_up
    rec.register("near", rec.now + 0.5, 1e6, ticking=False)
    rec.log(Kind.FAULT, "nemesis", action="kill", target="scheduler-0")
    rec.advance(grace + 1)
    rec.register("far", rec.now, 1e6, ticking=False)
    rec.finish()
    assert judged_boundaries(rec.events, PARAMS) == 1
    assert judged_boundaries([e for e in rec.events if e.schedule != "far"], PARAMS) == 0


def test_keyed_order_is_checked_only_in_the_outboxes_that_keep_it() -> None:
    rec = Recorder()
    rec.commit("m1", "a", outbox="loose")
    rec.commit("m2", "a", outbox="loose")
    rec.deliver("m2", "a")
    rec.deliver("m1", "a")
    rec.finish()
    assert run_checker(rec) == []


@settings(max_examples=60, deadline=None)
@given(clean_histories())
def test_a_random_clean_history_of_the_model_reports_nothing(rec: Recorder) -> None:
    rec.finish()
    assert run_checker(rec) == []


@settings(max_examples=100, deadline=None)
@given(clean_histories(), st.sampled_from(list(AnomalyKind)))
def test_any_anomaly_planted_into_a_clean_history_is_reported_alone(rec: Recorder, kind: AnomalyKind) -> None:
    planted = PLANTS[kind](rec)
    rec.finish()
    assert run_checker(rec) == [planted]


# The history's files.


def test_the_loader_merges_every_process_file_in_time_order(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "producer") as producer, HistoryWriter(tmp_path, "worker-0") as worker:
        enqueue = producer.log(Kind.ENQUEUE_COMMITTED, job=1, queue="q", tag="t1", max_attempts=3)
        claim = worker.log(Kind.CLAIM, job=1, fence=1, worker="worker-0", lease_until=1e9)
        ack = worker.log(Kind.ACK, began=claim.mono, job=1, fence=1, worker="worker-0", ok=True)
    assert load_history(tmp_path) == [enqueue, claim, ack]
    assert [event.seq for event in (claim, ack)] == [1, 2]


def test_the_loader_drops_the_torn_line_a_killed_process_left(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "worker-0") as worker:
        whole = worker.log(Kind.RUN_START, job=1, fence=1, worker="worker-0")
    with (tmp_path / "worker-0.jsonl").open("a", encoding="utf-8") as file:
        file.write(replace(whole, seq=2).to_json()[:20])
    assert load_history(tmp_path) == [whole]


def test_the_loader_refuses_a_line_with_a_field_it_does_not_know(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"kind": "claim", "process": "p", "seq": 1, "mono": 1, "wall": 1, "x": 1}\n')
    with pytest.raises(ValueError, match="unknown event fields"):
        load_history(tmp_path)


def test_a_snapshot_reads_back_as_written(tmp_path: Path) -> None:
    snapshot = Snapshot(pending=frozenset({1}), running=frozenset({2}), dead=frozenset({3}), delivered=frozenset({"m"}))
    (tmp_path / "snapshot.json").write_text(snapshot.to_json())
    assert load_snapshot(tmp_path / "snapshot.json") == snapshot


def test_an_event_reads_back_as_written() -> None:
    event = Event(Kind.FAULT, "nemesis", 1, 2.5, 1e9, action="cut", target="proxy")
    assert Event.from_json(event.to_json()) == event


def test_an_ack_issued_before_a_newer_claim_was_granted_is_not_stale_though_logged_after_it() -> None:
    rec = Recorder()
    job = rec.job()
    rec.enqueue(job)
    rec.claim(job, 1, "worker-0", lease=1.0)
    rec.run_start(job, 1, "worker-0")
    rec.run_end(job, 1, "worker-0")
    issued = rec.now
    rec.advance(1.5)
    rec.claim(job, 2, "worker-1")  # the engine sweeps a lease it saw lapse, while the ack was in flight
    rec.log(Kind.ACK, "worker-0", began=issued, job=job, fence=1, worker="worker-0", ok=True)
    rec.finish()
    assert run_checker(rec) == []


def test_a_message_the_sink_holds_is_delivered_though_no_courier_logged_it() -> None:
    rec = Recorder()
    rec.commit("m1", "a")
    rec.delivered.add("m1")  # the courier was killed between delivering and logging
    rec.finish()
    assert run_checker(rec) == []


def test_a_job_whose_ack_was_issued_but_never_answered_is_not_lost() -> None:
    rec = Recorder()
    job = rec.job()
    rec.enqueue(job)
    rec.claim(job, 1, "worker-0")
    rec.run_start(job, 1, "worker-0")
    rec.run_end(job, 1, "worker-0")
    rec.log(Kind.ACK, "worker-0", job=job, fence=1, worker="worker-0")  # the intent, logged before the call
    rec.log(Kind.FAULT, "nemesis", action="kill", target="worker-0")
    rec.finish()
    assert run_checker(rec) == []


def test_a_job_whose_only_ack_was_refused_and_is_gone_is_lost() -> None:
    rec = Recorder()
    job = rec.job()
    enqueue = rec.enqueue(job)
    rec.claim(job, 1, "worker-0")
    rec.ack(job, 1, "worker-0", ok=False)
    rec.finish()
    assert [(a.kind, a.evidence) for a in check(rec.events, rec.snapshot(), PARAMS)] == [(AnomalyKind.LOST, (enqueue,))]


def test_a_run_whose_claim_was_released_took_no_attempt() -> None:
    rec = Recorder()
    job = rec.job()
    rec.enqueue(job, max_attempts=1)
    rec.claim(job, 1, "worker-0")
    rec.run_start(job, 1, "worker-0")
    rec.run_end(job, 1, "worker-0")
    rec.release(job, 1, "worker-0")  # stopping before the job could finish
    rec.claim(job, 2, "worker-1")
    rec.run_start(job, 2, "worker-1")
    rec.run_end(job, 2, "worker-1")
    rec.ack(job, 2, "worker-1")
    rec.finish()
    assert run_checker(rec) == []


@pytest.mark.parametrize("crashed", [True, False])
def test_a_rolled_back_id_given_again_after_a_crash_names_the_later_job(crashed: bool) -> None:
    """The run of 2026-12-05: a server crash right after a rolled-back batch, and the ids it had drawn
    committed again by another producer a moment later. Runs of the later job are no anomaly; a run
    before its commit, or with no crash between, still is."""
    rec = Recorder()
    job = rec.job()
    rollback = rec.enqueue(job, committed=False)
    if crashed:
        rec.log(Kind.FAULT, "nemesis", action="server_immediate")
    rec.advance(0.5)
    rec.enqueue(job)
    rec.advance(0.5)
    claim = rec.claim(job, 1, "worker-0")
    rec.run_start(job, 1, "worker-0")
    rec.run_end(job, 1, "worker-0")
    rec.ack(job, 1, "worker-0")
    found = [(a.kind, a.evidence) for a in check(rec.events, rec.snapshot(), PARAMS)]
    assert found == ([] if crashed else [(AnomalyKind.ROLLED_BACK_RAN, (rollback, claim))])
