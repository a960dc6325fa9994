# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_clock_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""The database server's clock, read without a round trip per call: the Postgres default (ADR 015).

Every host sharing a database must agree on "now": a lease granted by one host lapses for all
of them at the same instant, a boundary is due for all at once. The clock asks the server for
its time (``clock_timestamp()``) at open, keeping the sample with the shortest round trip of a
few, and again every minute on a background thread; between samples it adds the local
monotonic clock's progress to the last sample. A host's own wall clock never enters: one that
is a minute fast or slow, or jumps, reads the same instants as every other host. An outage only
stretches the time between samples; the estimate carries on from the local monotonic clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from alkstore.engine import Helper, StopToken, WallClock, spawn
from alkstore.errors import AlkstoreError

__all__ = ["RESYNC_EVERY", "DatabaseClock"]

log = logging.getLogger("alkstore.postgres")

#: How often (wall seconds) the offset to the server's clock is measured again.
RESYNC_EVERY = 60.0
#: Samples taken per measurement; the one with the shortest round trip is kept.
SAMPLES = 3
#: A step backwards smaller than this after a new measurement is smoothed over (now() never
#: decreases because of it); a larger one is a real change of the server's clock, and is taken.
_SMOOTHED = timedelta(seconds=1)


class DatabaseClock(WallClock):
    """``now()`` from the database server's clock, offset-corrected against the local monotonic clock.

    ``read_server`` returns the server's current time (one round trip). It sleeps in wall
    (monotonic) time, as the system clock does. ``measure`` must have run once before ``now``.
    """

    def __init__(self, read_server: Callable[[], datetime]) -> None:
        self._read_server = read_server
        self._anchor: tuple[datetime, float] | None = None  # (server instant, local monotonic at it)
        self._last: datetime | None = None
        self._lock = threading.Lock()
        self._stopped = StopToken()
        self._resyncing: Helper | None = None
        self.round_trip = 0.0  # of the kept sample, in seconds: the anchor is within half of it

    def __repr__(self) -> str:
        return "<alkstore.adapters.postgres.DatabaseClock>"

    def measure(self) -> None:
        """Sample the server's clock (``SAMPLES`` round trips) and anchor to the best sample."""
        best: tuple[float, datetime, float] | None = None
        for _ in range(SAMPLES):
            before = time.monotonic()
            server = self._read_server()
            after = time.monotonic()
            sample = (after - before, server, (before + after) / 2)
            if best is None or sample[0] < best[0]:
                best = sample
        assert best is not None
        with self._lock:
            self.round_trip, server, local = best
            self._anchor = (server, local)

    def start(self) -> None:
        """Measure again every ``RESYNC_EVERY`` seconds in the background (a task; in the sync twin a
        daemon thread), until ``stop()``."""
        self._resyncing = spawn(self._resync, name="alkstore-db-clock")

    def stop(self) -> None:
        self._stopped.cancel()

    def _resync(self) -> None:
        while not self._stopped.wait(RESYNC_EVERY):
            try:
                self.measure()
            except AlkstoreError as exc:  # an outage: carry on from the local monotonic clock
                log.debug("could not measure the database clock (%s); keeping the last offset", exc)

    def now(self) -> datetime:
        anchor = self._anchor
        if anchor is None:
            raise AlkstoreError("the database clock was read before its first measurement")
        server, local = anchor
        estimate = server + timedelta(seconds=time.monotonic() - local)
        # Lock-free: two threads racing here can only leave the larger of two nearby instants or
        # the smaller; either keeps later calls within the smoothing window.
        last = self._last
        if last is not None and last > estimate and last - estimate < _SMOOTHED:
            return last
        self._last = estimate
        return estimate
