"""Crash-safe file writes: a crash leaves the old file or the new one, never half of one.

Responsible for: atomic writes (JSON or bytes) and directory fsyncs, shared by the run store,
the knob journal and iolab's other state files. The temporary file is one no other process can
have made or linked (:func:`iolab.safefiles.new_temp`), and a state file's mode is given
(0600) whatever the umask. Not responsible for: what is written or where, or what may stand
at the final name (:mod:`iolab.safefiles`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from pathlib import Path
from typing import Any

from iolab.safefiles import temp_beside

_LIBC = ctypes.CDLL(None, use_errno=True)


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_filesystem(path: Path) -> None:
    """Make every file written so far on ``path``'s filesystem durable, in one call.

    One syncfs(2) replaces an fsync per file and per folder: a run folder of ten raw files
    and a manifest then costs one flush instead of a dozen. Where syncfs is missing (not
    Linux), every file under ``path`` and the folder itself are synced one by one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        syncfs = getattr(_LIBC, "syncfs", None)
        if syncfs is not None:
            if syncfs(fd) == 0:
                return
            err = ctypes.get_errno()
            if err != errno.ENOSYS:  # a failed flush (EIO) is an error, not a fallback
                raise OSError(err, f"syncfs {path}: {os.strerror(err)}")
        for f in Path(path).rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:  # fsync needs no write access
                    os.fsync(fh.fileno())
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, exclusive: bool = False,
                 mode: int | None = None) -> None:
    """Write ``data`` via a synced temporary file renamed into place.

    With ``exclusive`` the file is linked into place instead, which fails with
    FileExistsError if it exists: two writers can never share one file. ``mode``: the
    file's permissions whatever the umask (0600 for state); None: as the umask makes them
    (the stored runs, which others may read).
    """
    path = Path(path)
    # removed on every way out, a stop signal included (link: the temporary name stays)
    with temp_beside(path, mode) as (fd, tmp):
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: Any, *, exclusive: bool = False,
                      mode: int | None = None) -> None:
    """Write ``obj`` as JSON (indented, keys sorted) with :func:`write_atomic`."""
    text = json.dumps(obj, indent=2, sort_keys=True) + "\n"
    write_atomic(path, text.encode(), exclusive=exclusive, mode=mode)
