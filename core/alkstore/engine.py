"""The engine author's kit: the port, its records, and the rules an engine calls (ADR 027).

An adapter that stores alkstore's data implements ``AsyncEngine`` (the async runtime's port) or
``Engine`` (the sync runtime's): each is two ports, ``AsyncRuntimePort`` (what the store, the
worker and the scheduler need) and ``AsyncOperationsPort`` (what operators read and do; sync:
``RuntimePort``, ``OperationsPort``), walked through in ``docs/engines.md``; an engine may
implement the runtime port alone, and then the operators' calls raise ``NotOffered``. It imports from
core only this module, ``alkstore.errors`` and ``alkstore.testing`` (linted:
``tests/test_layout.py``). What is here is everything an engine needs: the records it takes and
returns, the clock and stop-token ports, the rules it must apply where the data is
(``registration_boundary``, ``plan_tick``, ``soonest``, the listing and claim orders), the error
texts of the sweeps, and what an engine written once for both runtimes uses (``ASYNC``,
``aspawn``/``spawn``, ADR 026). The port's methods' docstrings are the contract;
``contract_tests/`` holds every engine to it, through ``alkstore.testing``.
"""

from __future__ import annotations

from .port._acompat import ASYNC, AHelper, Helper, aspawn, spawn
from .port._dependency_records import PARENT_FAILED_ERROR, ParentFailure, ParentLink, parent_failed_error
from .port._engine import Engine
from .port._engine_async import AsyncEngine
from .port._operations_port import OperationsPort
from .port._operations_port_async import AsyncOperationsPort
from .port._records import (
    JOB_EXPIRED_ERROR,
    LEASE_EXPIRED_ERROR,
    ActionRecord,
    Alike,
    Burial,
    ClaimRequest,
    Done,
    DueSchedule,
    Existing,
    Fire,
    Handed,
    Heartbeat,
    Held,
    JobKey,
    JobPhase,
    JobQuery,
    JobRecord,
    JobState,
    LockRecord,
    NewAction,
    NewJob,
    NewSchedule,
    PlannedFire,
    QueueConfig,
    QueueCounts,
    RateLimit,
    ResultRecord,
    Retry,
    ScheduleRecord,
    TableStats,
    TaskFiguresRecord,
    ThroughputRecord,
    TickBudget,
    TickResult,
    WorkerRecord,
    job_record,
    new_job,
)
from .port._runtime_port import RuntimePort, Waiter
from .port._runtime_port_async import AsyncRuntimePort, AsyncWaiter
from .port._step_records import EventRecord, StepRecord, Wait
from .port._steps_port import StepsPort
from .port._steps_port_async import AsyncStepsPort, steps_of
from .port._time import Clock, StopToken, SystemClock, WallClock, wall_sleep, wall_sleep_async
from .rules._boundary import registration_boundary, soonest
from .rules._names import RESERVED_PREFIX
from .rules._operations import payload_contains
from .rules._orders import CLAIM_ORDER, ORDERS, after_key, claim_order, key_of, listing_order, order_of, phase_at
from .rules._rates import QUEUE_RATE_KEY, may_start, next_start, rated_due
from .rules._urls import redact
from .scheduler._leader import LEASE_TTL as SCHEDULER_LEASE
from .scheduler._tick import TickPlan, plan_tick

__all__ = [
    "ASYNC",
    "CLAIM_ORDER",
    "JOB_EXPIRED_ERROR",
    "LEASE_EXPIRED_ERROR",
    "ORDERS",
    "PARENT_FAILED_ERROR",
    "QUEUE_RATE_KEY",
    "RESERVED_PREFIX",
    "SCHEDULER_LEASE",
    "AHelper",
    "ActionRecord",
    "Alike",
    "AsyncEngine",
    "AsyncOperationsPort",
    "AsyncRuntimePort",
    "AsyncStepsPort",
    "AsyncWaiter",
    "Burial",
    "ClaimRequest",
    "Clock",
    "Done",
    "DueSchedule",
    "Engine",
    "EventRecord",
    "Existing",
    "Fire",
    "Handed",
    "Heartbeat",
    "Held",
    "Helper",
    "JobKey",
    "JobPhase",
    "JobQuery",
    "JobRecord",
    "JobState",
    "LockRecord",
    "NewAction",
    "NewJob",
    "NewSchedule",
    "OperationsPort",
    "ParentFailure",
    "ParentLink",
    "PlannedFire",
    "QueueConfig",
    "QueueCounts",
    "RateLimit",
    "ResultRecord",
    "Retry",
    "RuntimePort",
    "ScheduleRecord",
    "StepRecord",
    "StepsPort",
    "StopToken",
    "SystemClock",
    "TableStats",
    "TaskFiguresRecord",
    "ThroughputRecord",
    "TickBudget",
    "TickPlan",
    "TickResult",
    "Wait",
    "Waiter",
    "WallClock",
    "WorkerRecord",
    "after_key",
    "aspawn",
    "claim_order",
    "job_record",
    "key_of",
    "listing_order",
    "may_start",
    "new_job",
    "next_start",
    "order_of",
    "parent_failed_error",
    "payload_contains",
    "phase_at",
    "plan_tick",
    "rated_due",
    "redact",
    "registration_boundary",
    "soonest",
    "spawn",
    "steps_of",
    "wall_sleep",
    "wall_sleep_async",
]
