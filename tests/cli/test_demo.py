"""``alkstore demo`` end to end, as a user runs it: in a subprocess, through the installed script."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter

import pytest

from tests._proc import ALKSTORE, LiveProcess, run

EVENT = re.compile(r"^\s+\+(\d+\.\d\d)s  (\w+)\s+(.+?)\s{2,}(.*)$")
RETRY = re.compile(r"attempt (\d+)/(\d+) failed: (.+); retry in (\d+\.\d)s \(at \+(\d+\.\d\d)s\)$")
DEAD = re.compile(r"attempt (\d+)/(\d+) failed: (.+); dead, no attempts left$")
TABLE_ROW = re.compile(r"^\s+(heartbeat|report)\s+(@every \ds)\s+(\d+)$")
COUNT_ROW = re.compile(r"^\s{4}(messages written|delivered|retried|dead|still pending)\s+(\d+)$")


def events(stdout: str) -> list[tuple[float, str, str, str]]:
    """Every event line as (seconds since start, kind, subject, detail)."""
    found = []
    for line in stdout.splitlines():
        match = EVENT.match(line)
        if match:
            found.append((float(match.group(1)), match.group(2), match.group(3), match.group(4)))
    return found


def summary(stdout: str) -> tuple[dict[str, int], dict[str, int]]:
    """The summary's fires per schedule and its outbox counts."""
    assert "summary after" in stdout, stdout
    tail = stdout[stdout.index("summary after") :]
    fires = {m.group(1): int(m.group(3)) for m in map(TABLE_ROW.match, tail.splitlines()) if m}
    counts = {m.group(1): int(m.group(2)) for m in map(COUNT_ROW.match, tail.splitlines()) if m}
    return fires, counts


@pytest.fixture(scope="module")
def demo_run() -> subprocess.CompletedProcess[str]:
    """One run of ``alkstore demo --seconds 11`` (long enough for a best-effort message to die), which succeeded."""
    result = run([ALKSTORE, "demo", "--seconds", "11"])
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.slow
def test_demo_prints_fires_deliveries_a_retry_with_its_delay_and_a_summary_that_adds_up(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    result = demo_run
    assert result.stderr == ""
    seen = events(result.stdout)
    kinds = Counter(kind for _, kind, _, _ in seen)
    fired = Counter(subject for _, kind, subject, _ in seen if kind == "fire")
    assert fired["heartbeat"] >= 2
    assert fired["report"] >= 1
    assert kinds["written"] >= 3
    assert kinds["delivered"] >= 1
    retries = [RETRY.search(detail) for _, kind, _, detail in seen if kind == "retry"]
    assert retries
    assert all(retries), retries
    for retry in retries:
        assert retry is not None
        assert retry.group(1) == "1"  # webhook works on its second attempt; crm has no third
        assert 4.5 <= float(retry.group(4)) <= 5.5  # the outbox curve's first step, 5 s
    leader = [detail for _, kind, _, detail in seen if kind == "leader"]
    assert len(leader) == 2
    assert leader[0].startswith("scheduler leadership acquired by ")
    assert leader[1] == leader[0].replace("acquired", "released")

    fires, counts = summary(result.stdout)
    assert fires == {"heartbeat": fired["heartbeat"], "report": fired["report"]}
    assert counts["messages written"] == kinds["written"]
    assert counts["delivered"] == kinds["delivered"]
    assert counts["retried"] == kinds["retry"]
    assert counts["dead"] == kinds["dead"]
    assert counts["still pending"] == counts["messages written"] - counts["delivered"] - counts["dead"]


@pytest.mark.slow
def test_demo_messages_to_a_down_destination_die_after_one_retry_with_their_error(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    result = demo_run
    seen = events(result.stdout)
    dead = [(subject, DEAD.search(detail)) for _, kind, subject, detail in seen if kind == "dead"]
    assert dead, result.stdout
    for subject, match in dead:
        assert subject.endswith("-> crm")
        assert match is not None
        assert match.group(1) == match.group(2) == "2"
        assert match.group(3) == "503 Service Unavailable"
    first_crm_retry = next(t for t, kind, subject, _ in seen if kind == "retry" and subject == dead[0][0])
    died_at = next(t for t, kind, subject, _ in seen if kind == "dead" and subject == dead[0][0])
    assert died_at - first_crm_retry >= 4.5  # the retry waited out the curve's 5 s before the last attempt
    _, counts = summary(result.stdout)
    assert counts["dead"] == len(dead)


@pytest.mark.slow
def test_sigint_stops_a_running_demo_cleanly_and_still_prints_the_summary() -> None:
    with LiveProcess([ALKSTORE, "demo", "--seconds", "120"]) as demo:
        demo.wait_for(lambda stream, line: stream == "stdout" and " fire " in line, timeout=60)
        demo.proc.send_signal(signal.SIGINT)
        code = demo.finish(timeout=60)

    stdout = "".join(demo.stdout)
    assert code == 0, demo.stderr
    assert demo.stderr == []
    kinds = [kind for _, kind, _, _ in events(stdout)]
    assert "stopping" in kinds
    assert kinds[-1] == "leader"  # the scheduler lease is released after the stop, last of all
    assert "scheduler leadership released by" in stdout
    fires, counts = summary(stdout)
    assert fires["heartbeat"] >= 1
    assert counts["messages written"] >= 0


@pytest.mark.slow
def test_python_dash_m_alkstore_runs_the_demo() -> None:
    result = run([sys.executable, "-m", "alkstore", "demo", "--seconds", "3"])

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("alkstore demo: 3 s on memory://")
    fires, _ = summary(result.stdout)
    assert fires["heartbeat"] >= 1
