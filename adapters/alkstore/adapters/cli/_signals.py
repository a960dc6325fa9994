"""Signal handling for the long-running commands: count interrupts, touch nothing else.

A signal handler runs between two bytecodes of the main thread, possibly while that thread
holds a lock (a ``StopToken``'s, the output stream's), so the handler only counts; the main
thread polls the count and does the real work (cancelling a ``StopToken``) in plain code.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable
from types import FrameType, TracebackType
from typing import Any

__all__ = ["Interrupts"]


class Interrupts:
    """While open, count the given signals; with ``abort_on_second``, a second one raises ``KeyboardInterrupt``.

    Outside the main thread (where Python cannot install handlers) it counts nothing and
    the default handlers stay in place.
    """

    def __init__(self, signals: Iterable[signal.Signals], *, abort_on_second: bool = True) -> None:
        self._signals = tuple(signals)
        self._abort_on_second = abort_on_second
        self._previous: dict[signal.Signals, Any] = {}
        self.count = 0
        self.last: signal.Signals | None = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.last = signal.Signals(signum)
        if self._abort_on_second and self.count > 1:
            raise KeyboardInterrupt

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for signum in self._signals:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
