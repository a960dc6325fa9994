"""The telemetry port: what a store and its workers report as jobs move (ADR 024).

A store (either runtime) opened with ``telemetry=`` calls one method of it per event: an enqueue (one call
per batch), a claim, an ack, a retry, a burial, a scheduler fire, and each run of a job by a
``Worker`` or delivery of an outbox message. This base class does nothing; an adapter
(``alkstore.adapters.otel``) overrides what it reports. A store opened without telemetry makes
none of these calls (one ``None`` check per event), so the port costs nothing unless it is
used, and core imports no integration library.

The trace context of an enqueue travels with its jobs (``NewJob.trace``/``JobRecord.trace``, a
text the engine stores and never reads), so a run, however much later and wherever it
happens, can point back at the enqueue that made it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING

from .port._records import Fire, JobRecord
from .port._telemetry import RunReport, TelemetryPort
from .port._time import Clock

if TYPE_CHECKING:
    from .store._store import Store
    from .store._store_async import AsyncStore

__all__ = ["RunReport", "Telemetry"]


#: What ``Telemetry.enqueue`` and ``Telemetry.run`` return when they record nothing (reusable: no state).
_NO_TRACE: AbstractContextManager[str | None] = nullcontext(None)
_NO_RUN: AbstractContextManager[RunReport] = nullcontext(RunReport())


class Telemetry(TelemetryPort):
    """Receives a store's events; every method here does nothing, and a subclass overrides what it reports.

    Methods are called from any thread or task that uses the store (a worker's threads, the
    scheduler's, an event loop's tasks), so an implementation must be thread-safe and must not
    block; they should not raise (an error would surface in the call that reported).
    """

    def opened(self, store: Store | AsyncStore) -> None:
        """``store`` was opened with this telemetry (it may read the store at collection time, e.g. queue depths)."""

    def closed(self, store: Store | AsyncStore) -> None:
        """``store`` was closed: read it no more."""

    def enqueue(
        self, queue: str, task: str | None, count: int, parents: Sequence[str] = ()
    ) -> AbstractContextManager[str | None]:
        """Around one enqueue of ``count`` jobs onto ``queue`` (for ``task``, if they are a task's runs).

        ``parents`` are the trace contexts their parents carry (``after=``, ADR 073), passed only when
        there are some, so an enqueue's span can link to the traces it continues (ADR 074).

        The context yields the trace context each job carries (a W3C ``traceparent``), or
        ``None``; the jobs are written inside it, and count as enqueued when it exits without
        an error (in a caller's transaction: when written, whether or not it commits).
        """
        return _NO_TRACE

    def claimed(self, jobs: Sequence[JobRecord], now: datetime) -> None:
        """``jobs`` were claimed (leased) at ``now``: each had waited for it since its ``run_at``."""

    def acked(self, jobs: Sequence[JobRecord]) -> None:
        """``jobs`` were acked (done and gone); stale acks are not reported."""

    def retried(self, jobs: Sequence[JobRecord]) -> None:
        """``jobs`` failed an attempt and are pending again."""

    def buried(self, jobs: Sequence[JobRecord]) -> None:
        """``jobs`` were made dead by a failure (exhausted, failed for good, or undecodable)."""

    def fired(self, fires: Sequence[Fire]) -> None:
        """A scheduler tick fired ``fires`` (each enqueued one job)."""

    def run(self, job: JobRecord, clock: Clock) -> AbstractContextManager[RunReport]:
        """Around one run of ``job`` by a worker (or a delivery by an outbox courier), in either runtime.

        The context exits with the run's exception when it raised (the run's failure), and the
        run calls ``RunReport.refused`` on what it yields when it could not start (an unknown
        task, say). ``clock`` is the store's, so a run's duration is measured in the time its
        stamps are. An async run stays inside the context across its awaits: an implementation
        keeps its state in the context it yields (or in context variables), not per thread.
        """
        return _NO_RUN
