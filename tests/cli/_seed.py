"""Jobs in every phase for the inspection tests of both engines."""

from __future__ import annotations

from alkstore import EnqueueOpts, Queue
from tests.support import must_claim


def delayed_running_and_dead(emails: Queue, ids: dict[str, int], worker_id: str) -> None:
    """Add a delayed job, one running under ``worker_id`` and a dead one to ``emails``, their ids to ``ids``."""
    ids["delayed"] = emails.enqueue({"to": "later@example.com"}, EnqueueOpts(delay=3600))
    ids["running"] = emails.enqueue({"to": "busy@example.com"}, EnqueueOpts(priority=9))
    must_claim(emails, worker_id)
    ids["dead"] = emails.enqueue({"to": "bounce@example.com"}, EnqueueOpts(priority=9))
    must_claim(emails, worker_id).fail("550 mailbox unavailable")
