"""Scratch files: the target files benchmarks read, which the package writes, marks as its own,
and alone may overwrite or remove.

A scratch file is written once with incompressible data and then reused. One whose
``layout`` is ``fallocated`` is laid out with fallocate(2) instead and never written: its
extents stay *unwritten*, and a file system answers reads of them with zeros without reading
the device (an experiment measures with it what a file laid out that way does). Before a byte
of it is written (or its space allocated), it is entered in this user's registry of scratch files on this machine
(``scratch-<machine id>.json`` in :func:`iolab.paths.state_dir`; one file per machine, so
that a home folder shared by the nodes of a cluster never mixes them) with its inode
number, and once complete with its size and modification time (and its layout). That entry is the mark: a
file is *ours* when the registry has its path with the inode, size and modification time the
file has now. A file of the same name made by anyone else, put in the place of ours, or
written since, has no matching entry. (The device number is not part of the mark: it can
change across reboots.) The registry is read, changed and written under a lock, and a
registry that cannot be read is an error, never taken for an empty one, which would orphan
every file it lists; so is one with an entry of the wrong shape (not a mapping, a field or a
user of the wrong type, or a path iolab never enters: relative, which ``clean`` would take
in the folder it runs in, not as pathlib writes it, or with control characters), named in
one line, rather than skipped: the next write would drop it, and with it what it says of a
file iolab wrote.

The registry and its lock (``.scratch-<machine id>.json.lock``, a :class:`iolab.lockfile.Lock`
that names its holder) are state: files of mode 0600 in a folder of mode 0700, whatever the
umask, never followed through a link, and a FIFO or another special file in their place is
refused before any read that could block (:mod:`iolab.safefiles`). The registry is not even
read from a folder that others can write into (world-writable without the sticky bit), nor
when another user than this one or root owns it, nor when it holds more than
:data:`REGISTRY_MOST` bytes: what it names would otherwise be removed by ``clean`` or called
iolab's by ``plan``. A lock another process
holds is waited for: the wait names the holder once, and Ctrl-C (or a campaign's stop check)
ends it.

An entry also names the file's *users*: each checkout of iolab (its folder) and campaign
(``experiment/environment``) that laid the file out or reused it. Two checkouts whose params
name one path share one file; :func:`clean` removes only files that every user of which is
in its scope (this checkout, and an experiment if given), and says which it leaves and why,
so that cleaning one checkout never takes a file another one's campaign reads.

Before anything runs, a scratch path is refused (:func:`problems`) when

* it is relative (the tools run inside each run folder, so a relative path would put a
  scratch file into every stored run and hash it into ``run.json``);
* fio would read it as something else: ``:`` separates file names in fio's ``filename``,
  ``$`` starts a variable it expands, ``\\`` escapes, and control characters or blanks at
  either end do not survive its option parser;
* it lies inside the data directory, which holds the record and nothing else;
* something exists there that is not ours (a user's file, a folder, a link, a device, or a
  file an iolab older than the registry wrote);
* a folder of its path is a link another user made, or a folder another user owns or may
  write into (world-writable without the sticky bit): they could put a link in place of the
  next folder, and the file would be written wherever it points
  (:func:`iolab.safefiles.folders_problem`);
* this user cannot create or write it.

The folders a scratch file's path names that do not exist are made 0755 whatever the umask:
others may read them, as they may the file, but never put a file there.

Responsible for: those checks, laying a file out under its mark (:func:`lay_out`), saying
what a campaign will do to each file (:func:`describe`) and what happened to a file since it
was ours (:func:`change`), and removing marked files (:func:`clean`). Not responsible for:
which files an experiment reads (``Experiment.scratch_files``) or when they are written and
checked (the runner).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import json
import os
import secrets
import shutil
import socket
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

from iolab.durable import write_json_atomic
from iolab.errors import IolabError, ParseError, excerpt
from iolab.lockfile import Lock
from iolab.parsers import load_json
from iolab.paths import REPO_ROOT, state_dir
from iolab.safefiles import (STATE_MODE, NotOurs, TooLarge, check_folder, folders_problem,
                             make_folders, read_regular, state_folder)

CHUNK = 1 << 20
# a folder iolab makes for a scratch file, whatever the umask: others may read (as they may
# the file, 0644) but never put anything there (0777 under umask 000 would let them put a
# file at the name the next campaign writes)
FOLDER_MODE = 0o755
VERSION = 2
# bytes of the registry at most: an entry takes a few hundred, and a user lays out a few
# dozen files
REGISTRY_MOST = 16 << 20
# what fio's option parser splits on, expands or unescapes in a file name
FIO_SPECIAL = {":": "fio's separator between file names", "$": "fio expands $VARIABLES",
               "\\": "fio's escape character"}
# how a scratch file is laid out: written with data, or its space allocated and never written
LAYOUTS = ("written", "fallocated")


@dataclass(frozen=True)
class ScratchFile:
    """A file the runs read, with the params key that names it, the size it must have and
    how it is laid out (one of :data:`LAYOUTS`)."""

    key: str
    path: Path
    size: int
    layout: str = "written"


def _machine() -> str:
    try:
        return Path("/etc/machine-id").read_text().strip() or socket.gethostname()
    except OSError:
        return socket.gethostname()


def user(campaign: str) -> dict[str, str]:
    """A scratch file's user: this checkout and the campaign (``experiment/environment``)."""
    return {"checkout": str(REPO_ROOT), "campaign": campaign}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _same_file(path: str, rec: dict[str, Any], sealed: bool = False) -> bool:
    """Whether ``path`` is the file of the entry ``rec``: its inode, and once the file was
    complete (``mtime_ns`` recorded), its size and modification time too, so that a file
    written or replaced since is not taken for ours (an inode number can be handed out again
    at once). ``sealed``: only a complete one."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_ino != rec.get("ino"):
        return False
    if "mtime_ns" not in rec:
        return not sealed
    return [st.st_size, st.st_mtime_ns] == [rec.get("size"), rec.get("mtime_ns")]


# what each field of an entry holds, when it is there
_ENTRY_TYPES = {"ino": int, "size": int, "mtime_ns": int, "by": str, "created_at": str,
                "final": str, "users": list, "layout": str}


def _entry_problem(name: str, rec: Any) -> str | None:
    """What is wrong with the shape of the registry entry ``name``, in words, or None."""
    problem = _name_problem(name)
    if problem:
        return f"the path is {problem}"
    if not isinstance(rec, dict):
        return f"{excerpt(rec)} is not a mapping of the file's inode, size and users"
    for key, kind in _ENTRY_TYPES.items():
        value = rec.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"key '{key}': {excerpt(value)} is not {_WORDS[kind]}"
    problem = _name_problem(rec.get("final"))
    if rec.get("final") is not None and problem:
        return f"key 'final': {excerpt(rec['final'])} is {problem}"
    if rec.get("layout", "written") not in LAYOUTS:
        return f"key 'layout': {excerpt(rec['layout'])} is not one of {', '.join(LAYOUTS)}"
    for used in rec.get("users") or []:
        if not (isinstance(used, dict) and all(isinstance(used.get(k, ""), str)
                                               for k in ("checkout", "campaign"))):
            return (f"key 'users': {excerpt(used)} is not a user ({{checkout: FOLDER, "
                    "campaign: EXPERIMENT/ENVIRONMENT}})")
    return None


_WORDS = {int: "a whole number", str: "text", list: "a list"}


def _name_problem(name: Any) -> str | None:
    """Why ``name`` is not a path iolab enters in its registry, in words, or None: only an
    absolute path as pathlib writes it, free of control characters, is. A relative name
    would be taken relative to the folder ``clean`` runs in, and a file there removed."""
    if not isinstance(name, str) or not name.startswith("/") or str(PurePosixPath(name)) != name \
            or any(ord(c) < 32 or ord(c) == 127 for c in name):
        return ("not an absolute path as iolab enters one (no '//', '.' or '/' at the end, "
                "no control characters)")
    return None


class Registry:
    """This user's scratch files on this machine: path -> inode, size, mtime, who made it."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else \
            state_dir() / f"scratch-{_machine()}.json"

    # -- reading and writing, under the lock ---------------------------------------------

    def _load(self) -> dict[str, dict[str, Any]]:
        # a registry in a folder others can write into may be theirs: refused before it is
        # read, so that no file it names is removed (clean), or called ours (plan)
        if os.path.lexists(self.path.parent):
            check_folder(self.path.parent)
        try:
            # a link or a FIFO put in its place is refused: never followed, never a read
            # that blocks for ever
            # another user's is never this user's (a file it names could be removed by clean)
            raw = read_regular(self.path, "its registry of scratch files", REGISTRY_MOST,
                               own=True)
            # depth-checked: a registry nested 100,000 deep is malformed, not a RecursionError
            doc = load_json(raw.decode("utf-8"), self.path.name) if raw is not None else None
        except (NotOurs, TooLarge):
            raise
        except (OSError, ValueError, ParseError) as exc:
            raise IolabError(f"{self.path}: the registry of the scratch files iolab wrote "
                             f"cannot be read ({exc}); repair it, or remove it (iolab then "
                             "knows none of those files as its own, and 'iolab clean' leaves "
                             "them to you)") from None
        if raw is None:
            return {}
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(files, dict):
            raise IolabError(f"{self.path}: not a registry of scratch files (no 'files' "
                             "mapping); repair or remove it")
        for name, rec in files.items():
            problem = _entry_problem(name, rec)
            if problem:
                # refused, not skipped: a skipped entry would be dropped at the next write,
                # and with it what the rest of it says about a file iolab wrote
                raise IolabError(f"{self.path}: entry {excerpt(name)}: {problem}, so this is "
                                 "not a registry iolab wrote; repair that entry, or remove it "
                                 "(iolab then knows that file no longer as its own)")
        return files

    @contextmanager
    def _changing(self, check: Callable[[], None] = lambda: None
                  ) -> Iterator[dict[str, dict[str, Any]]]:
        """The registry's files, pruned, to change in place; written back under the lock.
        Another process holding the lock is waited for: named once, and ``check`` (a
        campaign's stop check) or Ctrl-C ends the wait."""
        try:
            state_folder(self.path.parent)
            lock = Lock(self.path.with_name(f".{self.path.name}.lock"),
                              "the registry of scratch files", mode=STATE_MODE)
            lock.acquire(wait=True, check=check)
        except OSError as exc:
            raise IolabError(f"{self.path}: the registry of scratch files cannot be written "
                             f"({exc.strerror or exc})") from None
        try:
            files = self._pruned(self._load())
            yield files
            try:
                write_json_atomic(self.path, {"version": VERSION, "files": files},
                                  mode=STATE_MODE)
            except OSError as exc:
                raise IolabError(f"{self.path}: the registry of scratch files cannot be "
                                 f"written ({exc.strerror or exc})") from None
        finally:
            lock.release()

    @staticmethod
    def _pruned(files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The entries that still describe a file, each under the name the file has now: a
        partial file renamed into place is found under its ``final`` name."""
        out: dict[str, dict[str, Any]] = {}
        for name, rec in files.items():
            for candidate in (name, rec.get("final")):
                # under its final name only once complete: a partial file is never renamed
                if candidate and _same_file(candidate, rec, sealed=candidate != name):
                    out[candidate] = rec if candidate == name else \
                        {k: v for k, v in rec.items() if k != "final"}
                    break
        return out

    # -- what callers use ----------------------------------------------------------------

    def entry(self, path: Path) -> dict[str, Any] | None:
        """The entry that makes ``path`` ours now, or None (only that entry is looked at:
        one on a hung network mount must not stop every plan)."""
        name = str(path)
        for key, rec in self._load().items():
            if key == name and _same_file(name, rec):
                return rec
            if rec.get("final") == name and _same_file(name, rec, sealed=True):
                return {k: v for k, v in rec.items() if k != "final"}
        return None

    def mark(self, path: Path, fd: int, *, size: int, by: str, final: Path,
             check: Callable[[], None] = lambda: None, layout: str = "written") -> None:
        """Enter the open, still empty file ``fd`` (at ``path``) as ours, to be renamed to
        ``final`` when complete, laid out as ``layout``."""
        ino = os.fstat(fd).st_ino
        with self._changing(check) as files:
            files[str(path)] = {"ino": ino, "size": size, "by": by, "created_at": _now(),
                                "final": str(final), "users": [user(by)], "layout": layout}

    def seal(self, path: Path, fd: int, *, size: int, by: str, final: Path,
             check: Callable[[], None] = lambda: None) -> None:
        """The file is complete: record its size and modification time."""
        st = os.fstat(fd)
        with self._changing(check) as files:
            rec = files.setdefault(str(path), {"ino": st.st_ino, "by": by,
                                               "created_at": _now(), "final": str(final),
                                               "users": [user(by)]})
            rec.update(size=size, mtime_ns=st.st_mtime_ns)

    def use(self, path: Path, by: str, check: Callable[[], None] = lambda: None) -> None:
        """Campaign ``by`` of this checkout reads the file that is ours at ``path``."""
        with self._changing(check) as files:
            rec = files.get(str(path))
            if rec is not None and user(by) not in rec.setdefault("users", []):
                rec["users"].append(user(by))

    def tidy(self, check: Callable[[], None] = lambda: None) -> None:
        """Write the registry as it stands (after a rename, or removals)."""
        with self._changing(check):
            pass

    def ours(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every file that is still ours, by path."""
        return [(Path(name), rec) for name, rec in sorted(self._pruned(self._load()).items())]


def path_problem(path: Path, data_dir: Path | None = None) -> str | None:
    """Why ``path`` may not be a scratch file, whatever is there now; or None."""
    text = str(path)
    if not path.is_absolute():
        return (f"{text!r} is a relative path; the tools run inside each run's folder, so it "
                "would be written into every stored run: give an absolute path")
    for char, why in FIO_SPECIAL.items():
        if char in text:
            return f"{text!r} contains {char!r} ({why}), so fio would read another file"
    if any(ord(c) < 32 or ord(c) == 127 for c in text) or text != text.strip():
        return f"{text!r} holds control characters or blanks at an end, which fio drops"
    if data_dir is not None:
        folder = Path(os.path.abspath(data_dir))
        real = Path(os.path.abspath(path))
        if real.is_relative_to(folder) or Path(os.path.realpath(real)).is_relative_to(
                os.path.realpath(folder)):
            return (f"{text} lies inside the data directory {folder}, which holds the stored "
                    "runs and nothing else: choose a path outside it")
    return None


def _writable_problem(path: Path) -> str | None:
    """Why this user cannot create or replace ``path``."""
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        return (f"{path} cannot be created: {parent} is not a folder this user (uid "
                f"{os.getuid()}) may write")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        st = path.stat()
        return (f"{path} is not writable by uid {os.getuid()} (owner uid {st.st_uid}, mode "
                f"{st.st_mode & 0o7777:04o}); another user's run made it? Run as that user, or "
                "choose another path")
    return None


def _kind(st: os.stat_result) -> str:
    return ("a file" if stat.S_ISREG(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
            else "a symbolic link" if stat.S_ISLNK(st.st_mode) else "a special file")


def change(f: ScratchFile, entry: dict[str, Any]) -> str | None:
    """What happened to ``f`` since ``entry``, its registry entry when it was ours, was taken
    (removed, replaced, resized or written since), in words; None while it is still that file.
    A runner asks before and after each run: a tool reading a file that is not the one laid
    out (one it made itself after ours was removed) measures something else."""
    try:
        st = os.lstat(f.path)
    except FileNotFoundError:
        return "was removed"
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"was replaced by {_kind(st)}"
    if st.st_ino != entry.get("ino"):
        return (f"was replaced by another file (inode {st.st_ino}; iolab laid out inode "
                f"{entry.get('ino')})")
    if st.st_size != entry.get("size"):
        return f"has {st.st_size:,} bytes where iolab laid it out with {entry.get('size'):,}"
    if st.st_mtime_ns != entry.get("mtime_ns"):
        # a file removed and made again can get the same inode number at once
        return "was rewritten or replaced (its modification time changed)"
    return None


def state(f: ScratchFile, registry: Registry, data_dir: Path | None = None
          ) -> tuple[str, str]:
    """(what a campaign will do with the file, in words): ``create``, ``reuse``, ``rewrite``
    or ``refuse``, with the detail."""
    problem = path_problem(f.path, data_dir) or folders_problem(f.path)
    if problem:
        return "refuse", problem
    try:
        st = os.lstat(f.path)
    except FileNotFoundError:
        problem = _writable_problem(f.path)
        return ("refuse", problem) if problem else ("create", "will be created")
    except OSError as exc:
        return "refuse", f"{f.path} cannot be examined ({exc.strerror})"
    entry = registry.entry(f.path)
    if entry is None:
        return "refuse", (f"{f.path} exists, and is {_kind(st)} that is not in the registry of "
                          f"files iolab wrote ({registry.path}): it may be yours, or one an "
                          "iolab older than the registry wrote; it is never written. Choose "
                          "a path where nothing is, or remove it yourself if it is not yours "
                          "to keep")
    problem = _writable_problem(f.path)
    if problem:
        return "refuse", problem
    made = f"made by iolab ({entry.get('by', '?')}) at {entry.get('created_at', '?')}"
    others = sorted({u.get("checkout") for u in entry.get("users", [])} - {str(REPO_ROOT)})
    if others:
        made += f", also used by the checkout(s) {', '.join(others)}"
    had = entry.get("layout", "written")  # entries older than layouts are all written
    if had != f.layout:
        return "rewrite", f"exists, {made}, laid out {had}; laid out anew, {f.layout}"
    if st.st_size == f.size:
        return "reuse", f"exists, {made}; reused"
    return "rewrite", f"exists, {made}, with {st.st_size} bytes; rewritten with {f.size}"


def problems(files: list[ScratchFile], registry: Registry, data_dir: Path | None = None
             ) -> list[tuple[ScratchFile, str]]:
    """Each file that may not be used, with why."""
    return [(f, detail) for f in files
            for what, detail in [state(f, registry, data_dir)] if what == "refuse"]


def describe(files: list[ScratchFile], registry: Registry, data_dir: Path | None = None
             ) -> list[str]:
    """One line per file for the plan: its path, size and what the campaign does to it."""
    return [f"{f.path} ({f.size:,} bytes, {f.key}{_layout_words(f)}): {detail}" for f in files
            for _, detail in [state(f, registry, data_dir)]]


def _layout_words(f: ScratchFile) -> str:
    """How the plan names a layout other than the usual one ("" for a written file)."""
    return "" if f.layout == "written" else f", {f.layout}: allocated, never written"


def _fallocate(fd: int, size: int) -> None:
    """fallocate(2) itself, mode 0 (OSError where the file system has none): glibc's
    posix_fallocate would instead write a zero into every block, which makes a written file,
    the very thing a ``fallocated`` layout is not."""
    libc = ctypes.CDLL(None, use_errno=True)
    call = getattr(libc, "fallocate", None)
    if call is None:
        raise OSError(errno.EOPNOTSUPP, "this C library has no fallocate(2)")
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    if call(fd, 0, 0, size) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _fill(f: ScratchFile, fd: int, check: Callable[[], None]) -> None:
    """Lay the open, empty file ``fd`` out as ``f`` says: each MiB drawn anew, or its space
    allocated with fallocate(2) and never written."""
    if f.layout == "fallocated":
        check()
        try:
            _fallocate(fd, f.size)
        except OSError as exc:
            raise IolabError(f"key '{f.key}': {f.path} cannot be laid out with fallocate(2) "
                             f"({exc.strerror or exc}): its file system has no unwritten "
                             "extents to measure; nothing was written (allowed: a path on a "
                             "file system with fallocate, such as ext4, xfs or btrfs)") from None
        os.fsync(fd)
        return
    with os.fdopen(fd, "wb", closefd=False) as out:
        left = f.size
        while left:
            check()
            out.write(os.urandom(min(CHUNK, left)))
            left -= min(CHUNK, left)
        out.flush()
        os.fsync(out.fileno())


def lay_out(f: ScratchFile, registry: Registry, by: str,
            check: Callable[[], None] = lambda: None) -> bool:
    """Write ``f`` with incompressible data (or, for a ``fallocated`` layout, allocate its
    space and write nothing) unless it is ours with its size and layout already; True when
    it laid it out. The new file is marked before its first byte and renamed into place only
    when complete, so a file half-written by a killed campaign is never taken for done (and
    is ours, for :func:`clean` and the next campaign). ``check`` is called before every MiB
    (a campaign's stop check): whatever it raises stops the writing, and the half-written
    file is removed. A file that is not ours is refused (IolabError): callers check
    :func:`problems` first, so this is the last line of defence.

    Each MiB is drawn anew: a file read before it was written would be holes, which the file
    system answers without any device I/O, and a repeated block would shrink to one on
    storage that deduplicates. That is what a ``fallocated`` file is for: its unwritten
    extents are answered the same way."""
    what, detail = state(f, registry)
    if what == "refuse":
        raise IolabError(f"key '{f.key}': {detail}")
    if what == "reuse":
        registry.use(f.path, by, check)
        return False
    make_folders(f.path.parent, FOLDER_MODE)
    problem = folders_problem(f.path)  # a folder another user made just now, or a link
    if problem:
        raise IolabError(f"key '{f.key}': {problem}")
    for path, rec in registry.ours():  # a killed campaign's half-written copy: ours to remove
        if rec.get("final") == str(f.path):
            path.unlink(missing_ok=True)
    free = shutil.disk_usage(f.path.parent).free
    if f.size > free:  # the writing would fill the file system, and every other user's writes
        raise IolabError(f"key '{f.key}': {f.path} would take {f.size:,} bytes, but its file "
                         f"system has {free:,} free; nothing was written (allowed: a size "
                         "that fits)")
    # a name no other process and no earlier campaign of a reused pid can have
    tmp = f.path.with_name(f".{f.path.name}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        registry.mark(tmp, fd, size=f.size, by=by, final=f.path, check=check, layout=f.layout)
        _fill(f, fd, check)
        registry.seal(tmp, fd, size=f.size, by=by, final=f.path, check=check)
    except BaseException:  # a stop, a full disk: the partial file would only hold the space
        tmp.unlink(missing_ok=True)
        try:
            registry.tidy(check)
        except (IolabError, KeyboardInterrupt):
            pass  # its entry names a file that is gone: it vouches for nothing
        raise
    finally:
        os.close(fd)
    os.replace(tmp, f.path)
    registry.tidy(check)  # the entry now stands under the final name
    return True


def _outside(rec: dict[str, Any], experiment: str | None, any_checkout: bool) -> str | None:
    """Why a file of ours is left by a clean of this checkout (and ``experiment``), or None."""
    users = rec.get("users")
    if not users:
        return None if any_checkout else (
            "made before iolab recorded which checkout uses a file; --all-checkouts removes it")
    others = sorted({u.get("checkout", "?") for u in users} - {str(REPO_ROOT)})
    if others and not any_checkout:
        return f"also used by the checkout(s) {', '.join(others)}; --all-checkouts removes it"
    if experiment is not None:
        campaigns = sorted({u.get("campaign", "?") for u in users
                            if not u.get("campaign", "").startswith(f"{experiment}/")})
        if campaigns:
            return f"also used by {', '.join(campaigns)}"
    return None


def clean(registry: Registry, *, dry_run: bool = False, under: Path | None = None,
          experiment: str | None = None, any_checkout: bool = False) -> list[str]:
    """Remove the files that are ours and in scope; one line per file removed or left. In
    scope: every user of the file is this checkout (any checkout with ``any_checkout``), a
    campaign of ``experiment`` if given, and the file lies ``under`` a folder if given. A
    file that is no longer ours (replaced, moved, written since) is not touched and drops
    out of the registry."""
    lines = []
    folder = Path(os.path.abspath(under)) if under is not None else None
    for path, rec in registry.ours():
        if folder is not None and not path.is_relative_to(folder):
            continue
        size = f"{rec.get('size', 0):,} bytes"
        why = _outside(rec, experiment, any_checkout)
        if why is not None:
            lines.append(f"left {path} ({size}, made by {rec.get('by', '?')}): {why}")
            continue
        if dry_run:
            lines.append(f"would remove {path} ({size}, made by {rec.get('by', '?')})")
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        lines.append(f"removed {path} ({size}, made by {rec.get('by', '?')})")
    if not dry_run:
        registry.tidy()  # drops what is gone
    return lines
