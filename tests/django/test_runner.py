"""``runner.DaemonThreads``, the threads plain tasks run on: no run waits for another, and none outlives the process."""

from __future__ import annotations

import threading

import pytest

from alkstore.adapters.django.runner import DaemonThreads


def test_calls_at_once_each_get_a_thread_of_their_own() -> None:
    threads = DaemonThreads("test")
    together = threading.Barrier(3, timeout=30)  # only if all three run at once do they pass it
    names = [threads.submit(lambda: (together.wait(), threading.current_thread().name)[1]) for _ in range(3)]
    assert len({future.result(timeout=30) for future in names}) == 3
    threads.shutdown()


def test_a_call_that_raises_fails_its_future_and_the_threads_are_daemons() -> None:
    threads = DaemonThreads("test")

    def fail() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        threads.submit(fail).result(timeout=30)
    assert threads.submit(lambda: threading.current_thread().daemon).result(timeout=30)
    threads.shutdown()
