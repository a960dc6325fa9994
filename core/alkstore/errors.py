"""The one exception hierarchy of alkstore.

Every error alkstore raises on purpose is an ``AlkstoreError``. Bad input is also a
``ValueError`` (a value out of range or malformed) or a ``TypeError`` (an argument of the
wrong kind), so generic handlers keep working::

    AlkstoreError
    ├── InvalidName          (ValueError)  empty, too long, unprintable or padded name
    ├── ReservedName         (ValueError)  a user name under the reserved ``__alkstore_`` prefix
    ├── InvalidSpec          (ValueError)  a schedule spec outside ``@every <n><s|m|h|d>``
    ├── InvalidPayload       (ValueError)  a payload the codec cannot encode or decode
    ├── InvalidOptions       (ValueError)  options or arguments out of range or contradictory
    │   ├── UnknownParent                  an ``after=`` id of no job stored live, dead or kept
    │   └── DependencyCycle                a graph whose jobs wait on each other in a circle
    ├── InvalidArgument      (TypeError)   an argument of the wrong type (a job id that is not an int, …)
    │   └── InvalidTransaction (ValueError) not this store's transaction, already finished, or not in one
    ├── LeaseLost                          a fenced call by a holder whose lease was taken over
    ├── JobHeld                            an operator's write to a job a worker holds (running)
    ├── UnknownJob           (LookupError) an operator's write to a job stored neither live nor dead
    ├── LeadershipLost                     the scheduler runner has, or never got, the leader lock
    ├── EventTimeout                       ``job.wait_for`` timed out before its event was emitted
    ├── NotOffered                         an operators' call on an engine without the operations port
    ├── StoreClosed                        a call on a store after ``close()``
    └── DatabaseError                      a driver error, raised ``from`` the original
        ├── DatabaseUnavailable            transient: connection lost, pool timeout, shutdown; retry later
        ├── PoolerMisconfigured            a transaction pooler without ``prepare_threshold=None``
        └── SchemaOutOfDate                the database schema is missing or older than the code

Input errors are raised before any I/O, so a rejected call never leaves anything half-written.
``DatabaseUnavailable`` is the one a loop may retry (ADR 014); every other ``DatabaseError``
is permanent until someone acts.
"""

from __future__ import annotations

__all__ = [
    "AlkstoreError",
    "DatabaseError",
    "DatabaseUnavailable",
    "DependencyCycle",
    "EventTimeout",
    "InvalidArgument",
    "InvalidName",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidSpec",
    "InvalidTransaction",
    "JobHeld",
    "LeadershipLost",
    "LeaseLost",
    "NotOffered",
    "PoolerMisconfigured",
    "ReservedName",
    "SchemaOutOfDate",
    "StoreClosed",
    "UnknownJob",
    "UnknownParent",
]


class AlkstoreError(Exception):
    """Base of every error alkstore raises on purpose."""


class InvalidName(AlkstoreError, ValueError):
    """A queue, schedule, outbox or lock name is empty, too long, unprintable or padded."""


class ReservedName(AlkstoreError, ValueError):
    """A user-supplied name starts with the engine's reserved prefix ``__alkstore_``."""


class InvalidSpec(AlkstoreError, ValueError):
    """A schedule spec is not exactly ``@every <n><s|m|h|d>`` within the allowed range."""


class InvalidPayload(AlkstoreError, ValueError):
    """The codec cannot encode (or decode) a payload."""


class InvalidOptions(AlkstoreError, ValueError):
    """Options or arguments are out of range, of the wrong type, or contradictory."""


class UnknownParent(InvalidOptions):
    """A job's ``after=`` names an id of no stored job (nor a kept result): nothing was enqueued."""


class DependencyCycle(InvalidOptions):
    """A graph's jobs wait on each other in a circle, so none could ever run: nothing was enqueued."""


class InvalidArgument(AlkstoreError, TypeError):
    """An argument is of the wrong type: a job id that is not an int, an error that is not a str, …"""


class InvalidTransaction(InvalidArgument, ValueError):
    """A transaction that is not this store's kind (a ``TypeError``), or one that has finished or never
    began (a ``ValueError``): either way nothing was written."""


class LeaseLost(AlkstoreError):
    """A job or lock lease was taken over (or is gone); the fenced call changed nothing."""


class JobHeld(AlkstoreError):
    """A worker holds the job (it is running under a lease): an operator's write to it, such as skipping
    a step (ADR 077), is refused and nothing was written; it may be tried again once the run ends."""


class UnknownJob(AlkstoreError, LookupError):
    """No job of that id is stored live or dead (acked, cancelled, purged, or never enqueued): an operator's
    write to it, such as skipping a step (ADR 077), is refused and nothing was written."""


class EventTimeout(AlkstoreError):
    """``job.wait_for`` reached its timeout before the event was emitted; the task may handle it (ADR 069)."""


class LeadershipLost(AlkstoreError):
    """The scheduler runner could not acquire, or could not keep, the leader lock."""


class NotOffered(AlkstoreError):
    """The call needs the engine's operations port (listings, actions on jobs, results, workers,
    throughput), which this engine does not offer: it stops at the runtime port (ADR 062).
    Raised before any I/O; the message names the call and the engine."""


class StoreClosed(AlkstoreError):
    """The store was closed; open a new one."""


class DatabaseError(AlkstoreError):
    """The database driver failed; the driver's exception is the ``__cause__``."""


class DatabaseUnavailable(DatabaseError):
    """The database cannot serve the call for now: connection lost, pool timeout, shutdown, conflict.

    Retrying later may succeed. A call whose connection was lost in flight may or may not have
    taken effect; fenced calls and re-registrations make such a retry safe.
    """


class PoolerMisconfigured(DatabaseError):
    """The server lost track of the driver's prepared statements: a transaction pooler (PgBouncer
    ``pool_mode = transaction``) without the store's pooler options; permanent until reconfigured."""


class SchemaOutOfDate(DatabaseError):
    """The database schema is missing or older than this code; run ``alkstore migrate``."""
