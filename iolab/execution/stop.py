"""Requests that a running campaign stop after its current run.

A campaign stopped this way ends as if it had run out of runs: the run in progress is
finished and stored, every knob is restored, and the same command (or ``iolab submit
--resume``) continues where it stopped. Slurm's warning before a job's time limit arrives at
the job's first process (``iolab notebook``), while the campaign runs in the notebook's
kernel, another process in a session of its own; so the request is a small file that the
campaign reads between runs, not a signal. It lies beside the data directory's lock (see
``iolab.core.locks``), never in the data directory.

A request names the Slurm job that made it, if any (with its restart count: Slurm keeps a
job's id when it requeues it), and when. A campaign honours a request of its own job, or one
made after it started; any other is stale (its campaign ended before reading it) and is
removed with a message.

The lock folder is shared, so a request is state kept the safe way (:mod:`iolab.safefiles`):
written with mode 0600 through a temporary file only this process can have made, and read
only when it is a regular file; a link, a FIFO or another special file at its name is no
request (never followed, never opened). Its name follows from the data directory's path, so
any user could put a file there: only a file owned by this user or root is a request (a
user stops only their own campaigns). A request iolab did not write (its ``at`` not a
number, its ``reason`` or ``job`` not text, not a JSON object, larger than
:data:`REQUEST_MOST` bytes) is ignored, and the campaign says so in one line, as it does for
another user's file; a request cut off (a full disk), or not JSON at all (nested deeper than
iolab writes one included), still asks for a stop.

Responsible for: writing, reading and clearing requests. Not responsible for: what the
campaign does when it stops (``iolab.execution.runner``).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from iolab.core import locks
from iolab.durable import write_json_atomic
from iolab.errors import ParseError, excerpt
from iolab.parsers import load_json
from iolab.safefiles import STATE_MODE, NotOurs, check_regular, open_regular, state_folder

EXIT_STOPPED = 3  # the exit status of a command whose campaign stopped on request, runs left
REQUEST_MOST = 64 << 10  # bytes of a request at most: iolab writes about a hundred


def request_path(data_dir: Path) -> Path:
    return locks.data_lock_path(data_dir).with_suffix(".stop")


def _job() -> str | None:
    """This process's Slurm job as ``ID`` or ``ID.RESTARTS`` (None outside Slurm)."""
    job = os.environ.get("SLURM_JOB_ID")
    restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
    return job if job is None or restarts == "0" else f"{job}.{restarts}"


def request(data_dir: Path, reason: str) -> Path:
    """Ask the campaign on ``data_dir`` (running now, or about to start in this Slurm job) to
    stop after its current run."""
    path = request_path(data_dir)
    state_folder(path.parent)
    check_regular(path, "a stop request")  # a link there is refused, not replaced
    write_json_atomic(path, {"reason": reason, "at": time.time(), "pid": os.getpid(),
                             "job": _job()}, mode=STATE_MODE)
    return path


def read(data_dir: Path) -> dict[str, Any] | None:
    """The request at ``data_dir``'s name, or None when there is none this user may honour
    (see :func:`_problem`)."""
    doc, _ = _read(data_dir)
    return doc


def _read(data_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """(the request, or None; why a file at the request's name is not one, or "")."""
    path = request_path(data_dir)
    try:
        fd = open_regular(path, os.O_RDONLY, "a stop request")
    except NotOurs:
        return None, ""  # not a request iolab made
    except OSError:
        fd = -1
    if fd is None:
        return None, ""
    if fd >= 0:
        with os.fdopen(fd, "rb") as fh:
            owner = os.fstat(fh.fileno()).st_uid
            if owner not in (os.geteuid(), 0):
                # anyone may put a file in the shared lock folder: only this user (or root)
                # stops this user's campaign
                return None, (f"ignored {path}: a stop request made by uid {owner}, not by "
                              f"this user (uid {os.geteuid()}) or root")
            try:
                raw = fh.read(REQUEST_MOST + 1)
            except OSError:
                raw = b""
            if len(raw) > REQUEST_MOST:
                return None, (f"ignored {path}: more than {REQUEST_MOST:,} bytes, so not a stop "
                              "request iolab wrote")
    else:
        raw = b""
    try:
        doc = load_json(raw.decode("utf-8"), str(path))
    except (ValueError, ParseError):
        # half a request (a full disk) still asks for a stop
        return {"reason": "an unreadable stop request", "at": time.time(), "job": None}, ""
    problem = _problem(doc)
    if problem:
        return None, f"ignored {path}: {problem}"
    return doc, ""


def _problem(doc: Any) -> str:
    """Why a request's JSON is not one iolab writes (a hand-made or altered one), or ""."""
    if not isinstance(doc, dict):
        return f"not a stop request (a JSON {type(doc).__name__}, not an object)"
    at = doc.get("at")
    if not isinstance(at, (int, float)) or isinstance(at, bool) or not math.isfinite(at):
        return f"key 'at': {excerpt(at)} is not a time (seconds since 1970, a number)"
    for key in ("reason", "job"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            return f"key '{key}': {excerpt(doc[key])} is not text"
    return ""


def clear(data_dir: Path) -> None:
    try:
        request_path(data_dir).unlink()
    except OSError:
        # gone already, or another user's in a sticky lock folder: then it stays stale, and
        # stale requests are not honoured
        pass


def pending(data_dir: Path, started_at: float) -> tuple[dict[str, Any] | None, str]:
    """(the request this campaign, started at ``started_at`` (time.time()), must honour, or
    None; a message when a stale request was removed)."""
    doc, ignored = _read(data_dir)
    if doc is None:
        return None, ignored
    job = _job()
    if (job is not None and doc.get("job") == job) or doc["at"] >= started_at:
        return doc, ""
    clear(data_dir)
    return None, (f"removed a stale stop request ({doc.get('reason')}, made before this "
                  "campaign started)")
