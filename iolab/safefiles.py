"""Files at names iolab chose or a user gave, opened without following or writing into what is
not ours.

iolab keeps state at fixed names, some of them in folders every user may write into (its
locks in ``/run/lock``), and writes outputs where the user names them. Anyone who can write
into such a folder can put something at that name first: a symbolic link to a file root
would then truncate, a FIFO that would block every read for ever, a device node. So:

* **State files** (the locks, the scratch registry, stop requests, the knob journal, the
  book's build record) are read and opened only when they are regular files. A symbolic link
  is never followed (``O_NOFOLLOW``); a FIFO, a device, a socket or a folder is refused after
  an ``lstat``, before any open that could block or act on it, and ``O_NONBLOCK`` with an
  ``fstat`` of what was opened closes the gap between the two.
* They are written through a temporary file beside them that only this call can have made
  (``O_CREAT | O_EXCL | O_NOFOLLOW``, a random name) and renamed into place, with mode 0600
  whatever the umask (:func:`new_temp`, used by :func:`iolab.durable.write_atomic`). A state
  folder is made 0700 (each missing part of it), and one that exists must be a folder owned
  by this user or root (a link to one, only when made by this user or root) that others
  cannot write into: world-writable only with the sticky bit, group-writable only for this
  user's own group (a user private group: Ubuntu's umask 002 makes every folder so).
* **Folders** of a data directory are iolab's: one that is a link is never written through
  (:func:`own_folder`, :func:`refuse_linked`), and a folder iolab copies (a run folder that
  ``iolab migrate`` rewrites, an environment's params) is copied without following a link or
  opening anything but a regular file, within bounds on its depth, its files' sizes and
  their number, under a temporary name renamed once whole (:func:`copy_folder`).
* **Outputs** a user names (``iolab tidy -o``, ``iolab notebook -o``, ``iolab book
  --glue-snapshot``) are written the same way, by a rename, never by an open for writing of
  the final name; a path that exists and is not a regular file (a link, a FIFO, a device, a
  folder) or another user's file is refused, never replaced, and so is a path one of whose
  folders is a link another user made, another user's folder, or one others may write into
  without the sticky bit (:func:`folders_problem`): another user could make the output land
  elsewhere (:func:`check_output`, :func:`replace_output`). Nor is an output ever a file iolab
  keeps (:func:`kept_problem`): one inside the data directory (a stored run's raw file, a host
  record) or one git tracks in the checkout (a params file), but the file a verb exists to
  renew (the glue snapshot, a derived replay, the AiSIO reference table); nor, there or not,
  one in a ``.git`` folder, iolab's state folder or its lock folder (:func:`state_problem`).

A refusal is :class:`NotOurs`: one line naming the path, what is there and what is allowed.

Every read has a bound (:func:`read_regular`'s ``most``): each caller states the most bytes a
file of its role can hold when iolab wrote it, and a larger file is :class:`TooLarge`, in one
line naming the file and the bound, before a byte of it is read. A 3 GB sparse file in place
of a knob journal or a cache would otherwise be read whole and end the command with a
MemoryError. The bound is a limit, never a reservation: memory follows the file's size
(:func:`read_bounded`). A state file or cache others could have written is refused too where
its reader asks (``own``): only one of this user's or root's that no one else may write is read
(:func:`check_owner`), and a cache in a folder others may write into is not trusted
(:func:`folder_trust_problem`). Caches are written with :data:`CACHE_MODE` in folders made
with :data:`CACHE_FOLDER_MODE`, whatever the umask.

Responsible for: those checks, and the opens, reads, copies and replacements that apply them.
Not responsible for: what the files hold or where they live (their modules), crash safety
(:mod:`iolab.durable`) or locking (:mod:`iolab.lockfile`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable, Iterator

from iolab.errors import InputError

STATE_MODE = 0o600   # a state file: this user's alone, whatever the umask
FOLDER_MODE = 0o700  # a state folder made by iolab
CACHE_MODE = 0o644   # a cache file: others may read it, only its owner write it, whatever the umask
CACHE_FOLDER_MODE = 0o755  # a cache folder made by iolab
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
OUTPUT_ALLOWED = ("a path where nothing is, a regular file of this user's (replaced whole), or - "
                  "for standard output")


class NotOurs(InputError):
    """Something other than a regular file (or a folder iolab may use) at a name iolab uses."""


class TooLarge(InputError):
    """A file larger than any iolab writes in its role: refused before it is read."""


READ_MOST = 64 << 20  # bytes read from a file whose reader states no bound of its own
READ_BLOCK = 1 << 20  # bytes read at a time past a file's stated size


def what_is(st: os.stat_result) -> str:
    """What a file is, in words (for a refusal)."""
    mode = st.st_mode
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISREG, "a regular file")):
        if test(mode):
            return words
    return "a special file"


def _refusal(path: Path, st: os.stat_result, role: str) -> NotOurs:
    link = _link_text(path, st)
    return NotOurs(path, None, f"is {what_is(st)}{link}, where iolab keeps {role}; it is never "
                   "followed, opened or replaced", allowed="a regular file, or nothing (iolab "
                   "then makes it); remove what is there if it is not yours to keep")


def check_regular(path: Path, role: str) -> os.stat_result | None:
    """``path``'s lstat when it is a regular file, None when nothing is there; NotOurs (naming
    ``role``, what the file should be) for anything else, a link included."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(Path(path), st, role)
    return st


