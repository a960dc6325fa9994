"""The steps port's records: checkpoints, a job's wait and a stored event (ADR 069).

Kept apart from ``_records`` so that the steps port (``_steps_port_async``) and its generated twin
share one set of classes; normalised values only, as every record of the port.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["EventRecord", "StepRecord", "Wait"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """A finished step of a job: its name, its result as core encoded it, and when it was stored."""

    name: str
    result: bytes
    at: datetime


@dataclass(frozen=True, slots=True)
class Wait:
    """What a sleeping job waits for: the instant it is due again, and the event that wakes it sooner."""

    until: datetime
    event: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """An emitted event as stored: the first emit of its name, kept until ``expires_at``."""

    name: str
    payload: bytes
    at: datetime
    expires_at: datetime
