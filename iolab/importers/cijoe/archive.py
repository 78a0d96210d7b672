"""Opening an AiSIO CIJOE archive and indexing its commands.

The archive is a ``.tar.gz`` (or ``.tar``, ``.tar.bz2``, ``.tar.xz``) or its extracted
folder, read and never extracted to disk; its files are keyed by their path below the CIJOE
output root (the folder holding the ``NNN_<step>/cmd_XX.state`` files). The index is every
command of every step, in order, each with its ``.state`` and ``.output`` and classified.

An archive comes from elsewhere, so it is read as data and nothing more:

* **Links are never followed.** A symbolic or hard link member of a tar, and a symbolic
  link (to a file or a folder) or a file with more than one name (a hard link) in a folder,
  is skipped, with a note naming it (and where a symbolic link points); so is a FIFO, a
  device or a socket (never opened: a FIFO would block). A file that is not read is as
  missing: a benchmark whose output is a link is stored as failed.
* **Only what the import uses is kept** (:data:`KEPT`: the commands' records and outputs,
  CIJOE's ``config.orig`` and AiSIO's result files under ``artifacts/``); every other member
  (CIJOE's ``report.html``, ...) is streamed past unread (a tar, decompressed in blocks) or
  hashed in blocks (a folder's file, for the folder's digest).
* **The bytes read are bounded** (:data:`MAX_BYTES`, 1 GiB, forty times the largest AiSIO
  archive): the decompressed stream of a tar, and the kept files (of a tar or a folder) by
  the sizes they unpack to, checked before each is read (a sparse member's holes take no room
  in the stream). An archive that would go past it is refused, naming the member and the
  limit, before more is read. Kept files are read in blocks.
* **So are its members** (:data:`MAX_MEMBERS`, 100,000, about thirty-six times the 2,780 of
  the largest AiSIO archive): each costs memory however empty it is (a folder's file name and
  digest, a link's note), so an archive with more is refused, naming the limit, before more
  is read; a tar's members are streamed (tarfile keeps the header of every member it read
  unless told not to). A folder's folders are read at most :data:`MAX_DEPTH` levels deep
  (Python's walk recurses once a level: 1,100 levels ended the import in a RecursionError).
* **Each member it reads is there once.** A tar holding one of them twice (appended to, a
  link and a file of one name) is refused, naming the member: which copy is the command's
  cannot be told.

Responsible for: reading the archive's files, their times and its sha256; finding the CIJOE
output root; indexing and classifying the commands in order (a ``cat`` reads a capture only
once the command that started it was seen).
Not responsible for: what kind one command line is (:mod:`iolab.importers.cijoe.kinds`),
reading CIJOE's ``.state`` records (:mod:`iolab.parsers.cijoe_state`), or grouping the
commands into repetitions (:mod:`iolab.importers.cijoe.pairing`).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import lzma
import os
import re
import stat
import tarfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from iolab.core.store import sha256_file
from iolab.errors import InputError, ParseError, excerpt
from iolab.paths import resolve
from iolab.safefiles import what_is
from iolab.importers.cijoe.kinds import (CPUFREQ_START, DCGM_START, OTHER, classify_argv,
                                         command_words, program_argv)
from iolab.importers.cijoe.report import ImportReport
from iolab.parsers.cijoe_state import parse_cijoe_state

# digits in ASCII ([0-9]: \d takes any script's) and bounded: CIJOE numbers its steps with
# three digits and its commands from 1
_STATE = re.compile(r"^(?P<root>(?:.*/)?)(?P<step>[0-9]{3}_[^/]+)/cmd_(?P<n>[0-9]{1,9})"
                    r"\.state$")
_DMON_OUTPUT = re.compile(r">\s*(\S+?)[\"']?\s*$")
ALLOWED = "a .tar.gz archive or its extracted folder"


@dataclass
class Command:
    """One CIJOE command: its ``.state`` (parsed and raw) and its ``.output``."""

    step: str
    number: int
    state: dict[str, Any]
    state_bytes: bytes
    output_bytes: bytes
    kind: str = OTHER
    # what params._command_params read from a benchmark's command line (and output), read once
    params: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return f"{self.step}/cmd_{self.number:02d}"

    @property
    def cmd(self) -> str:
        return str(self.state.get("cmd", ""))

    @cached_property
    def argv(self) -> list[str]:
        return command_words(self.cmd)


# What the import reads of an archive (by a member's path, with its root): each command's
# record and output, CIJOE's merged config, and AiSIO's result files and p2p figure
KEPT = re.compile(r"(?:^|/)(?:cmd_[0-9]{1,9}\.(?:state|output)|config\.orig)$"
                  r"|(?:^|/)artifacts/(?:.*\.out|cuda-sample-p2p-bandwidth)$")
MAX_BYTES = 1 << 30  # read out of one archive: a tar's decompressed stream, a folder's kept files
MAX_MEMBERS = 100_000  # members of a tar, or files and folders of a folder
MAX_DEPTH = 64  # levels of folders in a folder read (CIJOE's output has three or four)
CHUNK = 1 << 20


@dataclass
class Archive:
    name: str
    sha256: str
    files: dict[str, bytes]  # path relative to the CIJOE output root: the KEPT files only
    mtimes: dict[str, float]
    skipped: list[str] = field(default_factory=list)  # links and special files, not read


class _TooBig(Exception):
    """The archive's bytes went past MAX_BYTES (not an OSError: nothing may take it for an
    unreadable file)."""


class _TooMany(Exception):
    """The archive has more than MAX_MEMBERS members."""


class _TooDeep(Exception):
    """A folder read holds folders more than MAX_DEPTH levels deep (args: the first one)."""


class _Bounded:
    """A stream that raises _TooBig once more than ``limit`` bytes were read from it;
    ``member`` is the tar member being read or passed over, for the refusal."""

    def __init__(self, stream: Any, limit: int):
        self.stream, self.limit, self.count, self.member = stream, limit, 0, None

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size if size is not None and size >= 0 else CHUNK)
        self.count += len(data)
        if self.count > self.limit:
            raise _TooBig(self.member)
        return data


def open_archive(path: Path) -> Archive:
    """The archive's kept regular files, keyed by their path below the CIJOE output root."""
    path = resolve(path, "archive", allowed=ALLOWED)
    try:
        if path.is_dir():
            files, mtimes, skipped, sha = _read_folder(path)
        elif path.is_file():
            files, mtimes, skipped = _read_tar(path)
            sha = sha256_file(path)
        elif path.exists():  # a FIFO or a device: never read (a FIFO would block for ever)
            raise InputError(path, None, "is neither a regular file nor a folder", allowed=ALLOWED)
        else:
            raise InputError(path, None, "no such archive or folder")
    except _TooBig as exc:
        where = f"member {exc.args[0]}" if exc.args[0] else "its first member"
        raise InputError(path, None, f"reading {where} would take more than {MAX_BYTES:,} bytes "
                         "out of the archive, the most an import reads",
                         allowed=f"archives of at most {MAX_BYTES:,} bytes decompressed") from None
    except _TooMany:
        raise InputError(path, None, f"holds more than {MAX_MEMBERS:,} members (files, folders "
                         "and links), the most an import reads",
                         allowed=f"archives of at most {MAX_MEMBERS:,} members") from None
    except _TooDeep as exc:
        raise InputError(path, None, f"holds the folder {exc.args[0]}, more than {MAX_DEPTH} "
                         "levels deep, deeper than an import reads",
                         allowed=f"folders at most {MAX_DEPTH} levels deep") from None
    roots = {m.group("root") for m in map(_STATE.match, files) if m}
    if len(roots) != 1:
        raise InputError(path, None, "not a CIJOE output: expected NNN_<step>/cmd_XX.state files "
                         f"under one root folder, found {len(roots)} roots {sorted(roots)}")
    root = roots.pop()
    return Archive(path.name, sha,
                   {n[len(root):]: b for n, b in files.items() if n.startswith(root)},
                    {n[len(root):]: t for n, t in mtimes.items() if n.startswith(root)},
                    skipped)


