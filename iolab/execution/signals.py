"""The signals a running campaign answers, and what each asks of it.

Every signal whose default action ends the process (signal(7): "Term" and "Core") is in
:data:`TABLE`, with what a campaign does about it and why:

* **stop now** (:data:`STOP_NOW`): SIGINT (Ctrl-C), SIGTERM (``kill``, a service manager,
  Slurm at the time limit), SIGHUP (the terminal or the SSH session closed, which also
  leaves the campaign without its controlling terminal), SIGQUIT (Ctrl-\\), and every other
  signal that would otherwise end the process with its knobs changed: SIGUSR2, the timers
  (SIGALRM, SIGVTALRM, SIGPROF), SIGXCPU, SIGPWR, SIGIO, SIGSTKFLT, SIGTRAP, SIGSYS and the
  real-time signals SIGRTMIN..SIGRTMAX. The driver's process tree is ended, the unfinished
  run set aside, every knob restored, and the command exits with 128 + the signal's number.
* **stop after the run** (:data:`STOP_AFTER_RUN`): SIGUSR1 (``iolab stop``'s signal, and
  Slurm's warning before a job's time limit).
* **ignored** (:data:`IGNORED`): SIGPIPE and SIGXFSZ, as Python itself has them from its
  start; the write they would interrupt fails with an error instead (EPIPE, EFBIG), which
  the campaign handles where the write is.
* **left to its default** (:data:`LEFT`): what a handler cannot or must not answer. SIGKILL
  cannot be caught, nor can 32 and 33, which glibc keeps for its threads. SIGSEGV, SIGBUS,
  SIGFPE, SIGILL and SIGABRT mean the process itself crashed: a handler that returns from a
  fault runs the faulting instruction again, for ever, and ``abort()`` ends the process
  after any handler; Python's faulthandler prints the traceback. For all of them the knob
  journal is the way back: it is on disk before any knob is touched, the next ``iolab run``
  on the same data restores it (and ends the leftover processes) before anything else, and
  ``iolab restore`` does so by itself.

SIGSTOP, SIGTSTP, SIGTTIN and SIGTTOU stop the process without ending it, SIGCONT continues
it, and SIGCHLD, SIGURG and SIGWINCH are ignored by default, so none of them is in the table.

A handler raises nothing: an exception raised at an arbitrary point can leave
``subprocess``'s internal lock held, and the next wait for the driver then hangs for ever.
It records the request and kills the driver's process group, so that the wait returns; the
campaign acts on it at its next :meth:`Signals.check`: between runs, before each step of its
set-up, and before each MiB of a scratch file it writes. The handlers are installed for the
whole campaign, from before its plan to after its knobs are restored, so a signal at any
moment leads to the same end; what is in progress when it comes (reading the store, taking
the host's inventory) finishes first, which takes seconds at most.

``iolab notebook`` answers the same table in the process that waits for the notebook's
kernel, which runs the campaign in a session of its own: it passes a stop-now signal on to
the kernel and exits with 128 + its number (``iolab.batch.job``).

Responsible for: the table, installing and restoring the handlers, and the requests they
record.
Not responsible for: what a stop does (``iolab.execution.runner``) or stop requests made through
the data directory (``iolab.execution.stop``).
"""

from __future__ import annotations

import os
import signal
from typing import Any

STOP_NOW = "stop now"
STOP_AFTER_RUN = "stop after the run"
IGNORED = "ignored"
LEFT = "left to its default"

_NO_MEANING = ("has no meaning for iolab; its default action would end the process with its "
               "knobs changed")
_CRASH = ("the process itself crashed: a handler cannot make it safe (a fault returns to the "
          "faulting instruction, abort() ends the process after any handler); the knob "
          "journal is restored by the next 'iolab run' or by 'iolab restore'")

