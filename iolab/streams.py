"""Standard output and error that a lost terminal, a full disk or a closed descriptor cannot
break.

A campaign runs for hours, often in a terminal or an SSH session that may go away; what it
prints is a courtesy, what it stores is the point. So the CLI writes through
:class:`Guarded` streams: a write that fails (``EIO`` after the terminal hung up,
``ENOSPC`` on ``/dev/full``, ``EPIPE`` when the reader left, ``EBADF`` on a closed
descriptor) is dropped and remembered instead of raised, so that a progress bar or a message
can never abort a campaign half-way. The command's exit status then says that output was
lost (:func:`exit_status`).

A descriptor closed before the start (``iolab run ... 2>&-``) is opened on ``/dev/null``
first: otherwise the next file the process opens would get its number, and stray writes to
standard error would land in a run's raw files.

Responsible for: guarding the CLI's standard streams and the exit status of lost output.
Not responsible for: what is printed (``iolab.cli``).
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any

EXIT_OUTPUT_LOST = 74  # EX_IOERR of sysexits.h
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell shows for a reader that went away


class Guarded(io.TextIOBase):
    """A text stream whose failed writes are dropped and remembered (``lost``)."""

    def __init__(self, stream: Any, closed_at_start: bool = False):
        self._stream = stream
        self.lost: BaseException | None = (OSError(errno.EBADF, "closed before the start")
                                           if closed_at_start else None)
        self.dropped = False  # something was to be written after the stream was lost

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:
        return getattr(self._stream, "errors", None)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        try:
            return self.lost is None and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self._stream.fileno()

    def write(self, text: str) -> int:
        if self.lost is None:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as exc:  # ValueError: the stream was closed
                self.lost = exc
        if text:
            self.dropped = True
        return len(text)

    def flush(self) -> None:
        if self.lost is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self.lost = exc
                self.dropped = True


def _open_closed_descriptors() -> set[int]:
    """Open ``/dev/null`` on each of descriptors 0, 1 and 2 that is closed; returns them."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            got = os.open(os.devnull, os.O_RDWR)
            if got != fd:  # a lower descriptor was free after all: keep ours at its number
                os.dup2(got, fd)
                os.close(got)
            closed.add(fd)
    return closed


def guard() -> tuple[Guarded, Guarded]:
    """Replace ``sys.stdout`` and ``sys.stderr`` by guarded streams; returns them."""
    closed = _open_closed_descriptors()
    out: list[Guarded] = []
    for fd, name in ((1, "stdout"), (2, "stderr")):
        current = getattr(sys, name)
        if isinstance(current, Guarded):
            out.append(current)
            continue
        if current is None or fd in closed:  # Python found it closed and gave None
            current = open(fd, "w", closefd=False, errors="backslashreplace")
        guarded = Guarded(current, closed_at_start=fd in closed)
        setattr(sys, name, guarded)
        out.append(guarded)
    return out[0], out[1]


def settle(*streams: Guarded) -> None:
    """Flush each stream; where one was lost, point its descriptor at ``/dev/null``, so that
    what is still buffered beneath it cannot fail again when Python flushes at exit."""
    for stream in streams:
        stream.flush()
        if stream.lost is not None:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, stream.fileno())
                os.close(null)
            except (OSError, ValueError):
                pass  # no descriptor beneath (a StringIO in a test): nothing to flush later


def exit_status(code: int, *streams: Guarded) -> int:
    """``code``, or the status of output that was lost when the command itself succeeded."""
    if code != 0:
        return code
    lost = [s for s in streams if s.dropped]
    if not lost:
        return 0
    if any(isinstance(s.lost, BrokenPipeError) for s in lost):
        return EXIT_BROKEN_PIPE
    return EXIT_OUTPUT_LOST
