"""The nemesis run: producers, workers (sync and async), schedulers and couriers as OS processes, half of
them on skewed wall clocks, on a PostgreSQL cluster of the run's own; faults injected on a seeded
schedule (the server restarted among them), then heal, drain, snapshot and check.

``python -m tests.nemesis.run --operations 1000000 --seed 7 --out DIR`` runs until the
processes logged that many operations and every fault kind was injected, then checks the
run (exit 1 on any anomaly); ``tests/nemesis/test_nemesis.py`` runs a short one. The
processes reach the server through ``tests/postgres/_proxy.Proxy``, which the nemesis cuts and
heals; the nemesis itself logs to ``history/nemesis.jsonl`` (one ``fault`` per action).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import alkstore
from tests.postgres._proxy import Proxy

from .checker import Params, judged_boundaries
from .harness import check_run, read_snapshot
from .history import HistoryWriter, Kind, load_history
from .proc import CHORES, LEASE_S, OUTBOX, QUEUE, sink_messages
from .server import Cluster

__all__ = ["FAULT_KINDS", "PARAMS", "Config", "Result", "main", "nemesis_run"]

ROOT = Path(__file__).resolve().parents[2]
#: What the checker allows: the scheduler's 10 s lease, a new leader's catch-up, one host's clocks.
PARAMS = Params(ttl=10.0, catch_up=5.0, slack=0.5, ordered_outboxes=frozenset({OUTBOX}))
#: The faults the nemesis chooses among (``stop`` brings its ``cont``, ``cut`` its ``heal``; ``server_*``
#: restart the database server, cleanly or by a crash).
FAULT_KINDS = ("kill", "stop", "restart", "cut", "exhaust", "server_fast", "server_immediate")
#: Wall-clock skews an incarnation may run under (``faketime``), seconds, drawn evenly: half run skewed.
SKEWS = (0, 0, 60, -60)
#: How long a process asked to stop (SIGTERM) may take before it is killed instead.
STOP_PATIENCE_S = 30.0


@dataclass(frozen=True, slots=True)
class Config:
    """One run's shape: how many of each process, how long, how hard."""

    seed: int = 0
    #: Operations (events the processes logged) to reach before the faults end.
    operations: int = 2000
    #: Faults to inject at least (``stop`` and ``cut`` count once, not with their ``cont``/``heal``).
    faults: int = 10
    #: The faults end by then, however few operations: a bound on the run's length, seconds.
    max_seconds: float = 86400.0
    #: Quiet seconds before the first fault, and after every ``calm_every`` faults (0: never again).
    calm: float = 30.0
    calm_every: int = 10
    #: Seconds between two faults, drawn uniformly.
    gap: tuple[float, float] = (0.5, 2.5)
    producers: int = 2
    workers: int = 2
    async_workers: int = 1
    #: Processes running alkstore's own ``Worker`` and ``AsyncWorker`` over the ``chores`` queue.
    task_workers: int = 1
    task_async_workers: int = 1
    schedulers: int = 2
    couriers: int = 2
    #: A producer's steps per second, about.
    rate: float = 25.0
    #: The most the drain may take, seconds.
    drain_s: float = 120.0


#: The long run's shape, but for what the command line sets.
DEFAULT = Config()


@dataclass(slots=True)
class Result:
    """What a run did and what the checker said."""

    run: Path
    operations: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    anomalies: list[str] = field(default_factory=list)
    #: Processes that exited on their own (a crash), with their exit status.
    crashed: list[str] = field(default_factory=list)
    drained: bool = False
    #: How many schedule boundaries ``missed_fire`` judged (the rest lay near a fault).
    judged: int = 0
    #: Process incarnations started, by their wall clock's skew in seconds.
    skews: Counter[int] = field(default_factory=Counter)
    seconds: float = 0.0


