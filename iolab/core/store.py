"""The run store: ``data/raw/<experiment>/<environment>/``.

Layout::

    host.json                 inventory of the host the campaign ran on (with its fingerprint)
    campaign-log.jsonl        one line when each 'run' starts and ends (overrides, filters, outcome)
    runs/<run-id>/run.json    manifest (``iolab.core.manifest``): identity, argv, times, exit
                              code, knob states, file hashes
    runs/<run-id>/stdout, stderr, <tool and collector files>
    failed/<run-id>@<time>/   runs whose tool failed (kept for inspection, retried on resume)
    partial/<name>/           leftovers of a process that was killed mid-run (never counted)

A run is written into ``runs/.tmp-<run-id>-<pid>/`` and renamed into place only once its
manifest is written, so a killed run never looks complete. Resume skips complete runs only.

A run folder is named by its run id. Folders of version-1 manifests keep their old id as
their name until ``iolab migrate`` renames them; they are read through the ``upgrade``
function the caller gives, ``upgrade(doc, path, host)`` (the experiment knows how; ``host``
is this campaign's host record).

The host record, the campaign log and each run's ``run.json`` are read, and the log appended
to, only when they are regular files (:mod:`iolab.safefiles`): a link there is not followed,
a FIFO never blocks a command (in an open that Ctrl-C cannot end), a device is never opened.
Such a thing in place of a run's ``run.json`` (or of one of its raw files) makes that run
corrupt; in place of the host record or the log, the command is refused in one line. Nothing
is written through a folder that is a link: the experiment's, the campaign's, or one of its
``runs/``, ``failed/`` and ``partial/`` (refused in one line, never followed).
Each is read up to a bound (:data:`HOST_MOST`, :data:`LOG_MOST`,
:data:`iolab.core.manifest.MANIFEST_MOST`) and nested no deeper than iolab writes: a larger
or deeper one is treated as the damaged file it is, in one line, never read whole.

Responsible for: layout, atomic commit, listing and checking stored runs, the host record.
Not responsible for: running tools, parsing their output, knob handling, or the manifest's
fields (``iolab.core.manifest``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from contextlib import contextmanager
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from iolab.core import integrity
from iolab.core import manifest as mf
from iolab.core.integrity import sha256_file
from iolab.core.manifest import RunManifest, UnreadableManifest, Upgrade
from iolab.durable import sync_filesystem, write_json_atomic
from iolab.errors import InputError, IolabError, ParseError, excerpt, printable
from iolab.host.record import read_host_record
from iolab.parsers import load_json
from iolab.paths import check_name, usable_name
from iolab.safefiles import append_regular, own_folder, read_regular, refuse_linked

TMP_PREFIX = ".tmp-"
LOG = "campaign-log.jsonl"
_LOG_ROLE = "the campaign log"
# bytes of a campaign log at most: a line per run and event, a few hundred bytes each (the
# largest committed log is about 100 kB)
LOG_MOST = 256 << 20
_ROOT_ROLE = "a campaign (raw/<experiment>/<environment>/)"
# runs/, failed/, partial/ (and jobs/, extras/), the campaign's folder, the experiment's and
# raw/: a link at any of them would take what iolab writes out of the data directory (raw/
# linked into another user's folder put a campaign where that user may replace its runs)
DEPTH = 4

# The campaign log's events: {event: {field: its JSON types}}, besides "event" and "at" (a
# time) that every line has. Store.log refuses a field not named here, so the published
# schema (iolab.schemas) cannot fall behind what is written.
LOG_EVENTS: dict[str, dict[str, tuple[str, ...]]] = {
    "start": {"pid": ("integer",), "owner": ("string",), "params": ("array",),
              "overrides": ("object",), "where": ("object",), "limit": ("integer", "null"),
              "selected": ("integer",), "most": ("integer",),
              "repetitions": ("integer", "object"), "order": ("string",), "seed": ("integer",),
              "iolab_version": ("string",)},
    "round": {"round": ("integer",), "seed": ("integer",), "runs": ("array",)},
    "search": {"grid": ("string",), "strategy": ("string",), "budget": ("integer", "null"),
               "seed": ("integer",), "objective": ("object",), "version": ("integer",),
               "runs_used": ("integer",), "configurations": ("integer",),
               "runs_certain_more": ("integer",), "done": ("boolean",), "waiting": ("string",),
               "next": ("object", "null"), "answer": ("object", "null"),
               "best_set": ("array",), "after_the_search": ("object",),
               "decisions": ("array",)},
    "confirm": {"waiting": ("string",), "points": ("array",)},
    "end": {"pid": ("integer",), "completed": ("integer",), "failed": ("integer",),
            "interrupted": ("boolean",), "stopped": ("string",), "signal": ("string",),
            "knobs_not_restored": ("array",), "restore": ("string",)},
    "quarantined": {"run": ("string",), "reason": ("string",)},
    # how quiet the machine was when 'iolab replicate' started this campaign, and whether it
    # started on a busy one because --busy-ok said so (iolab.execution.replicate)
    "quiet": {"load_average": ("number",), "cpus": ("integer",),
              "foreign_cpu_pct": ("number", "null"), "steal_pct": ("number", "null"),
              "sample_s": ("number",), "busy": ("string",), "busy_ok": ("boolean",)},
}
# fields a line may lack: added after logs that are kept were written ("most", "order",
# "repetitions", "seed", "stopped"), or written only when they apply ("signal"; the knobs a
# campaign could not put back, each with its state and the command that fixes it, and the
# 'iolab restore' that finishes the restore)
LOG_OPTIONAL = {"start": ("most", "order", "repetitions", "seed"),
                "end": ("stopped", "signal", "knobs_not_restored", "restore")}


def log_time() -> str:
    """Now, as every campaign log line's ``at`` says it: ISO 8601 in UTC to the millisecond
    (``2026-11-24T08:34:26.227+00:00``, as ``iolab.execution.one_run.now_iso`` writes it), so
    that a log's times read alike and sort in order."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# a campaign log line's "at": log_time's form, and no other (a folder-name stamp sorts apart)
