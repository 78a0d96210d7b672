"""Crash-safe file writes: a crash leaves the old file or the new one, never half of one.

Responsible for: atomic JSON writes and directory fsyncs, shared by the run store and the
knob journal. Not responsible for: what is written or where.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
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
