"""What every benchmark script shares: the server it measures by default, and the load it ran under."""

from __future__ import annotations

from pathlib import Path

#: The local test server (trust auth), as the test suite and CI find it.
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def load_average() -> str:
    """``/proc/loadavg`` as it reads now, for the record beside a figure."""
    return Path("/proc/loadavg").read_text().strip()
