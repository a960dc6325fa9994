"""What every benchmark script shares: the server it measures by default, the load it ran under, and
subjects measured interleaved."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

#: The local test server (trust auth), as the test suite and CI find it.
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def load_average() -> str:
    """``/proc/loadavg`` as it reads now, for the record beside a figure."""
    return Path("/proc/loadavg").read_text().strip()


def interleaved(names: Sequence[str], block: Callable[[str], tuple[int, float]], size: int) -> dict[str, float]:
    """Each subject's rate per second: ``block(name)`` (how many it did, in how many seconds) for each name
    in turn, round after round, until each did fewer than ``size``; load that comes and goes hits all alike."""
    totals = {name: [0, 0.0] for name in names}
    live = set(names)
    while live:
        for name in names:
            if name not in live:
                continue
            done, seconds = block(name)
            totals[name][0] += done
            totals[name][1] += seconds
            if done < size:
                live.discard(name)
    return {name: count / seconds for name, (count, seconds) in totals.items()}


def repeated(doc: str, run_once: Callable[[str, int], dict[str, float]]) -> tuple[int, list[dict[str, float]]]:
    """A script's ``--dsn``, ``--jobs`` and ``--repeats`` read, and ``run_once(dsn, jobs)`` run that many times
    between two readings of the load (printed); the number of repeats and each run's rates."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"load before: {load_average()}")
    runs = [run_once(args.dsn, args.jobs) for _ in range(args.repeats)]
    print(f"load after: {load_average()}")
    return args.repeats, runs


def print_rates(repeats: int, runs: Sequence[dict[str, float]], baselines: dict[str, str | None]) -> None:
    """The table of each subject's best rate and its median ratio to its baseline (``None``: it is one)."""
    print(f"| subject | claim+ack/s (best of {repeats}) | ratio to plain (median) |")
    print("| --- | --- | --- |")
    for name, baseline in baselines.items():
        best = max(run[name] for run in runs)
        ratio = "-" if baseline is None else f"{statistics.median(run[name] / run[baseline] for run in runs):.2f}x"
        print(f"| {name} | {best:,.0f} | {ratio} |")
