"""When a worker's claim round begins (ADR 022, amended): under a backlog it waits, briefly, for every slot to
free, so one claim carries their acks and jobs in one commit where a claim each commits once each."""

from __future__ import annotations

from datetime import timedelta

from alkstore.port._time import ManualClock
from alkstore.worker._parts import GATHER_PAUSE, GATHER_WAIT, Gathering
from tests.support import MIDNIGHT

ACK_DELAY = 0.02
MS = timedelta(milliseconds=1)


def backlogged(clock: ManualClock, slots: int = 4, took: timedelta = MS, ack_delay: float = ACK_DELAY) -> Gathering:
    """A worker's gathering after a round that got all it asked for and took ``took`` on the store's ``clock``."""
    gathering = Gathering(slots, ack_delay)
    began = clock.now()
    gathering.claimed(slots, slots, began, clock.advance(took))
    return gathering


def test_a_worker_without_a_backlog_claims_for_its_first_free_slot() -> None:
    clock = ManualClock(MIDNIGHT)
    gathering = Gathering(4, ACK_DELAY)
    assert gathering.want() == 1
    assert gathering.wait(1) == 0.0
    gathering.claimed(4, 3, clock.now(), clock.advance(MS))
    assert gathering.want() == 1, "the last claim came back short: no backlog"
    assert gathering.wait(1) == 0.0


def test_under_a_backlog_the_round_waits_for_every_slot_as_long_as_the_last_claim_took() -> None:
    clock = ManualClock(MIDNIGHT)
    gathering = backlogged(clock, took=timedelta(microseconds=700))
    assert gathering.want() == 4
    assert gathering.wait(4) == 0.0, "every slot free: at once"
    assert gathering.wait(1) == 0.0007
    assert gathering.wait(3) == 0.0007
    gathering.claimed(4, 4, clock.now(), clock.advance(timedelta(microseconds=300)))
    assert gathering.wait(2) == 0.0003, "each round measures its claim anew"
    assert backlogged(clock, slots=1).wait(1) == 0.0, "a single slot never waits"


def test_the_wait_is_no_longer_than_gather_wait_or_the_ack_delay() -> None:
    clock = ManualClock(MIDNIGHT)
    slow = timedelta(seconds=1)
    assert backlogged(clock, took=slow).wait(1) == GATHER_WAIT, "a slow claim: GATHER_WAIT at most"
    assert backlogged(clock, took=slow, ack_delay=0.0005).wait(1) == 0.0005, "acks wait no longer"
    assert backlogged(clock, took=slow, ack_delay=0.0).wait(1) == 0.0, "ack_delay=0: no gathering"
    assert backlogged(clock, took=timedelta(0)).wait(1) == 0.0, "a claim that took no time: none"


def test_a_wait_that_fell_short_makes_the_next_rounds_claim_at_once() -> None:
    clock = ManualClock(MIDNIGHT)
    gathering = backlogged(clock)
    gathering.waited(4)
    assert gathering.want() == 4, "every slot came: gathering goes on"
    gathering.waited(3)
    for _ in range(GATHER_PAUSE):
        assert gathering.want() == 1
        assert gathering.wait(1) == 0.0
        gathering.claimed(1, 1, clock.now(), clock.advance(MS))
    assert gathering.want() == 4, "the pause over, a full claim gathers again"
