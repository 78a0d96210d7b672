"""Checks on a data directory before anything reads or writes it, with one-line reasons.

A data directory holds ``raw/<experiment>/<environment>/`` and ``cache/``. Before a command
uses one it must be a folder (not a file), not the ``raw/`` folder of another data directory
(that would plan a second campaign under ``raw/raw``), and, for commands that write, a
folder this user can create files in, on a path no other user can redirect: none of its
folders (as given and as resolved) a link another user made, another user's folder or one
others may write into without the sticky bit (:func:`iolab.safefiles.folders_problem`).
Whoever can rename or replace a folder of that path decides where runs, host records and
logs land, between two commands or during one.

Responsible for: those checks and their messages, and turning an OSError met while writing
into one line that names the path and the cause. Not responsible for: the layout inside
(``iolab.core.store``) or locking (``iolab.core.locks``).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from iolab.errors import InputError, IolabError, shell_word
from iolab.safefiles import NotOurs, folders_problem

ALLOWED = "a folder holding raw/ (created when missing), or $IOLAB_DATA"


def _looks_like_raw(path: Path) -> bool:
    """``raw/`` itself: its children are experiment folders holding environment folders with
    a ``runs/`` folder or a ``host.json``."""
    if path.name == "raw" and not (path / "raw").exists():
        return True
    try:
        for exp in path.iterdir():
            if exp.is_dir() and exp.name not in ("raw", "cache") and any(
                    (env / "runs").is_dir() or (env / "host.json").is_file()
                    for env in exp.iterdir() if env.is_dir()):
                return True
    except OSError:
        return False
    return False


def check(data_dir: Path, *, write: bool = False, given: str | os.PathLike | None = None
          ) -> Path:
    """``data_dir`` if it can serve as a data directory; InputError saying why not. With
    ``write``, NotOurs when another user could redirect it (the module docstring), checked on
    ``data_dir`` and on ``given``, the path as the user gave it (before its links were
    resolved), before anything is made."""
    path = Path(data_dir)
    if write:
        for place in (path, *([Path(os.path.abspath(given))] if given else [])):
            refuse_redirected(place)
    if path.exists() and not path.is_dir():
        raise InputError(path, None, "is a file, not a data directory", ALLOWED)
    if path.is_dir() and _looks_like_raw(path):
        raise InputError(path, None, f"is the raw/ folder of a data directory, not a data "
                         f"directory; pass its parent, --data {shell_word(path.parent)}", ALLOWED)
    if write:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise from_os_error(exc, "cannot create the data directory") from None
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            raise IolabError(f"{path}: the data directory is on a read-only file system; "
                             "nothing was changed")
        if not os.access(path, os.W_OK | os.X_OK):
            raise IolabError(f"{path}: the data directory is not writable by this user "
                             f"(uid {os.getuid()}); nothing was changed")
    return path


def refuse_redirected(path: Path) -> None:
    """NotOurs when another user could decide where what is written into the data directory
    ``path`` lands (:func:`iolab.safefiles.folders_problem` of a file in it)."""
    problem = folders_problem(Path(path) / "raw")
    if problem and not _under_a_file(Path(path)):  # that one: making it fails, saying so
        raise NotOurs(path, None, f"{problem}; a data directory is never written where another "
                      "user decides where it lands", allowed="a data directory whose folders "
                      "are this user's or root's, and that others cannot write into (or that "
                      "have the sticky bit, as /tmp has)")


def _under_a_file(path: Path) -> bool:
    """Whether the nearest part of ``path`` that exists is no folder (a file): nothing can be
    made below it, so no one could redirect what would be."""
    for part in [path, *path.parents]:
        if os.path.lexists(part):
            return not part.is_dir()
    return False


HINTS = {
    errno.ENOSPC: "the disk is full; free space and run the same command again (stored runs "
                  "are kept; an unfinished one is discarded)",
    errno.EDQUOT: "the disk quota is exceeded; free space and run the same command again",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied; run as a user who may write there or choose another "
                  "--data folder",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
}


def from_os_error(exc: OSError, doing: str = "") -> IolabError:
    """An OSError as one line: the path, what was being done, the cause and what to do."""
    where = exc.filename or ""
    cause = HINTS.get(exc.errno, exc.strerror or str(exc))
    text = ": ".join(part for part in (str(where), doing, cause) if part)
    return IolabError(text)
