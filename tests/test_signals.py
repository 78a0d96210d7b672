"""The signals a campaign answers (``iolab.execution.signals``): one table that names every
signal whose default action ends the process, and handlers that do what it says.

The handlers are tried in this process, each signal sent to itself inside a ``Signals``
block; a handler of the test's own is installed first, so that a signal the campaign did not
take is caught by the test (and fails it) instead of ending the test run. The real campaigns
that these signals stop, with THP changed, are in ``tests/test_faults.py``.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from iolab.execution.signals import (IGNORED, LEFT, STOP_AFTER_RUN, STOP_NOW, TABLE, Interrupted,
                                     Signals, answered, signal_name)

# signal(7): the signals whose default action is to stop, continue or nothing
NOT_ENDING = {signal.SIGCHLD, signal.SIGCONT, signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN,
              signal.SIGTTOU, signal.SIGURG, signal.SIGWINCH}
GLIBC_OWN = {32, 33}  # not in signal.valid_signals(): glibc keeps them for its threads


def test_every_signal_whose_default_ends_the_process_is_in_the_table_with_why():
    ending = (set(signal.valid_signals()) | GLIBC_OWN) - NOT_ENDING
    assert set(TABLE) == ending
    for sig, (action, why) in TABLE.items():
        assert action in (STOP_NOW, STOP_AFTER_RUN, IGNORED, LEFT) and why, signal_name(sig)
    assert answered(STOP_AFTER_RUN) == (signal.SIGUSR1,)
    assert answered(IGNORED) == (signal.SIGPIPE, signal.SIGXFSZ)
    assert set(answered(LEFT)) == {signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
                                   signal.SIGILL, signal.SIGABRT, *GLIBC_OWN}


@pytest.fixture
def guard():
    """``guard(sig)``: a handler of the test's own for ``sig`` (what it received, in a list),
    put back as it was after the test."""
    saved: dict[int, object] = {}
    received: list[int] = []

    def install(sig: int) -> list[int]:
        saved.setdefault(sig, signal.getsignal(sig))
        signal.signal(sig, lambda signum, frame: received.append(signum))
        return received

    yield install
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def delivered(predicate) -> bool:
    """Whether ``predicate`` comes true once the pending handlers have run (Python runs them
    in the main thread between bytecodes)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.001)
    return predicate()


@pytest.mark.parametrize("sig", answered(STOP_NOW), ids=signal_name)
def test_a_stop_now_signal_asks_the_campaign_to_stop_at_its_next_check(sig, guard):
    received = guard(sig)
    with Signals() as signals:
        os.kill(os.getpid(), sig)
        assert delivered(lambda: signals.now == sig or received), signal_name(sig)
        assert received == [], f"{signal_name(sig)} did not reach the campaign's handler"
        with pytest.raises(Interrupted) as info:
            signals.check()
    assert (info.value.signum, info.value.name) == (sig, signal_name(sig))
    os.kill(os.getpid(), sig)  # the test's own handler is back after the block
    assert delivered(lambda: received == [sig])


@pytest.mark.parametrize("sig", answered(IGNORED), ids=signal_name)
def test_an_ignored_signal_is_ignored_whatever_the_process_had(sig, guard):
    """A notebook kernel or an embedding program may have set its own handler or the default
    action; during a campaign the signal is ignored all the same."""
    received = guard(sig)
    with Signals() as signals:
        assert signal.getsignal(sig) == signal.SIG_IGN
        os.kill(os.getpid(), sig)
        time.sleep(0.01)
        signals.check()  # nothing asked
        assert received == [] and signals.now is None
    assert signal.getsignal(sig) not in (signal.SIG_IGN, signal.SIG_DFL)  # the test's, back


def test_real_time_signals_are_named_as_the_shell_names_them():
    assert signal_name(signal.SIGRTMIN) == "SIGRTMIN"
    assert signal_name(signal.SIGRTMIN + 3) == "SIGRTMIN+3"
    assert signal_name(signal.SIGRTMAX) == "SIGRTMAX"
    assert signal_name(signal.SIGUSR2) == "SIGUSR2"
