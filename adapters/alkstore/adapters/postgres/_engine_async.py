"""The PostgreSQL engine: the ``Engine`` port on psycopg 3 and psycopg_pool.

Each method borrows one pooled connection in autocommit mode and does its work in one
statement, except registration and the tick, which take a transaction. The statements live in
``_sql``, rows become records in ``_rows``, driver errors are translated in ``_errors``, pools
and checkouts are ``_connections``', waiting claims ``_waiting``'s, the default clock ``_clock``'s.

Over 500 lines: one method per port method, each a few lines over a named statement; what is
not a thin call already lives in the modules above. A split by port area is the next step if it
grows again.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import BaseRowFactory, scalar_row, tuple_row

from alkstore import engine as port
from alkstore.engine import Clock, StopToken, claim_order, plan_tick, redact
from alkstore.errors import AlkstoreError, LeaseLost

from . import _migrate_async, _rows
from ._bookkeeping_async import AsyncPostgresBookkeeping
from ._clock_async import AsyncDatabaseClock
from ._connections_async import AsyncConnections
from ._cursors import ClaimCursors, claim_params, full_params
from ._dependencies_async import has_parents, insert_with_parents, relink_requeued, waits_on_parents, with_links
from ._errors import raise_translated
from ._options import EngineOptions, parse_options
from ._rates import rated_claim_params
from ._sql import UPKEEP_TABLES, Statements
from ._sql import vacuum as vacuum_statement
from ._steps_async import AsyncPostgresSteps
from ._transactions_async import caller_connection
from ._waiting_async import AsyncListening

__all__ = ["AsyncPostgresEngine", "open_engine"]

log = logging.getLogger("alkstore.postgres")

#: Queue channel names remembered per engine before the memo starts over.
_CHANNEL_CACHE_SIZE = 4096
_SCALAR: BaseRowFactory[Any] = scalar_row


async def open_engine(url: str, **options: Any) -> AsyncPostgresEngine:
    """Entry point for ``postgresql://``, ``postgres://`` and ``postgresql+psycopg://`` URLs: an engine, started."""
    engine = AsyncPostgresEngine(url, **options)
    await engine.start()
    return engine


#: Jobs per statement of a batch enqueue: one array insert each (a few MB of parameters at most);
#: a larger batch takes several statements in one transaction.
_ENQUEUE_CHUNK = 5000


def _keyed(job: port.NewJob) -> bool:
    """Whether ``job`` carries a key (unique, ordering or rate): it then takes ``_insert_keyed``."""
    return bool(job.unique_key or job.ordering_key or job.rate_key)


