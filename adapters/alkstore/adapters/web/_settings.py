"""A queue's settings as its page's form shows and sends them (ADR 068): the text of each field, both ways.

The form holds each setting ``Queue.configure`` takes (``QueueSettings``), seconds for durations, and a
blank field for the derived default (or, for the concurrency cap and kept results, none). Only the
reading of text is here; every rule on the values (ranges, the retry curve's base under its cap) is
the core's, which ``configure`` applies before it writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import cast

from alkstore import QueueDefaults, QueueSettings
from alkstore.display import span
from alkstore.errors import InvalidOptions

__all__ = ["SETTINGS", "entry_of", "said", "settings_of"]

#: Each setting: its keyword, its label, and what its field holds.
SETTINGS = (
    ("visibility_timeout", "Visibility timeout", "seconds a claim's lease lasts"),
    ("max_attempts", "Max attempts", "runs before a job dies"),
    ("backoff_base", "Backoff base", "seconds before the first retry, doubling"),
    ("backoff_cap", "Backoff cap", "seconds a retry waits at most"),
    ("priority", "Priority", "of jobs enqueued without one"),
    ("concurrency", "Concurrency cap", "jobs running at once on every host; blank: no cap"),
    ("keep_results", "Keep results", "seconds a succeeded job's outcome is kept; blank: not kept"),
)
_DURATIONS = frozenset({"visibility_timeout", "backoff_base", "backoff_cap", "keep_results"})


def _text(value: int | timedelta | None) -> str:
    if value is None:
        return ""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
        return str(int(seconds)) if seconds.is_integer() else str(seconds)
    return str(value)


def entry_of(defaults: QueueDefaults) -> dict[str, str]:
    """The form's fields for a queue's effective settings."""
    return {key: _text(getattr(defaults, key)) for key, _, _ in SETTINGS}


def settings_of(form: Mapping[str, str]) -> QueueSettings:
    """``configure``'s keywords from the form's text (blank: ``None``); ``InvalidOptions`` names a field
    whose text is not a number (whole, for a count)."""
    settings: dict[str, int | float | None] = {}
    for key, label, _ in SETTINGS:
        text = form.get(key, "").strip()
        if not text:
            settings[key] = None
            continue
        try:
            number = float(text) if key in _DURATIONS else int(text)
        except ValueError:
            kind = "a number of seconds" if key in _DURATIONS else "a whole number"
            raise InvalidOptions(f"{label}: {text[:100]!r} is not {kind}") from None
        settings[key] = int(number) if isinstance(number, float) and number.is_integer() else number
    return cast(QueueSettings, settings)  # each key one of QueueSettings', each value of its type


def said(defaults: QueueDefaults) -> str:
    """The settings a queue now has, in words, for the page that says they were saved."""
    cap = "no cap" if defaults.concurrency is None else f"at most {defaults.concurrency} at once"
    kept = "not kept" if defaults.keep_results is None else f"kept {span(defaults.keep_results)}"
    return (
        f"lease {span(defaults.visibility_timeout)}, {defaults.max_attempts} attempts, backoff "
        f"{span(defaults.backoff_base)} up to {span(defaults.backoff_cap)}, priority {defaults.priority}, "
        f"{cap}, results {kept}"
    )