def open_regular(path: Path, flags: int, role: str) -> int | None:
    """``path`` opened with ``flags`` (O_RDONLY, O_RDWR) when it is a regular file, None when
    nothing is there; NotOurs for anything else. Never follows a link, never blocks on a FIFO,
    never opens a device."""
    if check_regular(path, role) is None:
        return None
    try:
        fd = os.open(path, flags | _NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link put there since the lstat
            raise _refusal(Path(path), os.lstat(path), role) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # swapped in since the lstat: opened, never read
        os.close(fd)
        raise _refusal(Path(path), st, role)
    return fd


def read_regular(path: Path, role: str, most: int = READ_MOST, own: bool = False
                 ) -> bytes | None:
    """The bytes of the regular file ``path``; None when nothing is there; NotOurs for
    anything else (see :func:`open_regular`), and with ``own`` for a file of another user's
    than this one's or root's, or one others than its owner may write (:func:`check_owner`); TooLarge when it holds more than ``most`` bytes (the most a
    file of ``role`` holds when iolab wrote it), before any of it is read."""
    fd = open_regular(path, os.O_RDONLY, role)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if own:
            check_owner(Path(path), st, role)
        if st.st_size > most:
            raise too_large(Path(path), st.st_size, most, role)
        data = read_bounded(fh, st.st_size, most)
    if len(data) > most:  # grew since the fstat
        raise too_large(Path(path), len(data), most, role)
    return data


def read_bounded(fh, size: int, most: int) -> bytes:
    """What the open file ``fh`` holds, ``size`` bytes by its fstat, read up to one byte past
    ``most`` (so a caller sees that it holds more). Memory follows the file, never the
    bound: ``fh.read(most + 1)`` reserves all of ``most`` before it reads a byte (1 GiB for a
    58 kB cache), which ends everyday commands under an address-space limit (``ulimit -v``,
    a batch system's). A file grown since its fstat, or one whose size says nothing (0 in
    /proc), is read on in blocks."""
    data = fh.read(min(size, most) + 1)  # one past the size: a file that grew shows it
    if len(data) <= size or len(data) > most:
        return data
    parts, total = [data], len(data)
    while total <= most:
        block = fh.read(min(READ_BLOCK, most + 1 - total))
        if not block:
            break
        parts.append(block)
        total += len(block)
    return b"".join(parts)


def too_large(path: Path, size: int, most: int, role: str) -> TooLarge:
    """The refusal of a file of ``size`` bytes where ``role`` holds at most ``most``."""
    return TooLarge(path, None, f"holds {size:,} bytes (or more), more than iolab ever writes "
                    f"in {role}; it is not read", allowed=f"at most {most:,} bytes; move the "
                    "file away if it is not iolab's")


def check_owner(path: Path, st: os.stat_result, role: str) -> None:
    """NotOurs unless the file of ``st`` belongs to this user or root and no one else may
    write it (no group or world write bit): a file of ``role`` another user made, or could
    have rewritten since (a cache made under ``umask 000`` is 0666), is never taken for this
    user's."""
    problem = trust_problem(st)
    if problem:
        raise NotOurs(path, None, f"{problem}, where iolab keeps {role}; a file another user "
                      "made or may write is never read as this user's", allowed="a file of this "
                      "user's or root's that only its owner may write (mode 0644 or 0600); "
                      "remove it if it is not yours to keep")


def trust_problem(st: os.stat_result) -> str | None:
    """Why a file of ``st`` may hold what another user wrote, in words; None when it may not:
    it belongs to this user or root and only its owner may write it."""
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        return f"belongs to uid {st.st_uid}, not to this user (uid {me}) or root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by others than its owner (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def folder_trust_problem(folder: Path, depth: int = 1) -> str | None:
    """Why files in ``folder`` may have been put or replaced by another user, in words: it or
    one of its ``depth - 1`` parents is a link, not a folder, another user's folder, or one
    others may write into (:func:`others_write`). None when none is, or when they do not
    exist yet (iolab then makes them, :data:`CACHE_FOLDER_MODE`)."""
    me = os.geteuid()
    for part in [Path(folder), *Path(folder).parents][:depth]:
        try:
            st = os.lstat(part)
        except (FileNotFoundError, NotADirectoryError):  # not there (under a file: never made)
            continue
        if not stat.S_ISDIR(st.st_mode):
            return f"{part} is {what_is(st)}{_link_text(part, st)}, not a folder"
        if st.st_uid not in (me, 0):
            return (f"the folder {part} belongs to uid {st.st_uid}, not to this user "
                    f"(uid {me}) or root")
        problem = others_write(st)
        if problem:
            return f"the folder {part} {problem}"
    return None


def append_regular(path: Path, data: bytes, role: str, mode: int = 0o666) -> None:
    """Append ``data`` to the regular file ``path`` (made with ``mode``, less the umask, when
    nothing is there) and sync it; NotOurs for anything else at that name, a file with more
    than one name (a hard link) included. Never follows a link, never blocks on a FIFO,
    never opens a device."""
    check_regular(path, role)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, mode)
    except OSError as exc:
        # a link (ELOOP) or a FIFO without a reader (ENXIO) put there since the lstat
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise _refusal(Path(path), os.lstat(path), role) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # swapped in since the lstat: opened, never written
            raise _refusal(Path(path), st, role)
        if st.st_nlink > 1:  # another name elsewhere: appending would write that file too
            raise NotOurs(path, None, f"has {st.st_nlink} names (hard links), where iolab keeps "
                          f"{role}; it is never written", allowed="a file with this one name, "
                          "or nothing (iolab then makes it)")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def new_temp(path: Path, mode: int | None = STATE_MODE, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new, empty file beside ``path`` that no one else can have made or linked (its name is
    random and it is created exclusively), open for writing: (fd, its path). ``mode``: its
    permissions whatever the umask; None: as the umask makes them (a user's output)."""
    folder = Path(path).parent
    for _ in range(100):
        tmp = folder / f".iolab-{secrets.token_hex(8)}{suffix}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
                         0o666 if mode is None else mode)
        except FileExistsError:
            continue
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # the umask only takes bits away; this sets them exactly
        except BaseException:  # Ctrl-C included: the file is no one's to remove but ours
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name after 100 tries", str(folder))


@contextlib.contextmanager
def temp_beside(path: Path, mode: int | None = STATE_MODE, suffix: str = ".tmp"
                ) -> Iterator[tuple[int, Path]]:
    """:func:`new_temp`'s file (fd, its path) for the block, removed on every way out of it
    unless the block renamed it away: an error, Ctrl-C and a stop signal included. A stop
    that came between the file's creation and a caller's ``try`` left a hidden
    ``.iolab-<hex>.tmp`` beside the output or state file for good; here the file is made
    and noted in one step a stop signal cannot split (:func:`iolab.children.held`: the
    signal is raised once it is noted, and the file is then removed). The block owns the
    fd (it closes it)."""
    from iolab.children import held

    tmp = None
    try:
        try:
            with held():
                fd, tmp = new_temp(path, mode, suffix)
        except BaseException:  # the stop raised as the step ended: the fd is ours to close
            if tmp is not None:
                os.close(fd)
            raise
        yield fd, tmp
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)  # gone already once renamed into place


