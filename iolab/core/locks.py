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

Both are lock files that name their holder (:class:`iolab.lockfile.Lock`: pid, command
line, data directory, since when), so a refusal can say who holds it, and a lock of a process
that is gone is taken over. A data lock's file is removed when its holder releases it (one per
data directory ever used would pile up in the system's lock folder). The host lock's file
stays: it is one, and may belong to another user; so lock files are 0644 whatever the umask,
for another user's iolab to lock it (a flock needs no write access) and to read who holds
it. A link, a FIFO or another special file at a lock's name is refused, never followed or
written (:mod:`iolab.lockfile`). The lock folder is shared, so it must be one that others
cannot put files into unless it has the sticky bit (``/run/lock`` has it); the per-user
folder (``/tmp/iolab-locks.<uid>``, or ``$IOLAB_LOCK_DIR`` when iolab makes it) is made 0700
(:func:`iolab.safefiles.state_folder`).

Responsible for: where the data, host and knob locks live, and taking them. Not responsible
for: the lock file itself (:mod:`iolab.lockfile`) or what is done under the locks.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from typing import Any

from iolab import safefiles
# where the locks live is the bottom layer's to say (iolab.safefiles refuses outputs there)
from iolab.paths import HOST_LOCK_DIRS, lock_dir, system_lock_dir
from iolab.host.knobs import Knob
from iolab.lockfile import Lock, LockHeld, describe, holder

__all__ = ["HOST_LOCK", "HOST_LOCK_DIRS", "KnobLocks", "Lock", "LockHeld", "data_lock",
           "data_lock_path", "describe", "holder", "host_lock", "knob_lock_path", "lock_dir",
           "system_lock_dir"]

HOST_LOCK = "iolab-host.lock"


def data_lock_path(data_dir: Path) -> Path:
    digest = hashlib.sha256(os.path.realpath(data_dir).encode()).hexdigest()[:16]
    return lock_dir() / f"iolab-data-{digest}.lock"


def _ready_lock_dir() -> Path:
    """The lock folder, made (0700) if need be and checked (module docstring)."""
    return safefiles.state_folder(lock_dir())


def data_lock(data_dir: Path) -> Lock:
    _ready_lock_dir()
    return Lock(data_lock_path(data_dir), f"the data directory {data_dir}", data_dir,
                remove_when_released=True)


def host_lock(data_dir: Path | None) -> Lock:
    _ready_lock_dir()
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
        safefiles.state_folder(path.parent)  # the per-user folder, if it is that: 0700
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