LOG_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


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


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "an unreadable target"


def _folder(entry: os.DirEntry) -> bool:
    """A folder, or an entry that cannot be told from one (a loop of links), which is then
    reported as a corrupt run rather than stopping every command that lists the runs."""
    try:
        return entry.is_dir()
    except OSError:
        return True


@dataclass
class StoredRun:
    path: Path
    manifest: RunManifest

    @property
    def run_id(self) -> str:
        return self.manifest.run_id


@dataclass
class CorruptRun:
    path: Path
    reason: str

    def describe(self) -> str:
        """One line: the folder's name is anyone's (a line break in it too), so escaped."""
        return printable(f"{self.path}: {self.reason}")


def corrupt_message(corrupt: list[CorruptRun], what: str, shown: int = 10) -> str:
    lines = [f"{len(corrupt)} stored run(s) are corrupt, so {what} would be wrong or "
             "incomplete:"]
    lines += [f"  {c.describe()}" for c in corrupt[:shown]]
    if len(corrupt) > shown:
        lines.append(f"  ... and {len(corrupt) - shown} more ('iolab verify' lists them all)")
    lines.append("restore them (e.g. 'git checkout -- FOLDER' or from a backup), or move them "
                 "aside with 'iolab verify --quarantine' so that 'iolab run' measures them again")
    return "\n".join(lines)