TABLE: dict[int, tuple[str, str]] = {
    signal.SIGINT: (STOP_NOW, "Ctrl-C"),
    signal.SIGTERM: (STOP_NOW, "kill, a service manager, Slurm at the time limit"),
    signal.SIGHUP: (STOP_NOW, "the terminal or the SSH session closed"),
    signal.SIGQUIT: (STOP_NOW, "Ctrl-\\"),
    signal.SIGUSR1: (STOP_AFTER_RUN, "'iolab stop', and Slurm's warning before a job's "
                                     "time limit"),
    signal.SIGUSR2: (STOP_NOW, _NO_MEANING),
    signal.SIGALRM: (STOP_NOW, f"a timer iolab does not set; {_NO_MEANING}"),
    signal.SIGVTALRM: (STOP_NOW, f"a timer iolab does not set; {_NO_MEANING}"),
    signal.SIGPROF: (STOP_NOW, f"a profiler's timer iolab does not set; {_NO_MEANING}"),
    signal.SIGXCPU: (STOP_NOW, "the CPU-time limit (ulimit -t) was reached; SIGKILL follows "
                               "at the hard limit, so the knobs are put back while there is time"),
    signal.SIGPWR: (STOP_NOW, "a power failure (a UPS daemon): the knobs are put back before "
                              "the power goes"),
    signal.SIGIO: (STOP_NOW, f"asynchronous I/O iolab does not ask for; {_NO_MEANING}"),
    signal.SIGSTKFLT: (STOP_NOW, f"unused by Linux; {_NO_MEANING}"),
    signal.SIGTRAP: (STOP_NOW, "sent by another process (a debugger takes its breakpoints "
                               f"itself, they are never delivered); {_NO_MEANING}"),
    signal.SIGSYS: (STOP_NOW, "a bad system call (sent, or raised by a seccomp filter, "
                              "where the call then fails); the campaign stops at its next check"),
    signal.SIGPIPE: (IGNORED, "as Python has it from its start: a write to a reader that left "
                              "fails with EPIPE, which the command's output drops and reports "
                              "(iolab.streams); a campaign does not end because its output "
                              "went away"),
    signal.SIGXFSZ: (IGNORED, "as Python has it from its start: a write past the file-size "
                              "limit (ulimit -f) fails with EFBIG instead, handled as any "
                              "failed write"),
    signal.SIGKILL: (LEFT, "cannot be caught; the knob journal is restored by the next "
                           "'iolab run' or by 'iolab restore'"),
    32: (LEFT, "glibc's own (thread cancellation); cannot be caught from Python; the knob "
               "journal is restored by the next 'iolab run' or by 'iolab restore'"),
    33: (LEFT, "glibc's own (set*id in every thread); cannot be caught from Python; the knob "
               "journal is restored by the next 'iolab run' or by 'iolab restore'"),
    signal.SIGSEGV: (LEFT, _CRASH),
    signal.SIGBUS: (LEFT, _CRASH),
    signal.SIGFPE: (LEFT, _CRASH),
    signal.SIGILL: (LEFT, _CRASH),
    signal.SIGABRT: (LEFT, _CRASH),
    **{rt: (STOP_NOW, f"a real-time signal; {_NO_MEANING}")
       for rt in range(signal.SIGRTMIN, signal.SIGRTMAX + 1)},
}


def answered(action: str) -> tuple[int, ...]:
    """The signals of :data:`TABLE` with ``action``, in signal order."""
    return tuple(sorted(sig for sig, (what, _) in TABLE.items() if what == action))


def signal_name(signum: int) -> str:
    """A signal's name: ``SIGTERM``; a real-time signal as ``SIGRTMIN+3``."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        if signal.SIGRTMIN < signum < signal.SIGRTMAX:
            return f"SIGRTMIN+{signum - signal.SIGRTMIN}"
        return f"signal {signum}"


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads, if it is still there."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Interrupted(KeyboardInterrupt):
    """A stop-now signal, raised where the campaign can stop cleanly."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal_name(self.signum)

    def __str__(self) -> str:
        return self.name


class Signals:
    """Within the block, the campaign's handlers; the previous ones are put back after it."""

    def __init__(self) -> None:
        self.now: int | None = None         # the first stop-now signal received
        self.after_run: int | None = None   # a stop-after-the-run signal received
        self.group: int | None = None       # the running driver's process group
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        handlers = {STOP_NOW: self._stop_now, STOP_AFTER_RUN: self._stop_after_run,
                    IGNORED: signal.SIG_IGN}
        for action, handler in handlers.items():
            for sig in answered(action):
                # a handler installed outside Python (faulthandler.register, a C library)
                # could not be put back afterwards: it stays
                if signal.getsignal(sig) is not None:
                    self._previous[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _stop_now(self, signum: int, frame: Any) -> None:
        if self.now is None:
            self.now = signum
        self.kill_driver()

    def _stop_after_run(self, signum: int, frame: Any) -> None:
        self.after_run = signum

    def kill_driver(self) -> None:
        if self.group is not None:
            kill_group(self.group)

    def driver_started(self, pid: int) -> None:
        """The driver runs as process group ``pid``; a stop asked for just before is acted
        on at once."""
        self.group = pid
        if self.now is not None:
            self.kill_driver()

    def check(self) -> None:
        if self.now is not None:
            raise Interrupted(self.now)

    def after_run_reason(self) -> str:
        return f"signal {signal_name(self.after_run)}" if self.after_run else ""
