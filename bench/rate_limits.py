"""Rate limits (ADR 070) on PostgreSQL: what they cost an unlimited queue's claim, and whether they hold.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/rate_limits.py claim-cost --before-src /tmp/alkstore-main [--jobs 4000] [--repeats 3]
    .venv/bin/python bench/rate_limits.py holds [--keys 10000] [--per-key 5] [--per 1] [--workers 4] [--seconds 20]

``claim-cost``: claim+ack of an unlimited queue by the code of another checkout (``--before-src``,
e.g. ``git archive main core adapters | tar -x -C /tmp/alkstore-main``) against this one, each in a
process of its own on a schema of its own, measured interleaved in blocks of 250 (load that comes
and goes hits both alike): the median ratio after/before over the repeats. A limited queue of this
checkout (a key limit that never binds: every job its own key) is measured beside them.

``holds``: ``--keys`` keys, each limited to ``--per-key`` starts per ``--per`` seconds, each with more
jobs than its limit lets start in ``--seconds``, claimed and acked by ``--workers`` threads on the
database's clock. Every start's instant (the job's ``claimed_at``) is kept; the script prints the
most starts of one key in any window of ``--per`` seconds (each window starting at a start: the
limit holds when that is at most ``--per-key``, for every key, no tolerance), the keys and windows
over the limit, the shortest gap between two starts of one key against the limit's spacing
(``--per`` / ``--per-key``), and the starts made against what the limits allowed. A ``--per``
above 1 scales the window when the machine cannot claim ``--keys`` x ``--per-key`` jobs a second:
the limit must bind for the run to test it. Results go to ``docs/benchmarks.md`` with the load.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from _bench import DEFAULT_DSN, load_average

BLOCK = 250
CHECKOUT = Path(__file__).resolve().parent.parent


def _use_source(source: str | None) -> None:
    """Import ``alkstore`` from ``source`` (its ``core`` and ``adapters``) instead of this checkout."""
    if source is None:
        return
    ours = {str(CHECKOUT / "core"), str(CHECKOUT / "adapters")}
    sys.path[:] = [entry for entry in sys.path if entry not in ours]
    sys.path[:0] = [str(Path(source) / "core"), str(Path(source) / "adapters")]


def child(dsn: str, jobs: int, source: str | None, limited: bool) -> None:
    """One subject in a process of its own: fill a queue, then claim+ack a block per line read from stdin."""
    _use_source(source)
    import alkstore

    schema = f"bench_rate_{uuid.uuid4().hex[:8]}"
    with alkstore.open(dsn, schema=schema, migrate=True, max_size=2) as store:
        queue = store.queue("q")
        if limited:
            queue.configure(key_rate=alkstore.RateLimit(1, per=3600))
            for n in range(jobs):
                queue.enqueue({"n": n}, alkstore.EnqueueOpts(rate_key=f"k{n}"))
        else:
            for start in range(0, jobs, 1000):
                queue.enqueue_many([{"n": n} for n in range(start, min(jobs, start + 1000))])
        for _ in range(5):  # warm-up: prepared statements, the cached configuration
            if (job := queue.claim("bench")) is not None:
                job.ack()
        from alkstore.adapters.postgres._migrate import current_version

        print("ready", current_version(), flush=True)  # the schema version: which code this is
        for _ in sys.stdin:
            done, started = 0, time.perf_counter()
            while done < BLOCK and (job := queue.claim("bench")) is not None:
                job.ack()
                done += 1
            print(done, time.perf_counter() - started, flush=True)
        with store.transaction() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def claim_cost(args: argparse.Namespace) -> None:
    subjects = {"before (unlimited)": (args.before_src, False), "after (unlimited)": (None, False)}
    subjects["after (key-limited, never binding)"] = (None, True)
    runs = []
    versions: dict[str, int] = {}
    print(f"load before: {load_average()}")
    for _ in range(args.repeats):
        procs = {}
        for name, (source, limited) in subjects.items():
            argv = [sys.executable, __file__, "child", "--dsn", args.dsn, "--jobs", str(args.jobs)]
            argv += ["--limited"] if limited else []
            argv += ["--source", source] if source else []
            procs[name] = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name, proc in procs.items():
            assert proc.stdout is not None
            ready, version = proc.stdout.readline().split()
            assert ready == "ready"
            versions[name] = int(version)
        totals = {name: [0, 0.0] for name in procs}
        live = set(procs)
        while live:
            for name, proc in procs.items():
                if name not in live:
                    continue
                assert proc.stdin is not None
                assert proc.stdout is not None
                proc.stdin.write("block\n")
                proc.stdin.flush()
                done, seconds = proc.stdout.readline().split()
                totals[name][0] += int(done)
                totals[name][1] += float(seconds)
                if int(done) < BLOCK:
                    live.discard(name)
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        runs.append({name: count / seconds for name, (count, seconds) in totals.items()})
    print(f"load after: {load_average()}")
    print(f"schema versions: {versions}")
    print(f"| subject | claim+ack/s (best of {args.repeats}) | ratio to before (median) |")
    print("| --- | --- | --- |")
    for name in subjects:
        best = max(run[name] for run in runs)
        ratio = statistics.median(run[name] / run["before (unlimited)"] for run in runs)
        print(f"| {name} | {best:,.0f} | {ratio:.2f}x |")


def holds(args: argparse.Namespace) -> None:
    import alkstore

    schema = f"bench_rate_{uuid.uuid4().hex[:8]}"
    per_key = args.per_key
    jobs_per_key = int(per_key * args.seconds / args.per * 1.5) + 1
    starts: dict[str, list[datetime]] = defaultdict(list)
    lock = threading.Lock()
    print(f"load before: {load_average()}")
    with alkstore.open(args.dsn, schema=schema, migrate=True, max_size=args.workers + 1) as store:
        queue = store.queue("calls")
        queue.configure(key_rate=alkstore.RateLimit(per_key, per=args.per))
        filled = time.perf_counter()
        for round_ in range(jobs_per_key):  # one transaction per round: every key's next job
            with store.transaction() as tx:
                for k in range(args.keys):
                    store.enqueue_tx(tx, "calls", {"key": k, "n": round_}, alkstore.EnqueueOpts(rate_key=f"k{k}"))
        print(f"enqueued {jobs_per_key * args.keys:,} jobs in {time.perf_counter() - filled:.0f} s")
        stop = time.monotonic() + args.seconds

        def work(worker: str) -> None:
            while time.monotonic() < stop:
                jobs = queue.claim_many(worker, 10)
                for job in jobs:
                    assert job.claimed_at is not None
                    with lock:
                        starts[str(job.payload["key"])].append(job.claimed_at)
                    job.ack()
                if not jobs:
                    time.sleep(0.01)

        threads = [threading.Thread(target=work, args=(f"w{n}",)) for n in range(args.workers)]
        began = store.clock.now()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ended = store.clock.now()
        with store.transaction() as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print(f"load after: {load_average()}")
    worst, over_keys, over_windows, windows = 0, 0, 0, 0
    gap = timedelta.max
    period = timedelta(seconds=args.per)
    for times in starts.values():
        times.sort()
        over = 0
        for i, start in enumerate(times):
            inside = bisect.bisect_left(times, start + period) - i
            worst = max(worst, inside)
            over += inside > per_key
            windows += 1
            if i:
                gap = min(gap, start - times[i - 1])
        over_windows += over
        over_keys += over > 0
    made = sum(len(times) for times in starts.values())
    seconds = (ended - began).total_seconds()
    allowed = args.keys * per_key * seconds / args.per
    print(f"{args.keys:,} keys at {per_key} per {args.per:g} s, {args.workers} workers, {seconds:.1f} s")
    print(f"most starts of one key in any {args.per:g} s window: {worst} (limit {per_key})")
    print(f"keys over the limit: {over_keys}; windows over it: {over_windows} of {windows:,}")
    print(f"shortest gap between two starts of one key: {gap.total_seconds():.6f} s (spacing {args.per / per_key:g} s)")
    print(f"keys that started: {len(starts):,}; most starts of one key: {max(map(len, starts.values()), default=0)}")
    print(f"starts: {made:,} of {allowed:,.0f} the limits allowed ({made / allowed:.1%}), {made / seconds:,.0f}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cost = commands.add_parser("claim-cost")
    cost.add_argument("--before-src", required=True)
    cost.add_argument("--jobs", type=int, default=4000)
    cost.add_argument("--repeats", type=int, default=3)
    held = commands.add_parser("holds")
    held.add_argument("--keys", type=int, default=10_000)
    held.add_argument("--per-key", type=int, default=5)
    held.add_argument("--workers", type=int, default=4)
    held.add_argument("--per", type=float, default=1, help="the limit's period, seconds")
    held.add_argument("--seconds", type=float, default=20)
    one = commands.add_parser("child")
    one.add_argument("--jobs", type=int, required=True)
    one.add_argument("--source")
    one.add_argument("--limited", action="store_true")
    for command in (cost, held, one):
        command.add_argument("--dsn", default=DEFAULT_DSN)
    args = parser.parse_args()
    if args.command == "child":
        child(args.dsn, args.jobs, args.source, args.limited)
    elif args.command == "claim-cost":
        claim_cost(args)
    else:
        holds(args)


if __name__ == "__main__":
    main()
