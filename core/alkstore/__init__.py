"""alkstore: durable job queues, leases, recurring schedules and a transactional outbox.

One API over two engines, chosen by URL: ``alkstore.open("memory://")`` (embedded, for
tests and demos) or ``alkstore.open("postgresql://…")`` (production), in two runtimes written once:
``alkstore.open`` gives the sync ``Store``, ``await alkstore.open_async`` the ``AsyncStore``.
"""

from __future__ import annotations

from importlib import metadata
from pkgutil import extend_path

# A source checkout has two halves of the package, core/alkstore and adapters/alkstore (ADR 013);
# in the wheel they are one directory and this finds nothing more. (Editors look for this line
# near the top.)
__path__ = extend_path(__path__, __name__)


from .errors import (
    AlkstoreError,
    DatabaseError,
    DatabaseUnavailable,
    DependencyCycle,
    EventTimeout,
    InvalidArgument,
    InvalidName,
    InvalidOptions,
    InvalidPayload,
    InvalidSpec,
    InvalidTransaction,
    JobHeld,
    LeadershipLost,
    LeaseLost,
    NotOffered,
    PoolerMisconfigured,
    ReservedName,
    SchemaOutOfDate,
    StoreClosed,
    UnknownJob,
    UnknownParent,
)
from .port._dependency_records import ParentFailure
from .port._records import Fire, JobPhase, JobState, RateLimit
from .port._time import Clock, ManualClock, StopToken, SystemClock
from .rules._boundary import CATCH_UP_CAP
from .rules._codec import Codec, JsonCodec
from .rules._graphs import Graph, chain, chord, group
from .rules._names import RESERVED_PREFIX
from .rules._operations import STATS_CAP
from .rules._options import EnqueueOpts, QueueDefaults, QueueSettings, ScheduleOpts
from .rules._records import (
    ActionInfo,
    CancelOutcome,
    JobId,
    JobInfo,
    JobPage,
    Leader,
    LockInfo,
    QueueStats,
    Schedule,
    ScheduleEntry,
    TaskFiguresInfo,
    ThroughputInfo,
    WorkerInfo,
)
from .rules._results import AttemptFailure, JobResult, ResultPage
from .rules._spec import Every, parse_spec
from .rules._steps import DEFAULT_EVENT_KEEP, JobSuspended, StepInfo, WaitInfo
from .store._job import Job
from .store._job_async import AsyncJob
from .store._kernel import CONFIG_TTL
from .store._locks import Lock
from .store._locks_async import AsyncLock
from .store._outbox import Delivery, Outbox
from .store._outbox_async import AsyncDelivery, AsyncOutbox
from .store._queue import Queue
from .store._queue_async import AsyncQueue
from .store._steps_async import StepTx
from .store._store import Store, open  # noqa: A004
from .store._store_async import AsyncStore, open_async
from .store._tasks import Courier, Periodic, Task, Tasks, check_arguments, current_job
from .worker._parts import WorkerStats
from .worker._upkeep import DEFAULT_ACTION_RETENTION, DEFAULT_DEAD_RETENTION
from .worker._worker import Handler, Worker
from .worker._worker_async import AsyncHandler, AsyncWorker

__all__ = [
    "CATCH_UP_CAP",
    "CONFIG_TTL",
    "DEFAULT_ACTION_RETENTION",
    "DEFAULT_DEAD_RETENTION",
    "DEFAULT_EVENT_KEEP",
    "RESERVED_PREFIX",
    "STATS_CAP",
    "ActionInfo",
    "AlkstoreError",
    "AsyncDelivery",
    "AsyncHandler",
    "AsyncJob",
    "AsyncLock",
    "AsyncOutbox",
    "AsyncQueue",
    "AsyncStore",
    "AsyncWorker",
    "AttemptFailure",
    "CancelOutcome",
    "Clock",
    "Codec",
    "Courier",
    "DatabaseError",
    "DatabaseUnavailable",
    "Delivery",
    "DependencyCycle",
    "EnqueueOpts",
    "EventTimeout",
    "Every",
    "Fire",
    "Graph",
    "Handler",
    "InvalidArgument",
    "InvalidName",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidSpec",
    "InvalidTransaction",
    "Job",
    "JobHeld",
    "JobId",
    "JobInfo",
    "JobPage",
    "JobPhase",
    "JobResult",
    "JobState",
    "JobSuspended",
    "JsonCodec",
    "Leader",
    "LeadershipLost",
    "LeaseLost",
    "Lock",
    "LockInfo",
    "ManualClock",
    "NotOffered",
    "Outbox",
    "ParentFailure",
    "Periodic",
    "PoolerMisconfigured",
    "Queue",
    "QueueDefaults",
    "QueueSettings",
    "QueueStats",
    "RateLimit",
    "ReservedName",
    "ResultPage",
    "Schedule",
    "ScheduleEntry",
    "ScheduleOpts",
    "SchemaOutOfDate",
    "StepInfo",
    "StepTx",
    "StopToken",
    "Store",
    "StoreClosed",
    "SystemClock",
    "Task",
    "TaskFiguresInfo",
    "Tasks",
    "ThroughputInfo",
    "UnknownJob",
    "UnknownParent",
    "WaitInfo",
    "Worker",
    "WorkerInfo",
    "WorkerStats",
    "chain",
    "check_arguments",
    "chord",
    "current_job",
    "group",
    "open",
    "open_async",
    "parse_spec",
]

try:
    __version__ = metadata.version("alkstore")
except metadata.PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
    __version__ = "0+unknown"


for _public in (
    AsyncJob,
    AsyncLock,
    AsyncOutbox,
    AsyncQueue,
    AsyncStore,
    AsyncWorker,
    AttemptFailure,
    CancelOutcome,
    Clock,
    Codec,
    Courier,
    EnqueueOpts,
    Every,
    Fire,
    Graph,
    Job,
    JobId,
    JobInfo,
    JobPage,
    JobPhase,
    JobResult,
    JobState,
    JsonCodec,
    Leader,
    Lock,
    ManualClock,
    Outbox,
    ParentFailure,
    Periodic,
    Queue,
    QueueDefaults,
    QueueSettings,
    QueueStats,
    ResultPage,
    Schedule,
    ScheduleEntry,
    ScheduleOpts,
    StopToken,
    Store,
    SystemClock,
    Task,
    Tasks,
    Worker,
    WorkerStats,
):
    _public.__module__ = __name__
del _public
