"""Locks: a lease on a name held by one owner for a TTL, with a fencing token (ADR 009)."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from alkstore.port._records import LockRecord
from alkstore.rules._options import as_duration

if TYPE_CHECKING:
    from ._kernel_async import AsyncKernel

__all__ = ["AsyncLock"]


class AsyncLock:
    """A held lock on a name. ``token`` grows with every acquisition: use it as a fencing token."""

    __slots__ = ("_kernel", "_record", "ttl")

    def __init__(self, kernel: AsyncKernel, record: LockRecord, ttl: timedelta) -> None:
        self._kernel = kernel
        self._record = record
        self.ttl = ttl

    def __repr__(self) -> str:
        return f"<alkstore.{type(self).__name__} {self.name!r} owner={self.owner!r} token={self.token}>"

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def owner(self) -> str:
        return self._record.owner

    @property
    def token(self) -> int:
        return self._record.token

    @property
    def expires_at(self) -> datetime:
        return self._record.expires_at

    async def renew(self, ttl: float | timedelta | None = None) -> None:
        """Extend the lock by ``ttl`` (default: the acquiring ttl) from now; ``LeaseLost`` if it lapsed."""
        span = self.ttl if ttl is None else as_duration(ttl, "ttl", allow_zero=False)
        now = self._kernel.clock.now()
        self._record = await self._kernel.live().renew_lock(self._record, now, now + span)

    async def release(self) -> bool:
        """Free the lock; ``False`` if it had already been taken over or released."""
        return await self._kernel.live().release_lock(self._record)

    async def __aenter__(self) -> AsyncLock:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()
