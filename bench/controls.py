"""What the queue controls cost the claim: claim+ack with unique keys, with ordering keys (10 and
10,000 keys) and with a global limit, against plain claim+ack, in one run on PostgreSQL.

Run by hand, never from the test suite (the figures depend on the machine and its load)::

    .venv/bin/python bench/controls.py [--dsn URL] [--jobs 4000] [--repeats 3]

Each subject has a queue of its own, filled before timing (the enqueue is not measured here);
the timed part is one thread claiming and acking every job until its queue is empty. The
subjects are measured interleaved in blocks (250 claim+acks each), so load that comes and goes
hits them alike; each repeat gives every subject's rate and its ratio to plain, and the table
shows the median ratio. Target: every subject at least 0.8x plain. Results go to
``docs/benchmarks.md`` with the machine's load.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from _bench import interleaved, print_rates, repeated
from psycopg import sql

import alkstore
from alkstore import EnqueueOpts

BLOCK = 250


@dataclass(frozen=True, slots=True)
class Subject:
    """A workload: its name, the options of its n-th job, and its queue's settings."""

    name: str
    opts: Callable[[int], EnqueueOpts | None]
    concurrency: int | None = None


SUBJECTS = (
    Subject("plain", lambda n: None),
    Subject("unique keys", lambda n: EnqueueOpts(unique_key=f"u{n}")),
    Subject("ordering, 10 keys", lambda n: EnqueueOpts(ordering_key=f"k{n % 10}")),
    Subject("ordering, 10,000 keys", lambda n: EnqueueOpts(ordering_key=f"k{n % 10_000}")),
    Subject("global limit 8", lambda n: None, concurrency=8),
)


def fill(store: alkstore.Store, queue: str, subject: Subject, jobs: int) -> None:
    handle = store.queue(queue)
    if subject.concurrency is not None:
        handle.configure(concurrency=subject.concurrency)
    if subject.opts(0) is None:  # keyless subjects fill in batches
        for start in range(0, jobs, 1000):
            handle.enqueue_many([{"n": n} for n in range(start, min(jobs, start + 1000))])
        return
    for n in range(jobs):
        handle.enqueue({"n": n}, subject.opts(n))


def block(store: alkstore.Store, queue: str) -> tuple[int, float]:
    """Claim and ack up to ``BLOCK`` jobs of ``queue``; how many, in how many seconds."""
    handle = store.queue(queue)
    done = 0
    started = time.perf_counter()
    while done < BLOCK and (job := handle.claim("bench")) is not None:
        job.ack()
        done += 1
    return done, time.perf_counter() - started


def run_once(dsn: str, jobs: int) -> dict[str, float]:
    schema = f"bench_controls_{uuid.uuid4().hex[:8]}"
    with alkstore.open(dsn, schema=schema, migrate=True, max_size=2) as store:
        queues = {subject.name: f"q{index}" for index, subject in enumerate(SUBJECTS)}
        for subject in SUBJECTS:
            fill(store, queues[subject.name], subject, jobs)
        rates = interleaved([subject.name for subject in SUBJECTS], lambda name: block(store, queues[name]), BLOCK)
        with store.transaction() as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return rates


def main() -> None:
    repeats, runs = repeated(__doc__, run_once)
    print_rates(repeats, runs, {subject.name: "plain" for subject in SUBJECTS})


if __name__ == "__main__":
    main()
