"""``iolab migrate``: rewrite version-1 run manifests as version 2, renaming their folders.

Version-1 runs are read without migrating (through the experiment), so migrating is never
required; it makes the store uniform again: every folder named by its version-2 run id, every
manifest carrying its identity. For each version-1 run (complete or failed) the migration

1. copies the run folder to ``runs/.tmp-<new id>-<pid>/`` (raw files byte for byte, checked
   against the hashes in the manifest), keeps the old manifest there as ``run.v1.json``; a
   link, a FIFO or a device in the folder is never followed or read: the migration stops
   there in one line, the run left as it is and nothing of its copy kept,
2. writes the version-2 manifest (``migrated_from`` says from which id and when),
3. renames the copy into place (the atomic step), then removes the old folder.

A crash leaves either the old folder alone (the copy is a leftover that the next campaign
moves to ``partial/``), or both folders, of which the store reads only the new one; running
``iolab migrate --apply`` again finishes the job. Without ``--apply`` nothing is written:
the plan of what would happen is shown (a dry run). Running it twice changes nothing.

Responsible for: the migration plan and its crash-safe execution. Not responsible for: how a
version-1 manifest maps to version 2 (``Experiment.upgrade_v1``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from iolab.core import manifest as mf
from iolab.core.manifest import RunManifest
from iolab.core.integrity import sha256_regular
from iolab.core.store import DEPTH, TMP_PREFIX, Store
from iolab.durable import fsync_dir
from iolab.errors import IolabError, printable
from iolab.safefiles import NotOurs, copy_folder, refuse_linked

V1_COPY = "run.v1.json"


@dataclass
class Migration:
    source: Path                 # the version-1 folder
    target: Path                 # where the version-2 folder goes
    manifest: RunManifest        # the version-2 manifest (migrated_at not yet set)
    finish_only: bool = False    # the target exists already: only the old folder is left
    problem: str | None = None   # why this run is not migrated (it is left as it is)

    def describe(self) -> str:
        """One line: a run folder's name is whoever made it's (a line break too), escaped."""
        where = printable(f"{self.source.relative_to(self.source.parents[2])} -> "
                          f"{self.target.name}")
        if self.problem:
            return f"leave {where} as it is: {self.problem}"
        what = "remove the old copy of" if self.finish_only else "migrate"
        note = self.manifest.extra.get("v1_mismatch")
        return f"{what} {where}" + (f" (does not match today's plan: {note})" if note else "")


def plan(store: Store) -> list[Migration]:
    """Every version-1 run of the store and where it goes; reads only.

    Two old runs that map to one new id (they differed only in what is no longer part of a
    run's identity) cannot both move there: the first does, the other is left as it is with
    a ``problem``. A target that exists already counts as an earlier migration of this very
    folder only when its manifest says it was migrated from it and every file matches.
    """
    out: list[Migration] = []
    claimed: dict[Path, Path] = {}
    host = store.read_host() or {}
    for folder in store.run_folders() + store.failed_runs():
        try:
            doc = mf.load_json(folder / mf.FILE)
        except mf.UnreadableManifest:
            continue  # incomplete runs are the next campaign's to quarantine, not ours
        if mf.check_version(doc, folder / mf.FILE) != 1:
            continue
        try:
            mf.check_v1(doc, folder / mf.FILE)
        except mf.DamagedManifest:
            continue  # corrupt: 'iolab verify' names it, and its quarantine sets it aside
        new = store.upgrade(doc, folder / mf.FILE, host)
        failed = folder.parent == store.failed_dir
        target = folder.parent / (f"{new.run_id}@{folder.name.split('@', 1)[1]}" if failed
                                  else new.run_id)
        m = Migration(folder, target, new)
        if target in claimed:
            m.problem = f"{claimed[target].name} moves to the same id (the same run, measured twice)"
        elif target.exists():
            m.finish_only = _copy_of(target, doc)
            if not m.finish_only:
                m.problem = f"{target.name} exists and is not a migrated copy of this run"
        claimed.setdefault(target, folder)
        out.append(m)
    return out


def _copy_of(target: Path, doc: dict) -> bool:
    """Whether ``target`` is what migrating the run of ``doc`` wrote."""
    try:
        copy = mf.load_json(target / mf.FILE)
    except mf.UnreadableManifest:
        return False
    files = doc.get("files", {})
    return ((copy.get("migrated_from") or {}).get("run_id") == doc["run_id"]
            and copy.get("files") == files
            and all(_sha256(target / n) == f["sha256"] for n, f in files.items()))


def _sha256(path: Path) -> str | None:
    """The sha256 of the regular file ``path``; None when nothing, or something else (a
    link, a FIFO, a device: never followed or read), is there."""
    try:
        return sha256_regular(path)
    except (FileNotFoundError, NotOurs):
        return None


def _verify(folder: Path, manifest: RunManifest) -> None:
    for name, meta in manifest.files.items():
        path = folder / name
        if _sha256(path) != meta["sha256"]:
            raise IolabError(f"{path}: missing or changed since the run was stored (its sha256 is "
                             f"in {folder / mf.FILE}); not migrating this run")


def apply(migrations: list[Migration], log=print) -> int:
    """Carry out the migrations; returns how many folders were migrated or finished. NotOurs,
    before anything is changed, when runs/ or failed/, or a folder above them up to raw/, is a
    link: the copies would be written where it points."""
    for folder in sorted({m.source.parent for m in migrations}):
        refuse_linked(folder, "the stored runs", DEPTH)
    done = 0
    for m in migrations:
        if m.problem:
            log(f"left {m.source}: {m.problem}")
            continue
        if m.finish_only:
            shutil.rmtree(m.source)
            log(f"removed {m.source}, already migrated to {m.target.name}")
            done += 1
            continue
        _verify(m.source, m.manifest)
        tmp = m.source.parent / f"{TMP_PREFIX}{m.manifest.run_id}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        # never through a link: one to a root-only file would copy its content into the data
        # directory, one to /dev/zero fill the disk (NotOurs names it; the run is left as it is)
        copy_folder(m.source, tmp, f"the version-1 run folder {m.source}",
                    temp_prefix=TMP_PREFIX)  # swept as its own are, should it be killed
        os.replace(tmp / mf.FILE, tmp / V1_COPY)
        m.manifest.migrated_from = {**(m.manifest.migrated_from or {}),
                                    "migrated_at": datetime.now(timezone.utc).isoformat(
                                        timespec="seconds")}
        mf.write(tmp / mf.FILE, m.manifest)
        fsync_dir(tmp)
        os.rename(tmp, m.target)
        fsync_dir(m.target.parent)
        shutil.rmtree(m.source)
        log(f"migrated {m.source.name} -> {m.target.name}")
        done += 1
    return done
