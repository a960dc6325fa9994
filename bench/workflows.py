"""Job dependencies (ADR 073) on PostgreSQL beside the same work without them.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/workflows.py [--dsn URL] [--jobs 1000] [--repeats 3] [--fan-in 10000]

- chain: a chain of ``--jobs`` jobs (one graph, each waiting on the one before) run one at a time,
  claim then ack, against as many independent jobs run the same way. Only the runs are timed (the
  enqueue apart, printed). Target (issue 42): the chain at least 0.8x the independent jobs' rate.
- through a worker: the same chain and independent jobs as tasks (a no-op), each block drained by an
  ``alkstore.Worker`` of one slot, timed from its start until every job is durably done; with the
  engine's round trips per job (its calls: a pipelined pair of statements is one). A worker carries
  its acks on its next claim (``ack_and_claim``), so this is the rate a user's worker reaches.
- fan-in: ``--fan-in`` parents (10,000) and one child waiting on all of them (another queue), the
  parents claimed and acked in batches; then the child's queue claimed round by round. Target (issue
  42): the child claimed within one claim round of the last parent's ack (rounds, not time).
- ack path: independent jobs run one at a time on a schema as migrated, against a schema whose
  dependency trigger (``jobs_settle``) is dropped: what the feature costs the ack of a job nobody
  waits on. Target: at most 10 % (a ratio of at least 0.91).

``--sqlite PATH`` runs the chain and the worker's blocks on a SQLite file instead (no trigger to
drop there, no fan-in, and no calls counted: its engine makes no round trips).

Another checkout's code runs the same script with ``PYTHONPATH=<checkout>/core:<checkout>/adapters``
(e.g. ``git archive main core adapters | tar -x -C /tmp/main``): before and after a change, each
ratio taken within its own run.

Blocks alternate between the subjects of a pair, so load that comes and goes hits both alike; each
ratio is the median of the per-run ratios.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).parent))

from _bench import DEFAULT_DSN, QUEUE, drop_trigger, load_average, scratch_stores

import alkstore

CPU: list[float] = []


def run_all(store: alkstore.Store, count: int) -> float:
    """Seconds to claim and ack ``count`` jobs of ``QUEUE``, one at a time (this process's CPU per job in ``CPU``)."""
    queue = store.queue(QUEUE)
    gc.collect()  # the garbage of the block before (a graph's nodes) is not this run's to collect
    cpu = time.process_time()
    started = time.perf_counter()
    done = 0
    while done < count:
        job = queue.claim("bench")
        if job is None:
            raise RuntimeError(f"nothing to claim after {done} of {count} jobs")
        job.ack()
        done += 1
    seconds = time.perf_counter() - started
    CPU.append((time.process_time() - cpu) / count)
    return seconds


def chain_block(store: alkstore.Store, count: int) -> tuple[float, float]:
    """(enqueue seconds, run seconds) of a chain of ``count`` jobs."""
    graph = store.graph()
    for n in range(count):
        graph.add(f"j{n}", QUEUE, n, after=[f"j{n - 1}"] if n else ())
    started = time.perf_counter()
    store.enqueue_graph(graph)
    enqueued = time.perf_counter() - started
    return enqueued, run_all(store, count)


def independent_block(store: alkstore.Store, count: int) -> tuple[float, float]:
    """(enqueue seconds, run seconds) of ``count`` independent jobs."""
    started = time.perf_counter()
    store.queue(QUEUE).enqueue_many(range(count))
    enqueued = time.perf_counter() - started
    return enqueued, run_all(store, count)


class WorkerRuns:
    """A no-op task on ``QUEUE`` and a one-slot ``Worker`` draining a block of its jobs; the engine's calls counted."""

    def __init__(self, store: alkstore.Store, dsn: str | None, schema: str = "") -> None:
        """``dsn`` ``None``: a store on another engine, timed until its worker stopped (which writes the acks)."""
        self.store, self.calls = store, Counter[str]()
        self.tasks = alkstore.Tasks()
        self.left, self.done = 0, threading.Event()
        self.watch = None if dsn is None else psycopg.connect(dsn, autocommit=True)
        self.count_jobs = sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(schema))

        @self.tasks.task("noop", queue=QUEUE)
        def noop(n: int) -> None:
            self.left -= 1
            if not self.left:
                self.done.set()

        self.noop = noop
        connections = getattr(store.engine, "_connections", None)  # PostgreSQL's; SQLite's calls are not counted
        for name in ("one", "all", "two", "transaction", "connection") if connections else ():
            if hasattr(connections, name):  # "two" is not in every version (another checkout on PYTHONPATH)
                setattr(connections, name, self._counted(name, getattr(connections, name)))

    def _counted(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return call(*args, **kwargs)

        return counted

    def block(self, count: int, chain: bool) -> tuple[float, float]:
        """(seconds, engine calls per job) of a worker draining ``count`` jobs: a chain, or independent jobs."""
        if chain:
            self.store.enqueue_graph(alkstore.chain(*(self.noop.s(n=n) for n in range(count))))
        else:
            with self.store.transaction() as tx:
                for n in range(count):
                    self.noop.enqueue_tx(self.store, tx, n=n)
        gc.collect()
        self.left = count
        self.done.clear()
        self.calls.clear()
        stop = alkstore.StopToken()
        worker = alkstore.Worker(self.store, self.tasks, concurrency=1, poll_interval=0.05)
        thread = threading.Thread(target=worker.run, args=(stop,))
        started = time.perf_counter()
        thread.start()
        self.done.wait()
        while self.watch and (row := self.watch.execute(self.count_jobs).fetchone()) and row[0]:
            time.sleep(0.0005)  # durable: the last ack is in
        seconds = time.perf_counter() - started
        calls = sum(self.calls.values()) / count
        stop.cancel()
        thread.join()
        if self.watch is None:
            seconds = time.perf_counter() - started
        return seconds, calls


def fan_in_rounds(store: alkstore.Store, parents: int) -> tuple[int, float]:
    """(claim rounds after the last parent's ack until the child was claimed, seconds its enqueue took) of
    one child waiting on ``parents`` parents; none of its rounds before that ack may find it."""
    queue, children = store.queue(QUEUE), store.queue("fan-in")
    ids = queue.enqueue_many(range(parents))
    started = time.perf_counter()
    children.enqueue("child", alkstore.EnqueueOpts(after=[int(job_id) for job_id in ids]))
    enqueued = time.perf_counter() - started
    acked = 0
    while acked < parents:
        batch = queue.claim_many("bench", min(1000, parents - acked))
        if acked + len(batch) == parents and children.claim("bench") is not None:
            raise RuntimeError("the child was claimed before its last parent's ack")
        if store.ack_many(batch):
            raise RuntimeError("a parent's lease was lost")
        acked += len(batch)
    for rounds in range(1, 11):
        child = children.claim("bench")
        if child is not None:
            child.ack()
            return rounds, enqueued
    raise RuntimeError("the child was not claimed in 10 rounds after its last parent's ack")


def sqlite_runs(args: argparse.Namespace) -> int:
    """The chain against independent jobs, by the store's calls and through a worker, on a SQLite file."""
    print(f"load before      {load_average()}")
    with alkstore.open(f"sqlite:///{args.sqlite}") as store:
        runs, ratios, worker_ratios = WorkerRuns(store, None), [], []
        for repeat in range(args.repeats):
            _, chain_run = chain_block(store, args.jobs)
            _, alone_run = independent_block(store, args.jobs)
            order = [True, False] if repeat % 2 else [False, True]
            worker_runs = {chain: runs.block(args.worker_jobs, chain)[0] for chain in order}
            ratios.append(alone_run / chain_run)
            worker_ratios.append(worker_runs[False] / worker_runs[True])
            print(
                f"run {repeat + 1}: chain {args.jobs / chain_run:,.0f} jobs/s, independent {args.jobs / alone_run:,.0f}"
                f" jobs/s; through a worker {args.worker_jobs / worker_runs[True]:,.0f} / "
                f"{args.worker_jobs / worker_runs[False]:,.0f} jobs/s"
            )
    print(f"chain / independent          {statistics.median(ratios):.2f}x (target >= 0.80x)")
    print(f"worker: chain / independent  {statistics.median(worker_ratios):.2f}x (target >= 0.80x)")
    print(f"load after       {load_average()}")
    return 0


def pg_runs(
    args: argparse.Namespace, stores: dict[str, alkstore.Store], runs: WorkerRuns, plain: str, bare: str
) -> None:
    """The chain, the ack path and the worker's blocks, repeat by repeat, and the fan-in, on PostgreSQL."""
    chain_ratios, ack_ratios, worker_ratios = [], [], []
    for repeat in range(args.repeats):
        chain_enqueue, chain_run = chain_block(stores[plain], args.jobs)
        if repeat % 2:  # which of the two runs first alternates, repeat by repeat
            _, bare_run = independent_block(stores[bare], args.jobs)
            _, plain_run = independent_block(stores[plain], args.jobs)
        else:
            _, plain_run = independent_block(stores[plain], args.jobs)
            _, bare_run = independent_block(stores[bare], args.jobs)
        chain_ratios.append(plain_run / chain_run)
        ack_ratios.append(bare_run / plain_run)
        chain_cpu, *others = (f"{us * 1e6:.0f}" for us in CPU[-3:])
        plain_cpu, bare_cpu = others[::-1] if repeat % 2 else others
        print(
            f"run {repeat + 1}: chain {args.jobs / chain_run:,.0f} jobs/s (enqueued in {chain_enqueue:.2f} s),"
            f" independent {args.jobs / plain_run:,.0f} jobs/s,"
            f" without the trigger {args.jobs / bare_run:,.0f} jobs/s;"
            f" client CPU per job {chain_cpu} / {plain_cpu} / {bare_cpu} us"
        )
        if args.worker_jobs:
            order = [True, False] if repeat % 2 else [False, True]
            worker_runs = {chain: runs.block(args.worker_jobs, chain) for chain in order}
            (chained, chained_calls), (alone, alone_calls) = worker_runs[True], worker_runs[False]
            worker_ratios.append(alone / chained)
            print(
                f"run {repeat + 1}, through a worker: chain {args.worker_jobs / chained:,.0f} jobs/s"
                f" ({chained_calls:.2f} round trips per job), independent {args.worker_jobs / alone:,.0f} jobs/s"
                f" ({alone_calls:.2f})"
            )
    if args.fan_in:
        rounds, enqueued = fan_in_rounds(stores[plain], args.fan_in)
        print(
            f"fan-in of {args.fan_in:,}: child claimed in claim round {rounds} after the last parent's ack"
            f" (target 1; enqueued in {enqueued:.2f} s)"
        )
    print(f"chain / independent          {statistics.median(chain_ratios):.2f}x (target >= 0.80x)")
    print(f"ack path with / without      {statistics.median(ack_ratios):.2f}x (target >= 0.91x)")
    if worker_ratios:
        print(f"worker: chain / independent  {statistics.median(worker_ratios):.2f}x (target >= 0.80x)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fan-in", type=int, default=10_000, help="parents of the fan-in's child (0: none)")
    parser.add_argument("--worker-jobs", type=int, default=1000, help="jobs per worker block (0: no worker run)")
    parser.add_argument("--sqlite", metavar="PATH", help="the chain and the worker's runs on a SQLite file instead")
    args = parser.parse_args()
    if args.sqlite:
        return sqlite_runs(args)
    tag = uuid.uuid4().hex[:8]
    plain, bare, tasked = f"bench_deps_{tag}", f"bench_nodeps_{tag}", f"bench_tasks_{tag}"
    print(f"load before      {load_average()}")
    with scratch_stores(args.dsn, (plain, bare, tasked)) as stores:
        drop_trigger(args.dsn, bare, "jobs_settle")
        runs = WorkerRuns(stores[tasked], args.dsn, tasked)
        try:
            pg_runs(args, stores, runs, plain, bare)
        finally:
            if runs.watch:
                runs.watch.close()
    print(f"load after       {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
