"""The in-memory engine's tables: one ``MemoryTables`` is all of a memory store, one lock over it all.

Both runtimes' memory engines (``_engine_async`` and its sync twin) are thin layers over one
``MemoryTables``. Its state and shared moves are ``_state.TableState``; its transitions are
split by concept into ``_jobs``, ``_schedules`` and ``_listings``, which all work on that one
state under its one lock.
"""

from __future__ import annotations

from ._jobs import JobTables
from ._listings import OperationTables
from ._schedules import ScheduleTables
from ._state import MemoryTransaction
from ._steps import StepTables

__all__ = ["MemoryTables", "MemoryTransaction"]


class MemoryTables(JobTables, ScheduleTables, OperationTables, StepTables):
    """All state of one memory store, guarded by one lock; each method is one atomic transition or read.

    The engines call these for their port methods (see ``alkstore.engine.AsyncEngine`` for the
    contract each follows).
    """
