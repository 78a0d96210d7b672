"""A lock file that names its holder: an ``flock`` on a small file holding the holder's pid,
command line, data directory and start, so that whoever finds it taken can say who holds it.

The kernel drops a flock when its holder dies, so a lock file naming a process that is gone
is stale: it is taken over, and the caller is told. A lock made with
``remove_when_released`` has its file removed by its holder on release; a process that
opened it just before and locks the removed file sees that the path no longer names what
it locked, and starts again.

Lock files often live in a folder every user may write into (``/run/lock``), so what stands
at a lock's name may not be ours:

* A symbolic link, a FIFO, a device, a folder, or a file with other names (hard links) there
  is refused with one line naming the path; nothing is followed, opened or written
  (:mod:`iolab.safefiles`).
* The holder's record is written only into a lock file that is *ours*: made by this process,
  or a regular file of this user's that is empty or holds a holder's record (a lock file an
  iolab of this user made before), judged by the whole file: one of more than
  :data:`RECORD_MOST` bytes is no record (its first bytes blank or a record would not make
  the rest ours to truncate). Any other file there is never truncated or written:
  another user's lock file is locked as it is (its holder then goes unnamed); a file of this
  user's that holds something else is refused. Only an own file is emptied or removed on
  release.
* A lock file is made with the mode its caller gives (:data:`LOCK_MODE`, 0644, by default)
  whatever the umask.

A holder's record is read (to name the holder) only up to :data:`RECORD_MOST` bytes and
nested no deeper than iolab writes it, and only its fields of the kinds iolab writes (a
positive pid, a command line of strings, a data directory and a start as text) are used: any
other content, another user's file included, leaves the holder (or that part of it) unnamed
rather than ending the command.

A lock is refused when another process holds it (:class:`LockHeld`, naming the holder), or
waited for (``acquire(wait=True)``): the wait says once who holds it and polls (``LOCK_NB``
and a sleep of :data:`POLL_S`), calling the caller's ``check`` before each try, so that
Ctrl-C or a campaign's stop request ends it at once; a blocking flock would sleep on through
a signal whose handler returns.

Responsible for: taking, waiting for, describing and releasing one lock file. Not responsible
for: where the locks live or what they protect (:mod:`iolab.core.locks`, the scratch
registry in :mod:`iolab.host.scratch`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from iolab import safefiles
from iolab.checks import is_positive_int
from iolab.errors import IolabError, printable, shortened

# Lock files: readable by every user, so that another user's iolab can lock the same file
# (the host lock is one for the whole host) and say who holds it; written only by the user
# who made the file
LOCK_MODE = 0o644
POLL_S = 0.1  # how often a waiting lock tries again: Ctrl-C is answered within this
# bytes of a holder's record at most (its command line is cut to fit): a larger file at a
# lock's name is not one iolab wrote
RECORD_MOST = 64 << 10
_BLANK = object()  # a lock file holding nothing but blanks: released, or never written


class LockHeld(IolabError):
    """Another live iolab process holds the lock."""


def _holder_text(info: dict[str, Any]) -> str:
    """The holder as its record names it, escaped (a line break too): the record is another
    process's, and what a refusal or ``iolab status`` quotes from it stays on its line."""
    if info.get("pid") is None and not info.get("argv"):
        return "a process that did not say who it is"
    cmd = " ".join(info.get("argv") or []) or "?"
    data = f", data {info['data_dir']}" if info.get("data_dir") else ""
    pid, since = info.get("pid", "?"), info.get("since", "?")
    return printable(f"pid {pid} ('{cmd}'{data}, since {since})")


def _say(line: str) -> None:
    # the holder's command line is another process's, read from the lock file: no ESC through
    print(f"iolab: {printable(line)}", file=sys.stderr, flush=True)


def _record(fd: int) -> Any:
    """The JSON the lock file ``fd`` holds (:data:`_BLANK` when it is blank); None when it is not a
    holder's record iolab can have written: larger than :data:`RECORD_MOST`, not JSON, or
    nested deeper than iolab writes."""
    try:
        raw = os.pread(fd, RECORD_MOST + 1, 0)
    except OSError:
        return None
    if len(raw) > RECORD_MOST:
        return None
    if not raw.strip():
        return _BLANK
    try:
        return json.loads(raw.decode(errors="replace"))
    # nested too deeply: the bound above keeps this to a RecursionError of a small read (this
    # module lies below iolab.parsers' depth-checked reader)
    except (ValueError, RecursionError):
        return None


# A holder record's fields and the kinds iolab writes them in (:func:`_holder_record`)
_FIELDS: dict[str, Callable[[Any], bool]] = {
    "pid": is_positive_int,
    "argv": lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
    "data_dir": lambda v: isinstance(v, str),
    "since": lambda v: isinstance(v, str),
}


def _read_info(fd: int) -> dict[str, Any]:
    """The holder's record, with only the fields of the kinds iolab writes: another
    process's file may hold anything (an ``argv`` of 5, a ``pid`` of a list), and a field
    of another kind leaves that part of the holder unnamed rather than ending the command."""
    info = _record(fd)
    if not isinstance(info, dict):
        return {}
    return {key: info[key] for key, fits in _FIELDS.items() if key in info and fits(info[key])}


def _holder_record(argv: list[str], data_dir: Path | None) -> bytes:
    """This process's holder record, its command line cut so that the whole fits in
    :data:`RECORD_MOST` bytes (a command with a huge argument list is still named)."""
    info = {"pid": os.getpid(), "argv": argv, "since":
            datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "data_dir": str(data_dir) if data_dir else None}
    text = json.dumps(info) + "\n"
    if len(text.encode()) > RECORD_MOST // 2:
        info["argv"] = [shortened(" ".join(map(str, argv)), 1000)]
        text = json.dumps(info) + "\n"
    return text.encode()