class Child:
    """One incarnation of a role's process (``worker-1.2``: worker 1, started the second time)."""

    def __init__(
        self,
        role: str,
        index: int,
        generation: int,
        run: Path,
        url: str,
        schema: str,
        seed: int,
        rate: float,
        skew: int = 0,
    ):
        self.role, self.index, self.generation, self.skew = role, index, generation, skew
        self.name = f"{role}-{index}.{generation}"
        self.stopped = False
        (run / "logs").mkdir(exist_ok=True)
        self._log: IO[str] = open(run / "logs" / f"{self.name}.log", "w", encoding="utf-8")  # noqa: SIM115
        # Every process logs wall time on this host's clock (its own may be skewed below).
        offset = time.time() - time.monotonic()
        command = [sys.executable, "-m", "tests.nemesis.proc", role, "--id", self.name, "--url", url]
        command += ["--schema", schema, "--run", str(run), "--seed", str(seed), "--rate", str(rate)]
        command += ["--wall-offset", repr(offset)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if skew:
            env.update(_skewed(skew))
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float) -> int | None:
        """Wait for the exit; ``None`` if it did not come in ``timeout``."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


class Ops:
    """Counts the operations logged so far: the lines of every history file but the nemesis's."""

    def __init__(self, history: Path) -> None:
        self._history = history
        self._offsets: dict[Path, int] = {}
        self.count = 0

    def update(self) -> int:
        for path in self._history.glob("*.jsonl"):
            if path.name == "nemesis.jsonl":
                continue
            with path.open("rb") as file:
                file.seek(self._offsets.get(path, 0))
                data = file.read()
            self._offsets[path] = self._offsets.get(path, 0) + len(data)
            self.count += data.count(b"\n")
        return self.count