def make_folders(path: Path, mode: int = FOLDER_MODE) -> Path:
    """The folder ``path``, each missing part of it made with ``mode`` whatever the umask (a
    folder ``mkdir(parents=True)`` makes under ``umask 000`` is 0777: anyone could put files
    into it). Folders that exist are left as they are."""
    path = Path(path)
    missing = []
    for part in [path, *path.parents]:
        if os.path.lexists(part):
            break
        missing.append(part)
    for part in reversed(missing):
        try:
            os.mkdir(part, mode)
        except FileExistsError:
            continue  # made by another process just now: left as it is
        fd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fchmod(fd, mode)  # whatever the umask
        finally:
            os.close(fd)
    return path


def linked_folder(folder: Path, depth: int = 1) -> Path | None:
    """The first of ``folder`` and its ``depth - 1`` parents that is a symbolic link (None
    when none is): the folders of a data directory are iolab's, and a link in place of one
    would put what iolab writes there somewhere else."""
    for part in [Path(folder), *Path(folder).parents][:depth]:
        if part.is_symlink():
            return part
    return None


def refuse_linked(folder: Path, role: str, depth: int = 1) -> Path:
    """``folder``; NotOurs when it, or one of its ``depth - 1`` parents, is a link (never
    followed: what iolab writes there would land elsewhere). Makes nothing."""
    linked = linked_folder(folder, depth)
    if linked is not None:
        try:
            target = os.readlink(linked)
        except OSError:  # removed since
            target = "an unreadable target"
        raise NotOurs(linked, None, f"is a symbolic link to {target}, where iolab keeps {role}; "
                      "it is never followed", allowed="a folder, or nothing (iolab then makes it)")
    return Path(folder)


