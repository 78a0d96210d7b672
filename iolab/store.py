"""The run store: ``data/raw/<experiment>/<environment>/``.

Layout::

    host.json                 inventory of the host the campaign ran on (with its fingerprint)
    runs/<run-id>/run.json    manifest: params, argv, times, exit code, knob states, file hashes
    runs/<run-id>/stdout, stderr, <tool and collector files>
    failed/<run-id>@<time>/   runs whose tool failed (kept for inspection, retried on resume)
    partial/<name>/           leftovers of a process that was killed mid-run (never counted)

A run is written into ``runs/.tmp-<run-id>-<pid>/`` and renamed into place only once its
manifest is written, so a killed run never looks complete. Resume skips complete runs only.

Responsible for: layout, atomic commit, listing and checking stored runs, the host record.
Not responsible for: running tools, parsing their output, or knob handling.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .durable import fsync_dir, write_json_atomic
from .errors import InputError, IolabError

SCHEMA_VERSION = 1
TMP_PREFIX = ".tmp-"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _stamp() -> str:
    """A folder-name timestamp fine enough that two failures of one run never collide."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class StoredRun:
    path: Path
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]


class Store:
    def __init__(self, data_dir: Path, experiment: str, environment: str):
        self.data_dir = Path(data_dir)
        self.experiment = experiment
        self.environment = environment
        self.root = self.data_dir / "raw" / experiment / environment
        self.runs_dir = self.root / "runs"
        self.failed_dir = self.root / "failed"
        self.partial_dir = self.root / "partial"
        self.host_path = self.root / "host.json"

    # -- host record -------------------------------------------------------------------
    def read_host(self) -> dict[str, Any] | None:
        if not self.host_path.exists():
            return None
        try:
            return json.loads(self.host_path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(self.host_path, None, f"not valid JSON ({exc}); restore it from git "
                             "or move the campaign away") from exc

    def check_or_record_host(self, inventory: dict[str, Any], fingerprint: str,
                             diff: list[str], allow_change: bool = False) -> None:
        """Record the host on the first run; refuse a different host afterwards.

        ``diff`` lists the fingerprint fields that differ from the stored host (computed by
        the caller, which knows the inventory format).
        """
        stored = self.read_host()
        if stored is None:
            self.root.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.host_path, {**inventory, "fingerprint": fingerprint})
            return
        if stored.get("fingerprint") == fingerprint:
            return
        if not allow_change:
            raise IolabError(
                f"{self.host_path}: this campaign was recorded on a host with fingerprint "
                f"{stored.get('fingerprint')}, but this host has {fingerprint} "
                f"(differs in: {', '.join(diff) or 'unknown fields'}). Runs from different hosts "
                f"are not mixed silently: use another --env name for this host, or pass "
                f"--allow-host-change to add to this campaign anyway.")
        history = stored.get("other_hosts", [])
        if fingerprint not in [h.get("fingerprint") for h in history]:
            history.append({**{k: v for k, v in inventory.items() if k != "other_hosts"},
                            "fingerprint": fingerprint})
            write_json_atomic(self.host_path, {**stored, "other_hosts": history})

    # -- listing -------------------------------------------------------------------------
    def _load_manifest(self, run_dir: Path) -> dict[str, Any] | None:
        path = run_dir / "run.json"
        try:
            manifest = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if manifest.get("run_id") != run_dir.name or manifest.get("status") != "ok":
            return None
        return manifest

    def complete_runs(self) -> list[StoredRun]:
        if not self.runs_dir.exists():
            return []
        out = []
        for run_dir in sorted(self.runs_dir.iterdir()):
            if run_dir.name.startswith(".") or not run_dir.is_dir():
                continue
            manifest = self._load_manifest(run_dir)
            if manifest is not None:
                out.append(StoredRun(run_dir, manifest))
        return out

    def complete_ids(self) -> set[str]:
        return {r.run_id for r in self.complete_runs()}

    def incomplete_runs(self) -> list[Path]:
        """Folders under runs/ that look like runs but have no valid manifest."""
        if not self.runs_dir.exists():
            return []
        return [d for d in sorted(self.runs_dir.iterdir())
                if d.is_dir() and not d.name.startswith(".") and self._load_manifest(d) is None]

    def stale_tmp_dirs(self) -> list[Path]:
        if not self.runs_dir.exists():
            return []
        out = []
        for d in sorted(self.runs_dir.glob(f"{TMP_PREFIX}*")):
            try:
                pid = int(d.name.rsplit("-", 1)[1])
            except (IndexError, ValueError):
                pid = -1
            if pid <= 0 or not _pid_alive(pid) or pid == os.getpid():
                out.append(d)
        return out

    def failed_runs(self) -> list[Path]:
        return sorted(self.failed_dir.glob("*")) if self.failed_dir.exists() else []

    def quarantine(self) -> list[str]:
        """Move leftovers of killed runs and half-written runs to ``partial/``; never delete.

        Returns one line per move, for the user.
        """
        messages = []
        for d in self.stale_tmp_dirs() + self.incomplete_runs():
            self.partial_dir.mkdir(parents=True, exist_ok=True)
            dest = self.partial_dir / f"{d.name.lstrip('.')}@{_stamp()}"
            os.rename(d, dest)
            kind = "interrupted run" if d.name.startswith(TMP_PREFIX) else "half-written run (no valid run.json)"
            messages.append(f"moved {kind} {d} to {dest}; it will be run again")
        return messages

    # -- writing -------------------------------------------------------------------------
    def begin(self, run_id: str) -> Path:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.runs_dir / f"{TMP_PREFIX}{run_id}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        return tmp

    def _finish_manifest(self, tmp: Path, manifest: dict[str, Any]) -> None:
        files = {}
        for f in sorted(tmp.iterdir()):
            if f.is_file() and f.name != "run.json":
                with open(f, "rb+") as fh:
                    os.fsync(fh.fileno())
                files[f.name] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
        manifest = {**manifest, "schema_version": SCHEMA_VERSION, "files": files}
        write_json_atomic(tmp / "run.json", manifest)
        fsync_dir(tmp)

    def commit(self, tmp: Path, manifest: dict[str, Any]) -> Path:
        """Write the manifest, then rename the folder into place (the atomic step)."""
        run_id = manifest["run_id"]
        final = self.runs_dir / run_id
        if final.exists():
            raise IolabError(f"{final}: a run with this id is already stored; refusing to overwrite it")
        self._finish_manifest(tmp, {**manifest, "status": "ok"})
        os.rename(tmp, final)
        fsync_dir(self.runs_dir)
        return final

    def commit_failed(self, tmp: Path, manifest: dict[str, Any]) -> Path:
        self.failed_dir.mkdir(parents=True, exist_ok=True)
        self._finish_manifest(tmp, {**manifest, "status": "failed"})
        dest = self.failed_dir / f"{manifest['run_id']}@{_stamp()}"
        os.rename(tmp, dest)
        return dest

    def discard(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)


def campaigns(data_dir: Path) -> list[tuple[str, str]]:
    """(experiment, environment) pairs that have a folder under ``data/raw``."""
    raw = Path(data_dir) / "raw"
    if not raw.exists():
        return []
    return sorted((e.name, v.name) for e in raw.iterdir() if e.is_dir()
                  for v in e.iterdir() if v.is_dir())
