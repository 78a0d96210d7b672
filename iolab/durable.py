"""Crash-safe file writes: a crash leaves the old file or the new one, never half of one.

Responsible for: atomic JSON writes and directory fsyncs, shared by the run store and the
knob journal. Not responsible for: what is written or where.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from pathlib import Path
from typing import Any

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


def write_json_atomic(path: Path, obj: Any, *, exclusive: bool = False) -> None:
    """Write ``obj`` as JSON via a synced temporary file renamed into place.

    With ``exclusive`` the file is linked into place instead, which fails with
    FileExistsError if it exists: two writers can never share one file.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    try:
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