def own_folder(folder: Path, role: str, depth: int = 1) -> Path:
    """``folder``, made with its parents if missing; NotOurs when it, or one of its ``depth -
    1`` parents, is a link (never followed: what iolab writes there would land elsewhere)."""
    refuse_linked(folder, role, depth)
    Path(folder).mkdir(parents=True, exist_ok=True)
    return refuse_linked(folder, role, depth)  # one put there since


COPY_DEPTH_MOST = 32  # folder levels below the one copied: far below Python's recursion limit


def copy_folder(source: Path, target: Path, role: str, *, file_most: int | None = None,
                files_most: int | None = None, depth_most: int = COPY_DEPTH_MOST,
                temp_prefix: str = ".iolab-") -> None:
    """Copy the folder ``source`` to ``target`` (which must not exist), its regular files
    byte for byte with their permission bits (setuid and the like dropped) and times, as
    ``shutil.copytree`` does, but never following a link: a link, a FIFO, a device or a
    socket anywhere in ``source`` is NotOurs naming it (``role``: what ``source`` is). A link
    to a root-only file would have copied its content; one to /dev/zero, without end.

    Bounded: a file larger than ``file_most`` bytes, more than ``files_most`` files, or
    folders nested more than ``depth_most`` levels are TooLarge, before the file that
    crosses the bound is read (a 3 GiB sparse file would become 3 GiB of disk). The copy is
    made under a temporary name beside ``target`` (``temp_prefix``, a random part and this
    process's id: a store sweeps its own stale ones) and renamed to it once whole, so that
    ``target`` is never half a copy; on any exception what was copied is removed again (a
    caller that must survive a signal turns it into one: :class:`iolab.children.Stoppable`)."""
    from iolab.children import held

    target = Path(target)
    _check_source_folder(Path(source), role)  # a linked source: refused before target is made
    tmp = None
    try:
        # made and noted in one step a stop signal cannot split: a folder made but not yet
        # noted would be left beside the target
        with held():
            tmp = _new_temp_folder(target, temp_prefix)
        _copy_into(Path(source), tmp, role, _Budget(file_most, files_most, depth_most))
        if os.path.lexists(target):  # made since the caller looked: never replaced
            raise FileExistsError(errno.EEXIST, "made while the copy was made", str(target))
        os.rename(tmp, target)
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)  # ours alone: rmtree follows no link
        raise