class AsyncPostgresEngine(AsyncPostgresBookkeeping, port.AsyncEngine, AsyncPostgresSteps):
    """Queues, leases and schedules in one PostgreSQL schema; see ``alkstore.engine.Engine``.

    Options: ``schema`` (default ``"alkstore"``, any name up to 63 bytes, always quoted),
    ``min_size``/``max_size`` of the connection pool (1/10), ``migrate`` (``False``: opening
    an unmigrated or older schema raises ``SchemaOutOfDate``; ``True`` migrates first),
    ``connect_timeout`` (seconds per connection attempt; default the URL's, else 10),
    ``pool_timeout`` (seconds to wait for a free pooled connection, 5; under the scheduler's 10 s
    lease, ADR 036), ``prepare_threshold`` (psycopg's, default 5 runs before a
    statement is prepared, but the engine's one-statement calls are prepared at their first, ADR
    053; ``None`` never prepares statements, as a transaction pooler needs),
    ``listen_url`` (where parked claims LISTEN; default the URL) and ``listen_max_size`` (the
    listening pool's bound, default ``max_size``), ``grant`` (roles that migrating makes
    application roles of the schema, ADR 019) and ``claim_backstop`` (seconds, default 1: a
    claim reads from 10 s behind its cursor at least this often, the whole ready index every 60
    of those, and from its cursor in between, ADRs 061 and 067; 0 reads it whole every time).
    A store holds at most ``max_size + listen_max_size`` connections at once
    (``max_connections``): its open checks the schema on one more, closed before the pools open.
    ``open_engine`` constructs one and ``start``s it.
    """

    def __init__(self, url: str, **options: Any) -> None:
        self._options = parse_options(url, options)
        opts: EngineOptions = self._options
        self._schema = opts.schema
        self._sql = Statements.for_schema(self._schema)
        self._closed = False
        self._channels: dict[str, str] = {}
        self._closing = StopToken()  # cancelled by close(): parked waits return at once
        self._parked_lock = threading.Lock()
        self._parked: Counter[str] = Counter()  # queues with a parked claim in this engine
        self._clock = AsyncDatabaseClock(self._server_time)
        self._clock_conn: psycopg.AsyncConnection[Any] | None = None
        self._cursors = ClaimCursors(opts.claim_backstop)
        self._connections = AsyncConnections(opts, self._sql)
        self._listening = AsyncListening(
            self._connections.listen_pool, self._sql, self._schema, self._closing, self._notify_queues
        )

    async def start(self) -> None:
        """Check (or migrate) the schema and measure the clock on a direct connection, then open the pools.

        The direct connection comes first, so a wrong URL or an old schema fails now with the real cause.
        """
        opts = self._options
        try:
            async with await psycopg.AsyncConnection.connect(opts.url, **opts.connect_kwargs) as conn:
                if opts.migrate:
                    await _migrate_async.apply(conn, self._sql, self._schema, opts.grant)
                await _migrate_async.check(conn, self._sql, self._schema, opts.url)
                self._clock_conn = conn
                await self._clock.measure()
                self._clock_conn = None
        except psycopg.Error as exc:
            raise_translated(exc)
        await self._connections.open()
        self._clock.start()

    def __repr__(self) -> str:
        state = " closed" if self._closed else ""
        return (
            f"<alkstore.adapters.postgres.PostgresEngine url={redact(self._options.url)!r}"
            f" schema={self._schema!r}{state}>"
        )

    @property
    def schema(self) -> str:
        """The schema holding every table and function of this store."""
        return self._schema

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def max_connections(self) -> int:
        """The most connections this store holds at once: ``max_size + listen_max_size``."""
        return self._options.max_connections

    @property
    def listening_works(self) -> bool | None:
        """Whether notifications reach this store's listening connections (``None``: no parked claim found out yet)."""
        return self._listening.works

    @property
    def pool(self) -> Any:
        """The connection pool of every operation but parked claims."""
        return self._connections.pool

    @property
    def waiter_pool(self) -> Any:
        """The pool of listening connections held by claims parked in ``claim(wait=…)``."""
        return self._connections.listen_pool

    # -- connections -------------------------------------------------------------------

    async def _server_time(self) -> datetime:
        """The database server's clock, one round trip (the default clock's sample)."""
        conn = self._clock_conn
        try:
            if conn is not None:
                row = await (await conn.execute(self._sql.server_time, {})).fetchone()
                assert row is not None
                return _rows.utc(row[0])
            value = await self._connections.one(self._sql.server_time, {}, _SCALAR)
        except psycopg.Error as exc:
            raise_translated(exc)
        assert isinstance(value, datetime)
        return _rows.utc(value)

    async def _notify_queues(self, queues: Sequence[str]) -> None:
        """Send a NOTIFY to each queue's channel from a connection of the main pool."""
        await self._connections.all(self._sql.notify_queues, {"schema": self._schema, "queues": list(queues)}, _SCALAR)

    async def _channel(self, conn: psycopg.AsyncConnection[Any], queue: str) -> str:
        """The NOTIFY channel of ``queue``: asked of the schema's ``channel()`` once, then remembered.

        The SQL function stays the one owner of the formula; enqueues pass the name as a
        parameter instead of hashing it again in every statement.
        """
        channel = self._channels.get(queue)
        if channel is None:
            row = await (await conn.execute(self._sql.channel, {"schema": self._schema, "queue": queue})).fetchone()
            assert row is not None
            channel = str(row[0])
            if len(self._channels) >= _CHANNEL_CACHE_SIZE:
                self._channels.clear()
            self._channels[queue] = channel
        return channel

    # -- lifecycle -----------------------------------------------------------------------

    async def migrate(self) -> None:
        async with self._connections.connection() as conn:
            applied = await _migrate_async.apply(conn, self._sql, self._schema, self._options.grant)
        if applied:
            log.info("migrated schema %r to version %s", self._schema, applied[-1])

    async def close(self) -> None:
        """Close both pools; parked claims are woken first, so they return promptly."""
        if self._closed:
            return
        self._closed = True
        self._closing.cancel()
        self._clock.stop()
        with self._parked_lock:
            parked = sorted(self._parked)
        if parked:
            # A claim parked in conn.notifies() elsewhere wakes only through its socket.
            try:
                async with self._connections.lend(wait=1.0) as conn:
                    await conn.execute(self._sql.notify_queues, {"schema": self._schema, "queues": parked})
            except (psycopg.Error, AlkstoreError) as exc:
                log.warning("could not wake the claims parked on %s at close: %s", parked, exc)
        await self._connections.close()

    @property
    def offers_dependencies(self) -> bool:
        """Jobs wait on their parents here (ADR 073)."""
        return True

    def default_clock(self) -> Clock:
        """The database server's clock (ADR 015), shared by every host on this database."""
        return self._clock

    # -- queue configuration ------------------------------------------------------------

    async def configure_queue(self, queue: str, config: port.QueueConfig) -> port.QueueConfig | None:
        async with self._connections.transaction() as conn:
            await conn.execute(self._sql.configure_queue, _rows.config_params(queue, config))
            await conn.execute(self._sql.unconfigure_queue, {"queue": queue})
            return await self._config_on(conn, queue)

    async def set_paused(self, queue: str, paused: bool) -> port.QueueConfig | None:
        async with self._connections.transaction() as conn:
            await conn.execute(self._sql.set_paused, {"queue": queue, "paused": paused})
            await conn.execute(self._sql.unconfigure_queue, {"queue": queue})
            return await self._config_on(conn, queue)

    async def _config_on(self, conn: psycopg.AsyncConnection[Any], queue: str) -> port.QueueConfig | None:
        async with conn.cursor(row_factory=_rows.QUEUE_CONFIG) as cursor:
            return await (await cursor.execute(self._sql.queue_config, {"queue": queue})).fetchone()

    async def queue_config(self, queue: str, tx: Any = None) -> port.QueueConfig | None:
        if tx is None:
            return await self._connections.one(self._sql.queue_config, {"queue": queue}, _rows.QUEUE_CONFIG)
        try:
            async with (await caller_connection(tx)).cursor(row_factory=_rows.QUEUE_CONFIG) as cursor:
                return await (await cursor.execute(self._sql.queue_config, {"queue": queue})).fetchone()
        except psycopg.Error as exc:
            raise_translated(exc)

    # -- jobs ----------------------------------------------------------------------------

    async def caller_transaction(self, tx: Any) -> psycopg.AsyncConnection[Any]:
        return await caller_connection(tx)

    async def enqueue(self, jobs: Sequence[port.NewJob], now: datetime, tx: Any = None) -> list[int]:
        if not jobs:
            return []
        alike = len(jobs) == 1 or isinstance(jobs, port.Alike)
        if alike:  # every job as the first but for its payload: the path is the first's, no scans
            first = jobs[0]
            parents, keyed = waits_on_parents(first), _keyed(first)
        else:
            parents, keyed = has_parents(jobs), any(_keyed(job) for job in jobs)
        if len(jobs) == 1 and tx is None and not (parents or keyed):
            # The commonest call, one plain job on a pooled connection: one statement.
            job = jobs[0]
            channel = self._channels.get(job.queue)
            if channel is None:
                async with self._connections.connection() as pooled:
                    channel = await self._channel(pooled, job.queue)
            params = _rows.job_params(job, now, channel)
            job_id = await self._connections.one(self._sql.enqueue_one, params, _SCALAR)
            assert job_id is not None
            return [int(job_id)]
        if parents:
            if tx is not None:
                try:
                    conn = await caller_connection(tx)
                    return await insert_with_parents(self._sql, conn, jobs, now, self._channel, self._schema)
                except psycopg.Error as exc:
                    raise_translated(exc)
            async with self._connections.transaction() as own:
                return await insert_with_parents(self._sql, own, jobs, now, self._channel, self._schema)
        if keyed:
            if tx is not None:
                try:
                    return await self._insert_keyed(await caller_connection(tx), jobs, now)
                except psycopg.Error as exc:
                    raise_translated(exc)
            async with self._connections.transaction() as own:
                return await self._insert_keyed(own, jobs, now)
        if tx is not None:
            conn = await caller_connection(tx)
            try:
                return await self._insert(conn, jobs, now, alike)
            except psycopg.Error as exc:
                raise_translated(exc)
        async with self._connections.connection() as conn:
            if len(jobs) <= _ENQUEUE_CHUNK:
                return await self._insert(conn, jobs, now, alike)
            async with conn.transaction():  # several statements: all of them or none
                return await self._insert(conn, jobs, now, alike)

    async def _insert(
        self, conn: psycopg.AsyncConnection[Any], jobs: Sequence[port.NewJob], now: datetime, alike: bool
    ) -> list[int]:
        """Insert ``jobs`` on ``conn`` (in its transaction, if it has one), ``_ENQUEUE_CHUNK`` per statement;
        ``alike``: known to differ in their payloads only (else compared here)."""
        ids: list[int] = []
        async with conn.cursor(row_factory=scalar_row) as cursor:
            if len(jobs) == 1:
                job = jobs[0]
                channel = await self._channel(conn, job.queue)
                await cursor.execute(self._sql.enqueue_one, _rows.job_params(job, now, channel))
                return [int(value) for value in await cursor.fetchall() if value is not None]
            shared = await self._channel(conn, jobs[0].queue) if alike or _rows.alike(jobs) else None
            for start in range(0, len(jobs), _ENQUEUE_CHUNK):
                chunk = jobs[start : start + _ENQUEUE_CHUNK]
                if shared is not None:
                    await cursor.execute(self._sql.enqueue_alike, _rows.alike_params(chunk, now, shared))
                else:
                    await cursor.execute(self._sql.enqueue_many, _rows.jobs_params(chunk, now, self._schema))
                ids.extend(sorted(int(value) for value in await cursor.fetchall() if value is not None))
        return ids

    async def _insert_keyed(
        self, conn: psycopg.AsyncConnection[Any], jobs: Sequence[port.NewJob], now: datetime
    ) -> list[int]:
        """Insert ``jobs`` one by one in ``conn``'s transaction, their ordering keys locked first;
        a unique key already held gives its holder's id as ``Existing``."""
        ordered = [job for job in jobs if job.ordering_key is not None]
        if ordered:
            params = {
                "schema": self._schema,
                "queues": [job.queue for job in ordered],
                "keys": [job.ordering_key for job in ordered],
            }
            await conn.execute(self._sql.lock_ordering_keys, params)
        ids: list[int] = []
        async with conn.cursor(row_factory=scalar_row) as cursor:
            for job in jobs:
                channel = await self._channel(conn, job.queue)
                while True:
                    await cursor.execute(self._sql.enqueue_keyed, _rows.keyed_params(job, now, channel))
                    inserted = await cursor.fetchone()
                    if inserted is not None:
                        ids.append(int(inserted))
                        break
                    holder = {"queue": job.queue, "unique_key": job.unique_key}
                    held = await (await cursor.execute(self._sql.unique_holder, holder)).fetchone()
                    if held is not None:
                        ids.append(port.Existing(int(held)))
                        break
                    # The holder let go of the key between the two statements: insert again.
        return ids

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection inside a transaction: commits on normal exit, rolls back on error.

        The caller's own psycopg errors pass through untouched; a failure to begin or commit
        is a ``DatabaseError``.
        """
        in_body = False
        try:
            async with self._connections.lend() as conn, conn.transaction():
                in_body = True
                yield conn
                in_body = False
        except psycopg.Error as exc:
            if in_body:
                raise
            raise_translated(exc)

    async def claim(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        return (await self.ack_and_claim((), request))[1]

    async def ack_and_claim(
        self, acks: Sequence[port.Held], request: port.ClaimRequest
    ) -> tuple[list[port.Held], list[port.JobRecord]]:
        if request.rate is not None or request.key_rate is not None:
            return (await self.ack(acks) if acks else []), await self._claim_rated(request)
        if not acks:
            params = {**self._cursors.params(request.queue, request.now), **claim_params(request)}
            claim = self._sql.claim_full if params["full"] else self._sql.claim
            rows = await self._connections.all(claim, params, _rows.JOB_OR_SWEPT, binary=True)
            return [], await self._claimed(request, params, rows)
        parents = self._cursors.parents(pair.job_id for pair in acks)
        if not parents:  # the cursor read before the acks end: a reset they cause is for the claim after this one
            params = {**self._cursors.params(request.queue, request.now), **claim_params(request)}
        self._cursors.ended(pair.job_id for pair in acks)
        keeping = _keeping(acks)
        ack_params = _rows.keeping_params(acks) if keeping else _rows.fenced_params(acks)
        if parents:  # ADR 073: the claim a statement after the ack (one transaction, one round trip), so it sees
            # the dependents the ack's trigger made ready; its cursor read after the reset, so in full
            # the ack sets claim_follows: its trigger leaves the notice for a child it makes ready to the claim,
            # which sends it only for a child it did not take (migration 20)
            params = {**self._cursors.params(request.queue, request.now), **claim_params(request)}
            ack = self._sql.ack_keeping_before_claim if keeping else self._sql.ack_many_before_claim
            claim = self._sql.claim_waking_full if params["full"] else self._sql.claim_waking
            waking = {**params, "schema": self._schema}
            acked, rows = await self._connections.two(ack, ack_params, _SCALAR, claim, waking, _rows.JOB_OR_SWEPT)
            return _stale(acks, acked), await self._claimed(request, params, rows)
        if keeping:
            statement = self._sql.ack_keeping_and_claim_full if params["full"] else self._sql.ack_keeping_and_claim
        else:
            statement = self._sql.ack_and_claim_full if params["full"] else self._sql.ack_and_claim
        found = await self._connections.all(statement, {**params, **ack_params}, _rows.CLAIM_ROW, binary=True)
        stale = _stale(acks, [row for row in found if isinstance(row, int)])
        return stale, await self._claimed(request, params, [row for row in found if not isinstance(row, int)])

    async def _claimed(
        self, request: port.ClaimRequest, params: dict[str, Any], rows: list[Any]
    ) -> list[port.JobRecord]:
        """The jobs a claim with ``params`` took (``rows``; ``None``: it swept, and runs again), in claim order."""
        if None in rows:  # the statement swept instead of claiming: claim again, in full, without the probe
            self._cursors.claimed(request.queue, request.now, params, ())
            self._cursors.swept(request.queue)
            params.update(full_params(), probe=False)  # its resets stay: the sweep does not make it current
            rows = await self._connections.all(self._sql.claim_full, params, _rows.JOB_OR_SWEPT, binary=True)
        claimed = [row for row in rows if row is not None]
        claimed.sort(key=claim_order)
        self._cursors.claimed(request.queue, request.now, params, claimed)
        return claimed

    async def _claim_rated(self, request: port.ClaimRequest) -> list[port.JobRecord]:
        """The claim of a queue with a rate limit (ADR 070): read in full, each start counted as it is taken."""
        params = rated_claim_params(request)
        rows = await self._connections.all(self._sql.claim_rated, params, _rows.JOB_OR_SWEPT, binary=True)
        if None in rows:  # it swept instead: claim again, without the probe
            self._cursors.swept(request.queue)
            params["probe"] = False
            rows = await self._connections.all(self._sql.claim_rated, params, _rows.JOB_OR_SWEPT, binary=True)
        return sorted((row for row in rows if row is not None), key=claim_order)

    async def soonest_due(self, queues: Sequence[str]) -> datetime | None:
        value = await self._connections.one(self._sql.soonest_due, self._cursors.idle_params(queues), _SCALAR)
        return None if value is None else _rows.utc(value)

    @asynccontextmanager
    async def waiter(self, *queues: str) -> AsyncIterator[port.AsyncWaiter]:
        with self._parked_lock:
            self._parked.update(queues)
        try:
            async with self._listening.waiter(queues) as waiter:
                yield waiter
        finally:
            with self._parked_lock:
                self._parked.subtract(queues)
                for queue in queues:
                    if not self._parked[queue]:
                        del self._parked[queue]

    async def ack(self, held: Sequence[port.Held]) -> list[port.Held]:
        self._cursors.ended(pair.job_id for pair in held)
        if len(held) == 1 and isinstance(kept := held[0], port.Done):
            acked = await self._connections.one(self._sql.ack_keeping_one, _rows.kept_params(kept), _SCALAR)
            return [] if acked is not None else [kept]
        if _keeping(held):
            params = _rows.keeping_params(held)
            return _stale(held, await self._connections.all(self._sql.ack_keeping, params, _SCALAR, binary=True))
        if len(held) == 1:
            pair = held[0]
            done = await self._connections.one(
                self._sql.ack_one, {"id": int(pair.job_id), "fence": pair.fence}, _SCALAR
            )
            return [] if done is not None else [pair]
        return _stale(held, await self._connections.all(self._sql.ack_many, _rows.fenced_params(held), _SCALAR))

    async def retry(self, retries: Sequence[port.Retry], now: datetime) -> list[port.Held]:
        params = {**_rows.retry_params(retries), "now": now, "schema": self._schema}
        stale = _stale(retries, await self._connections.all(self._sql.retry, params, _SCALAR))
        self._cursors.ended((retry.job_id for retry in retries), put_back=True)
        return stale

    async def bury(self, burials: Sequence[port.Burial], now: datetime) -> list[port.Held]:
        self._cursors.ended(burial.job_id for burial in burials)
        params = {
            **_rows.fenced_params(burials),
            **_rows.failure_params(burials),
            "attempt_entries": [burial.attempt for burial in burials],
            "now": now,
        }
        return _stale(burials, await self._connections.all(self._sql.bury, params, _SCALAR))

    async def release(self, held: Sequence[port.Held], now: datetime) -> list[port.Held]:
        params = {**_rows.fenced_params(held), "now": now, "schema": self._schema}
        stale = _stale(held, await self._connections.all(self._sql.release, params, _SCALAR))
        self._cursors.ended((pair.job_id for pair in held), put_back=True)
        return stale

    async def heartbeat(self, beats: Sequence[port.Heartbeat]) -> tuple[list[port.Held], list[port.Held]]:
        params = {**_rows.fenced_params(beats), "lease_untils": [beat.lease_until for beat in beats]}
        rows = await self._connections.all(self._sql.heartbeat, params, tuple_row)
        asked = {int(job_id) for job_id, cancel_requested in rows if cancel_requested}
        moved = [job_id for job_id, _ in rows]
        return _stale(beats, moved), [port.Held(beat.job_id, beat.fence) for beat in beats if beat.job_id in asked]

    async def get_job(self, job_id: int) -> port.JobRecord | None:
        async with self._connections.connection() as conn:
            async with conn.cursor(row_factory=_rows.JOB, binary=True) as cursor:
                record = await (await cursor.execute(self._sql.get_job, {"id": int(job_id)})).fetchone()
            return await with_links(conn, self._sql, record)

    async def requeue_dead(self, job_ids: Sequence[int], now: datetime) -> list[int]:
        params = {"ids": _rows.ids(job_ids), "now": now, "schema": self._schema}
        async with self._connections.transaction() as conn:
            keys = await (await conn.execute(self._sql.dead_ordering_keys, params)).fetchall()
            if keys:
                locks = {"schema": self._schema, "queues": [q for q, _ in keys], "keys": [k for _, k in keys]}
                await conn.execute(self._sql.lock_ordering_keys, locks)
            async with conn.cursor(row_factory=scalar_row) as cursor:
                rows = await (await cursor.execute(self._sql.requeue_dead, params)).fetchall()
            await relink_requeued(self._sql, conn, [int(value) for value in rows if value is not None], now)
        self._cursors.reset()
        return sorted(int(value) for value in rows if value is not None)

    # -- locks ---------------------------------------------------------------------------

    async def try_lock(self, name: str, owner: str, now: datetime, expires_at: datetime) -> port.LockRecord | None:
        params = {"name": name, "owner": owner, "now": now, "expires_at": expires_at}
        return await self._connections.one(self._sql.try_lock, params, _rows.LOCK)

    async def renew_lock(self, lock: port.LockRecord, now: datetime, expires_at: datetime) -> port.LockRecord:
        params = {"name": lock.name, "token": lock.token, "now": now, "expires_at": expires_at}
        # Wait for a connection at most half what is left of the lease (ADR 036): a renewal that
        # gets none fails while the lease holds, and never renews late on a stale ``now``.
        left = (lock.expires_at - now).total_seconds()
        wait = min(self._options.pool_timeout, max(left / 2, 0.001))
        renewed = await self._connections.one(self._sql.renew_lock, params, _rows.LOCK, wait=wait)
        if renewed is None:
            raise LeaseLost(f"lock {lock.name!r} is no longer held by {lock.owner!r}")
        return renewed

    async def renew_lock_peek(
        self, lock: port.LockRecord, now: datetime, expires_at: datetime
    ) -> tuple[port.LockRecord, datetime | None]:
        params = {"name": lock.name, "token": lock.token, "now": now, "expires_at": expires_at}
        left = (lock.expires_at - now).total_seconds()  # the wait for a connection as renew_lock's (ADR 036)
        wait = min(self._options.pool_timeout, max(left / 2, 0.001))
        row = await self._connections.one(self._sql.renew_lock_peek, params, _rows.LOCK_AND_SOONEST, wait=wait)
        if row is None:
            raise LeaseLost(f"lock {lock.name!r} is no longer held by {lock.owner!r}")
        return row

    async def release_lock(self, lock: port.LockRecord) -> bool:
        params = {"name": lock.name, "token": lock.token}
        return await self._connections.one(self._sql.release_lock, params, _SCALAR) is not None

    # -- schedules -----------------------------------------------------------------------

    async def register_schedules(
        self, schedules: Sequence[port.NewSchedule], now: datetime
    ) -> list[port.ScheduleRecord]:
        stored: dict[str, port.ScheduleRecord] = {}
        pending = {schedule.name: schedule for schedule in schedules}
        async with self._connections.transaction() as conn:
            while pending:
                locked = await (await conn.execute(self._sql.lock_schedules, {"names": sorted(pending)})).fetchall()
                existing = {
                    name: (int(interval_s), _rows.utc(boundary), None if anchor is None else _rows.utc(anchor))
                    for name, interval_s, boundary, anchor in locked
                }
                updates = [pending[name] for name in sorted(existing)]
                inserts = [schedule for name, schedule in sorted(pending.items()) if name not in existing]
                for batch, statement in ((updates, self._sql.update_schedules), (inserts, self._sql.insert_schedules)):
                    if not batch:
                        continue
                    params = _rows.schedule_params(batch, existing, now)
                    async with conn.cursor(row_factory=_rows.SCHEDULE) as cursor:
                        for record in await (await cursor.execute(statement, params)).fetchall():
                            stored[record.name] = record
                            del pending[record.name]
                # What is left was inserted by a concurrent registration: lock its rows and decide again.
        return [stored[schedule.name] for schedule in schedules]

    async def unschedule(self, name: str) -> bool:
        return await self._connections.one(self._sql.unschedule, {"name": name}, _SCALAR) is not None

    async def schedules(self) -> list[port.ScheduleRecord]:
        return await self._connections.all(self._sql.schedules, {}, _rows.SCHEDULE)

    async def tick(self, now: datetime, budget: port.TickBudget, fired: dict[str, int]) -> port.TickResult:
        async with self._connections.transaction() as conn:
            async with conn.cursor(row_factory=_rows.DUE_SCHEDULE) as cursor:
                await cursor.execute(self._sql.due_schedules, {"now": now, "limit": budget.rows + 1})
                due = await cursor.fetchall()
            configs: dict[str, port.QueueConfig | None] = dict.fromkeys({schedule.queue for schedule in due})
            if due:
                async with conn.cursor(row_factory=_rows.NAMED_QUEUE_CONFIG) as cursor:
                    await cursor.execute(self._sql.queue_configs, {"queues": sorted(configs)})
                    configs.update(await cursor.fetchall())
            plan = plan_tick(due, configs, now, budget, fired)
            ids: list[int] = []
            if plan.fires:
                rows = await (await conn.execute(self._sql.next_job_ids, {"count": len(plan.fires)})).fetchall()
                ids = sorted(int(row[0]) for row in rows)
                await conn.execute(self._sql.insert_fires, _rows.fire_params(ids, plan, now))
            if plan.advanced:
                names, boundaries, lasts = zip(*plan.advanced, strict=True)
                params = {"names": list(names), "boundaries": list(boundaries), "lasts": list(lasts)}
                await conn.execute(self._sql.advance_schedules, params)
            if plan.fires:
                queues = sorted({fire.queue for fire in plan.fires})
                await conn.execute(self._sql.notify_queues, {"schema": self._schema, "queues": queues})
            row = await (await conn.execute(self._sql.soonest_boundary, {})).fetchone()
        soonest = None if row is None or row[0] is None else _rows.utc(row[0])
        return plan.result(ids, soonest)

    async def soonest_boundary(self) -> datetime | None:
        value = await self._connections.one(self._sql.soonest_boundary, {}, _SCALAR)
        return None if value is None else _rows.utc(value)

    # -- inspection and actions (ADR 020) --------------------------------------------------

    async def queue_counts(
        self, now: datetime, queue: str | None = None, cap: int | None = None
    ) -> list[port.QueueCounts]:
        if queue is None:
            return await self._connections.all(self._sql.queue_counts, {"now": now, "cap": cap}, _rows.QUEUE_COUNTS)
        params = {"now": now, "queue": queue, "cap": cap}
        return await self._connections.all(self._sql.queue_counts_one, params, _rows.QUEUE_COUNTS)

    async def list_jobs(self, query: port.JobQuery) -> list[port.JobRecord]:
        statement = {
            (port.JobPhase.READY, False): self._sql.list_ready,
            (port.JobPhase.DELAYED, False): self._sql.list_delayed,
            (port.JobPhase.WAITING, False): self._sql.list_waiting,
            (port.JobPhase.RUNNING, False): self._sql.list_running,
            (port.JobPhase.DEAD, False): self._sql.list_dead,
            (port.JobPhase.READY, True): self._sql.list_ready_reversed,
            (port.JobPhase.DELAYED, True): self._sql.list_delayed_reversed,
            (port.JobPhase.WAITING, True): self._sql.list_waiting_reversed,
            (port.JobPhase.RUNNING, True): self._sql.list_running_reversed,
            (port.JobPhase.DEAD, True): self._sql.list_dead_reversed,
        }[query.phase, query.reverse]
        return await self._connections.all(statement, _rows.listing_params(query), _rows.JOB, binary=True)

    async def read_lock(self, name: str) -> port.LockRecord | None:
        return await self._connections.one(self._sql.read_lock, {"name": name}, _rows.LOCK)

    async def list_locks(self, now: datetime, limit: int, after: str | None = None) -> list[port.LockRecord]:
        params = {"now": now, "limit": limit, "after": after}
        return await self._connections.all(self._sql.list_locks, params, _rows.LOCK)

    async def cancel(self, job_ids: Sequence[int]) -> list[int]:
        rows = await self._connections.all(self._sql.cancel, {"ids": _rows.ids(job_ids)}, _SCALAR)
        return sorted(int(value) for value in rows)

    async def request_cancel(self, job_ids: Sequence[int]) -> list[int]:
        rows = await self._connections.all(self._sql.request_cancel, {"ids": _rows.ids(job_ids)}, _SCALAR)
        return sorted(int(value) for value in rows)

    async def cancel_requested(self, held: Sequence[port.Held]) -> list[port.Held]:
        if not held:
            return []
        async with self._connections.connection() as conn:
            rows = await (await conn.execute(self._sql.cancel_requested, _rows.fenced_params(held))).fetchall()
        asked = {(int(job_id), int(fence)) for job_id, fence in rows}
        return [pair for pair in held if (pair.job_id, pair.fence) in asked]

    async def purge_dead(self, queue: str, died_before: datetime, limit: int) -> int:
        params = {"queue": queue, "before": died_before, "limit": limit}
        return int(await self._connections.one(self._sql.purge_dead, params, _SCALAR) or 0)

    # -- kept results (ADR 042) ---------------------------------------------------------

    async def get_result(self, job_id: int) -> port.ResultRecord | None:
        return await self._connections.one(self._sql.get_result, {"id": int(job_id)}, _rows.RESULT, binary=True)

    async def list_results(self, queue: str, limit: int, after: port.JobKey | None = None) -> list[port.ResultRecord]:
        params = {
            "queue": queue,
            "limit": limit,
            "at": None if after is None else after.at,
            "id": None if after is None else after.id,
        }
        return await self._connections.all(self._sql.list_results, params, _rows.RESULT, binary=True)

    async def purge_results(self, queue: str | None, now: datetime, limit: int) -> int:
        params = {"queue": queue, "now": now, "limit": limit}
        return int(await self._connections.one(self._sql.purge_results, params, _SCALAR) or 0)

    async def purge_dead_ids(self, job_ids: Sequence[int]) -> list[int]:
        rows = await self._connections.all(self._sql.purge_dead_jobs, {"ids": _rows.ids(job_ids)}, _SCALAR)
        return sorted(int(value) for value in rows)

    # -- storage upkeep (ADR 023) ---------------------------------------------------------

    async def table_stats(self) -> list[port.TableStats]:
        params = {"schema": self.schema, "tables": list(UPKEEP_TABLES)}
        return await self._connections.all(self._sql.table_stats, params, _rows.TABLE_STATS)

    async def vacuum(self, tables: Sequence[str]) -> list[str]:
        """Each table by its own ``VACUUM`` on a pooled (autocommit) connection; one PostgreSQL skips with a
        warning (locked by another vacuum, or not this role's to vacuum) is left out."""
        done = []
        async with self._connections.connection() as conn:
            skipped: list[str] = []

            def notice(diagnostic: psycopg.errors.Diagnostic) -> None:
                if diagnostic.severity_nonlocalized == "WARNING":
                    skipped.append(diagnostic.message_primary or "")

            conn.add_notice_handler(notice)
            try:
                for table in tables:
                    skipped.clear()
                    await conn.execute(vacuum_statement(self.schema, table), {})
                    if skipped:
                        log.info("VACUUM of %s.%s skipped: %s", self.schema, table, "; ".join(skipped))
                    else:
                        done.append(table)
            finally:
                conn.remove_notice_handler(notice)
        return done


def _keeping(items: Sequence[port.Held]) -> bool:
    """Whether some of the acks ``items`` keep their job's outcome or hand it to its dependents (then
    ``ack_keeping`` writes them all)."""
    return any(isinstance(item, (port.Done, port.Handed)) for item in items)


def _stale(items: Sequence[port.Held], done: Sequence[Any]) -> list[port.Held]:
    """The pairs whose job the statement did not change (``done`` are the ids it did)."""
    changed = {int(job_id) for job_id in done if job_id is not None}
    return [port.Held(item.job_id, item.fence) for item in items if item.job_id not in changed]
