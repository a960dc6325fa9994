"""Job ids in blocks: an engine takes ``BLOCK`` ids from the file's counter at once and hands them out itself.

An enqueue then writes its rows only, not the counter's page too, in most commits (ADR 063, amended
2026-12-07). Ids are never reused: a block is taken in a write transaction under the file's write lock,
and kept only once that transaction commits (a rolled-back take gives the block up). Each engine's ids
increase in the order it hands them out; two engines (processes) on one file interleave their blocks (ids
across engines follow no commit order, as PostgreSQL's, taken before their commits, do not).
"""

from __future__ import annotations

import sqlite3

from . import _statements as sql

__all__ = ["BLOCK", "JobIds"]

#: How many ids an engine takes from the counter beyond what the enqueue that runs out needs.
BLOCK = 64


class JobIds:
    """The block of job ids an engine holds, ``[next, end)``: one tuple, replaced whole, so that a caller's
    transaction on another thread giving the block up (without the engine's lock, which its thread may be
    waiting for while holding the file's write lock) leaves either block or none, never half of each."""

    __slots__ = ("_block", "fresh")

    def __init__(self) -> None:
        self._block = (0, 0)
        #: The block was taken in the write transaction now open: kept only if it commits (read by a commit, which
        #: calls ``committed`` only when it is set).
        self.fresh = False

    def take(self, db: sqlite3.Connection, count: int, own: bool = True) -> int:
        """The first of ``count`` new ids. ``own``: ``db`` is the engine's connection in its write transaction
        (under the engine's lock). Otherwise ``db`` is the caller's transaction, which the caller may roll back:
        the counter is taken there directly, and the block given up, so that this engine's ids keep rising."""
        if not own:
            self._block = (0, 0)
            return self._counter(db, count)
        first, end = self._block
        if first + count <= end:
            self._block = (first + count, end)
            return first
        first = self._counter(db, count + BLOCK)
        self._block, self.fresh = (first + count, first + count + BLOCK), True
        return first

    @staticmethod
    def _counter(db: sqlite3.Connection, count: int) -> int:
        last: int = db.execute(sql.NEXT_COUNTER, (count, "job")).fetchone()[0]
        return last - count + 1

    def committed(self) -> None:
        """The write transaction committed: a block it took is the engine's."""
        self.fresh = False

    def rolled_back(self) -> None:
        """The write transaction rolled back: a block it took was never taken (another engine may take it)."""
        if self.fresh:
            self._block = (0, 0)
            self.fresh = False
