"""The issue's tick on PostgreSQL (ADR 017): twenty ``@every 1s`` schedules with 1 MB payloads, 70 s
behind, fired by a real leading process under 200 MB of memory, a small schedule beside them
on time, the lease held throughout. The run is ``bench/big_tick.py``'s; its figures are in ADR 017.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from alkstore import CATCH_UP_CAP
from alkstore.scheduler._leader import LEASE_TTL
from tests.support import PATIENCE

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "big_tick.py"
SCHEDULES, MB, BEHIND_S = 20, 1.0, 70


def big_tick(dsn: str) -> dict[str, Any]:
    """One run of ``bench/big_tick.py`` (its own process, and its leader another); its JSON report."""
    argv = [sys.executable, str(BENCH), "--dsn", dsn, "--schedules", str(SCHEDULES), "--mb", str(MB)]
    argv += ["--behind", str(BEHIND_S)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PATIENCE * 10)
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_twenty_1_mb_schedules_70_s_behind_fire_under_200_mb_with_the_small_schedule_on_time(pg_dsn: str) -> None:
    report = big_tick(pg_dsn)
    assert "error" not in report, report["error"]
    assert report["peak_rss_mb"] < 200, report
    assert report["catch_up_fires"] == SCHEDULES * CATCH_UP_CAP
    assert report["big_catch_up_fires"] == [CATCH_UP_CAP]  # each big schedule: 64 of its backlog, the rest skipped
    stored = report["stored"]
    assert set(stored) == {f"big-{index:02}" for index in range(SCHEDULES)} | {"small"}
    for name, fired in stored.items():
        assert fired["jobs"] == fired["distinct_boundaries"], f"{name} fired a boundary twice"
        if name != "small":  # every fire carries the whole payload, copied inside the database
            assert fired["payload_mb"] == pytest.approx(fired["jobs"] * MB, rel=1e-3)
    small = report["small"]
    assert small["fires"] >= 2
    assert small["missed_boundaries"] == 0
    assert small["late_max_s"] < LEASE_TTL.total_seconds(), small  # generous: on a quiet machine, milliseconds
    lease = report["lease"]
    assert lease["looks"] > 0
    assert (lease["lapsed"], lease["holders"]) == (0, 1), lease
