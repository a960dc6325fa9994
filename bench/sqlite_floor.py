"""The SQLite engine against its floor: a hand-written ``sqlite3`` queue on the same machine, in the same run.

The floor: one table, an enqueue is an ``INSERT`` (one per transaction, or 100 in one), a claim is
``UPDATE … RETURNING`` of the first due row inside ``BEGIN IMMEDIATE``, an ack a ``DELETE``: what a
queue on SQLite cannot do with less. alkstore does the same through its public API (sync runtime,
``synchronous=NORMAL`` both). Each figure is jobs per second over ``COUNT`` jobs, in a fresh file.

    .venv/bin/python bench/sqlite_floor.py [COUNT]
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import alkstore

FLOOR_SCHEMA = (
    "CREATE TABLE q (id INTEGER PRIMARY KEY, payload BLOB NOT NULL, run_at REAL NOT NULL, state INTEGER NOT NULL,"
    " lease REAL)",
    "CREATE INDEX q_ready ON q (state, run_at, id)",
)
FLOOR_INSERT = "INSERT INTO q (payload, run_at, state) VALUES (?, ?, 0)"
FLOOR_CLAIM = (
    "UPDATE q SET state = 1, lease = ? WHERE id = (SELECT id FROM q WHERE state = 0 AND run_at <= ?"
    " ORDER BY run_at, id LIMIT 1) RETURNING id, payload"
)
FLOOR_ACK = "DELETE FROM q WHERE id = ?"


def rate(count: int, body: Callable[[], None]) -> float:
    start = time.perf_counter()
    body()
    return count / (time.perf_counter() - start)


def floor(path: Path, count: int) -> dict[str, float]:
    db = sqlite3.connect(path, isolation_level=None, timeout=5)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    for statement in FLOOR_SCHEMA:
        db.execute(statement)
    payload = b'{"n": 1}'

    def single() -> None:
        for _ in range(count):
            db.execute("BEGIN IMMEDIATE")
            db.execute(FLOOR_INSERT, (payload, time.time()))
            db.execute("COMMIT")

    def batches() -> None:
        for _ in range(count // 100):
            db.execute("BEGIN IMMEDIATE")
            db.executemany(FLOOR_INSERT, [(payload, time.time())] * 100)
            db.execute("COMMIT")

    def drain() -> None:
        for _ in range(2 * count):
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(FLOOR_CLAIM, (time.time() + 30, time.time())).fetchone()
            db.execute("COMMIT")
            db.execute("BEGIN IMMEDIATE")
            db.execute(FLOOR_ACK, (row[0],))
            db.execute("COMMIT")

    figures = {"enqueue, one per transaction": rate(count, single), "enqueue, batches of 100": rate(count, batches)}
    figures["claim + ack, one at a time"] = rate(2 * count, drain)
    db.close()
    return figures


def engine(path: Path, count: int) -> dict[str, float]:
    with alkstore.open(f"sqlite:///{path}") as store:
        queue = store.queue("bench")

        def single() -> None:
            for _ in range(count):
                queue.enqueue({"n": 1})

        def batches() -> None:
            for _ in range(count // 100):
                queue.enqueue_many([{"n": 1}] * 100)

        def drain() -> None:
            for _ in range(2 * count):
                job = queue.claim("bench")
                assert job is not None
                job.ack()

        figures = {"enqueue, one per transaction": rate(count, single), "enqueue, batches of 100": rate(count, batches)}
        figures["claim + ack, one at a time"] = rate(2 * count, drain)
    return figures


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as directory:
        base = floor(Path(directory) / "floor.db", count)
        mine = engine(Path(directory) / "alkstore.db", count)
    print(f"| {'what':32} | floor/s | alkstore/s | ratio |")
    print(f"|{'-' * 34}|--------:|-----------:|------:|")
    for what, figure in base.items():
        print(f"| {what:32} | {figure:7.0f} | {mine[what]:10.0f} | {mine[what] / figure:5.2f} |")


if __name__ == "__main__":
    main()
