"""The run table's claiming turn (ADR 049): one claim round at a time, by the claim loop or by a slot whose
run just ended, which then claims without waking the claim loop; the turn goes back to the claim loop
whenever a slot cannot take it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from alkstore import StopToken
from alkstore.worker._parts import Run
from alkstore.worker._runs import Runs

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class FakeJob:
    id: int


def run_of(job_id: int, *, running: bool = True) -> Run:
    run = Run(FakeJob(job_id), NOW, NOW, None)
    run.running = running
    return run


def table(slots: int, *runs: Run) -> Runs:
    table = Runs(slots)
    table.add(list(runs))
    return table


def test_the_claim_loop_takes_the_turn_for_the_free_slots_and_waits_while_a_round_is_under_way() -> None:
    runs = table(2, run_of(1))
    stop = StopToken()
    assert runs.free(stop, StopToken()) == 1
    # the turn is held: the loop's next wait ends only with a stop, though a slot is free
    waiting = threading.Thread(target=lambda: results.append(runs.free(stop, StopToken())))
    results: list[int] = []
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()
    assert results == []
    runs.end_turn()
    waiting.join(5)
    assert results == [1]


def test_a_slot_whose_run_ended_takes_the_turn_and_counts_its_own_slot_free() -> None:
    ended, other = run_of(1), run_of(2)
    runs = table(3, ended, other)
    assert runs.take_turn(ended) == 2
    assert [run.job.id for run in runs.live()] == [2], "the ended run is forgotten"
    assert runs.take_turn(other) == 0, "one round at a time"
    assert runs.live() == [], "a slot refused the turn: its run is forgotten all the same, as finished does"
    runs.end_turn()
    assert runs.take_turn(other) == 3


def test_a_slot_takes_no_turn_while_claimed_jobs_wait_for_a_slot() -> None:
    ended, prefetched = run_of(1), run_of(2, running=False)
    runs = table(2, ended, prefetched)
    assert runs.take_turn(ended) == 0
    assert {run.job.id for run in runs.live()} == {2}
    prefetched.abandoned = True  # handed back: it no longer waits
    assert runs.take_turn(ended) == 2


def test_the_claim_loop_gets_the_turn_back_only_once_a_slot_is_free() -> None:
    ended = run_of(1)
    runs = table(1, ended)
    stop = StopToken()
    woken: list[int] = []
    loop = threading.Thread(target=lambda: woken.append(runs.free(stop, StopToken())))
    loop.start()
    assert runs.take_turn(ended) == 1
    runs.add([run_of(2)])  # the round claimed the slot's next job
    runs.end_turn()
    loop.join(0.5)
    assert loop.is_alive(), "no free slot: the claim loop sleeps on"
    assert woken == []
    assert runs.take_turn(runs.live()[0]) == 1
    runs.end_turn()  # nothing came this time
    loop.join(5)
    assert woken == [1]


class _Told(threading.Condition):
    """A condition that records how each of its waits ended (``True`` notified, ``False`` timed out) and counts
    its notifications."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[bool] = []
        self.entered = threading.Event()
        self.notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        self.entered.set()
        notified = super().wait(timeout)
        self.ends.append(notified)
        return notified


def test_a_run_that_ends_wakes_the_claim_loop_waiting_for_a_slot_and_a_change_nobody_waits_for_wakes_no_one() -> None:
    ended = run_of(1)
    runs = table(1, ended)
    told = runs._cond = _Told()  # the claim loop waits for a slot: is it woken, or does its wait run out?
    runs.finished(run_of(2))  # nobody waits: nobody is notified
    assert told.notified == 0
    stop = StopToken()
    results: list[int] = []
    loop = threading.Thread(target=lambda: results.append(runs.free(stop, StopToken())))
    loop.start()
    assert told.entered.wait(5)
    # The loop holds the condition but while it waits: this finish runs inside one of its waits.
    runs.finished(ended)
    loop.join(5)
    assert results == [1]
    assert told.ends[-1] is True, "the wait was ended by the finish, not by its timeout"


def test_more_free_returns_as_soon_as_the_slots_wanted_are_free() -> None:
    running = run_of(1)
    runs = table(2, running)
    assert runs.free(StopToken(), StopToken()) == 1  # the turn held, as a gathering round holds it (ADR 022)
    results: list[int] = []
    waiting = threading.Thread(target=lambda: results.append(runs.more_free(2, 60.0)))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive(), "one slot free of the two wanted"
    runs.finished(running)
    waiting.join(30)
    assert results == [2]
    assert runs.more_free(3, 0.0) == 2, "no time to wait: the slots free now"


def test_a_slot_refused_the_turn_wakes_the_claim_loop_waiting_for_a_slot_as_its_run_ends() -> None:
    ended, prefetched = run_of(1), run_of(2, running=False)
    runs = table(2, ended, prefetched)
    told = runs._cond = _Told()
    stop = StopToken()
    results: list[int] = []
    loop = threading.Thread(target=lambda: results.append(runs.free(stop, StopToken())))
    loop.start()
    assert told.entered.wait(5)
    assert runs.take_turn(ended) == 0, "a claimed job waits for a slot: the slot takes it instead"
    loop.join(5)
    assert results == [1]
    assert told.ends[-1] is True, "the wait was ended by the refused turn's finish, not by its timeout"
