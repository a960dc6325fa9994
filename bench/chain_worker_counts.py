"""What a chain's step costs a one-slot worker on PostgreSQL beside an independent job's, in counts (ADR 073).

Run by hand, never from the test suite::

    .venv/bin/python bench/chain_worker_counts.py [--dsn URL] [--jobs 300] [--rounds 2]

Each round drains a chain of ``--jobs`` no-op tasks (each waiting on the one before) and as many
independent ones through an ``alkstore.Worker`` of one slot, and prints per job: the engine's calls
by statement (a pipelined pair of statements is one call, one round trip), and the Python calls of
every thread of the process while the worker ran (``cProfile``, one profile per thread, merged).
Counts, which the machine's load does not move; the rates printed beside them are the load's. Another
checkout's code runs the same script with ``PYTHONPATH=<checkout>/core:<checkout>/adapters``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, QUEUE, load_average, scratch_stores

import alkstore


class Profiled:
    """A profile of the calling thread and one of each thread started while it is on, merged at the end."""

    def __init__(self) -> None:
        self.profiles = [cProfile.Profile()]
        self._run = threading.Thread.run

    def __enter__(self) -> Profiled:
        profiles, run = self.profiles, self._run

        def profiled(thread: threading.Thread) -> None:
            profile = cProfile.Profile()
            profiles.append(profile)
            profile.enable()
            try:
                run(thread)
            finally:
                profile.disable()

        threading.Thread.run = profiled  # type: ignore[method-assign, assignment]
        self.profiles[0].enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.profiles[0].disable()
        threading.Thread.run = self._run  # type: ignore[method-assign]

    def calls(self) -> int:
        """Every Python call (primitive or not) the profiles saw."""
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            stats.add(profile)
        return sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    jobs, name = args.jobs, f"bench_chainwk_{uuid.uuid4().hex[:8]}"
    print(f"load before      {load_average()}")
    with scratch_stores(args.dsn, (name,)) as stores:
        store = stores[name]
        engine: Any = store.engine
        named = ((key, getattr(engine._sql, key)) for key in dir(engine._sql) if not key.startswith("_"))
        statements = {id(value): key for key, value in named if isinstance(value, str)}
        calls: Counter[tuple[str, ...]] = Counter()
        tasks = alkstore.Tasks()
        left = [0]
        stops = [alkstore.StopToken()]

        @tasks.task("noop", queue=QUEUE)
        def noop(n: int) -> None:
            left[0] -= 1
            if not left[0]:
                stops[0].cancel()

        def counted(kind: str, call: Callable[..., Any]) -> Callable[..., Any]:
            def count(*args: Any, **kwargs: Any) -> Any:
                calls[(kind, *(statements[id(arg)] for arg in args if id(arg) in statements))] += 1
                return call(*args, **kwargs)

            return count

        connections = engine._connections
        for kind in ("one", "all", "two"):
            setattr(connections, kind, counted(kind, getattr(connections, kind)))
        for _ in range(args.rounds):
            for chain in (True, False):
                if chain:
                    store.enqueue_graph(alkstore.chain(*(noop.s(n=n) for n in range(jobs))))
                else:
                    noop.enqueue_many(store, [{"n": n} for n in range(jobs)])
                gc.collect()
                left[0], stops[0] = jobs, alkstore.StopToken()
                worker = alkstore.Worker(store, tasks, concurrency=1, poll_interval=0.05)
                calls.clear()
                started = time.perf_counter()
                with Profiled() as profiled:
                    worker.run(stops[0])
                seconds = time.perf_counter() - started
                subject = "chain" if chain else "independent"
                print(f"{subject}: {jobs / seconds:,.0f} jobs/s, Python calls per job {profiled.calls() / jobs:.0f}")
                for (kind, *names), count in calls.most_common():
                    if count / jobs >= 0.05:
                        print(f"    {count / jobs:.3f} per job  {kind}: {', '.join(names)}")
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
