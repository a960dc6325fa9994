"""The nemesis run's history: one event record per observed step, appended as JSON lines.

Every process of a run (producer, worker, scheduler, courier, the nemesis itself) appends to a
file of its own in one directory, so no two writers share a file; the loader merges them.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any

__all__ = ["Event", "HistoryWriter", "Kind", "Snapshot", "load_history", "load_snapshot"]


class Kind(StrEnum):
    """What an event records; the names are the ones written to the file."""

    ENQUEUE_COMMITTED = "enqueue_committed"
    ENQUEUE_ROLLED_BACK = "enqueue_rolled_back"
    CLAIM = "claim"
    HEARTBEAT = "heartbeat"
    RUN_START = "run_start"
    RUN_END = "run_end"
    ACK = "ack"
    RETRY = "retry"
    #: The claim was handed back unfinished (a worker stopping): it took no attempt.
    RELEASE = "release"
    BURY = "bury"
    SCHEDULE_REGISTER = "schedule_register"
    SCHEDULE_FIRE = "schedule_fire"
    OUTBOX_COMMIT = "outbox_commit"
    DELIVERY = "delivery"
    FAULT = "fault"
    #: The harness read the final snapshot: the history's end, up to which boundaries come due.
    SNAPSHOT = "snapshot"


#: The fault actions a nemesis records (``Event.action``); ``cut`` opens an outage, ``heal`` ends it;
#: ``exhaust`` has a scheduler hold every connection of its pool for a while; ``server_fast`` and
#: ``server_immediate`` restart the database server (a clean shutdown, or a crash and recovery).
FAULT_ACTIONS = frozenset(
    {"kill", "stop", "cont", "restart", "cut", "heal", "exhaust", "server_fast", "server_immediate"}
)


@dataclass(frozen=True, slots=True)
class Event:
    """One step as a process saw it, logged after the step returned.

    ``mono`` is ``time.monotonic()`` (one clock for every process on a host) when the event was
    logged, ``began`` the same clock when the call was issued; ``wall`` is epoch seconds.
    ``lease_until`` and ``boundary`` are epoch seconds of the database's clock. Which optional
    fields an event carries depends on its kind (README.md lists them).
    """

    kind: Kind
    process: str
    seq: int
    mono: float
    wall: float
    began: float | None = None
    job: int | None = None
    queue: str | None = None
    tag: str | None = None
    key: str | None = None
    max_attempts: int | None = None
    fence: int | None = None
    worker: str | None = None
    lease_until: float | None = None
    ok: bool | None = None
    schedule: str | None = None
    interval: float | None = None
    boundary: float | None = None
    message: str | None = None
    action: str | None = None
    target: str | None = None

    def to_json(self) -> str:
        """One line of the history file: the set fields only."""
        return json.dumps({name: value for name, value in asdict(self).items() if value is not None}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> Event:
        """Read a line ``to_json`` wrote; unknown fields are an error, not silently dropped."""
        data: dict[str, Any] = json.loads(line)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown event fields {sorted(unknown)}")
        data["kind"] = Kind(data["kind"])
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The store's state read once the run is over and drained: job ids by state, messages delivered."""

    pending: frozenset[int] = frozenset()
    running: frozenset[int] = frozenset()
    dead: frozenset[int] = frozenset()
    delivered: frozenset[str] = frozenset()

    def to_json(self) -> str:
        return json.dumps({name: sorted(getattr(self, name)) for name in ("pending", "running", "dead", "delivered")})


class HistoryWriter:
    """Appends one process's events to ``<directory>/<process>.jsonl``, a line per event.

    Each line is written with one ``write`` on an ``O_APPEND`` descriptor and flushed, so a kill
    loses at most the line being written (the loader drops a torn last line).
    """

    def __init__(self, directory: Path, process: str, *, fsync: bool = False, wall_offset: float | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.process = process
        #: ``wall`` as ``mono`` plus this offset (the run's one host clock) rather than this process's
        #: own wall clock, which may be skewed on purpose (``faketime``); ``None``: ``time.time()``.
        self._wall_offset = wall_offset
        self._fd = os.open(directory / f"{process}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._fsync = fsync
        self._seq = 0

    def log(self, kind: Kind, *, began: float | None = None, **fields: Any) -> Event:
        """Record ``kind`` now, with ``fields`` (the optional fields of ``Event``); return the event."""
        self._seq += 1
        mono = time.monotonic()
        wall = time.time() if self._wall_offset is None else mono + self._wall_offset
        event = Event(kind, self.process, self._seq, mono, wall, began, **fields)
        os.write(self._fd, (event.to_json() + "\n").encode())
        if self._fsync:
            os.fsync(self._fd)
        return event

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_history(directory: Path) -> list[Event]:
    """Every event of every ``*.jsonl`` file under ``directory``, in order of ``mono``.

    A last line without its newline is the one a killed process was writing, and is dropped; any
    other unreadable line is an error.
    """
    events: list[Event] = []
    for path in sorted(directory.glob("*.jsonl")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        if lines[-1]:  # torn: no newline after the last line
            lines = lines[:-1]
        events.extend(Event.from_json(line) for line in lines if line)
    return sorted(events, key=lambda event: (event.mono, event.process, event.seq))


def load_snapshot(path: Path) -> Snapshot:
    """The snapshot ``Snapshot.to_json`` wrote to ``path``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return Snapshot(
        pending=frozenset(data.get("pending", ())),
        running=frozenset(data.get("running", ())),
        dead=frozenset(data.get("dead", ())),
        delivered=frozenset(data.get("delivered", ())),
    )
