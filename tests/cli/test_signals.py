"""The command line's interrupt handling: the handler only counts, a second signal aborts."""

from __future__ import annotations

import os
import signal
import time

import pytest

from alkstore.adapters.cli._signals import Interrupts


def _deliver(signum: signal.Signals) -> None:
    """Send ``signum`` to this process and give the main thread bytecodes to run the handler on."""
    os.kill(os.getpid(), signum)
    for _ in range(100):
        time.sleep(0.001)


def test_the_first_interrupt_is_counted_not_raised() -> None:
    with Interrupts((signal.SIGINT,)) as interrupts:
        _deliver(signal.SIGINT)
        assert interrupts.count == 1
        assert interrupts.last is signal.SIGINT


def test_a_second_interrupt_aborts_with_keyboard_interrupt() -> None:
    with Interrupts((signal.SIGINT,)) as interrupts:
        _deliver(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            _deliver(signal.SIGINT)
    assert interrupts.count == 2


def test_without_abort_every_signal_is_only_counted() -> None:
    with Interrupts((signal.SIGTERM,), abort_on_second=False) as interrupts:
        _deliver(signal.SIGTERM)
        _deliver(signal.SIGTERM)
    assert interrupts.count == 2


def test_the_previous_handlers_are_restored_on_exit() -> None:
    before = signal.getsignal(signal.SIGINT)
    with Interrupts((signal.SIGINT,)):
        assert signal.getsignal(signal.SIGINT) is not before
    assert signal.getsignal(signal.SIGINT) is before
