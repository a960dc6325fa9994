"""Instructions (or calls) per job of an ``alkstore.Worker`` draining no-op jobs: core's per-job path.

A store (``memory://`` or a fresh SQLite file) is loaded with ``--jobs`` jobs of a no-op task in
batches of 100, then a sync ``Worker`` (``concurrency=1``, ``--prefetch`` as given) drains them in
this thread; the task stops the worker at the last one. With ``--load-only`` the drain is skipped:
run both under ``valgrind --tool=callgrind`` and the difference over ``--jobs`` is the drain's
instructions per job, whatever the machine's load::

    valgrind --tool=callgrind --callgrind-out-file=d.out .venv/bin/python bench/worker_per_job.py sqlite
    valgrind --tool=callgrind --callgrind-out-file=l.out .venv/bin/python bench/worker_per_job.py sqlite --load-only

``--api`` drains the same jobs by ``Queue.claim`` and ``Job.ack``, one at a time, with no worker.
``--profile`` instead runs the drain under ``cProfile`` (every thread's) and prints the top functions by
inclusive time with their calls per job.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import threading
from pathlib import Path

import alkstore

QUEUE = "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=("memory", "sqlite"))
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--prefetch", type=int, default=0)
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--api", action="store_true", help="drain by Queue.claim and Job.ack instead of a Worker")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--self-time", action="store_true", help="with --profile: sorted by own time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = "memory://" if args.engine == "memory" else f"sqlite:///{Path(directory) / 'bench.db'}"
        store = alkstore.open(url)
        tasks = alkstore.Tasks()
        stop = alkstore.StopToken()
        done = [0]

        @tasks.task("noop", queue=QUEUE)
        def noop(n: int) -> None:
            done[0] += 1
            if done[0] == args.jobs:
                stop.cancel()

        for first in range(0, args.jobs, 100):
            noop.enqueue_many(store, [{"n": n} for n in range(first, min(first + 100, args.jobs))])
        worker = alkstore.Worker(store, tasks, concurrency=1, prefetch=args.prefetch, poll_interval=0.05)
        if args.api and not args.load_only:  # the same jobs through the API, no worker: what the worker adds
            queue = store.queue(QUEUE)
            while (job := queue.claim("w")) is not None:
                noop.func(**job.payload)
                job.ack()
        elif not args.load_only:
            if args.profile:
                profiles = [cProfile.Profile()]
                thread_run = threading.Thread.run

                def profiled(thread: threading.Thread) -> None:
                    profiles.append(cProfile.Profile())
                    profiles[-1].runcall(thread_run, thread)

                threading.Thread.run = profiled  # type: ignore[method-assign,assignment]
                profiles[0].runcall(worker.run, stop)
                threading.Thread.run = thread_run  # type: ignore[method-assign]
                stats = pstats.Stats(profiles[0])
                for other in profiles[1:]:
                    stats.add(other)
                stats.sort_stats("cumulative")
                width = max(args.jobs, 1)
                column = 2 if args.self_time else 3
                table = stats.stats.items()  # type: ignore[attr-defined]
                rows = sorted(table, key=lambda item: -item[1][column])[: args.top]
                for (file, line, name), (_, calls, own, total, _) in rows:
                    print(
                        f"{total * 1e6 / width:8.2f} µs {own * 1e6 / width:7.2f} µs {calls / width:6.2f}/job "
                        f"{Path(file).name}:{line} {name}"
                    )
            else:
                worker.run(stop)
            assert done[0] == args.jobs, done[0]
        store.close()


if __name__ == "__main__":
    main()