def _new_temp_folder(target: Path, prefix: str) -> Path:
    """A new folder (0700, opened up to the source's mode once filled) beside ``target``,
    under a random name no one else can have made."""
    for _ in range(100):
        tmp = target.parent / f"{prefix}{secrets.token_hex(8)}-{os.getpid()}"
        try:
            os.mkdir(tmp, 0o700)
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name after 100 tries",
                          str(target.parent))


class _Budget:
    """What a copy may still take: bytes a file, files in all, folder levels."""

    def __init__(self, file_most: int | None, files_most: int | None, depth_most: int):
        self.file_most, self.files_most, self.depth_most = file_most, files_most, depth_most
        self.files = 0

    def check_file(self, path: Path, st: os.stat_result, role: str) -> None:
        self.files += 1
        if self.files_most is not None and self.files > self.files_most:
            raise TooLarge(path, None, f"is file {self.files:,} of {role}, more than iolab "
                           "copies; nothing was copied", allowed=f"at most {self.files_most:,} "
                           "files; remove what does not belong there")
        if self.file_most is not None and st.st_size > self.file_most:
            raise _copy_too_large(path, st.st_size, self.file_most, role)

    def check_depth(self, path: Path, depth: int, role: str) -> None:
        if depth > self.depth_most:
            raise TooLarge(path, None, f"lies {depth} folders deep in {role}, deeper than "
                           "iolab copies; nothing was copied", allowed=f"at most "
                           f"{self.depth_most} levels of folders")


def _copy_too_large(path: Path, size: int, most: int, role: str) -> TooLarge:
    return TooLarge(path, None, f"holds {size:,} bytes (or more), more than a file of {role} "
                    "holds; nothing was copied", allowed=f"files of at most {most:,} bytes; "
                    "move the file away if it does not belong there")


def _copy_into(source: Path, target: Path, role: str, budget: _Budget, depth: int = 0) -> None:
    budget.check_depth(source, depth, role)
    fd = _open_source_folder(source, role)
    try:
        with os.scandir(fd) as it:  # the folder opened, not its name: a link put there since
            entries = sorted(it, key=lambda e: e.name)  # the lstat is never listed
        folder = os.fstat(fd)
    finally:
        os.close(fd)
    for entry in entries:
        path, dest = source / entry.name, target / entry.name
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(dest, 0o700)
            _copy_into(path, dest, role, budget, depth + 1)
        elif stat.S_ISREG(st.st_mode):
            budget.check_file(path, st, role)
            _copy_file(path, dest, role, budget.file_most)
        else:
            raise _not_copied(path, st, role)
    os.chmod(target, stat.S_IMODE(folder.st_mode) & 0o777)
    os.utime(target, ns=(folder.st_atime_ns, folder.st_mtime_ns))


def _open_source_folder(folder: Path, role: str) -> int:
    """``folder`` opened for listing, never through a link (the folder ``copy_folder`` was
    given as much as one inside it: a link to a root-only folder would copy its files)."""
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a link, or no folder, since the lstat
            raise _not_a_folder(folder, os.lstat(folder), role) from None
        raise


def _check_source_folder(folder: Path, role: str) -> None:
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise _not_a_folder(folder, st, role)


def _not_a_folder(folder: Path, st: os.stat_result, role: str) -> NotOurs:
    return NotOurs(folder, None, f"is {what_is(st)}{_link_text(folder, st)}, where iolab "
                   f"copies {role} from; it is never followed or copied",
                   allowed="a folder, not a link to one")


