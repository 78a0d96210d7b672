"""Process pools of the parallel derivations (``iolab search-replay --jobs``, a large tidy
table), and how they end on Ctrl-C.

A terminal's Ctrl-C reaches the whole foreground process group: without care each worker
raised KeyboardInterrupt and printed its traceback, and the pool, left to shut down as it
does at exit, waited on a worker that never ended, so the command hung after saying
"interrupted". So the workers ignore SIGINT (the main process alone decides what an
interrupt does), and when the work ends with an exception (KeyboardInterrupt included) the
pool cancels what is queued and ends its workers before the exception goes on. A signal that
ends the main process without an exception (SIGTERM, SIGKILL) leaves no worker behind either:
each worker asks the kernel for SIGTERM when its parent dies (Linux's PR_SET_PDEATHSIG), or
it would finish its item, seconds of CPU, as an orphan.

Responsible for: starting such a pool and ending it. Not responsible for: the work (the
callers) or the processes a campaign starts (:mod:`iolab.procs`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Iterator

PR_SET_PDEATHSIG = 1  # prctl(2)


def _worker_start(parent: int) -> None:
    """Leave SIGINT to the main process, and end with it (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown ends them
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


@contextlib.contextmanager
def pool(workers: int, **options: Any) -> Iterator[ProcessPoolExecutor]:
    """A ProcessPoolExecutor of ``workers`` processes (``options`` as it takes them) whose
    workers ignore SIGINT and end with the main process, shut down as usual when the block
    ends normally, and with its queued work cancelled and its workers ended when the block
    raises."""
    executor = ProcessPoolExecutor(workers, initializer=_worker_start,
                                   initargs=(os.getpid(),), **options)
    try:
        yield executor
    except BaseException:
        _end(executor)
        raise
    executor.shutdown()


def _end(executor: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers, waiting until each is gone: a worker busy
    with its item would otherwise finish it first (seconds for a replay), and the exit would
    wait on it. (Python 3.11 has no public way to end them: ``_processes`` is the pool's
    own map of its workers; shutdown clears it, so it is read first.)"""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join()
