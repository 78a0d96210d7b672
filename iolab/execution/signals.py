"""The signals a running campaign answers, and what each asks of it.

* SIGINT (Ctrl-C), SIGTERM (``kill``, a service manager, Slurm at the time limit), SIGHUP
  (the terminal or the SSH session closed, which also leaves the campaign without its
  controlling terminal) and SIGQUIT (Ctrl-\\) ask it to stop now: the driver's process tree
  is ended, the unfinished run discarded, every knob restored, and the command exits with
  128 + the signal's number.
* SIGUSR1 (``iolab stop``'s signal, and Slurm's warning before a job's time limit) asks it
  to stop after the current run.

A handler raises nothing: an exception raised at an arbitrary point can leave
``subprocess``'s internal lock held, and the next wait for the driver then hangs for ever.
It records the request and kills the driver's process group, so that the wait returns; the
campaign acts on it at its next :meth:`Signals.check`: between runs, before each step of its
set-up, and before each MiB of a scratch file it writes. The handlers are installed for the
whole campaign, from before its plan to after its knobs are restored, so a signal at any
moment leads to the same end; what is in progress when it comes (reading the store, taking
the host's inventory) finishes first, which takes seconds at most.

Responsible for: installing and restoring the handlers, and the requests they record.
Not responsible for: what a stop does (``iolab.execution.runner``) or stop requests made through
the data directory (``iolab.execution.stop``).
"""

from __future__ import annotations

import os
import signal
from typing import Any

STOP_NOW = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
STOP_AFTER_RUN = (signal.SIGUSR1,)


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
        return signal.Signals(self.signum).name


class Signals:
    """Within the block, the campaign's handlers; the previous ones are put back after it."""

    def __init__(self) -> None:
        self.now: int | None = None         # the first stop-now signal received
        self.after_run: int | None = None   # a stop-after-the-run signal received
        self.group: int | None = None       # the running driver's process group
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        for sig in STOP_NOW:
            self._previous[sig] = signal.signal(sig, self._stop_now)
        for sig in STOP_AFTER_RUN:
            self._previous[sig] = signal.signal(sig, self._stop_after_run)
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
        return f"signal {signal.Signals(self.after_run).name}" if self.after_run else ""