class Store:
    """One campaign's folder, ``data/raw/<experiment>/<environment>/``: its runs, its host
    record and its log, written only through commits that a crash cannot leave half done."""

    def __init__(self, data_dir: Path, experiment: str, environment: str,
                 upgrade: Upgrade | None = None):
        self.data_dir = Path(data_dir)
        # both become folders under the data directory: no separators, no '..'
        self.experiment = check_name("experiment", experiment)
        check_name("environment", environment)
        self.environment = environment
        self.upgrade = upgrade
        self._host: dict[str, Any] | None = None  # read once, for upgrading version-1 manifests
        self.root = self.data_dir / "raw" / experiment / environment
        note_read(experiment)
        self.runs_dir = self.root / "runs"
        self.failed_dir = self.root / "failed"
        self.partial_dir = self.root / "partial"
        self.host_path = self.root / "host.json"
        self.verify_cache_path = (self.data_dir / "cache" / "verified" / experiment
                                  / f"{environment}.json")
        # inside batch(): finished run folders and where they go, renamed at its end
        self._pending: list[tuple[Path, Path]] | None = None

    # -- host record -------------------------------------------------------------------
    def read_host(self) -> dict[str, Any] | None:
        """The campaign's host record, checked (:func:`iolab.host.record.read_host_record`);
        None without one."""
        return read_host_record(self.host_path)

    def check_or_record_host(self, inventory: dict[str, Any], fingerprint: str,
                             diff: list[str], allow_change: bool = False) -> None:
        """Record the host on the first run; refuse a different host afterwards.

        ``diff`` lists the fingerprint fields that differ from the stored host (computed by
        the caller, which knows the inventory format).
        """
        stored = self.read_host()
        if stored is None:
            # without host.json, the stored runs still say which host made them
            made_on = sorted({r.manifest.host_fingerprint for r in self.complete_runs(verify=False)
                              if r.manifest.host_fingerprint})
            if made_on and made_on != [fingerprint] and not allow_change:
                raise IolabError(
                    f"{self.host_path} is missing, but the campaign's stored runs were made on "
                    f"a host with fingerprint {', '.join(made_on)}, and this host has "
                    f"{fingerprint}. Restore host.json (e.g. from git), give this host an "
                    f"environment of its own ('iolab env new NAME --from {self.environment}'), "
                    f"or pass --allow-host-change to add to this campaign anyway.")
            self.own_root()
            write_json_atomic(self.host_path, {**inventory, "fingerprint": fingerprint})
            return
        if stored.get("fingerprint") == fingerprint:
            return
        if not allow_change:
            raise IolabError(
                f"{self.host_path}: this campaign was recorded on a host with fingerprint "
                f"{stored.get('fingerprint')}, but this host has {fingerprint} "
                f"(differs in: {', '.join(diff) or 'unknown fields'}). Runs from different hosts "
                f"are not mixed silently: give this host an environment of its own with "
                f"'iolab env new NAME --from {self.environment}' and run with --env NAME, or "
                f"pass --allow-host-change to add to this campaign anyway.")
        history = stored.get("other_hosts", [])
        if fingerprint not in [h.get("fingerprint") for h in history]:
            history.append({**{k: v for k, v in inventory.items() if k != "other_hosts"},
                            "fingerprint": fingerprint})
            self.own_root()
            write_json_atomic(self.host_path, {**stored, "other_hosts": history})

    # -- listing -------------------------------------------------------------------------
    def run_folders(self) -> list[Path]:
        """Every folder under runs/ that is not a temporary one, complete or not."""
        if not self.runs_dir.exists():
            return []
        # sorted by name as strings: comparing Path objects was a tenth of a large scan
        with os.scandir(self.runs_dir) as it:
            names = sorted(e.name for e in it if not e.name.startswith(".") and _folder(e))
        return [self.runs_dir / name for name in names]

    def _doc(self, run_dir: Path) -> dict[str, Any]:
        """The manifest's JSON; UnreadableManifest when cut off or missing, InputError for a
        version not read here."""
        doc = mf.load_json(run_dir / mf.FILE)
        mf.check_version(doc, run_dir / mf.FILE)
        return doc

    def _manifest(self, run_dir: Path, doc: dict[str, Any]) -> RunManifest:
        path = run_dir / mf.FILE
        if doc["schema_version"] == mf.SCHEMA_VERSION:
            return mf.from_json(doc, path)
        mf.check_v1(doc, path)
        if self._host is None:
            self._host = self.read_host() or {}
        return self.upgrade(doc, path, self._host)

    def scan(self, verify: bool = True, rehash: bool = False
             ) -> tuple[list[StoredRun], list[CorruptRun]]:
        """Every committed run with its manifest (version-1 manifests upgraded in memory), and
        every folder under runs/ that is not one: an unreadable ``run.json``, or (``verify``)
        a raw file that is missing or differs from the size and sha256 its manifest records
        (``rehash``: every file hashed, none trusted to the cache of verified files).

        Runs are committed by renaming a finished folder into place, so a folder under runs/
        without a valid manifest was damaged afterwards: it is *corrupt*, never "not run yet".
        """
        out: list[StoredRun] = []
        corrupt: list[CorruptRun] = []
        checker = integrity.Checker(self.verify_cache_path, rehash) if verify else None
        run_dirs = self.run_folders()
        names = {d.name for d in run_dirs}
        for run_dir in run_dirs:
            if run_dir.is_symlink():  # a run is a folder iolab renamed into place, never a link
                corrupt.append(CorruptRun(run_dir, f"is a symbolic link to "
                                          f"{_link_target(run_dir)}, not a run folder iolab "
                                          "made; it is never followed"))
                continue
            try:
                doc = self._doc(run_dir)
            except UnreadableManifest as exc:
                corrupt.append(CorruptRun(run_dir, f"run.json cannot be read ({exc.reason})"))
                continue
            if doc.get("status") != "ok":
                corrupt.append(CorruptRun(run_dir, f"run.json says status {doc.get('status')!r}; "
                                          "only committed runs belong under runs/"))
                continue
            if doc.get("run_id") != run_dir.name:
                corrupt.append(CorruptRun(run_dir, f"run.json is the manifest of run "
                                          f"{doc.get('run_id')!r}, not of this folder"))
                continue
            if doc["schema_version"] != mf.SCHEMA_VERSION and self.upgrade is None:
                raise InputError(run_dir / mf.FILE, "schema_version", "a version-1 manifest, "
                                 "and no experiment to read it with; run 'iolab migrate'")
            try:
                run = StoredRun(run_dir, self._manifest(run_dir, doc))
            except mf.DamagedManifest as exc:  # a field missing or of the wrong kind
                key = f" (key '{exc.key}')" if exc.key else ""
                corrupt.append(CorruptRun(run_dir, f"run.json is not a valid manifest{key}: "
                                          f"{exc.problem}"))
                continue
            problem = (self._contradiction(run.manifest)
                       or (checker.check(run_dir, run.manifest.files) if checker else None))
            if problem:
                corrupt.append(CorruptRun(run_dir, problem))
                continue
            # a migration that stopped after its copy was renamed into place: the copy wins;
            # two old runs of one identity (they differed only in what is no longer part of
            # it): the first wins, the other is reported by 'iolab migrate'
            if run_dir.name != run.run_id and (run.run_id in names
                                               or run.run_id in {r.run_id for r in out}):
                continue
            out.append(run)
        if checker:
            checker.save()
        return out, corrupt

    def _contradiction(self, manifest: RunManifest) -> str | None:
        """Why a committed run's manifest contradicts where it lies (None when it does not): it
        names another experiment or environment than its campaign's folder, or holds a failure
        reason, which only a run under failed/ has."""
        for key, own in (("experiment", self.experiment), ("environment", self.environment)):
            recorded = getattr(manifest, key)
            if recorded != own:
                return f"run.json names {key} {excerpt(recorded)}, not this folder's {own!r}"
        if manifest.failure:
            return (f"run.json records a failure ({excerpt(manifest.failure)}); only a failed "
                    "run has one, and it belongs under failed/")
        return None

    def complete_runs(self, verify: bool = True) -> list[StoredRun]:
        """Every committed, intact run (see :meth:`scan`)."""
        return self.scan(verify)[0]

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
        """Folders of failed runs (``<run-id>@<time>``), not a migration's leftovers."""
        if not self.failed_dir.exists():
            return []
        return sorted(d for d in self.failed_dir.iterdir() if d.is_dir() and "@" in d.name
                      and not d.name.startswith("."))

    def quarantine(self) -> list[str]:
        """Move the leftovers of runs interrupted before their commit to ``partial/``; never
        delete. Returns one line per move, for the user."""
        # a runs/ that is a link holds no leftovers of ours: nothing is moved out of it
        refuse_linked(self.runs_dir, "the stored runs", DEPTH)
        return [self._move_aside(d, "interrupted run") for d in self.stale_tmp_dirs()]

    def quarantine_corrupt(self, corrupt: list[CorruptRun]) -> list[str]:
        """Move corrupt runs to ``partial/`` (so the next campaign runs them again)."""
        lines = []
        for c in corrupt:
            lines.append(self._move_aside(c.path, f"corrupt run ({c.reason})"))
            self.log({"event": "quarantined", "run": c.path.name, "reason": c.reason})
        return lines

    def _move_aside(self, folder: Path, kind: str) -> str:
        own_folder(self.partial_dir, "runs set aside", DEPTH)
        dest = self.partial_dir / f"{folder.name.lstrip('.')}@{_stamp()}"
        os.rename(folder, dest)
        return printable(f"moved {kind} {folder} to {dest} (kept there, never deleted); the "
                         "next 'iolab run' measures again any run its plan still holds")

    # -- writing -------------------------------------------------------------------------
    def own_root(self) -> Path:
        """The campaign's folder, made if missing; NotOurs when it, its experiment's folder or
        raw/ is a link: the host record, the log and the runs would be written into its target."""
        return own_folder(self.root, _ROOT_ROLE, DEPTH - 1)

    def begin(self, run_id: str) -> Path:
        own_folder(self.runs_dir, "the stored runs", DEPTH)
        tmp = self.runs_dir / f"{TMP_PREFIX}{run_id}-{os.getpid()}"
        if any(t == tmp for t, _ in self._pending or []):
            raise IolabError(f"{self.runs_dir / run_id}: a run with this id is already stored "
                             "(in this batch); refusing to overwrite it")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        return tmp

    @staticmethod
    def file_records(folder: Path) -> dict[str, dict[str, Any]]:
        """sha256 and size of every raw file of a run folder."""
        files = {}
        for f in sorted(folder.iterdir()):
            # a link is never followed (a failed run may hold one its tool left)
            if f.is_file() and not f.is_symlink() and f.name != mf.FILE \
                    and not f.name.startswith("."):
                files[f.name] = {"sha256": sha256_file(f), "bytes": f.stat().st_size}
        return files

    def _finish(self, tmp: Path, manifest: RunManifest, status: str, dest: Path) -> None:
        """The manifest written beside the raw files, everything made durable at once, then
        the folder renamed into place (in a batch: at the batch's end). The folder is not a
        run until it is renamed, so the manifest needs no atomic write of its own.

        The rename is not synced on its own: a power loss that undoes it leaves a complete
        folder under its temporary name, which the next campaign moves to ``partial/`` and
        runs again; the run's content is durable before the rename either way, and the next
        sync makes the rename durable too."""
        manifest.status = status
        manifest.files = self.file_records(tmp)
        mf.write_plain(tmp / mf.FILE, manifest)
        if self._pending is not None:
            self._pending.append((tmp, dest))
            return
        sync_filesystem(tmp)
        os.rename(tmp, dest)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Commits inside wait for its end, where one sync makes all of them durable and
        each folder is then renamed into place: an import of hundreds of runs costs one
        flush, not one per run. Runs finished before an error are committed all the same."""
        self._pending = []
        try:
            yield
        finally:
            pending, self._pending = self._pending, None
            if pending:
                sync_filesystem(self.root)
                for tmp, dest in pending:
                    os.rename(tmp, dest)

    def commit(self, tmp: Path, manifest: RunManifest) -> Path:
        """Write the manifest, sync, then rename the folder into place (the atomic step)."""
        final = self.runs_dir / manifest.run_id
        if final.exists() or any(dest == final for _, dest in self._pending or []):
            raise IolabError(f"{final}: a run with this id is already stored; refusing to overwrite it")
        self._finish(tmp, manifest, "ok", final)
        return final

    def commit_failed(self, tmp: Path, manifest: RunManifest) -> Path:
        own_folder(self.failed_dir, "the failed runs", DEPTH)
        dest = self.failed_dir / f"{manifest.run_id}@{_stamp()}"
        self._finish(tmp, manifest, "failed", dest)
        return dest

    def log(self, record: dict[str, Any]) -> None:
        """Append one line to ``campaign-log.jsonl``: when a campaign started and ended, with
        its overrides, filters and outcome. Its ``at`` is now (:func:`log_time`) unless the
        caller gives one; a field LOG_EVENTS does not name, or an ``at`` not in
        :func:`log_time`'s form, is a bug."""
        record = {"at": log_time(), **record}
        fields = LOG_EVENTS.get(record.get("event"), {})
        undeclared = sorted(set(record) - {"event", "at"} - set(fields))
        if not fields or undeclared:
            raise ValueError(f"campaign log: event {record.get('event')!r} with fields "
                             f"{undeclared} is not declared in LOG_EVENTS")
        if not isinstance(record["at"], str) or not LOG_AT.fullmatch(record["at"]):
            raise ValueError(f"campaign log: event {record['event']!r} at {record['at']!r}, "
                             "not ISO 8601 in UTC as log_time() writes it")
        self.own_root()
        # only to a regular file: a link there is not followed, a FIFO never blocks the
        # campaign (with its locks held) in an open that Ctrl-C cannot end
        append_regular(self.root / LOG, (json.dumps(record, sort_keys=True) + "\n").encode(),
                       _LOG_ROLE)

    def log_lines(self, event: str) -> list[dict[str, Any]]:
        """The campaign log's lines of ``event``, oldest first (none without a log); a line
        that is not a JSON object is refused, naming the file and the line."""
        path = self.root / LOG
        raw = read_regular(path, _LOG_ROLE, LOG_MOST)
        if raw is None:
            return []
        text = raw.decode("utf-8", errors="replace")
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if f'"{event}"' not in line:
                continue  # most lines are other events: parsed only where they may match
            try:
                record = load_json(line, str(path))
            except (ValueError, ParseError) as exc:  # nested too deeply: ParseError
                why = exc.problem if isinstance(exc, ParseError) else exc
                raise InputError(path, f"line {number}", f"is not JSON ({why})",
                                 allowed="one JSON object per line, as iolab writes") from None
            if isinstance(record, dict) and record.get("event") == event:
                out.append(record)
        return out

    def discard(self, tmp: Path) -> None:
        shutil.rmtree(tmp, ignore_errors=True)


