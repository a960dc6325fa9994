# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_dependencies_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The PostgreSQL engine's job dependencies (ADR 073): storing a dependent, and reading a job's links.

A batch with a dependent in it is inserted one job at a time in one transaction (the caller's, under
a savepoint, or the engine's own): a dependent's live parents are row-locked (and counted one
dependent more) before it is inserted, its finished ones read after, so that a parent's ack either
sees the dependent or has happened already; the insert writes its links too (two statements per
dependent whose parents are all live, three when some finished). Its promotion, and what a parent's death
does, are the trigger of migration 0021 (``settle_21``), whatever statement deletes the parent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

import psycopg
from psycopg.rows import tuple_row

from alkstore import engine as port
from alkstore.errors import UnknownParent

from . import _rows
from ._sql import Statements

__all__ = ["has_parents", "insert_with_parents", "relink_requeued", "waits_on_parents", "with_links"]


class Channel(Protocol):
    """A queue's notification channel, as the engine finds it on a connection."""

    def __call__(self, conn: psycopg.Connection[Any], queue: str, /) -> str: ...


@contextmanager
def _all_or_none(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """What runs inside is kept whole or not at all, and nothing is committed that its owner did not commit:
    a savepoint in an open transaction, a transaction of its own in autocommit; on a connection whose
    transaction has not begun, the writes begin it (left open for its owner) and an error rolls it back
    (psycopg's ``transaction()`` would commit it on exit: a rolled-back caller would keep the jobs)."""
    if conn.autocommit or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with conn.transaction():
            yield
        return
    try:
        yield
    except BaseException:
        conn.rollback()
        raise


def waits_on_parents(job: port.NewJob) -> bool:
    """Whether ``job`` waits on parents (it then takes ``insert_with_parents``)."""
    return bool(job.after or job.after_batch)


def has_parents(jobs: Sequence[port.NewJob]) -> bool:
    """Whether some of ``jobs`` wait on parents (they then take ``insert_with_parents``)."""
    return any(waits_on_parents(job) for job in jobs)


def insert_with_parents(
    statements: Statements,
    conn: psycopg.Connection[Any],
    jobs: Sequence[port.NewJob],
    now: datetime,
    channel: Channel,
    schema: str,
) -> list[int]:
    """Insert ``jobs`` in order on ``conn`` under a savepoint (all or none); ``UnknownParent`` before
    anything is kept when a parent is no job the store knows. A job of the batch with no parent and an
    ordering key goes in as ``enqueue`` stores one (its key locked, behind the key's unfinished jobs)."""
    ids: list[int] = []
    with _all_or_none(conn), conn.cursor(row_factory=tuple_row) as cursor:
        for job in jobs:
            parents = tuple(dict.fromkeys((*job.after, *(ids[position] for position in job.after_batch))))
            links: dict[int, tuple[str, bytes | None]] = {}
            if parents:
                cursor.execute(statements.lock_parents, {"parents": list(parents)})
                links = {int(row[0]): ("waiting", None) for row in cursor.fetchall()}
                finished = [parent for parent in parents if parent not in links]
                if finished:
                    cursor.execute(statements.finished_parents, {"parents": finished})
                    for parent, state, result in cursor.fetchall():
                        if state is None and int(parent) in job.after:
                            raise UnknownParent(f"job {parent} (after=) is not stored: nothing was enqueued")
                        links[int(parent)] = (state or "succeeded", None if result is None else bytes(result))
            left = sum(1 for state, _ in links.values() if state == "waiting")
            keyed = _rows.keyed_params(job, now, channel(conn, job.queue))
            if not parents and job.ordering_key is not None:
                key = {"schema": schema, "queues": [job.queue], "keys": [job.ordering_key]}
                cursor.execute(statements.lock_ordering_keys, key)
                cursor.execute(statements.enqueue_keyed, keyed)
            else:
                policy = str(job.on_parent_failure) if parents else None
                params = {
                    **keyed,
                    "parents_left": left,
                    "on_parent_failure": policy,
                    "parents": list(parents),
                    "states": [links[parent][0] for parent in parents],
                    "results": [links[parent][1] for parent in parents],
                }
                cursor.execute(statements.enqueue_dependent, params)
            inserted = cursor.fetchone()
            if inserted is None:  # its unique key is held: the holder stands in for it
                cursor.execute(statements.unique_holder, {"queue": job.queue, "unique_key": job.unique_key})
                held = cursor.fetchone()
                assert held is not None
                ids.append(port.Existing(int(held[0])))
                continue
            child = int(inserted[0])
            ids.append(child)
            dead = [parent for parent in parents if links[parent][0] == "failed"]
            if dead and job.on_parent_failure is not port.ParentFailure.RUN:
                cursor.execute(statements.follow_parent, {"child": child, "parent": dead[0], "now": now})
    return ids


def relink_requeued(
    statements: Statements, conn: psycopg.Connection[Any], ids: Sequence[int], now: datetime
) -> None:
    """Link the dependents among the just requeued ``ids`` again to their parents as they are now (ADR 077):
    waiting on the live ones (row-locked first, as an enqueue does), a finished one succeeded, and a dead one
    followed by the dependent's policy at once, as memory and SQLite do."""
    with conn.cursor(row_factory=tuple_row) as cursor:
        cursor.execute(statements.requeued_links, {"ids": list(ids)})
        rows = [(int(child), int(parent), str(policy)) for child, parent, policy in cursor.fetchall()]
        if not rows:
            return
        parents = sorted({parent for _, parent, _ in rows})
        cursor.execute(statements.lock_parents, {"parents": parents})
        links: dict[int, tuple[str, bytes | None]] = {int(row[0]): ("waiting", None) for row in cursor.fetchall()}
        finished = [parent for parent in parents if parent not in links]
        if finished:
            cursor.execute(statements.finished_parents, {"parents": finished})
            for parent, state, result in cursor.fetchall():  # neither dead nor kept: it succeeded
                links[int(parent)] = (state or "succeeded", None if result is None else bytes(result))
        params = {
            "children": [child for child, _, _ in rows],
            "parents": [parent for _, parent, _ in rows],
            "states": [links[parent][0] for _, parent, _ in rows],
            "results": [links[parent][1] for _, parent, _ in rows],
        }
        cursor.execute(statements.relink_requeued, params)
        followed: set[int] = set()
        for child, parent, policy in rows:
            if links[parent][0] == "failed" and policy != "run" and child not in followed:
                followed.add(child)
                cursor.execute(statements.follow_parent, {"child": child, "parent": parent, "now": now})


def with_links(
    conn: psycopg.Connection[Any], statements: Statements, record: port.JobRecord | None
) -> port.JobRecord | None:
    """``record`` with its parents' links and the jobs waiting on it, as ``get_job`` reads them."""
    if record is None:
        return None
    with conn.cursor(row_factory=tuple_row, binary=True) as cursor:
        cursor.execute(statements.dependency_links, {"id": int(record.id)})
        rows = cursor.fetchall()
    if not rows:
        return record
    links = tuple(
        port.ParentLink(int(parent), state, None if result is None else bytes(result))
        for parent, state, result, child in rows
        if child is None
    )
    children = tuple(int(child) for *_, child in rows if child is not None)
    return replace(record, parents=tuple(link.id for link in links), parent_links=links, children=children)
