"""Checking a run's raw files against the sizes and sha256 sums its manifest recorded.

Hashing every raw byte on every ``tidy`` would make a warm table slow, so what was verified
is remembered in ``data/cache/verified/<experiment>/<environment>.json``: per file its size,
modification time (ns) and sha256. A file whose size and mtime match a remembered entry with
the recorded sha256 is not read again; any other file is hashed. The cache is a convenience:
deleting it only costs one re-hash, and a cache that cannot be written (a read-only data
directory) is not an error.

A raw file is read only when it is a regular file: a link, a FIFO or a device in its place
makes the run corrupt, never followed or opened (a FIFO would block the read for ever).

Anything but a regular file in the cache's place (a folder, a link, a FIFO) is neither read,
followed nor replaced (``iolab.safefiles``): the files are then hashed without the cache, and
the user told once; so is a cache in a folder others may write into. A cache file another
user may have written (not this user's or root's, or writable by group or others) is never
trusted: every file is hashed and the cache replaced. It is written 0644 in folders made
0755, whatever the umask. A cache iolab cannot have written (more than :data:`CACHE_MOST` bytes,
not JSON, nested deeper than it writes, of another shape) is ignored as if it were absent,
and replaced when the files are next verified; one too large to read is said once.

The cache trusts a file that was altered with its size and modification time kept (bit rot,
a careless copy). ``iolab verify`` therefore hashes every file (``rehash``), whatever the
cache says, and a file it finds altered leaves the cache, so that no later command takes it
for verified.

Responsible for: the per-file check and its cache. Not responsible for: deciding what a
corrupt run means for a command (``iolab.core.store`` and the callers).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from iolab.durable import write_atomic
from iolab.errors import ParseError, printable
from iolab.parsers import load_json
from iolab.safefiles import (CACHE_FOLDER_MODE, CACHE_MODE, NotOurs, TooLarge, check_regular,
                             folder_trust_problem, linked_folder, make_folders, open_regular,
                             read_regular, trust_problem, what_is)

CACHE_VERSION = 1
# bytes of the cache at most: an entry takes about a hundred per raw file, and the largest
# committed campaign's is a few MB
CACHE_MOST = 256 << 20
_ROLE = "the cache of verified files"
_TOLD: set[str] = set()  # caches whose place is taken, said once per process


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def sha256_regular(path: str | Path) -> str:
    """The sha256 of ``path`` when it is a regular file (NotOurs else; FileNotFoundError when
    nothing is there), opened without following a link or blocking on a FIFO."""
    fd = open_regular(Path(path), os.O_RDONLY, "a run's raw file")
    if fd is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    with os.fdopen(fd, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class Checker:
    """Verifies run folders, remembering verified files in ``cache_path``."""

    def __init__(self, cache_path: Path, rehash: bool = False):
        self.cache_path = Path(cache_path)
        self.rehash = rehash  # hash every file, trusting no remembered entry
        self.taken = False  # the cache's name holds something that is not ours to replace
        self._old = self._load()
        self._new: dict[str, list[Any]] = {}
        self._bad: set[str] = set()  # files found altered: never remembered as verified

    def _load(self) -> dict[str, list[Any]]:
        # <experiment>/, verified/, cache/
        folders = folder_trust_problem(self.cache_path.parent, 3)
        if folders:  # others could have written it: neither read nor replaced
            self.taken = True
            self._tell(f"{folders}: others could have written the cache of verified files "
                       f"{self.cache_path} there; every file is hashed without it (make the "
                       "folders this user's alone, e.g. chmod go-w, or remove them)")
            return {}
        try:
            st = check_regular(self.cache_path, _ROLE)
            problem = trust_problem(st) if st is not None else None
            if problem:  # another user may have vouched for altered files: replaced by save()
                self._tell(f"the cache of verified files {self.cache_path} {problem}; another "
                           "user's file is never trusted: every file is hashed, and the cache "
                           "replaced")
                return {}
            raw = read_regular(self.cache_path, _ROLE, CACHE_MOST, own=True)
            doc = load_json(raw.decode("utf-8"), str(self.cache_path)) if raw else None
        except NotOurs as exc:
            self.taken = True
            self._tell(f"{exc}; every file is hashed without it")
            return {}
        except TooLarge as exc:  # replaced by the next save, as a damaged cache is
            self._tell(f"{printable(exc.path)}: {exc.problem}; every file is hashed without it")
            return {}
        except (OSError, ValueError, ParseError):  # damaged: the files are hashed again
            return {}
        if not isinstance(doc, dict) or doc.get("version") != CACHE_VERSION:
            return {}
        files = doc.get("files")
        return files if isinstance(files, dict) else {}

    def _tell(self, line: str) -> None:
        """Say ``line`` about the cache once per process."""
        if str(self.cache_path) not in _TOLD:
            _TOLD.add(str(self.cache_path))
            print(f"iolab: {printable(line)}", file=sys.stderr)  # a path in it: one line

    def check(self, run_dir: Path, files: dict[str, dict[str, Any]]) -> str | None:
        """What is wrong with the run's raw files, or None when each matches its record."""
        # plain strings, not Path objects: a cold table checks tens of thousands of files
        folder = os.fspath(run_dir)
        run_name = os.path.basename(folder)
        for name, record in sorted(files.items()):
            path = os.path.join(folder, name)
            key = f"{run_name}/{name}"
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return f"{name} is missing (run.json records it)"
            except OSError as exc:
                return f"{name} cannot be read ({exc.strerror})"
            if not stat.S_ISREG(st.st_mode):  # never followed, never a read that blocks
                self._bad.add(key)
                return f"{name} is {what_is(st)}, not the regular file run.json records"
            want_size, want_sha = record.get("bytes"), record.get("sha256")
            if want_size is not None and st.st_size != want_size:
                self._bad.add(key)
                return (f"{name} has {st.st_size} bytes, run.json records {want_size} "
                        f"(truncated or altered)")
            stamp = [st.st_size, st.st_mtime_ns, want_sha]
            if not self.rehash and self._old.get(key) == stamp:
                self._new[key] = stamp
                continue
            try:
                sha = sha256_regular(path)
            except NotOurs as exc:  # swapped in since the lstat
                self._bad.add(key)
                return f"{name} {exc.problem}"
            except OSError as exc:
                return f"{name} cannot be read ({exc.strerror})"
            if want_sha is not None and sha != want_sha:
                self._bad.add(key)
                return f"{name} differs from what run.json records (sha256 {sha[:12]}..., " \
                       f"recorded {want_sha[:12]}...): altered"
            self._new[key] = stamp
        return None

    def save(self) -> None:
        """Add what was verified now to the cache, and drop what was found altered; written
        only when that changes it, so a command that finds nothing new leaves the data
        directory as it was. Other entries stay: an outdated one matches no file's size and
        mtime."""
        bad = self._bad & set(self._old)
        if self.taken or (not bad and all(self._old.get(key) == stamp
                                          for key, stamp in self._new.items())):
            return
        kept = {k: v for k, v in self._old.items() if k not in self._bad}
        if linked_folder(self.cache_path.parent, 3) is not None:  # cache/, verified/, <exp>/
            return  # a link is never followed: the files are verified again next time
        try:
            make_folders(self.cache_path.parent, CACHE_FOLDER_MODE)  # not the umask's 0777
            # through a temporary file only this call made: a link put beside it is not
            # followed; 0644 whatever the umask, so that no one else may rewrite it
            write_atomic(self.cache_path, json.dumps({"version": CACHE_VERSION,
                                                      "files": {**kept, **self._new}}).encode(),
                         mode=CACHE_MODE)
        except OSError:
            pass
