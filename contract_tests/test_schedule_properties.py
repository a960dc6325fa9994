"""Properties of the scheduler over generated scenarios: the engines agree, and they agree with a naive model.

Two properties share one scenario generator (``_scenario.scenarios``):

* every available engine plays the same scenario and shows the same outcome — fires in
  order, fired jobs' stamps, next boundaries, the soonest deadline, the jobs each worker
  handled, and how every fired job ended (done, dead with which error, pending, running);
* each engine's outcome keeps the invariants of docs/design.md (checked from the observations
  alone) and equals what an independent, naive model computes. The model does not call
  ``alkstore``'s boundary math: the engines share that code, so only an outside model
  can catch a bug in it.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import pytest
from hypothesis import given

from alkstore import ManualClock

from ._engines import EngineTarget
from ._profiles import sized
from ._scenario import CAP, Advance, Outcome, Register, Scenario, TickSeen, Unschedule, Work, expected, play, scenarios


@pytest.fixture(scope="module")
def every_engine(all_engines: tuple[list[EngineTarget], list[str]]) -> list[EngineTarget]:
    """All engines, or a skip: comparing one engine with itself would pass without proving anything."""
    targets, missing = all_engines
    if len(targets) < 2:
        pytest.skip("cross-engine equality needs at least two engines; unavailable: " + "; ".join(missing))
    return targets


def run(target: EngineTarget, scenario: Scenario) -> Outcome:
    clock = ManualClock(scenario.start)
    with target.store(clock) as store:
        return play(store, clock, scenario)


def _describe(scenario: Scenario, index: int) -> str:
    return f"step {index}: {scenario.steps[index]!r}"


@pytest.mark.postgres
@sized(0.5)
@given(scenario=scenarios())
def test_every_engine_shows_the_same_outcome_for_the_same_scenario(
    every_engine: list[EngineTarget], scenario: Scenario
) -> None:
    reference, *others = every_engine
    want = run(reference, scenario)
    for other in others:
        got = run(other, scenario)
        for index, (mine, theirs) in enumerate(zip(want.seen, got.seen, strict=True)):
            assert theirs == mine, f"{other.name} differs from {reference.name} at {_describe(scenario, index)}"
        assert got.census == want.census, f"{other.name} and {reference.name} differ in how fired jobs ended"


def check_invariants(scenario: Scenario, outcome: Outcome) -> None:
    """docs/design.md's invariants, judged from what the store showed (not from the model)."""
    seen = outcome.seen
    state: dict[str, tuple[timedelta, datetime]] = {}  # name -> (interval, next boundary) as last shown
    fired_ever: set[tuple[str, datetime]] = set()
    max_attempts: dict[tuple[str, datetime], int] = {}
    last_id = 0
    clock = scenario.start
    for index, (step, observed) in enumerate(zip(scenario.steps, seen, strict=True)):
        where = _describe(scenario, index)
        if isinstance(step, Advance):
            clock += step.by
        elif isinstance(step, Register):
            assert isinstance(observed, tuple)
            interval, boundary = observed[2], observed[6]
            if step.name in state and state[step.name][0] == interval:
                assert boundary == state[step.name][1], f"same interval must keep phase and backlog ({where})"
            else:
                assert boundary == clock + interval, f"a new phase starts one interval from now ({where})"
            state[step.name] = (interval, boundary)
        elif isinstance(step, Unschedule):
            assert observed is (step.name in state), where
            state.pop(step.name, None)
        elif isinstance(observed, TickSeen):
            now = observed.now
            assert now == clock, where
            fires = observed.fires
            assert list(fires) == sorted(fires, key=lambda f: (f[1], f[0])), f"fires out of order ({where})"
            per_schedule = Counter(name for name, _, _ in fires)
            assert all(count <= CAP for count in per_schedule.values()), f"more than {CAP} fires ({where})"
            for name, boundary, _ in fires:
                assert (name, boundary) not in fired_ever, f"{name} fired {boundary} twice ({where})"
                fired_ever.add((name, boundary))
            for job_id in observed.job_ids:
                assert job_id > last_id, f"job ids must increase with every insert ({where})"
                last_id = job_id
            for (name, boundary, queue), job in zip(fires, observed.jobs, strict=True):
                assert (job[0], job[2], job[3], job[6], job[8], job[9]) == (queue, name, boundary, now, "pending", 0)
                max_attempts[(name, boundary)] = job[5]
            listed = {entry[0]: entry for entry in observed.listing}
            assert set(listed) == set(state), f"the listing must hold exactly the registered schedules ({where})"
            for name, (interval, before) in state.items():
                after = listed[name][6]
                mine = [boundary for fired_name, boundary, _ in fires if fired_name == name]
                elapsed = 0 if before > now else (now - before) // interval + 1
                assert mine == [before + n * interval for n in range(min(elapsed, CAP))], (
                    f"{name} must fire its {CAP} oldest elapsed boundaries, oldest first ({where})"
                )
                assert after > now, f"{name} left a due boundary neither fired nor skipped ({where})"
                assert (after - before) % interval == timedelta(0), f"{name} lost its phase ({where})"
                if elapsed:
                    assert after - interval <= now, f"{name} skipped past the first boundary after now ({where})"
                else:
                    assert after == before, f"{name} moved without firing ({where})"
                state[name] = (interval, after)
            assert observed.soonest == min((b for _, b in state.values()), default=None), where
        elif isinstance(step, Work):
            assert isinstance(observed, tuple)
            assert len(observed) <= len(step.dispositions), where
            for name, boundary, attempts, _ in observed:
                assert 1 <= attempts <= max_attempts[(name, boundary)], f"attempts beyond max_attempts ({where})"
    assert len(outcome.census) == len(fired_ever), "every fired job is accounted for"
    for ended in outcome.census:
        if ended is None:
            continue  # done: acked and gone
        state_name, attempts, error, died_at = ended[8], ended[9], ended[10], ended[13]
        assert state_name in ("pending", "running", "dead"), ended
        assert 0 <= attempts <= ended[5], f"attempts beyond max_attempts: {ended}"
        assert (state_name == "dead") == (died_at is not None), ended
        assert state_name != "dead" or error is not None, f"a dead job without its error: {ended}"


@sized(1.0)
@given(scenario=scenarios())
def test_ticks_keep_every_invariant_and_match_a_naive_model(engine: EngineTarget, scenario: Scenario) -> None:
    outcome = run(engine, scenario)
    check_invariants(scenario, outcome)
    model = expected(scenario)
    for index, (got, want) in enumerate(zip(outcome.seen, model.seen, strict=True)):
        assert got == want, f"{engine.name} disagrees with the model at {_describe(scenario, index)}"
    for got_job, want_job in zip(outcome.census, model.census, strict=True):
        assert got_job == want_job, f"{engine.name} disagrees with the model on how a fired job ended"