def _not_copied(path: Path, st: os.stat_result, role: str) -> NotOurs:
    return NotOurs(path, None, f"is {what_is(st)}{_link_text(path, st)}, in {role}; it is "
                   "never followed or copied", allowed="regular files and folders only; "
                   "remove it, or move it out of the folder")


def _copy_file(path: Path, dest: Path, role: str, most: int | None) -> None:
    fd = open_regular(path, os.O_RDONLY, role)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "removed while it was copied", str(path))
    with os.fdopen(fd, "rb") as src:
        st = os.fstat(src.fileno())
        if most is not None and st.st_size > most:  # grown since the lstat
            raise _copy_too_large(path, st.st_size, most, role)
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
        with os.fdopen(out, "wb") as dst:
            if most is None:
                shutil.copyfileobj(src, dst, 1 << 20)
            else:
                _copy_bounded(src, dst, path, most, role)
            os.fchmod(dst.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
            dst.flush()
            os.utime(dst.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))


def _copy_bounded(src, dst, path: Path, most: int, role: str) -> None:
    """Copy up to ``most`` bytes; TooLarge when there is more (a file grown while copied)."""
    total = 0
    while block := src.read(min(READ_BLOCK, most + 1 - total)):
        total += len(block)
        if total > most:
            raise _copy_too_large(path, total, most, role)
        dst.write(block)


def _link_text(path: Path, st: os.stat_result) -> str:
    if not stat.S_ISLNK(st.st_mode):
        return ""
    try:
        return f" to {os.readlink(path)}"
    except OSError:
        return ""


def state_folder(path: Path) -> Path:
    """The state folder ``path``, made (each missing part 0700) if need be, and checked to be
    one that only this user (or root) can write into (module docstring); NotOurs if not."""
    path = make_folders(path, FOLDER_MODE)
    check_folder(path)  # one made by another process just now is checked like any other
    return path


