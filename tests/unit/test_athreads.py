"""The async runtime's calls of user code: an ``async def`` awaited on the loop, a plain one run on a thread,
whichever kind a callable was found to be before, hashable or not."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from alkstore.port._acompat import AThreads


class _Unhashable:
    """A callable object that cannot be a dict key."""

    __hash__ = None  # type: ignore[assignment]

    async def __call__(self) -> str:
        return threading.current_thread().name


async def _where() -> str:
    return threading.current_thread().name


def _plain_where() -> str:
    return threading.current_thread().name


def test_each_callable_is_called_as_its_kind_again_and_again_past_the_ones_remembered() -> None:
    async def main() -> list[Any]:
        calls = AThreads(1)
        loop_thread = threading.current_thread().name
        seen = []
        others: list[Callable[[], Any]] = [lambda: threading.current_thread().name for _ in range(AThreads.KINDS)]
        funcs: list[Callable[[], Any]] = [_where, _plain_where, _Unhashable(), *others, _where, _plain_where]
        for func in funcs:
            for _ in range(2):
                seen.append((await calls.call(func)) == loop_thread)
        calls.close()
        return seen

    seen = asyncio.run(main())
    on_loop = [True, True, False, False, True, True] + [False, False] * AThreads.KINDS + [True, True, False, False]
    assert seen == on_loop