def open_store(source: Any, environment: str, data_dir: Path) -> Store:
    """The store of a campaign, reading version-1 manifests through its experiment (or
    importer): ``source`` has ``name`` and ``upgrade_v1``."""
    return Store(data_dir, source.name, environment, upgrade=source.upgrade_v1)


# a file in which every experiment folder under raw/ that is read gets named, one per line
# ('*' for all), when this environment variable names one: how a book render learns which
# stored runs a chapter depends on (iolab.report.book, iolab.report.freshness)
READS_LOG = "IOLAB_READS_LOG"


def note_read(part: str) -> None:
    """Name ``part`` (an experiment's folder under raw/, or '*') in ``$IOLAB_READS_LOG``."""
    log = os.environ.get(READS_LOG)
    if log:
        try:
            with open(log, "a", encoding="utf-8") as f:
                f.write(part + "\n")
        except OSError:
            pass  # then the render depends on all of raw/ (see iolab.report.book)


def campaigns(data_dir: Path) -> list[tuple[str, str]]:
    """(experiment, environment) pairs that have a folder under ``data/raw``, both named as
    iolab names folders (:func:`unusable_folders` lists the others)."""
    return sorted((e.name, v.name) for e, v in _campaign_folders(data_dir)
                  if usable_name(e.name) and usable_name(v.name))


def unusable_folders(data_dir: Path) -> list[Path]:
    """Folders under ``data/raw`` at a campaign's place whose name no experiment or
    environment can have (a line break, a space): not iolab's, so never read or changed, and
    one of them must not stop a report on the others."""
    raw = Path(data_dir) / "raw"
    found = {e for e, _ in _campaign_folders(data_dir) if not usable_name(e.name)}
    found |= {v for e, v in _campaign_folders(data_dir)
              if usable_name(e.name) and not usable_name(v.name)}
    if raw.is_dir():  # an experiment's folder with no environment in it yet
        found |= {e for e in raw.iterdir() if e.is_dir() and not usable_name(e.name)}
    return sorted(found)


def _campaign_folders(data_dir: Path) -> list[tuple[Path, Path]]:
    note_read("*")
    raw = Path(data_dir) / "raw"
    if not raw.is_dir():
        return []
    return [(e, v) for e in raw.iterdir() if e.is_dir() for v in e.iterdir() if v.is_dir()]