def _read_tar(path: Path) -> tuple[dict[str, bytes], dict[str, float], list[str]]:
    """A tar's kept members (read as a stream, in one pass, bounded), their times, and what
    was skipped."""
    files, mtimes, skipped = {}, {}, []
    seen: set[str] = set()  # the names the import reads: no more than it keeps
    kept = 0
    try:
        with open(path, "rb") as raw, _decompressed(raw) as plain:
            stream = _Bounded(plain, MAX_BYTES)
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for count, member in enumerate(tar, start=1):
                    # a stream is read once: the headers tarfile keeps of the members it
                    # passed would grow with the member count
                    tar.members = []
                    if count > MAX_MEMBERS:
                        raise _TooMany()
                    stream.member = member.name
                    if not member.isdir() and KEPT.search(member.name):
                        _once(path, member.name, seen)  # one the import reads
                    if member.issym() or member.islnk():
                        skipped.append(f"{member.name}: a {'symbolic' if member.issym() else 'hard'}"
                                       f" link to {member.linkname} in the archive; not read "
                                       "(links are never followed)")
                    elif member.isfile() and KEPT.search(member.name):
                        # bounded by the size it unpacks to, before a byte is read: a sparse
                        # member's holes take no room in the stream but fill memory as zeros
                        if member.size > MAX_BYTES - kept:
                            raise _TooBig(member.name)
                        files[member.name] = _read_member(tar.extractfile(member))
                        kept += len(files[member.name])
                        mtimes[member.name] = float(member.mtime)
                    elif not (member.isfile() or member.isdir()):
                        skipped.append(f"{member.name}: a special file (a device or a FIFO) in "
                                       "the archive; not read")
    except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise InputError(path, None, f"not a readable tar archive ({exc})") from None
    return files, mtimes, skipped


