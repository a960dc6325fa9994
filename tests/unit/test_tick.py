"""The tick planner (``alkstore.scheduler._tick``): the catch-up of one tick, cut into bounded transactions."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from alkstore.engine import DueSchedule, TickBudget
from alkstore.rules._boundary import CATCH_UP_CAP
from alkstore.scheduler._tick import ROW_BYTES, TickPlan, plan_tick
from tests.support import MIDNIGHT

SECOND = timedelta(seconds=1)
NOW = MIDNIGHT + 100 * SECOND
ROOMY = TickBudget(rows=10_000, bytes=2**40)


def due(name: str, behind: int, size: int = 10, interval_s: int = 1) -> DueSchedule:
    """A schedule ``behind`` boundaries behind at ``NOW`` (its first due boundary ``behind - 1`` seconds ago)."""
    return DueSchedule(name, interval_s, "q", None, None, None, NOW - (behind - 1) * SECOND, size)


def play(schedules: list[DueSchedule], budget: TickBudget) -> tuple[list[tuple[str, object]], Counter[str], int]:
    """Plan transaction after transaction at ``NOW``, applying each plan, until nothing is left."""
    state = {s.name: s for s in schedules}
    fired: Counter[str] = Counter()
    fires: list[tuple[str, object]] = []
    transactions = 0
    while True:
        transactions += 1
        plan = plan_tick(state.values(), {}, NOW, budget, dict(fired))
        for fire in plan.fires:
            fires.append((fire.schedule, fire.boundary))
            fired[fire.schedule] += 1
        for name, boundary, _ in plan.advanced:
            old = state[name]
            state[name] = DueSchedule(name, old.interval_s, old.queue, None, None, None, boundary, old.payload_size)
        assert transactions < 10_000, "the plans never finished"
        if not plan.more:
            assert all(s.next_boundary > NOW for s in state.values())
            return fires, fired, transactions


def test_a_roomy_budget_fires_every_due_boundary_in_one_transaction_oldest_first() -> None:
    plan = plan_tick([due("a", 3), due("b", 2)], {}, NOW, ROOMY, {})
    assert not plan.more
    assert [(fire.schedule, fire.boundary) for fire in plan.fires] == sorted(
        ((fire.schedule, fire.boundary) for fire in plan.fires), key=lambda item: (item[1], item[0])
    )
    assert Counter(fire.schedule for fire in plan.fires) == {"a": 3, "b": 2}


def test_a_tick_cut_into_transactions_keeps_the_cap_the_order_and_the_skip() -> None:
    tight = TickBudget(rows=10, bytes=2**40)
    fires, fired, transactions = play([due("a", 70), due("b", 5)], tight)
    assert fired == {"a": 64, "b": 5}
    assert transactions == 7
    assert len(set(fires)) == len(fires), "a boundary fired twice"
    a_boundaries = [boundary for name, boundary in fires if name == "a"]
    assert a_boundaries == [NOW - 69 * SECOND + n * SECOND for n in range(64)], "oldest first, none skipped early"


def test_the_byte_budget_bounds_a_transaction_by_its_payloads() -> None:
    size = 1_000_000
    budget = TickBudget(rows=10_000, bytes=10 * (size + ROW_BYTES))
    plan = plan_tick([due("big", 64, size=size)], {}, NOW, budget, {})
    assert len(plan.fires) == 10
    assert plan.more
    _, fired, transactions = play([due("big", 64, size=size)], budget)
    assert (fired["big"], transactions) == (64, 7)


def test_a_fire_larger_than_the_whole_budget_still_fires_alone() -> None:
    budget = TickBudget(rows=10, bytes=100)
    plan = plan_tick([due("huge", 3, size=10_000)], {}, NOW, budget, {})
    assert [fire.schedule for fire in plan.fires] == ["huge"]
    assert plan.more


def test_the_cheapest_schedules_go_first_so_a_huge_backlog_never_holds_up_a_small_one() -> None:
    budget = TickBudget(rows=100, bytes=5 * (1_000_000 + ROW_BYTES))
    plan = plan_tick([due("huge", 64, size=1_000_000), due("small", 1, size=12)], {}, NOW, budget, {})
    assert "small" in {fire.schedule for fire in plan.fires}
    assert plan.advanced[0][0] == "small"


def test_a_schedule_not_yet_due_is_left_out_and_costs_nothing() -> None:
    later = DueSchedule("later", 60, "q", None, None, None, NOW + SECOND, 10)
    plan = plan_tick([later], {}, NOW, ROOMY, {})
    assert (plan.fires, plan.advanced, plan.more) == ((), (), False)


# -- the edges of one plan -------------------------------------------------------------------------


def test_a_schedule_not_yet_due_is_passed_over_and_the_due_ones_after_it_are_planned() -> None:
    ahead = DueSchedule("ahead", 1, "q", None, None, None, NOW + SECOND, 1)  # the cheapest: taken first
    plan = plan_tick([ahead, due("b", 2, size=50)], {}, NOW, ROOMY, {})
    assert [fire.schedule for fire in plan.fires] == ["b", "b"]
    assert [name for name, _, _ in plan.advanced] == ["b"]


def test_a_schedule_capped_earlier_in_the_tick_is_left_alone_and_the_next_one_is_planned() -> None:
    plan = plan_tick([due("capped", 5, size=1), due("b", 1, size=50)], {}, NOW, ROOMY, {"capped": CATCH_UP_CAP})
    assert [fire.schedule for fire in plan.fires] == ["b"]
    assert [name for name, _, _ in plan.advanced] == ["b"], "neither fired nor skipped forward: it waits"
    assert plan.skipped == ()
    assert not plan.more


def test_a_schedule_one_short_of_the_cap_fires_one_more_boundary_and_skips_the_rest() -> None:
    plan = plan_tick([due("a", 5)], {}, NOW, ROOMY, {"a": CATCH_UP_CAP - 1})
    assert len(plan.fires) == 1
    assert plan.skipped == (("a", 4),)


def test_the_last_row_of_the_budget_is_used() -> None:
    plan = plan_tick([due("a", 2, size=1), due("b", 1, size=2)], {}, NOW, TickBudget(rows=3, bytes=2**40), {})
    assert Counter(fire.schedule for fire in plan.fires) == {"a": 2, "b": 1}
    assert not plan.more


def test_a_budget_spent_exactly_leaves_the_next_schedule_for_another_transaction() -> None:
    plan = plan_tick([due("a", 2, size=1), due("b", 1, size=2)], {}, NOW, TickBudget(rows=2, bytes=2**40), {})
    assert [fire.schedule for fire in plan.fires] == ["a", "a"]
    assert [name for name, _, _ in plan.advanced] == ["a"]
    assert plan.more


def test_a_plan_result_carries_the_ids_and_the_soonest_boundary_and_refuses_a_short_id_list() -> None:
    plan = plan_tick([due("a", 2)], {}, NOW, ROOMY, {})
    soonest = NOW + 7 * SECOND
    result = plan.result([11, 12], soonest)
    assert [(fire.schedule, fire.job_id) for fire in result.fires] == [("a", 11), ("a", 12)]
    assert result.soonest == soonest
    assert result.more is False
    with pytest.raises(ValueError, match="zip"):
        plan.result([11], soonest)


def test_a_byte_budget_spent_by_one_schedule_leaves_the_next_for_another_transaction() -> None:
    room = 3 * (100 + ROW_BYTES)  # three fires of the first schedule, nothing of the second
    plan = plan_tick([due("a", 3, size=100), due("b", 1, size=200)], {}, NOW, TickBudget(rows=100, bytes=room), {})
    assert isinstance(plan, TickPlan)
    assert [fire.schedule for fire in plan.fires] == ["a", "a", "a"]
    assert [name for name, _, _ in plan.advanced] == ["a"]
    assert plan.more is True


def test_the_byte_budget_counts_down_across_schedules() -> None:
    room = 2 * (10 + ROW_BYTES) + (20 + ROW_BYTES)  # a's two fires and one of b's
    plan = plan_tick(
        [due("a", 2, size=10), due("b", 2, size=20), due("c", 1, size=30)], {}, NOW, TickBudget(100, room), {}
    )
    assert Counter(fire.schedule for fire in plan.fires) == {"a": 2, "b": 1}
    assert plan.more is True
