"""The port's records of job dependencies (ADR 073): a dependent's policy and how it sees a parent.

Apart from ``_records`` (which imports them, and where ``NewJob`` and ``JobRecord`` carry them) so that
neither module grows past its floor's length.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["PARENT_FAILED_ERROR", "ParentFailure", "ParentLink", "parent_failed_error"]

#: ``last_error`` of a dependent dead-lettered because a parent died (``parent_failed_error`` fills it in).
PARENT_FAILED_ERROR = "parent job {} did not succeed"


def parent_failed_error(parent_id: int) -> str:
    """The reason a dependent whose policy is ``die`` is dead-lettered with, naming the parent that died."""
    return PARENT_FAILED_ERROR.format(parent_id)


class ParentFailure(enum.StrEnum):
    """What becomes of a job when one of its parents dies (is buried, or cancelled, or ends so).

    ``CANCEL``: it is cancelled (deleted, as ``cancel`` ends a pending job); ``RUN``: that parent no
    longer holds it back (it runs once its other parents finished); ``DIE``: it is dead-lettered
    with ``parent_failed_error(parent)``. A dependent cancelled or dead is in turn a parent that died.
    """

    CANCEL = "cancel"
    RUN = "run"
    DIE = "die"


@dataclass(frozen=True, slots=True)
class ParentLink:
    """One parent of a job as the job sees it: ``state`` is ``waiting``, ``succeeded`` or ``failed``;
    ``result`` is what it handed its dependents when it succeeded (``None``: nothing)."""

    id: int
    state: str
    result: bytes | None = None