def _once(path: Path, name: str, seen: set[str]) -> None:
    """``name`` (of a member the import would read) added to ``seen``; InputError when it is
    there already: a tar may hold one path twice (appended to), and which copy the import
    should read cannot be told (the later one had silently replaced the first)."""
    if name in seen:
        raise InputError(path, None, f"member {excerpt(name)} is given twice; which copy is "
                         "the command's cannot be told", allowed="archives holding each file "
                         "once")
    seen.add(name)


def _read_member(fh: Any) -> bytes:
    """A tar member's bytes, read in blocks (its size was bounded before)."""
    parts = []
    while block := fh.read(CHUNK):
        parts.append(block)
    return b"".join(parts)


def _decompressed(raw: Any) -> Any:
    """``raw`` (an open file) decompressed as its first bytes say: gzip, bzip2, xz or none."""
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if magic.startswith(b"BZh"):
        return bz2.BZ2File(raw, mode="rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw, mode="rb")
    return contextlib.nullcontext(raw)


def _read_folder(path: Path) -> tuple[dict[str, bytes], dict[str, float], list[str], str]:
    """A folder's kept regular files (none through a link), their times, what was skipped,
    and the folder's digest (of every regular file's name and sha256, hashed in blocks)."""
    files, mtimes, skipped, sums = {}, {}, [], {}
    kept = count = 0
    for folder, dirs, names in os.walk(path):  # never into a linked folder
        count += len(dirs) + len(names)
        if count > MAX_MEMBERS:
            raise _TooMany()
        here = Path(folder)
        if len(here.relative_to(path).parts) >= MAX_DEPTH and dirs:  # before walk recurses
            raise _TooDeep((here / sorted(dirs)[0]).relative_to(path).as_posix())
        for name in sorted(dirs):
            if (here / name).is_symlink():
                rel = (here / name).relative_to(path).as_posix()
                skipped.append(f"{rel}: a symbolic link to {os.readlink(here / name)} in the "
                               "folder; not followed")
        for name in sorted(names):
            rel = (here / name).relative_to(path).as_posix()
            fd = _open_plain(here / name, rel, skipped)
            if fd is None:
                continue
            with os.fdopen(fd, "rb") as fh:
                keep = bool(KEPT.search(rel))
                if keep and os.fstat(fh.fileno()).st_size > MAX_BYTES - kept:
                    raise _TooBig(rel)  # before a byte of it is read
                sums[rel], data = _hash(fh, keep, MAX_BYTES - kept, rel)
                mtimes[rel] = os.fstat(fh.fileno()).st_mtime
            if keep:
                files[rel] = data
                kept += len(data)
    digest = hashlib.sha256()
    for rel in sorted(sums):
        # a name that is not UTF-8 (bytes kept as surrogates) is hashed as its bytes
        digest.update(f"{rel}\0{sums[rel]}\n".encode("utf-8", "surrogateescape"))
    return files, {k: v for k, v in mtimes.items() if k in files}, skipped, digest.hexdigest()


def _open_plain(path: Path, rel: str, skipped: list[str]) -> int | None:
    """``path`` opened for reading when it is a regular file; else None, noted in
    ``skipped`` (a link is never followed, a FIFO or a device never opened)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        skipped.append(f"{rel}: a symbolic link to {os.readlink(path)} in the folder; not "
                       "followed")
        return None
    if not stat.S_ISREG(st.st_mode):
        skipped.append(f"{rel}: {what_is(st)} in the folder; not read")
        return None
    if st.st_nlink > 1:
        skipped.append(_hard_link(rel, st.st_nlink))
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # swapped in since the lstat
        os.close(fd)
        skipped.append(f"{rel}: not a regular file when opened; not read" if
                       not stat.S_ISREG(st.st_mode) else _hard_link(rel, st.st_nlink))
        return None
    return fd


def _hard_link(rel: str, names: int) -> str:
    # another name of a file elsewhere (a root-only file, say), as a tar's hard link member is
    return (f"{rel}: a file with {names} names (hard links) in the folder, so maybe one "
            "from elsewhere; not read (links are never followed)")


def _hash(fh: Any, keep: bool, room: int, rel: str) -> tuple[str, bytes]:
    """The sha256 of an open file, read in blocks, and its bytes when ``keep`` (at most
    ``room`` of them: _TooBig past it)."""
    h, parts, size = hashlib.sha256(), [], 0
    while block := fh.read(CHUNK):
        h.update(block)
        if keep:
            size += len(block)
            if size > room:
                raise _TooBig(rel)
            parts.append(block)
    return h.hexdigest(), b"".join(parts)


def index_commands(arc: Archive, report: ImportReport) -> list[Command]:
    """Every command of every step, in order, classified."""
    commands = []
    for path in arc.files:
        match = _STATE.match(path)
        if not match:
            continue
        state = parse_cijoe_state(arc.files[path], f"{arc.name}:{path}")
        if "cmd" not in state:
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without 'cmd'")
        if not all(isinstance(state.get(k), (int, float)) for k in ("begin", "end")):
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without numeric 'begin' and 'end'")
        output = path[:-len(".state")] + ".output"
        if output not in arc.files:
            report.notes.append(f"{path}: no .output next to it; treated as empty")
        commands.append(Command(match.group("step"), int(match.group("n")), state,
                                arc.files[path], arc.files.get(output, b"")))
    commands.sort(key=lambda c: (c.step, c.number))
    _classify_all(commands)
    counts = Counter(c.kind for c in commands)
    report.notes.append(f"indexed {len(commands)} commands in "
                        f"{len({c.step for c in commands})} steps: "
                        + ", ".join(f"{n} {kind}" for kind, n in counts.most_common()))
    killed = [c for c in commands if c.state.get("err") == -15 and c.cmd.startswith("pkill")]
    if killed:
        report.notes.append(f"{len(killed)} 'pkill -f …' commands ended with err -15: pkill "
                            f"matched the shell CIJOE ran it in, so anything after it on the same "
                            f"line (AiSIO's 'sleep 0.2' after 'pkill -f dcgmi') never ran")
    return commands


def _classify_all(commands: list[Command]) -> None:
    """Classify in order: a capture's file is known once the command starting it was seen."""
    capture_files: dict[str, str] = {}
    for command in commands:
        command.kind = classify_argv(command.cmd, command.argv, capture_files)
        if command.kind == CPUFREQ_START and len(program_argv(command.argv)) > 1:
            capture_files[program_argv(command.argv)[1]] = CPUFREQ_START
        elif command.kind == DCGM_START:
            target = _DMON_OUTPUT.search(command.cmd)
            if target:
                capture_files[target.group(1)] = DCGM_START
