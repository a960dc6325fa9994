"""The vacuum rule (ADR 023): a table is due once its dead rows pass a floor plus a tenth of its live rows,
a low floor where the server's autovacuum does not cover it and a high one where it does."""

from __future__ import annotations

import pytest

from alkstore._upkeep import BEHIND_DEAD_ROWS, VACUUM_DEAD_FRACTION, VACUUM_DEAD_ROWS, vacuum_due
from alkstore.engine import TableStats


def stats(dead: int, live: int = 0, *, autovacuum: bool = False) -> TableStats:
    return TableStats("jobs", live, dead, autovacuum, vacuumable=True)


@pytest.mark.parametrize(("autovacuum", "floor"), [(False, VACUUM_DEAD_ROWS), (True, BEHIND_DEAD_ROWS)])
def test_a_table_is_due_once_its_dead_rows_reach_the_floor_plus_a_fraction_of_its_live_ones(
    autovacuum: bool, floor: int
) -> None:
    assert vacuum_due([stats(floor - 1, autovacuum=autovacuum)]) == []
    assert vacuum_due([stats(floor, autovacuum=autovacuum)]) == [stats(floor, autovacuum=autovacuum)]
    deep = 1_000_000
    bar = floor + int(VACUUM_DEAD_FRACTION * deep)
    assert vacuum_due([stats(bar - 1, deep, autovacuum=autovacuum)]) == []
    assert vacuum_due([stats(bar, deep, autovacuum=autovacuum)]) == [stats(bar, deep, autovacuum=autovacuum)]


def test_a_worker_waits_for_autovacuum_to_fall_far_behind_before_it_steps_in() -> None:
    assert VACUUM_DEAD_ROWS < BEHIND_DEAD_ROWS
    assert vacuum_due([stats(VACUUM_DEAD_ROWS, autovacuum=True)]) == []


def test_only_the_due_tables_are_named_in_their_order() -> None:
    quiet = TableStats("dead_jobs", 10, 3, False, True)
    busy = TableStats("jobs", 1000, 50_000, False, True)
    assert vacuum_due([quiet, busy]) == [busy]
    assert vacuum_due([]) == []