class Lock:
    """One lock file; use as a context manager or with :meth:`acquire` / :meth:`release`.

    ``what`` says in words what the lock protects, for the refusal message; ``mode``: the
    file's permissions when this lock makes it (:data:`LOCK_MODE`).
    """

    def __init__(self, path: Path, what: str, data_dir: Path | None = None,
                 remove_when_released: bool = False, mode: int = LOCK_MODE):
        self.path = Path(path)
        self.what = what
        self.data_dir = data_dir
        self.remove_when_released = remove_when_released
        self.mode = mode
        self.messages: list[str] = []   # what the caller should tell the user (a takeover)
        self._fd: int | None = None
        self._ours = False              # whether the holder's record may be written here
        self._made = False              # whether the file locked was made by this process
        self._told = False
        self._waiting: tuple[bool, Callable[[], None], Callable[[str], None]] = (
            False, lambda: None, _say)

    def acquire(self, *, wait: bool = False, check: Callable[[], None] = lambda: None,
                say: Callable[[str], None] = _say) -> Lock:
        """Take the lock. Held by another process: LockHeld, or with ``wait``, ``say`` once
        who holds it and try again every :data:`POLL_S` seconds, calling ``check`` (a
        campaign's stop check) before each try; Ctrl-C ends the wait."""
        self._waiting = (wait, check, say)
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
        try:
            self._ours = self._made or self._own_lock_file(fd)
        except BaseException:
            os.close(fd)
            raise
        previous = _read_info(fd)
        if previous.get("pid") not in (None, os.getpid()):
            self.messages.append(f"took over {self.path} from {_holder_text(previous)}, "
                                 f"which is no longer running")
        if self._ours:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, _holder_record(sys.argv, self.data_dir), 0)
            except OSError:
                pass  # a read-only lock file still locks; only the holder's name is missing
        self._fd = fd
        return self

    def _lock_file(self) -> int:
        """The lock file opened (made if need be) and flocked; LockHeld when another process
        holds it (or, waiting, once it no longer does)."""
        fd, self._made = self._open()
        try:
            self._flock(fd, *self._waiting)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open(self) -> tuple[int, bool]:
        """The lock file opened, never through a link and never a special file: (fd, whether
        this call made it)."""
        for _ in range(100):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, self.mode)
                os.fchmod(fd, self.mode)  # whatever the umask
                return fd, True
            except FileExistsError:
                pass
            except PermissionError:
                if not os.path.lexists(self.path):
                    raise  # a lock folder this user may not write into
            try:
                fd = safefiles.open_regular(self.path, os.O_RDWR, "a lock file")
            except PermissionError:
                # a host lock file another user made: locking needs no write access
                fd = safefiles.open_regular(self.path, os.O_RDONLY, "a lock file")
            if fd is not None:
                break
            # removed since (a data lock released): make it again
        else:
            raise IolabError(f"{self.path}: the lock file kept appearing and disappearing "
                             "(100 tries); is another program removing it?")
        links = os.fstat(fd).st_nlink
        if links > 1:
            os.close(fd)
            raise safefiles.NotOurs(self.path, None, f"has {links} names (hard links), so it "
                                    f"is not a lock file iolab made; it is never written",
                                    allowed="a lock file iolab made, or nothing there")
        return fd, False

    def _own_lock_file(self, fd: int) -> bool:
        """Whether an existing lock file is ours to write the holder into: this user's, and
        empty or holding a holder's record. Another user's is not (and is locked as it is); a
        file of this user's that holds anything else is refused, never truncated."""
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            return False
        doc = _record(fd)  # the whole file: blanks or a record first prove nothing of the rest
        if doc is _BLANK or isinstance(doc, dict) and "pid" in doc:
            return True
        raise safefiles.NotOurs(self.path, None, f"holds something other than an iolab lock's "
                                f"holder record ({st.st_size} bytes); iolab never truncates a "
                                f"file it did not make", allowed="a lock file iolab made, or "
                                "nothing there (remove it if it is not yours to keep)")

    def _flock(self, fd: int, wait: bool, check: Callable[[], None],
               say: Callable[[str], None]) -> None:
        """Lock ``fd``; LockHeld when another process holds it, or with ``wait``, poll."""
        if _try_flock(fd):
            return
        info = _read_info(fd)
        if not wait:
            raise LockHeld(f"{self.path}: {self.what} is held by {_holder_text(info)}; "
                           f"wait for it to end, or stop it (its knobs are restored when "
                           f"it ends)")
        if not self._told:
            say(f"{self.path}: {self.what} is held by {_holder_text(info)}; waiting for it "
                "(Ctrl-C to give up)")
            self._told = True
        while True:
            check()
            time.sleep(POLL_S)
            if _try_flock(fd):
                return

    def release(self) -> None:
        if self._fd is None:
            return
        removed = False
        if self._ours and self.remove_when_released and _names(self.path, self._fd):
            try:
                os.unlink(self.path)  # still holding it: nobody can take it in between
                removed = True
            except OSError:
                pass  # a folder that will not let it go: emptied instead
        if not removed and self._ours:
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


def _try_flock(fd: int) -> bool:
    """Whether ``fd`` is now locked by this process (False: another holds it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        now, held = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at ``path`` now, or None when nobody does (for ``status``); a link
    or a special file there is not a lock anybody holds (and is refused when one is taken)."""
    try:
        fd = safefiles.open_regular(path, os.O_RDONLY, "a lock file")
    except (OSError, IolabError):
        return None
    if fd is None:
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
