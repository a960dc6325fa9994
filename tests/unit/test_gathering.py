"""How long a worker's claim round under a backlog waits for more of its slots to free (ADR 022, amended):
a claim for every slot carries their acks and jobs in one commit where a claim each commits once each."""

from __future__ import annotations

from datetime import timedelta

from alkstore.port._time import ManualClock
from alkstore.worker._parts import GATHER_WAIT, gather_wait, gathered
from tests.support import MIDNIGHT

ACK_DELAY = 0.02
CLAIM_TOOK = 0.001


def test_a_worker_without_a_backlog_claims_for_its_first_free_slot() -> None:
    assert gathered(4, full=False) == 1
    assert gather_wait(1, 4, False, MIDNIGHT, MIDNIGHT, CLAIM_TOOK, ACK_DELAY) == 0.0


def test_under_a_backlog_the_round_waits_for_every_slot() -> None:
    assert gathered(4, full=True) == 4
    assert gathered(1, full=True) == 1, "a single slot never waits"
    assert gather_wait(4, 4, True, MIDNIGHT, MIDNIGHT, CLAIM_TOOK, ACK_DELAY) == 0.0, "all free: at once"
    assert gather_wait(1, 1, True, MIDNIGHT, MIDNIGHT, CLAIM_TOOK, ACK_DELAY) == 0.0


def test_the_wait_runs_from_when_the_first_slot_freed_on_the_stores_clock() -> None:
    clock = ManualClock(MIDNIGHT)
    freed_at = clock.now()
    assert gather_wait(2, 4, True, freed_at, clock.now(), CLAIM_TOOK, ACK_DELAY) == CLAIM_TOOK
    clock.advance(timedelta(microseconds=400))
    assert abs(gather_wait(3, 4, True, freed_at, clock.now(), CLAIM_TOOK, ACK_DELAY) - 0.0006) < 1e-9
    clock.advance(timedelta(microseconds=600))
    assert gather_wait(3, 4, True, freed_at, clock.now(), CLAIM_TOOK, ACK_DELAY) == 0.0, "waited as long as a claim"
    clock.advance(timedelta(seconds=1))
    assert gather_wait(3, 4, True, freed_at, clock.now(), CLAIM_TOOK, ACK_DELAY) == 0.0, "never negative"


def test_the_wait_is_no_longer_than_gather_wait_the_ack_delay_or_the_last_claim() -> None:
    clock = ManualClock(MIDNIGHT)
    now = clock.now()
    assert gather_wait(1, 4, True, now, now, 1.0, ACK_DELAY) == GATHER_WAIT, "a slow claim: GATHER_WAIT at most"
    assert gather_wait(1, 4, True, now, now, 1.0, 0.0005) == 0.0005, "acks never wait past ack_delay"
    assert gather_wait(1, 4, True, now, now, 1.0, 0.0) == 0.0, "ack_delay=0: no gathering"
    assert gather_wait(1, 4, True, now, now, 0.0, ACK_DELAY) == 0.0, "a claim that took no time: none either"
