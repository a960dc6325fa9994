"""The telemetry port as the runtime calls it: ``TelemetryPort`` and the ``RunReport`` a run tells (ADR 024, 062).

The public base class, ``alkstore.telemetry.Telemetry`` (which does nothing, for an adapter to
override), is this class's one subclass, and a store accepts nothing else; the store, the worker
and the scheduler call only what this class names, so they import no module above the port,
and the telemetry module may name the store in its hooks' signatures without an import circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from ._records import Fire, JobRecord
from ._time import Clock

__all__ = ["RunReport", "TelemetryPort"]


class RunReport:
    """What a run tells its telemetry beyond raising: that it could not run at all, and why."""

    __slots__ = ()

    def refused(self, reason: str) -> None:
        """The run did not start its work (an unknown task, say): ``reason`` is its failure."""


class TelemetryPort:
    """What a store reports its events to: ``alkstore.telemetry.Telemetry`` implements and documents each call."""

    __slots__ = ()

    def opened(self, store: Any) -> None:
        raise NotImplementedError

    def closed(self, store: Any) -> None:
        raise NotImplementedError

    def enqueue(
        self, queue: str, task: str | None, count: int, parents: Sequence[str] = ()
    ) -> AbstractContextManager[str | None]:
        raise NotImplementedError

    def claimed(self, jobs: Sequence[JobRecord], now: datetime) -> None:
        raise NotImplementedError

    def acked(self, jobs: Sequence[JobRecord]) -> None:
        raise NotImplementedError

    def retried(self, jobs: Sequence[JobRecord]) -> None:
        raise NotImplementedError

    def buried(self, jobs: Sequence[JobRecord]) -> None:
        raise NotImplementedError

    def fired(self, fires: Sequence[Fire]) -> None:
        raise NotImplementedError

    def run(self, job: JobRecord, clock: Clock) -> AbstractContextManager[RunReport]:
        raise NotImplementedError
