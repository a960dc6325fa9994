# GENERATED FILE, DO NOT EDIT: made from adapters/alkstore/adapters/postgres/_waiting_async.py
# by tools/async_to_sync.py (ADR 026, ADR 059). Edit the async source and run
# `python3 tools/async_to_sync.py`; CI fails when this file is stale.
"""Waiting claims: a connection of the listening pool LISTENs on the queue's channel (ADR 011).

The row is the truth: a waiter only shortens the wait, so a lost notification, a dead
listener or no listening connection to spare costs one poll interval, never a job. Listening
connections come from a ``ListeningPool`` (``_connections``), which opens them on the waiting
thread itself, within a bound, and has no worker thread; a connection is given back on the
waiting thread too, after ``UNLISTEN *`` and a drain of what arrived for it (no reset task that
one stuck connection could block for everybody); one that fails there is closed and dropped.

Whether notifications reach the listening connections at all is found out once, by the first
parked claim (ADR 019): it also listens on a probe channel of its own and sends a NOTIFY there
from a connection of the main pool. If that probe has not arrived ``PROBE_S`` seconds later,
LISTEN cannot work where ``listen_url`` leads (a transaction pooler, another database): a
warning is logged, once, and parked claims poll without taking a listening connection. The
verdict is not for ever: a probe can also miss its deadline on a machine too loaded to read it,
or while the server restarts, so every ``REPROBE_S`` seconds one parked claim listens and probes
again, and if that NOTIFY arrives, parked claims listen again (logged once). A claim that returns
before the probe is due leaves its connection to a short-lived thread that waits out the rest.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Awaitable, Callable, Sequence
from contextlib import closing, contextmanager

import psycopg

from alkstore.engine import RESERVED_PREFIX, Helper, Waiter, StopToken, spawn
from alkstore.errors import AlkstoreError

from ._connections import ListeningConnection, ListeningPool
from ._errors import raise_translated
from ._sql import Statements

__all__ = ["PROBE_S", "REPROBE_S", "Listening"]

log = logging.getLogger("alkstore.postgres")

#: How often (wall seconds) a listening wait looks at its stop token.
_STOP_SLICE_S = 0.05
#: How long (wall seconds) a probe NOTIFY may take to arrive before listening is judged not to work:
#: a direct connection delivers one in about a millisecond, so this only ever waits out a pooler.
PROBE_S = 5.0
#: How long (wall seconds) after a probe found notifications do not arrive the next probe is sent.
REPROBE_S = 60.0

Connection = ListeningConnection


class Listening:
    """Lends listening connections to parked claims, takes them back clean, and finds out whether they hear."""

    def __init__(
        self,
        pool: ListeningPool,
        sql: Statements,
        schema: str,
        closing: StopToken,
        notify: Callable[[Sequence[str]], object],
    ) -> None:
        self._pool = pool
        self._sql = sql
        self._schema = schema
        self._closing = closing
        self._notify = notify  # sends a NOTIFY to queues' channels from a connection of the main pool
        self._lock = threading.Lock()
        self._works: bool | None = None
        self._probing = False
        self._reprobe_at = 0.0  # when a negative verdict may be tried again (monotonic seconds)
        self._finisher: Helper | None = None  # what waits out a probe its claim returned before

    @property
    def works(self) -> bool | None:
        """Whether a probe NOTIFY reached a listening connection; ``None`` until one probe settled."""
        return self._works

    @contextmanager
    def waiter(self, queues: tuple[str, ...]) -> Iterator[Waiter]:
        """A waiter for ``queues``: listening if the pool lends a connection, else polling."""
        if self._works is False and (self._probing or time.monotonic() < self._reprobe_at):
            yield _PollingWaiter(self._closing)
            return
        try:
            conn = self._pool.getconn()
        except psycopg.Error as exc:
            log.debug("could not open a listening connection for %s (%s); the wait polls", list(queues), exc)
            conn = None
        if conn is None:
            yield _PollingWaiter(self._closing)
            return
        probe: _Probe | None = None
        try:
            try:
                for queue in queues:
                    conn.execute(self._sql.listen, {"schema": self._schema, "queue": queue})
                probe = self._probe(conn)
            except psycopg.Error as exc:
                raise_translated(exc)  # the connection goes back (or is dropped) below
            yield _ListeningWaiter(conn, ", ".join(queues), self._closing, probe, self)
        finally:
            if probe is not None and not probe.settled:
                self._finish_probe(conn, probe)
            else:
                self._give_back(conn)

    def _finish_probe(self, conn: Connection, probe: _Probe) -> None:
        """Settle a probe the wait ended before, from what reached ``conn`` meanwhile; or, if it is not due
        yet, wait out the rest in the background, which then gives ``conn`` back (the claim returns now)."""
        try:
            arrived = any([notify.channel == probe.channel for notify in conn.notifies(timeout=0)])
        except psycopg.Error:
            arrived = False
        if arrived:
            probe.settle(True)
        elif conn.closed:
            probe.give_up()
        elif time.monotonic() >= probe.deadline:
            probe.settle(False)
        else:
            self._finisher = spawn(self._await_probe, conn, probe, name="alkstore-listen-probe")
            return
        self._give_back(conn)

    def _await_probe(self, conn: Connection, probe: _Probe) -> None:
        try:
            while not probe.settled:
                left = probe.deadline - time.monotonic()
                if self._closing.is_cancelled():
                    probe.give_up()
                elif left <= 0:
                    probe.settle(False)
                else:
                    for notify in conn.notifies(timeout=min(left, _STOP_SLICE_S), stop_after=1):
                        if notify.channel == probe.channel:
                            probe.settle(True)
        except psycopg.Error as exc:
            log.debug("the listening probe's connection failed (%s); a later parked claim tries again", exc)
            probe.give_up()
        finally:
            self._give_back(conn)

    def _probe(self, conn: Connection) -> _Probe | None:
        """Listen on a probe channel on ``conn`` and notify it from elsewhere, unless a probe settled or runs."""
        with self._lock:
            if self._works is True or self._probing or (self._works is False and time.monotonic() < self._reprobe_at):
                return None
            self._probing = True
        queue = f"{RESERVED_PREFIX}listen-probe:{uuid.uuid4().hex}"
        try:
            row = (conn.execute(self._sql.channel, {"schema": self._schema, "queue": queue})).fetchone()
            assert row is not None
            conn.execute(self._sql.listen, {"schema": self._schema, "queue": queue})
            self._notify([queue])
        except AlkstoreError as exc:  # the main pool's NOTIFY failed: no verdict this time
            log.debug("could not send the listening probe (%s); a later parked claim tries again", exc)
            self._settle(None)
            return None
        except BaseException:
            self._settle(None)
            raise
        return _Probe(self, str(row[0]), time.monotonic() + PROBE_S)

    def _settle(self, works: bool | None) -> None:
        with self._lock:
            self._probing = False
            if works is None or self._works is True:
                return
            before, self._works = self._works, works
            if not works:
                self._reprobe_at = time.monotonic() + REPROBE_S
        if works and before is False:
            log.warning(
                "notifications reach the listening connections of schema %r again: parked claims listen", self._schema
            )
        elif not works and before is None:
            log.warning(
                "notifications do not reach the listening connections of schema %r: LISTEN cannot work there "
                "(a transaction pooler? set listen_url to a direct or session-pooled connection); "
                "parked claims poll instead, and try again every %g s",
                self._schema,
                REPROBE_S,
            )

    def _give_back(self, conn: Connection) -> None:
        if not conn.closed:  # a listener that died stays closed; the pool drops it
            try:
                conn.execute(self._sql.unlisten, {})
                for _ in conn.notifies(timeout=0):  # drop what arrived for the last holder
                    pass
            except psycopg.Error as exc:
                log.debug("dropping a listening connection that failed to UNLISTEN: %s", exc)
                conn.close()
        self._pool.putconn(conn)


class _Probe:
    """A NOTIFY on a channel of its own that one listening connection waits for until ``deadline``."""

    def __init__(self, listening: Listening, channel: str, deadline: float) -> None:
        self.channel = channel
        self.deadline = deadline
        self._listening = listening
        self.settled = False

    def settle(self, arrived: bool) -> None:
        if not self.settled:
            self.settled = True
            self._listening._settle(arrived)

    def give_up(self) -> None:
        """The waiter ends before the probe arrived or was due: no verdict."""
        if not self.settled:
            self.settled = True
            self._listening._settle(None)


class _ListeningWaiter(Waiter):
    """Parks on a connection that LISTENs on the queue's channel (and perhaps a probe's)."""

    def __init__(
        self, conn: Connection, queue: str, closing: StopToken, probe: _Probe | None, listening: Listening
    ) -> None:
        self._conn: Connection | None = conn
        self._queue = queue
        self._closing = closing
        self._probe = probe
        self._listening = listening

    def __repr__(self) -> str:
        return f"<alkstore.adapters.postgres waiter queue={self._queue!r}>"

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        _sliced(timeout, self._closing, stop, self._listen)

    @property
    def hears(self) -> bool:
        # Once a probe showed notifications arrive, and until its connection failed (then it polls).
        return self._conn is not None and self._listening.works is True

    def _listen(self, step: float) -> bool:
        """Wait ``step`` seconds for a notification of the queue; whether one came."""
        end = time.monotonic() + step
        while self._conn is not None:
            probe = self._probe if self._probe is not None and not self._probe.settled else None
            now = time.monotonic()
            if probe is not None and now >= probe.deadline:
                # Due: but a busy holder may not have waited since the probe was sent, so what
                # arrived meanwhile is still unread on the connection. Read it before judging.
                try:
                    arrived = [notify.channel for notify in self._conn.notifies(timeout=0)]
                except psycopg.Error as exc:
                    log.warning("listening for queue %r failed (%s); polling instead", self._queue, exc)
                    self._conn = None
                    probe.give_up()
                    continue
                probe.settle(probe.channel in arrived)
                if any(channel != probe.channel for channel in arrived):
                    return True
                continue
            left = end - now if probe is None else min(end, probe.deadline) - now
            if left <= 0:
                return False
            woken = False
            try:
                # Closed on the way out: the generator holds the connection's lock while it is open.
                # Every notification of the packet is read: leaving at the first drops the rest, and
                # under a stream of enqueues the probe shares a packet with a queue's notification.
                with closing(self._conn.notifies(timeout=left, stop_after=1)) as notifies:
                    for notify in notifies:
                        if self._probe is not None and notify.channel == self._probe.channel:
                            self._probe.settle(True)  # the probe (perhaps late): no job by itself
                        else:
                            woken = True
                if woken:
                    return True
            except psycopg.Error as exc:
                # The row is the truth: a dead listener only turns the rest of the wait into polling.
                log.warning("listening for queue %r failed (%s); polling instead", self._queue, exc)
                self._conn = None
        self._closing.wait(max(0.0, end - time.monotonic()))
        return False


class _PollingWaiter(Waiter):
    """Used when no listening connection is free: each wait sleeps its whole timeout (or until close or stop)."""

    def __init__(self, closing: StopToken) -> None:
        self._closing = closing

    def __repr__(self) -> str:
        return "<alkstore.adapters.postgres polling waiter>"

    def wait(self, timeout: float, stop: StopToken | None = None) -> None:
        _sliced(timeout, self._closing, stop, self._sleep)

    def _sleep(self, step: float) -> bool:
        self._closing.wait(step)
        return False


def _sliced(
    timeout: float, closing: StopToken, stop: StopToken | None, step: Callable[[float], bool]
) -> None:
    """Run ``step(seconds)`` until it says a job may be ready, ``timeout`` passes, the engine closes
    or ``stop`` is cancelled; with a stop token, in slices short enough to notice it soon."""
    end = time.monotonic() + timeout
    while not closing.is_cancelled() and not (stop is not None and stop.is_cancelled()):
        left = end - time.monotonic()
        if left <= 0 or step(left if stop is None else min(left, _STOP_SLICE_S)):
            return
