"""The short nemesis run: every process kind on a PostgreSQL cluster of its own (the server restarted among
the faults), workers of both runtimes, skewed clocks, every fault kind, and the checker finds nothing.

About a minute of wall time: a calm lead-in (so boundaries before the first fault are checked
for misses), then faults until a few thousand operations are logged, then heal, drain and
check. The counts are asserted too, so a run that did nothing, or spared a fault kind, fails.
The long run is by hand (README.md, docs/reliability.md).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from .history import Kind, load_history
from .proc import CHORES
from .run import FAULT_KINDS, Config, nemesis_run

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SHORT = Config(seed=20261201, operations=2500, faults=12, calm=24.0, calm_every=0, max_seconds=90.0)


def test_a_short_nemesis_run_injects_every_fault_and_the_checker_finds_no_anomaly(tmp_path: Path) -> None:
    result = nemesis_run(SHORT, tmp_path / "run")
    assert result.anomalies == [], "\n".join(result.anomalies)
    assert result.crashed == []
    assert result.drained, "the queues drained once the faults ended"
    assert result.operations >= SHORT.operations
    assert result.judged >= 1, "the calm lead-in's boundaries were judged for misses"
    assert {kind: result.faults[kind] >= 1 for kind in FAULT_KINDS} == dict.fromkeys(FAULT_KINDS, True)
    assert result.faults["cont"] == result.faults["stop"]
    assert result.faults["heal"] == result.faults["cut"]
    events = load_history(tmp_path / "run" / "history")
    kinds = Counter(event.kind for event in events)
    lived = {
        Kind.ENQUEUE_COMMITTED,
        Kind.ENQUEUE_ROLLED_BACK,
        Kind.HEARTBEAT,
        Kind.ACK,
        Kind.RETRY,
        Kind.BURY,
        Kind.SCHEDULE_REGISTER,
        Kind.SCHEDULE_FIRE,
        Kind.OUTBOX_COMMIT,
        Kind.DELIVERY,
    }
    assert {kind for kind in lived if kinds[kind] == 0} == set(), "every step was taken at least once"
    assert any(event.kind is Kind.ACK and event.ok is False for event in events), "a lapsed lease's ack was refused"
    assert result.skews[60] >= 1, "processes ran with their wall clocks a minute ahead"
    assert result.skews[-60] >= 1, "and a minute behind"
    ran_by = {event.process.rsplit("-", 1)[0] for event in events if event.kind is Kind.RUN_START}
    assert {"worker", "async-worker", "task-worker", "task-async-worker"} <= ran_by, "every kind of worker ran jobs"
    overruns = {e.job for e in events if e.kind is Kind.ENQUEUE_COMMITTED and e.queue == CHORES and e.tag == "overrun"}
    starts = Counter(e.job for e in events if e.kind is Kind.RUN_START and e.job in overruns)
    assert max(starts.values(), default=0) >= 2, "a chore that outran its timeout was given up and run again"
    assert any(event.key and event.key.startswith("u") for event in events if event.kind is Kind.ENQUEUE_COMMITTED)
    calls = Counter(
        (event.process, event.began) for event in events if event.kind is Kind.ENQUEUE_COMMITTED and event.began
    )
    assert max(calls.values()) > 1, "a batch enqueue committed several jobs in one call"