class Nemesis:
    """The run's processes, and the faults done to them, each logged as a ``fault`` event."""

    def __init__(
        self, config: Config, run: Path, url: str, schema: str, proxy: Proxy, result: Result, server: Cluster
    ) -> None:
        self.config, self.run, self.url, self.schema, self.proxy, self.result = config, run, url, schema, proxy, result
        self.server = server
        self.rng = random.Random(config.seed)
        self.writer = HistoryWriter(run / "history", "nemesis")
        self.ops = Ops(run / "history")
        self.children: dict[tuple[str, int], Child] = {}
        self.generations: Counter[tuple[str, int]] = Counter()
        self.conts: list[tuple[float, Child]] = []
        self.cut = False

    def start(self, role: str, index: int) -> Child:
        self.generations[role, index] += 1
        seed = self.rng.randrange(2**32)
        skew = self.rng.choice(SKEWS)
        generation = self.generations[role, index]
        child = Child(role, index, generation, self.run, self.url, self.schema, seed, self.config.rate, skew)
        self.result.skews[skew] += 1
        self.children[role, index] = child
        return child

    def start_all(self) -> None:
        counts = {
            "producer": self.config.producers,
            "worker": self.config.workers,
            "async-worker": self.config.async_workers,
            "task-worker": self.config.task_workers,
            "task-async-worker": self.config.task_async_workers,
            "scheduler": self.config.schedulers,
            "courier": self.config.couriers,
        }
        for role, count in counts.items():
            for index in range(count):
                self.start(role, index)

    def fault(self, action: str, target: Child | None = None) -> None:
        self.writer.log(Kind.FAULT, action=action, target=None if target is None else target.name)
        self.result.faults[action] += 1

    def _live(self, role: str | None = None) -> list[Child]:
        return [c for c in self.children.values() if not c.stopped and (role is None or c.role == role)]

    def pause(self, seconds: float) -> None:
        """Let ``seconds`` pass, resuming stopped processes when due and restarting any that crashed."""
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            for due, child in [entry for entry in self.conts if entry[0] <= now]:
                self.conts.remove((due, child))
                child.signal(signal.SIGCONT)
                child.stopped = False
                self.fault("cont", child)
            for key, child in list(self.children.items()):
                if not child.stopped and child.proc.poll() is not None:
                    self.result.crashed.append(f"{child.name} exited {child.proc.returncode}")
                    child.close()
                    self.start(*key)
            self.ops.update()
            if now >= end:
                return
            time.sleep(min(0.1, end - now))

    def act(self, kind: str) -> None:
        """One fault of ``kind`` on a target drawn from the seeded generator."""
        rng = self.rng
        if kind.startswith("server_"):
            self.fault(kind)
            self.server.restart(kind.removeprefix("server_"))
            return
        if kind == "cut":
            self.proxy.cut()
            self.cut = True
            self.fault("cut")
            self.pause(rng.uniform(0.5, 3.0))
            self.proxy.restore()
            self.cut = False
            self.fault("heal")
            return
        live = self._live("scheduler" if kind == "exhaust" else None)
        if not live:
            return
        target = rng.choice(live)
        key = (target.role, target.index)
        if kind == "exhaust":
            target.signal(signal.SIGUSR1)
            self.fault("exhaust", target)
        elif kind == "stop":
            target.signal(signal.SIGSTOP)
            target.stopped = True
            self.fault("stop", target)
            longest = 13.0 if target.role == "scheduler" else 4.0  # a scheduler may outlast its lease
            self.conts.append((time.monotonic() + rng.uniform(0.5, longest), target))
        elif kind == "kill":
            target.proc.kill()
            target.proc.wait()
            self.fault("kill", target)
            target.close()
            self.start(*key)
        else:  # restart: a clean stop, then a new incarnation
            target.signal(signal.SIGTERM)
            status = target.finish(STOP_PATIENCE_S)
            if status is None:
                target.proc.kill()
                target.proc.wait()
                self.fault("kill", target)
            else:
                self.fault("restart", target)
                if status != 0:
                    self.result.crashed.append(f"{target.name} exited {status} on SIGTERM")
            target.close()
            self.start(*key)

    def storm(self) -> None:
        """Faults until the operations and every fault kind are in, or the time is up; with calms between."""
        config, rng = self.config, self.rng
        deadline = time.monotonic() + config.max_seconds
        first = list(FAULT_KINDS)
        rng.shuffle(first)
        self.pause(config.calm)
        done = 0
        while time.monotonic() < deadline and (
            self.ops.update() < config.operations
            or done < config.faults
            or not all(self.result.faults[k] for k in FAULT_KINDS)
        ):
            kind = first.pop() if first else rng.choice(FAULT_KINDS)
            self.act(kind)
            done += 1
            if config.calm_every and done % config.calm_every == 0:
                self.pause(config.calm)
            else:
                self.pause(rng.uniform(*config.gap))

    def heal(self) -> None:
        """The end of the faults: the network back, every stopped process resumed."""
        if self.cut:
            self.proxy.restore()
            self.fault("heal")
        for _, child in self.conts:
            child.signal(signal.SIGCONT)
            child.stopped = False
            self.fault("cont", child)
        self.conts.clear()

    def stop_all(self, role: str | None = None) -> None:
        """SIGTERM every process (of ``role``) and wait for each (killing, and logging the kill, one that hangs)."""
        chosen = {key: child for key, child in self.children.items() if role is None or child.role == role}
        for child in chosen.values():
            child.signal(signal.SIGTERM)
        for key, child in chosen.items():
            status = child.finish(STOP_PATIENCE_S)
            if status is None:
                child.proc.kill()
                child.proc.wait()
                self.fault("kill", child)
                self.result.crashed.append(f"{child.name} did not stop on SIGTERM")
            elif status != 0:
                self.result.crashed.append(f"{child.name} exited {status} on SIGTERM")
            child.close()
            del self.children[key]

    def close(self) -> None:
        for child in self.children.values():
            child.close()
        self.writer.close()


def _drained(store: alkstore.Store, queues: Sequence[str]) -> bool:
    """Nothing left to run on ``queues``: no job ready, delayed, waiting for its key, or running."""
    for stats in store.queue_stats(cap=None):
        if stats.queue in queues and stats.ready + stats.delayed + stats.waiting + stats.running:
            return False
    return True


_SKEWED: dict[int, dict[str, str]] = {}


