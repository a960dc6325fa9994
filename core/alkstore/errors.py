"""The one exception hierarchy of alkstore.

Every error alkstore raises on purpose is an ``AlkstoreError``; bad input is also a
``ValueError`` so generic handlers keep working::

    AlkstoreError
    ├── InvalidName          (ValueError)  empty, too long, unprintable or padded name
    ├── ReservedName         (ValueError)  a user name under the reserved ``__alkstore_`` prefix
    ├── InvalidSpec          (ValueError)  a schedule spec outside ``@every <n><s|m|h|d>``
    ├── InvalidPayload       (ValueError)  a payload the codec cannot encode or decode
    ├── InvalidOptions       (ValueError)  enqueue/schedule options out of range or contradictory
    ├── LeaseLost                          a fenced call by a holder whose lease was taken over
    ├── LeadershipLost                     the scheduler runner has, or never got, the leader lock
    ├── StoreClosed                        a call on a store after ``close()``
    └── DatabaseError                      a driver error, raised ``from`` the original
        └── SchemaOutOfDate                the database schema is missing or older than the code

Input errors are raised before any I/O, so a rejected call never leaves anything half-written.
"""

from __future__ import annotations

__all__ = [
    "AlkstoreError",
    "DatabaseError",
    "InvalidName",
    "InvalidOptions",
    "InvalidPayload",
    "InvalidSpec",
    "LeadershipLost",
    "LeaseLost",
    "ReservedName",
    "SchemaOutOfDate",
    "StoreClosed",
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
    """Enqueue or schedule options are out of range, of the wrong type, or contradictory."""


class LeaseLost(AlkstoreError):
    """A job or lock lease was taken over (or is gone); the fenced call changed nothing."""


class LeadershipLost(AlkstoreError):
    """The scheduler runner could not acquire, or could not keep, the leader lock."""


class StoreClosed(AlkstoreError):
    """The store was closed; open a new one."""


class DatabaseError(AlkstoreError):
    """The database driver failed; the driver's exception is the ``__cause__``."""


class SchemaOutOfDate(DatabaseError):
    """The database schema is missing or older than this code; run ``alkstore migrate``."""
