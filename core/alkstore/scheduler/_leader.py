"""The scheduler leader's rules (ADR 006, 018): its lease's timing, its owner token, when to stand by.

Both runtimes' loops (``_runner_async`` and its sync twin) follow these; the loops only wait and
call the engine.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from dataclasses import dataclass
from datetime import timedelta

from alkstore.errors import DatabaseUnavailable, LeadershipLost, LeaseLost

__all__ = [
    "LEASE_TTL",
    "LOOK_EVERY",
    "RENEW_EVERY",
    "RETRY_EVERY",
    "SLEEP_SLICE",
    "StandBy",
    "after_leading",
    "owner_token",
]

LEASE_TTL = timedelta(seconds=10)
RENEW_EVERY = timedelta(seconds=2)
SLEEP_SLICE = timedelta(seconds=1)
#: How long a standby waits before asking for leadership again (wall seconds), and a leader
#: before retrying through an outage (seconds of the store's clock, which its lease is measured in).
RETRY_EVERY = timedelta(seconds=1)
#: How often (wall seconds) a standby reads the leader's lease again while it holds (ADR 044): between
#: reads it asks only once the lease it read has lapsed on the store's clock (looked at every
#: ``RETRY_EVERY``), so a leader that dies is followed at its lease's end and one that stops cleanly
#: within this.
LOOK_EVERY = timedelta(seconds=5)


def owner_token() -> str:
    """An owner token unique to one runner instance: host, pid, nanoseconds and randomness."""
    return f"{socket.gethostname()[:48]}:{os.getpid()}:{time.time_ns()}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class StandBy:
    """Ask for leadership again after ``wait``; ``warn`` when leadership was lost rather than refused."""

    wait: timedelta
    reason: str
    warn: bool


def after_leading(error: BaseException | None) -> StandBy | None:
    """What a long-running process does when ``run_schedules`` ends: stand by, or stop (``None``).

    Refused or lost leadership, and an outage (``DatabaseUnavailable``), mean standing by and
    asking again; a clean return means the process was asked to stop. Any other error is not
    this loop's to handle and is raised by the caller.
    """
    if error is None:
        return None
    if isinstance(error, LeadershipLost):
        lost = isinstance(error.__cause__, LeaseLost | DatabaseUnavailable)
        return StandBy(RETRY_EVERY, str(error), warn=lost)
    if isinstance(error, DatabaseUnavailable):
        return StandBy(RETRY_EVERY, f"database unavailable: {error}", warn=True)
    raise error
