"""The nemesis run (README.md).

A process of the run whose wall clock is skewed (libfaketime preloaded, ``FAKETIME`` set, the
monotonic clock left alone) would fail every ``time.sleep`` with EINVAL: libfaketime misreads
the absolute monotonic deadline ``time.sleep`` hands to ``clock_nanosleep``, while timed waits
work. A host whose wall clock is really off has no such fault, so such a process sleeps by a
timed wait instead, set here, before its modules bind ``time.sleep``.
"""

import os
import threading
import time
from typing import SupportsFloat, SupportsIndex


def _waiting_sleep(seconds: SupportsFloat | SupportsIndex) -> None:
    """``time.sleep`` as a timed wait on an event nothing sets."""
    threading.Event().wait(float(seconds))


if "FAKETIME" in os.environ:
    time.sleep = _waiting_sleep