def _skewed(skew: int) -> dict[str, str]:
    """The environment that runs a process with its wall clock ``skew`` seconds off (libfaketime preloaded).

    Read once from ``faketime`` itself, then given to the process directly: ``faketime`` runs its
    program as a child, so a signal meant for the program would reach only the wrapper. The
    monotonic clock is left alone, as on a real host whose wall clock is off (ADR 015).
    """
    if skew not in _SKEWED:
        program = shutil.which("faketime")
        if program is None:
            raise RuntimeError("faketime is not installed (apt-get install faketime): the nemesis skews clocks")
        probe = "import json, os; print(json.dumps({k: os.environ[k] for k in ('LD_PRELOAD', 'FAKETIME')}))"
        done = subprocess.run(
            [program, "-f", f"{skew:+d}s", sys.executable, "-c", probe], capture_output=True, text=True, check=True
        )
        _SKEWED[skew] = {**json.loads(done.stdout), "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    return _SKEWED[skew]


def nemesis_run(config: Config, out: Path) -> Result:
    """Run the nemesis on a PostgreSQL cluster of its own (it restarts the server), in the run
    directory ``out``; check it."""
    from alkstore.adapters.postgres.testing import unique_schema

    began = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    for skew in {skew for skew in SKEWS if skew}:
        _skewed(skew)  # no faketime: fail now, not in the first skewed process
    result = Result(out)
    schema = unique_schema("nemesis")
    (out / "run.json").write_text(json.dumps({"schema": schema, **asdict(config)}, indent=1), encoding="utf-8")
    with Cluster() as server:
        dsn = server.url
        with alkstore.open(dsn, schema=schema, migrate=True, min_size=0, max_size=2) as store, Proxy(dsn) as proxy:
            for queue in (QUEUE, CHORES):
                store.queue(queue).configure(visibility_timeout=LEASE_S, backoff_base=0.1, backoff_cap=0.5)
            outbox = store.outbox(OUTBOX)
            outbox.configure(visibility_timeout=3.0, max_attempts=20, backoff_base=0.1, backoff_cap=0.5)
            queues = [QUEUE, CHORES, outbox.queue]
            nemesis = Nemesis(config, out, proxy.url, schema, proxy, result, server)
            try:
                nemesis.start_all()
                nemesis.storm()
                nemesis.heal()
                nemesis.stop_all("producer")  # nothing new: the rest drains
                end = time.monotonic() + config.drain_s
                while not _drained(store, queues) and time.monotonic() < end:
                    nemesis.pause(0.5)
                result.drained = _drained(store, queues)
                nemesis.stop_all()
                result.operations = nemesis.ops.update()
                nemesis.writer.log(Kind.SNAPSHOT)
                snapshot = read_snapshot(store, queues, sink_messages(out))
            finally:
                nemesis.close()
        (out / "snapshot.json").write_text(snapshot.to_json(), encoding="utf-8")
    result.anomalies = check_run(out, PARAMS)
    result.judged = judged_boundaries(load_history(out / "history"), PARAMS)
    result.seconds = time.monotonic() - began
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the nemesis by hand; print what it did and every anomaly; 0 when clean."""
    parser = argparse.ArgumentParser(prog="python -m tests.nemesis.run", description=__doc__)
    parser.add_argument("--operations", type=int, default=DEFAULT.operations)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the run directory (history/, snapshot.json, logs/)")
    parser.add_argument("--rate", type=float, default=DEFAULT.rate, help="a producer's steps per second, about")
    parser.add_argument("--drain", type=float, default=DEFAULT.drain_s, help="the most the drain may take, seconds")
    parser.add_argument("--faults", type=int, default=DEFAULT.faults, help="faults to inject at least")
    parser.add_argument("--calm", type=float, default=DEFAULT.calm, help="quiet seconds between storms")
    parser.add_argument("--calm-every", type=int, default=DEFAULT.calm_every, help="faults per storm")
    parser.add_argument("--max-seconds", type=float, default=DEFAULT.max_seconds)
    args = parser.parse_args(argv)
    # SIGTERM ends the run as Ctrl-C does: its processes are killed and its cluster removed on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    config = Config(
        seed=args.seed,
        operations=args.operations,
        faults=args.faults,
        max_seconds=args.max_seconds,
        calm=args.calm,
        calm_every=args.calm_every,
        rate=args.rate,
        drain_s=args.drain,
    )
    result = nemesis_run(config, args.out)
    print(f"{result.operations} operations in {result.seconds:.0f} s; faults {dict(sorted(result.faults.items()))}")
    print(f"incarnations by clock skew (s): {dict(sorted(result.skews.items()))}")
    print(f"drained: {result.drained}; crashed: {result.crashed or 'none'}; boundaries judged: {result.judged}")
    print("\n".join(result.anomalies) if result.anomalies else "no anomaly")
    return 1 if result.anomalies or result.crashed or not result.drained else 0


if __name__ == "__main__":
    sys.exit(main())
