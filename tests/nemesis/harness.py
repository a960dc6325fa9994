"""The nemesis harness's first pieces: reading the final snapshot from a store, and checking a run's directory.

A run directory holds ``history/`` (one ``*.jsonl`` file per process, ``history.HistoryWriter``)
and ``snapshot.json``; ``python -m tests.nemesis.harness RUN_DIR`` checks it and exits 1 on
any anomaly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import alkstore
from alkstore import JobPhase

from .checker import Params, check
from .history import Snapshot, load_history, load_snapshot

__all__ = ["check_run", "main", "read_snapshot"]


def _ids(store: alkstore.Store, queue: str, phase: JobPhase) -> set[int]:
    """Every job id of ``queue`` in ``phase``, page by page."""
    ids: set[int] = set()
    cursor: str | None = None
    while True:
        page = store.jobs(queue, phase, limit=1000, cursor=cursor)
        ids.update(job.id for job in page.jobs)
        if page.cursor is None:
            return ids
        cursor = page.cursor


def read_snapshot(store: alkstore.Store, queues: Iterable[str], delivered: Iterable[str]) -> Snapshot:
    """The final state of ``queues`` in ``store``, with the message ids the couriers' sink holds."""
    pending: set[int] = set()
    running: set[int] = set()
    dead: set[int] = set()
    for queue in queues:
        pending |= _ids(store, queue, JobPhase.READY) | _ids(store, queue, JobPhase.DELAYED)
        running |= _ids(store, queue, JobPhase.RUNNING)
        dead |= _ids(store, queue, JobPhase.DEAD)
    return Snapshot(frozenset(pending), frozenset(running), frozenset(dead), frozenset(delivered))


def check_run(run: Path, params: Params) -> list[str]:
    """The anomalies of the run in ``run``, one line each with its evidence (empty when clean)."""
    anomalies = check(load_history(run / "history"), load_snapshot(run / "snapshot.json"), params)
    lines = []
    for anomaly in anomalies:
        lines.append(f"{anomaly.kind}: {anomaly.subject}")
        lines.extend(f"    {event.to_json()}" for event in anomaly.evidence)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Check a run directory; print its anomalies; 0 when clean, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis.harness", description=__doc__)
    parser.add_argument("run", type=Path)
    parser.add_argument("--ttl", type=float, required=True, help="the scheduler lock's lease, seconds")
    parser.add_argument("--catch-up", type=float, required=True, help="how long a new leader may take, seconds")
    parser.add_argument("--slack", type=float, default=0.0, help="the most the clocks may disagree, seconds")
    parser.add_argument("--ordered-outbox", action="append", default=[], help="an outbox keeping keyed order")
    args = parser.parse_args(argv)
    params = Params(args.ttl, args.catch_up, args.slack, frozenset(args.ordered_outbox))
    lines = check_run(args.run, params)
    print("\n".join(lines) if lines else "no anomaly")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
