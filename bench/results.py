"""What keeping results costs (ADR 042): claim+ack with a queue's ``keep_results`` on against the same
work with it off, one at a time and with the ack riding on the next claim (as a worker does it,
ADR 022), in one run on PostgreSQL.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/results.py [--dsn URL] [--jobs 4000] [--repeats 3]

Each subject has a queue of its own, filled before timing (the enqueue is not measured here);
the timed part is one thread claiming and acking every job until its queue is empty, a kept one
acked with a small result. The subjects are measured interleaved in blocks (250 claim+acks
each), so load that comes and goes hits them alike; each repeat gives every subject's rate and
the ratio of each kept subject to its plain twin, and the table shows the median ratio. Target:
kept at least 0.8x plain. Results go to ``docs/benchmarks.md`` with the machine's load.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from _bench import interleaved, print_rates, repeated
from psycopg import sql

import alkstore
from alkstore.engine import Held
from alkstore.store._kernel import kernel_of

BLOCK = 250
WORKER = "bench"
RESULT = {"status": "sent", "recipients": 3}


@dataclass(frozen=True, slots=True)
class Subject:
    """A workload: its name, whether its queue keeps results, whether the ack rides on the next claim, and
    the subject it is compared with."""

    name: str
    keep: bool
    riding: bool
    twin: str | None = None


SUBJECTS = (
    Subject("plain, ack on its own", keep=False, riding=False),
    Subject("kept, ack on its own", keep=True, riding=False, twin="plain, ack on its own"),
    Subject("plain, ack rides on the claim", keep=False, riding=True),
    Subject("kept, ack rides on the claim", keep=True, riding=True, twin="plain, ack rides on the claim"),
)


def fill(store: alkstore.Store, queue: str, subject: Subject, jobs: int) -> None:
    handle = store.queue(queue)
    if subject.keep:
        handle.configure(keep_results=timedelta(hours=1))
    for start in range(0, jobs, 1000):
        handle.enqueue_many([{"n": n} for n in range(start, min(jobs, start + 1000))])


def block(store: alkstore.Store, queue: str, subject: Subject) -> tuple[int, float]:
    """Claim and ack up to ``BLOCK`` jobs of ``queue`` as ``subject`` does; how many, in how many seconds."""
    kernel = kernel_of(store)
    handle = store.queue(queue)
    done = 0
    held: list[tuple[alkstore.Job, Held]] = []
    started = time.perf_counter()
    if not subject.riding:
        while done < BLOCK and (job := handle.claim(WORKER)) is not None:
            job.ack(result=RESULT)
            done += 1
        return done, time.perf_counter() - started
    while done < BLOCK:
        _, jobs = kernel.claim(queue, WORKER, 1, held)
        if not jobs:
            break
        held = [(jobs[0], kernel.finished(jobs[0], RESULT))]
        done += 1
    if held:
        store.engine.ack([pair for _, pair in held])
    return done, time.perf_counter() - started


def run_once(dsn: str, jobs: int) -> dict[str, float]:
    schema = f"bench_results_{uuid.uuid4().hex[:8]}"
    with alkstore.open(dsn, schema=schema, migrate=True, max_size=2) as store:
        queues = {subject.name: f"q{index}" for index, subject in enumerate(SUBJECTS)}
        for subject in SUBJECTS:
            fill(store, queues[subject.name], subject, jobs)
        by_name = {subject.name: subject for subject in SUBJECTS}
        rates = interleaved(
            [subject.name for subject in SUBJECTS], lambda name: block(store, queues[name], by_name[name]), BLOCK
        )
        kept = sum(len(store.results(queues[s.name], limit=1).results) for s in SUBJECTS if s.keep)
        assert kept == sum(1 for s in SUBJECTS if s.keep), "the kept subjects kept their results"
        with store.transaction() as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return rates


def main() -> None:
    repeats, runs = repeated(__doc__, run_once)
    print_rates(repeats, runs, {subject.name: subject.twin for subject in SUBJECTS})


if __name__ == "__main__":
    main()