def check_folder(path: Path) -> None:
    """NotOurs unless ``path`` is a folder that only this user or root can write into (a link
    to one counts when this user or root made the link: ``/var/lock`` -> ``/run/lock``)."""
    me = os.geteuid()
    try:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in (me, 0):
                raise _folder_refusal(path, f"is a symbolic link made by uid {st.st_uid}")
            st = os.stat(path)
    except FileNotFoundError:
        raise _folder_refusal(path, "does not exist (a link to nowhere?)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise _folder_refusal(path, f"is {what_is(st)}, not a folder")
    if st.st_uid not in (me, 0):
        raise _folder_refusal(path, f"belongs to uid {st.st_uid}, not to this user (uid {me}) "
                              "or root")
    problem = others_write(st)
    if problem:
        raise _folder_refusal(path, problem)


def others_write(st: os.stat_result) -> str | None:
    """How users other than this one (and root) may change what the names in the folder of
    ``st`` lead to, in words; None when they may not: world-writable only with the sticky
    bit, group-writable only for this user's own group (a user private group)."""
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & stat.S_IWOTH and not sticky:
        return f"is writable by every user (mode {st.st_mode & 0o7777:04o}) without the sticky bit"
    if st.st_mode & stat.S_IWGRP and not sticky and st.st_gid != os.getegid():
        return (f"is writable by group {st.st_gid} (mode {st.st_mode & 0o7777:04o}), which is "
                "not this user's own")
    return None


def folders_problem(path: Path) -> str | None:
    """Why another user could make a file written at ``path`` land elsewhere, in words: the
    first existing folder of its path that is a link another user made, or a folder another
    user owns or may write into (who could put a link in place of the next folder); None
    when there is none. Folders of the path that do not exist are not looked at: iolab
    makes them."""
    me = os.geteuid()
    for folder in reversed(Path(path).parents):  # from / down
        try:
            st = os.lstat(folder)
            if stat.S_ISLNK(st.st_mode):
                if st.st_uid not in (me, 0):
                    return (f"{folder}, a folder of its path, is a symbolic link made by uid "
                            f"{st.st_uid}, not by this user (uid {me}) or root; it is never "
                            "followed")
                st = os.stat(folder)
        except FileNotFoundError:
            return None  # this one and those below it are made by iolab
        except OSError as exc:
            return f"{folder}, a folder of its path, cannot be examined ({exc.strerror})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder}, a folder of its path, is {what_is(st)}"
        if st.st_uid not in (me, 0):
            return (f"{folder}, a folder of its path, belongs to uid {st.st_uid}, not to this "
                    f"user (uid {me}) or root, who could put a link in place of what lies in it")
        problem = others_write(st)
        if problem:
            return (f"{folder}, a folder of its path, {problem}: others could put a link in "
                    "place of what lies in it")
    return None


def _folder_refusal(path: Path, problem: str) -> NotOurs:
    return NotOurs(path, None, f"{problem}: others could put what they like at the names iolab "
                   "keeps its state under there",
                   allowed="a folder of this user's or root's that others cannot write into "
                           "(or the sticky bit set, as /tmp has it); e.g. chmod go-w, or "
                           "remove it and let iolab make it")


def check_output(path: Path, option: str, *, data_dir: Path | None = None,
                 renews: Iterable[Path] = ()) -> None:
    """Refuse (InputError naming ``option``) an output path whose folder is not one, that
    exists and is not a regular file (a link, a FIFO, a device, a folder), that is a file
    iolab keeps (:func:`kept_problem`: one inside ``data_dir``, the default data directory or
    the checkout's, or one git tracks in the checkout, such as a params file) unless it is
    one of ``renews`` (the files this output exists to renew), or one of whose folders
    another user could redirect (:func:`folders_problem`: a link another user made, another
    user's folder, one others may write into without the sticky bit), or that is another
    user's file (:func:`_check_output_owner`): an output is written only where nothing is,
    or over a regular file of the user's, and only where this user meant."""
    path = Path(path)
    folder = path.parent
    if not folder.is_dir():
        raise InputError(option, None, f"{path}: its folder {folder} "
                         f"{'is not a folder' if folder.exists() else 'does not exist'}")
    problem = folders_problem(path)
    if problem:
        raise NotOurs(option, None, f"{path}: {problem}; an output is never written where "
                      "another user decides where it lands", allowed="a path whose folders "
                      "are this user's or root's, and that others cannot write into (or that "
                      "have the sticky bit, as /tmp has), or - for standard output")
    problem = state_problem(path)
    if problem:
        raise NotOurs(option, None, f"{path} is {problem}; an output never replaces or adds a "
                      "file there", allowed=OUTPUT_PLACES)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise NotOurs(option, None, f"{path} is {what_is(st)}; an output never replaces or "
                      "writes into anything but a regular file", allowed=OUTPUT_ALLOWED)
    _check_output_owner(path, st, option)
    problem = kept_problem(path, data_dir, renews)
    if problem:
        raise NotOurs(option, None, f"{path} is {problem}; an output never replaces a file "
                      "iolab keeps", allowed=OUTPUT_PLACES)


def _check_output_owner(path: Path, st: os.stat_result, option: str) -> None:
    """NotOurs when the existing output ``path`` (of ``st``) is not this user's: the rename
    that writes an output would replace another user's file with one of this user's (root's,
    run as root), which the folder's write bit allows but the file's owner never agreed to.
    Root's file counts as another user's too, for a user who is not root."""
    me = os.geteuid()
    if st.st_uid != me:
        raise NotOurs(option, None, f"{path} belongs to uid {st.st_uid}, not to this user "
                      f"(uid {me}); an output never replaces another user's file",
                      allowed=OUTPUT_ALLOWED)


def kept_problem(path: Path, data_dir: Path | None = None,
                 renews: Iterable[Path] = ()) -> str | None:
    """What file iolab keeps the existing file ``path`` is, in words: one inside a data
    directory (``data_dir``, the default one, the checkout's ``data/``: a stored run's raw
    file, a host record, a cache, a derived table) or one git tracks in an iolab checkout (a
    params file, a notebook, the package's code); None when it is none of them, or is one
    of ``renews``."""
    from iolab import paths

    where = _real(path)
    if where in {_real(p) for p in renews}:
        return None
    problem = store_problem(path, data_dir)
    if problem:
        return problem
    for root in {paths.REPO_ROOT, paths.checkout_of(where.parent)} - {None}:
        if where.is_relative_to(root) and _tracked(root, where):
            return f"a file git tracks in the checkout {root}"
    return None


def store_problem(path: Path, data_dir: Path | None = None) -> str | None:
    """"inside the data directory D" when ``path`` (there or not) lies in a data directory:
    ``data_dir``, the default one or the checkout's ``data/``; None otherwise."""
    from iolab import paths

    where = _real(path)
    stores = [paths.default_data_dir(), paths.REPO_ROOT / "data"]
    if data_dir is not None:
        stores.insert(0, Path(data_dir))
    for store in stores:
        if where.is_relative_to(_real_folder(store)):
            return f"inside the data directory {_real_folder(store)}"
    return None


def state_problem(path: Path) -> str | None:
    """Where ``path`` (there or not) lies among the files that are git's or iolab's own state,
    in words: inside a ``.git`` folder (a checkout's config, index and hooks: a file added
    to its hooks is run by git), inside iolab's state folder (the scratch registry),
    inside ``$IOLAB_LOCK_DIR``, one of iolab's lock files in a system lock folder, or the
    book's build record; None when it is none of them. Unlike a data directory, which a new
    file may join, none of these takes a new file either."""
    from iolab import paths

    where = _real(path)
    if ".git" in where.parts:  # a worktree's .git is a file naming its git folder
        git = _git_folder(where)
        return f"git's own {git}" if git == where else f"inside git's own folder {git}"
    folders = [("iolab's state folder", paths.state_dir())]
    if os.environ.get("IOLAB_LOCK_DIR"):
        folders.append(("iolab's lock folder", paths.lock_dir()))
    for words, folder in folders:
        if where.is_relative_to(_real_folder(folder)):
            return f"inside {words} {_real_folder(folder)}"
    lock_folders = {_real_folder(f) for f in (paths.system_lock_dir(), *paths.HOST_LOCK_DIRS)}
    if where.parent in lock_folders and where.name.startswith("iolab-"):
        return f"one of iolab's lock files in {where.parent}"
    if where == _real(paths.BOOK_BUILD_RECORD):
        return "the book's build record"
    return None


OUTPUT_PLACES = ("a path outside the data directory, git's folders and iolab's state and lock "
                 "folders, of a file git does not track, or - for standard output")


def _git_folder(where: Path) -> Path:
    """``where``'s path up to its last ``.git``."""
    parts = where.parts
    return Path(*parts[:len(parts) - parts[::-1].index(".git")])


def _real(path: Path) -> Path:
    """``path`` with its folders' links resolved, its own name kept (never followed)."""
    path = Path(path)
    return Path(os.path.realpath(path.parent)) / path.name


def _real_folder(folder: Path) -> Path:
    """The folder ``folder`` names, every link on its path resolved, its own name too: a
    state, lock or data folder that is itself a link (``~/.local/state`` often is) holds
    what lies where it points, and an output's real path is compared with that."""
    return Path(os.path.realpath(folder))


def _tracked(root: Path, path: Path) -> bool:
    """Whether git tracks ``path`` in the checkout ``root``; False without git or outside a
    git checkout (an installed package has nothing git tracks)."""
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(root), "ls-files", "--error-unmatch", "--",
                               str(path.relative_to(root))], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def replace_output(path: Path, write: Callable[[Path], None], option: str,
                   suffix: str = ".tmp", *, data_dir: Path | None = None,
                   renews: Iterable[Path] = ()) -> None:
    """Write the output ``path`` whole or not at all: ``write`` fills a new temporary file
    beside it, which is then renamed over it (checked with :func:`check_output` before and
    again just before the rename). Its permissions are the umask's, as any file the user
    writes."""
    renews = tuple(renews)
    check_output(path, option, data_dir=data_dir, renews=renews)
    with temp_beside(path, mode=None, suffix=suffix) as (fd, tmp):
        os.close(fd)
        write(tmp)
        # something put there while it was written is not replaced
        check_output(path, option, data_dir=data_dir, renews=renews)
        os.replace(tmp, path)
