"""alkstore: durable job queues, leases, recurring schedules and a transactional outbox.

One API over two engines, chosen by URL: ``alkstore.open("memory://")`` (embedded, for
tests and demos) or ``alkstore.open("postgresql://…")`` (production).
"""

from __future__ import annotations

import re
from importlib import metadata
from pkgutil import extend_path
from typing import Any

from ._boundary import CATCH_UP_CAP
from ._codec import Codec, JsonCodec
from ._names import RESERVED_PREFIX
from ._operations import CancelOutcome, JobPage, Leader, QueueStats, WorkerInfo
from ._options import EnqueueOpts, QueueDefaults, QueueSettings, ScheduleOpts
from ._spec import Every, parse_spec
from ._store import Delivery, Job, JobInfo, Lock, Outbox, Queue, Schedule, ScheduleEntry, Store, check_store_options
from ._tasks import Periodic, Task, Tasks, current_job
from ._time import Clock, ManualClock, StopToken, SystemClock
from ._worker import Handler, Worker, WorkerStats
from .engine import Fire, JobPhase, JobState
from .errors import (
    AlkstoreError,
    DatabaseError,
    DatabaseUnavailable,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    InvalidSpec,
    InvalidTransaction,
    LeadershipLost,
    LeaseLost,
    ReservedName,
    SchemaOutOfDate,
    StoreClosed,
)
from .telemetry import Telemetry

# A source checkout has two halves of the package, core/alkstore and adapters/alkstore (ADR 013);
# in the wheel they are one directory and this finds nothing more. (Editors look for this line
# near the top.)
__path__ = extend_path(__path__, __name__)

__all__ = [
    "CATCH_UP_CAP",
    "RESERVED_PREFIX",
    "AlkstoreError",
    "CancelOutcome",
    "Clock",
    "Codec",
    "DatabaseError",
    "DatabaseUnavailable",
    "Delivery",
    "EnqueueOpts",
    "Every",
    "Fire",
    "Handler",
    "InvalidArgument",
    "InvalidName",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidSpec",
    "InvalidTransaction",
    "Job",
    "JobInfo",
    "JobPage",
    "JobPhase",
    "JobState",
    "JsonCodec",
    "Leader",
    "LeadershipLost",
    "LeaseLost",
    "Lock",
    "ManualClock",
    "Outbox",
    "Periodic",
    "Queue",
    "QueueDefaults",
    "QueueSettings",
    "QueueStats",
    "ReservedName",
    "Schedule",
    "ScheduleEntry",
    "ScheduleOpts",
    "SchemaOutOfDate",
    "StopToken",
    "Store",
    "StoreClosed",
    "SystemClock",
    "Task",
    "Tasks",
    "Worker",
    "WorkerInfo",
    "WorkerStats",
    "current_job",
    "open",
    "parse_spec",
]

ENGINE_ENTRY_POINTS = "alkstore.engines"
#: A libpq connection string: ``key=value`` pairs separated by white space.
_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")

try:
    __version__ = metadata.version("alkstore")
except metadata.PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0+unknown"


def open(  # noqa: A001
    url: str,
    *,
    clock: Clock | None = None,
    codec: Codec | None = None,
    telemetry: Telemetry | None = None,
    **options: Any,
) -> Store:
    """Open a store on ``url``: ``memory://`` or ``postgresql://…`` (also ``postgres://…``).

    ``clock`` stamps every job and lease (default: the engine's, which every host sharing the
    storage agrees on: the database server's clock on Postgres); ``codec`` (default: JSON,
    bytes kept as bytes) encodes payloads; ``telemetry`` receives the store's events (ADR 024:
    ``alkstore.adapters.otel.Telemetry`` reports them to OpenTelemetry); other keyword
    ``options`` go to the engine (Postgres: ``schema``, ``min_size``, ``max_size``,
    ``migrate``, …). The engine is found by URL scheme among the ``alkstore.engines`` entry
    points, so core imports no adapter.
    """
    if isinstance(url, str) and "://" not in url and _CONNINFO.match(url):
        scheme = "postgresql"  # a libpq key=value connection string (host=… dbname=…) is PostgreSQL's
    elif not isinstance(url, str) or "://" not in url:
        raise InvalidOptions(
            f"expected a URL such as 'memory://' or 'postgresql://…', or a libpq 'key=value …' string, not {url!r}"
        )
    else:
        # A SQLAlchemy-style scheme names its driver after a "+" (postgresql+psycopg): the engine is
        # the dialect's, and checks the driver itself.
        scheme = url.split("://", 1)[0].lower().partition("+")[0]
    check_store_options(clock, codec, telemetry)  # before the engine opens anything
    found = metadata.entry_points(group=ENGINE_ENTRY_POINTS, name=scheme)
    if not found:
        known = sorted(ep.name for ep in metadata.entry_points(group=ENGINE_ENTRY_POINTS))
        raise InvalidOptions(f"no alkstore engine for scheme {scheme!r} (installed: {', '.join(known) or 'none'})")
    factory = next(iter(found)).load()
    return Store(factory(url, **options), clock=clock, codec=codec, telemetry=telemetry)


for _public in (
    CancelOutcome,
    Clock,
    Periodic,
    Task,
    Tasks,
    Worker,
    WorkerStats,
    Codec,
    Delivery,
    EnqueueOpts,
    Every,
    Fire,
    Job,
    JobInfo,
    JobPage,
    JobPhase,
    JobState,
    JsonCodec,
    Leader,
    Lock,
    ManualClock,
    Outbox,
    Queue,
    QueueDefaults,
    QueueSettings,
    QueueStats,
    Schedule,
    ScheduleOpts,
    StopToken,
    Store,
    SystemClock,
):
    _public.__module__ = __name__
del _public
