"""Locks that keep two iolab processes apart: one per data directory, one per host, one per
knob.

* The **data lock** is held by every command that writes a data directory's runs (``run``,
  ``restore``, ``migrate --apply``, ``import-cijoe``, ``verify --quarantine``): two
  campaigns on one data directory would quarantine each other's unfinished runs. It lives
  beside the host lock (``iolab-data-<hash of the folder's real path>.lock``), not in the
  data directory, so that a refused command leaves the data directory as it was and a
  read-only one can still be checked.
* The **host lock** (``/run/lock/iolab-host.lock``, else ``/var/lock``; ``$IOLAB_LOCK_DIR``
  moves it) is held by every command that may change a system setting (``run`` and
  ``restore``), whatever its data directory: two campaigns changing THP at once would each
  restore what the other set. It also keeps two measurements off one host at the same time.
* A **knob lock** (``iolab-knob-<knob>-<hash of its sysfs and procfs>.lock``) is held by a
  process from before it first changes that knob, or restores it from a journal, until every
  knob it changed is back. It lives in the system's lock folder *whatever*
  ``$IOLAB_LOCK_DIR`` says: the host lock moves with that variable (the test suite gives
  itself a folder of its own, so that it never waits for a user's campaign), and two
  campaigns given two folders would otherwise both change THP, each restoring what the other
  set. So a campaign that would change a knob another live campaign has changed is refused,
  naming that campaign, whatever lock folders the two were given; a test that changes the
  real THP is refused the same way while a real campaign holds it. The hash is of the tree's
  real path: a fake tree in a test is another host's knob, and never collides with the real
  one.

Both are ``flock`` locks on a small file that names the holder (pid, command line, data
directory, since when), so a refusal can say who holds it. The kernel drops a flock when its
holder dies, so a lock file naming a process that is gone is stale: it is taken over, and
the caller is told. A data lock's file is removed when its holder releases it (one per data
directory ever used would pile up in the system's lock folder); a process that opened it
just before and locks the removed file sees that the path no longer names what it locked,
and starts again. The host lock's file stays: it is one, and may belong to another user.

Responsible for: taking, describing and releasing the locks. Not responsible for: what
is done under them.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iolab.errors import IolabError
from iolab.host.knobs import Knob

HOST_LOCK = "iolab-host.lock"
HOST_LOCK_DIRS = (Path("/run/lock"), Path("/var/lock"))


class LockHeld(IolabError):
    """Another live iolab process holds the lock."""


def lock_dir() -> Path:
    """Where the data and host locks live: ``$IOLAB_LOCK_DIR``, else the system's lock
    folder."""
    override = os.environ.get("IOLAB_LOCK_DIR")
    if override:
        return Path(override)
    return system_lock_dir()


def system_lock_dir() -> Path:
    """The first writable system lock folder (where the knob locks always live)."""
    for folder in HOST_LOCK_DIRS:
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
            return folder
    # an unprivileged user on a host without a shared lock folder cannot change system
    # settings anyway; a per-user folder still keeps that user's campaigns apart
    return Path(f"/tmp/iolab-locks.{os.getuid()}")


def data_lock_path(data_dir: Path) -> Path:
    digest = hashlib.sha256(os.path.realpath(data_dir).encode()).hexdigest()[:16]
    return lock_dir() / f"iolab-data-{digest}.lock"


def _holder_text(info: dict[str, Any]) -> str:
    if not info:
        return "a process that did not say who it is"
    cmd = " ".join(info.get("argv") or []) or "?"
    return (f"pid {info.get('pid')} ('{cmd}', data {info.get('data_dir')}, since "
            f"{info.get('since')})")


def _read_info(fd: int) -> dict[str, Any]:
    try:
        text = os.pread(fd, 65536, 0).decode(errors="replace")
        info = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


class Lock:
    """One lock file; use as a context manager or with :meth:`acquire` / :meth:`release`.

    ``what`` says in words what the lock protects, for the refusal message.
    """

    def __init__(self, path: Path, what: str, data_dir: Path | None = None,
                 remove_when_released: bool = False):
        self.path = Path(path)
        self.what = what
        self.data_dir = data_dir
        self.remove_when_released = remove_when_released
        self.messages: list[str] = []   # what the caller should tell the user (a takeover)
        self._fd: int | None = None

    def acquire(self) -> Lock:
        # a released data lock's file is removed: the file locked must still be the one the
        # path names, or it was removed between this open and this lock, and nobody else
        # will ever see it
        for _ in range(100):
            fd = self._lock_file()
            if _names(self.path, fd):
                break
            os.close(fd)
        else:
            raise IolabError(f"{self.path}: the lock file kept being replaced while it was "
                             "taken (100 tries); is another program removing it?")
        previous = _read_info(fd)
        if previous.get("pid") not in (None, os.getpid()):
            self.messages.append(f"took over {self.path} from {_holder_text(previous)}, "
                                 f"which is no longer running")
        info = {"pid": os.getpid(), "argv": sys.argv, "since":
                datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "data_dir": str(self.data_dir) if self.data_dir else None}
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        except OSError:
            pass  # a read-only lock file still locks; only the holder's name is missing
        self._fd = fd
        return self

    def _lock_file(self) -> int:
        """The lock file opened (created if need be) and flocked; LockHeld when another
        process holds it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            # a host lock file another user created: locking needs no write access
            fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            info = _read_info(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise LockHeld(f"{self.path}: {self.what} is held by {_holder_text(info)}; "
                               f"wait for it to end, or stop it (its knobs are restored when "
                               f"it ends)") from None
            raise
        return fd

    def release(self) -> None:
        if self._fd is None:
            return
        removed = False
        if self.remove_when_released:
            try:
                os.unlink(self.path)  # still holding it: nobody can take it in between
                removed = True
            except OSError:
                pass  # another user's file in a sticky folder: emptied instead
        if not removed:
            try:
                os.ftruncate(self._fd, 0)  # an empty file: nobody holds it
            except OSError:
                pass
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        now, held = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def data_lock(data_dir: Path) -> Lock:
    lock_dir().mkdir(parents=True, exist_ok=True)
    return Lock(data_lock_path(data_dir), f"the data directory {data_dir}", data_dir,
                remove_when_released=True)


def host_lock(data_dir: Path | None) -> Lock:
    lock_dir().mkdir(parents=True, exist_ok=True)
    return Lock(lock_dir() / HOST_LOCK, "this host's system settings (knobs) and measurements",
                data_dir)


def knob_lock_path(knob: Knob) -> Path:
    """The lock of ``knob`` on the tree its root names (the real /sys and /proc, or a fake)."""
    tree = f"{os.path.realpath(knob.root.sys)}\0{os.path.realpath(knob.root.proc)}"
    digest = hashlib.sha256(tree.encode()).hexdigest()[:16]
    return system_lock_dir() / f"iolab-knob-{knob.name}-{digest}.lock"


class KnobLocks:
    """The knob locks one process holds: :meth:`claim` takes a knob's lock (once; LockHeld
    names the live process that has it), and leaving the block releases them all, after
    the knobs were restored inside it."""

    def __init__(self, data_dir: Path | None):
        self.data_dir = data_dir
        self.messages: list[str] = []  # what the caller should tell the user (a takeover)
        self._held: dict[Path, Lock] = {}

    def claim(self, knob: Knob) -> None:
        path = knob_lock_path(knob)
        if path in self._held:
            return
        path.parent.mkdir(parents=True, exist_ok=True)  # the per-user folder, if it is that
        lock = Lock(path, f"the knob '{knob.name}' of {knob.root.sys}", self.data_dir,
                    remove_when_released=True)
        self._held[path] = lock.acquire()
        self.messages += lock.messages

    def release(self) -> None:
        while self._held:
            self._held.popitem()[1].release()

    def __enter__(self) -> KnobLocks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at ``path`` now, or None when nobody does (for ``status``)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_info(fd) or {"pid": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def describe(info: dict[str, Any]) -> str:
    return _holder_text(info)
