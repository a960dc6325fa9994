"""Bulk actions on everything matching a filter (ADR 068): what the filter is, and how far a run has come.

A filter is a queue's listing as its page shows it (queue, state, task, payload containment) and,
for dead jobs, an error group (``_views.group_key``). Each request acts on at most ``CHUNK`` jobs
it reads in the listing's order and hands on the listing's cursor: a large set is done in chunks,
each its own request, with its progress said between them. Jobs that arrive meanwhile ahead of the
cursor are left for another run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from alkstore import JobInfo, JobPhase
from alkstore.errors import InvalidOptions

from ._views import group_key, key_of

__all__ = ["CHUNK", "COUNT_SCAN", "VERBS", "Run", "run_of", "signature"]

#: The most jobs one request reads and acts on; the most a confirmation counts one by one.
CHUNK = 1000
COUNT_SCAN = 100_000
#: The bulk actions, the state each takes (dead jobs, or any live one), and the word for what each did.
VERBS = {"requeue": "Requeued", "purge": "Purged", "cancel": "Cancelled"}
_FIELDS = ("action", "queue", "state", "task", "contains", "group")


@dataclass(frozen=True, slots=True)
class Run:
    """One bulk action over a filter: the filter, where in its listing the next chunk starts (``cursor``;
    ``None``: the start), how many jobs were acted on so far and how many matched when asked."""

    action: str
    queue: str
    state: JobPhase
    task: str | None
    contains: str | None
    group: str | None
    cursor: str | None = None
    done: int = 0
    total: int = 0

    @property
    def probe(self) -> Any:
        """The payload containment to filter by, parsed (``run_of`` checked it is JSON)."""
        return None if self.contains is None else json.loads(self.contains)

    def matches(self, job: JobInfo) -> bool:
        """Whether a job of the listing is in the run's error group (every job, without one)."""
        return self.group is None or group_key(*key_of(job)) == self.group

    def fields(self) -> dict[str, str]:
        """The run as a form's fields (and a progress page's query)."""
        return {
            "action": self.action,
            "queue": self.queue,
            "state": self.state.value,
            "task": self.task or "",
            "contains": self.contains or "",
            "group": self.group or "",
            "cursor": self.cursor or "",
            "done": str(self.done),
            "total": str(self.total),
        }

    def said(self) -> str:
        """The filter in words."""
        words = f"{self.state.value} jobs of {self.queue}"
        if self.task:
            words += f", task {self.task}"
        if self.contains:
            words += f", payload containing {self.contains}"
        if self.group:
            words += f", error group {self.group}"
        return words


def run_of(form: Mapping[str, str]) -> Run:
    """The run a form names; ``InvalidOptions`` for an unknown action, state or count, an action the state
    does not take (requeue and purge: dead jobs; cancel: live ones), a group on live jobs, or a payload
    filter that is not JSON."""
    action, queue, state, task, contains, group = (form.get(key, "").strip() for key in _FIELDS)
    if action not in VERBS:
        raise InvalidOptions(f"no such bulk action: {action[:100]!r}")
    try:
        phase = JobPhase(state)
        done, total = int(form.get("done") or 0), int(form.get("total") or 0)
    except ValueError:
        raise InvalidOptions("not a state, or not a count") from None
    if (phase is JobPhase.DEAD) != (action != "cancel"):
        raise InvalidOptions(f"{action} does not act on {phase.value} jobs")
    if group and phase is not JobPhase.DEAD:
        raise InvalidOptions("an error group is of dead jobs")
    if contains:
        try:
            json.loads(contains)
        except ValueError as exc:
            raise InvalidOptions(f"the payload filter is not JSON: {exc}") from None
    cursor = form.get("cursor") or None
    return Run(action, queue, phase, task or None, contains or None, group or None, cursor, done, total)


def signature(secret: bytes, run: Run) -> str:
    """The dashboard's signature of a progress page's run: no link elsewhere can have it claim progress."""
    text = json.dumps(run.fields(), sort_keys=True)
    return hmac.new(secret, b"alkstore-progress\x00" + text.encode(), hashlib.sha256).hexdigest()
