"""Short commands iolab waits for (a Slurm client, a tool asked its version), run so that
none is left running when iolab stops waiting.

Each command runs in a process group of its own (a new session), which is SIGKILLed whole
when iolab stops waiting for it: at its timeout (a tool that hangs, and whatever it started:
a grandchild holds no pipe iolab can close), on an exception while it runs (Ctrl-C), and, in
the verbs that read or submit Slurm jobs (``iolab submit``, ``iolab status``), on a stop
signal (:class:`Stoppable`). The command's own group is what is killed, never iolab's.

Inside :class:`Stoppable` a stop signal (:data:`STOP_SIGNALS`: SIGTERM, SIGINT, SIGHUP,
SIGQUIT) raises :class:`Stopped` at once, except while a command runs or a step that must
not be cut in two is in progress (:func:`held`: ``sbatch`` and the job's record it is
followed by). Then the command's group is killed, so
that the wait returns, and the signal is raised when the step is done: a job Slurm took
always gets its record.

Responsible for: running those commands and ending them. Not responsible for: what they are
(``iolab.host.slurm``, ``iolab.host.inventory``), nor a campaign's processes
(``iolab.procs``, ``iolab.execution.signals``), which run for long and are found by owner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import Any, Iterator, Mapping

# what ends a command that only reads or submits: the terminal (Ctrl-C, Ctrl-\\, a closed
# session), kill, a service manager, Slurm. A campaign answers more (iolab.execution.signals,
# a layer above this module).
STOP_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)


class Stopped(KeyboardInterrupt):
    """A stop signal, raised where the command can stop cleanly; the command line exits with
    128 + :attr:`signum`."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads, if it is still there."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _State:
    def __init__(self) -> None:
        self.active = False           # a Stoppable block is in force
        self.held = 0                 # steps in progress that a signal must not cut
        self.signum: int | None = None  # a stop signal received while held
        self.groups: set[int] = set()   # the process groups of the commands running now


_state = _State()


def run(argv: list[str], *, timeout: float, env: Mapping[str, str] | None = None
        ) -> subprocess.CompletedProcess:
    """``argv``'s exit status and output (text), as ``subprocess.run(capture_output=True)``
    gives them, with standard input from /dev/null. Raises ``subprocess.TimeoutExpired``
    after ``timeout`` seconds and OSError when it cannot start, with its process group
    killed; inside :class:`Stoppable`, Stopped when a stop signal ended it."""
    with held():
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                env=None if env is None else dict(env))
        _state.groups.add(proc.pid)
        try:
            if _state.signum is not None:  # came while it started
                kill_group(proc.pid)
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            kill_group(proc.pid)  # before it is reaped: its group id is not anyone else's
            proc.wait()
            # not read to its end: a process that left the group may hold the pipes open
            for stream in (proc.stdout, proc.stderr):
                stream.close()
            raise
        finally:
            _state.groups.discard(proc.pid)
        if _state.signum is not None and proc.returncode < 0:
            # ended by the signal's kill, not by itself: what it printed is not an answer
            raise Stopped(_state.signum)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A step a stop signal must not cut in two: the signal is raised after it (inside
    :class:`Stoppable`; outside, signals keep their default actions)."""
    _state.held += 1
    try:
        yield
    finally:
        _state.held -= 1
    if not _state.held and _state.active and _state.signum is not None:
        raise Stopped(_state.signum)


class Stoppable:
    """Within the block, a stop signal ends the commands running and raises :class:`Stopped`
    (after a :func:`held` step); the previous handlers are put back after it. Outside the
    main thread (where Python takes no handler) signals keep their actions."""

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._installed = False

    def __enter__(self) -> Stoppable:
        if threading.current_thread() is not threading.main_thread():
            return self
        self._installed = True
        _state.active, _state.signum = True, None
        for sig in STOP_SIGNALS:
            # a handler installed outside Python could not be put back afterwards: it stays
            if signal.getsignal(sig) is not None:
                self._previous[sig] = signal.signal(sig, _stop_now)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._installed:
            return
        self._installed = False
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        _state.active, _state.signum = False, None


def _stop_now(signum: int, frame: Any) -> None:
    if not _state.held:
        raise Stopped(signum)
    if _state.signum is None:
        _state.signum = signum
    for group in list(_state.groups):
        kill_group(group)

