"""The run manifest (``run.json``): one typed record per run, written and read only here.

Schema version 2 (this package writes it)::

    schema_version  2
    run_id          <12-hex hash of identity>-r<rep>
    identity        {experiment, environment, point, invocation}: what the id hashes
    experiment, environment, rep, point, grids
    status          "ok" | "failed";  failure: why a failed run failed (else null)
    settings        the execution settings of the spec; config_id: their short hash
    tool, tool_version, driver, driver_version
    argv, cwd       exactly what ran (the driver repository-relative), in the run folder
    cpus            the resolved CPU set of a pinned run (else null)
    knobs           {knob: {requested, before, after, matches}} as read back from the kernel
    collectors      names of the collectors that ran
    host_fingerprint, iolab_version, spec_sources, overrides
    started_at, ended_at, duration_s, exit_code
    files           {name: {sha256, bytes}} of every raw file of the run
    extra           fields of one source (e.g. an import's archive paths); free-form
    migrated_from   {schema_version, run_id, migrated_at} when ``iolab migrate`` rewrote it

Version 1 (iolab before the experiment interface) keyed runs by every spec value; such
manifests are read through an upgrade function the caller supplies (it needs the experiment:
see :meth:`iolab.core.experiment.Experiment.upgrade_v1`), and ``iolab migrate`` rewrites
them. A manifest of any other version is refused with an error naming the file.

Responsible for: the record's fields, (de)serialisation, version checks. Not responsible for:
where manifests live (``iolab.core.store``) or what a run measured (parsers).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from iolab.core.identity import run_id
from iolab.durable import write_json_atomic
from iolab.errors import InputError, ParseError
from iolab.parsers import load_json as load_json_text
from iolab.safefiles import NotOurs, TooLarge, read_regular

SCHEMA_VERSION = 2
READABLE = (1, 2)
FILE = "run.json"
STATUSES = ("ok", "failed")
SHA256 = "[0-9a-f]{64}"  # a raw file's sum in ``files``: 64 lowercase hex digits
# what a version-1 manifest must hold to be upgraded (config: its settings); the rest is read
# with defaults
V1_REQUIRED = ("run_id", "experiment", "environment", "rep", "params", "config")

# What each field holds, in words: the published JSON Schema's descriptions (iolab.schemas).
HELP = {
    "run_id": "<12-hex hash of identity>-r<rep>; the run folder's name",
    "identity": "what the run id hashes: {experiment, environment, point, invocation}",
    "experiment": "the experiment's name", "environment": "the environment's name",
    "rep": "the repetition, from 0", "point": "the values of the experiment's variables",
    "status": "whether the tool succeeded", "failure": "why a failed run failed (else null)",
    "grids": "the grids of the params file the point belongs to",
    "settings": "the execution settings of the spec", "config_id": "their short hash",
    "tool": "the benchmark tool", "tool_version": "its version as it printed it",
    "driver": "the driver script (repository-relative)", "driver_version": "its version",
    "argv": "exactly what ran", "cwd": "where it ran: the run folder",
    "cpus": "the resolved CPU set of a pinned run (else null)",
    "knobs": "{knob: {requested, before, after, matches}} as read back from the kernel",
    "collectors": "names of the collectors that ran",
    "host_fingerprint": "the fingerprint of host.json's host",
    "iolab_version": "the iolab that made the run",
    "spec_sources": "the params file and --set overrides", "overrides": "the --set overrides",
    "started_at": "ISO 8601 time", "ended_at": "ISO 8601 time",
    "duration_s": "seconds the tool ran", "exit_code": "the tool's exit status",
    "files": "{name: {sha256, bytes}} of every raw file of the run",
    "extra": "fields of one source (e.g. an import's archive paths); free-form",
    "migrated_from": "{schema_version, run_id, migrated_at} when 'iolab migrate' rewrote it",
    "schema_version": "the manifest format's version",
}


# bytes of a run.json at most: iolab's are a few kB (a line per raw file and knob)
MANIFEST_MOST = 16 << 20


class DamagedManifest(InputError):
    """A version-2 manifest with a field iolab never writes, or a required field missing or of
    the wrong kind: damaged after it was written (the store reports its run as corrupt, so one
    altered run.json never locks out the rest of its campaign)."""


class UnreadableManifest(Exception):
    """A run.json that is missing, truncated or not JSON; ``reason`` says which."""

    def __init__(self, path: Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass
class RunManifest:
    run_id: str
    identity: dict[str, Any]
    experiment: str
    environment: str
    rep: int
    point: dict[str, Any]
    status: str = "ok"
    failure: str | None = None
    grids: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    config_id: str = ""
    tool: str | None = None
    tool_version: str | None = None
    driver: str | None = None
    driver_version: str | None = None
    argv: list[str] = field(default_factory=list)
    cwd: str = "the run folder"
    cpus: list[int] | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    collectors: list[str] = field(default_factory=list)
    host_fingerprint: str = ""
    iolab_version: str = ""
    spec_sources: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    exit_code: int | None = None
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    migrated_from: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        """The fields as a dict for JSON. Shallow: the values are shared with the manifest,
        not copied (dataclasses.asdict's deep copy was most of a commit's cost), so the
        result is for serializing, not for editing."""
        return {name: getattr(self, name) for name in _FIELD_ORDER}


_FIELD_ORDER = tuple(f.name for f in dataclasses.fields(RunManifest))
_FIELDS = set(_FIELD_ORDER)
_REQUIRED = {f.name for f in dataclasses.fields(RunManifest)
             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}

# (version-1 JSON, its path, the campaign's host record) -> the manifest as version 2
Upgrade = Callable[[dict[str, Any], Path, dict[str, Any]], RunManifest]


def load_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; UnreadableManifest when it is missing, cut off, not JSON
    (nested deeper than iolab writes included), larger than :data:`MANIFEST_MOST` bytes, or
    not a regular file (a link is not followed, a FIFO or a device never opened: a read of a
    FIFO would block every command that lists the runs)."""
    try:
        raw = read_regular(Path(path), "a run's manifest", MANIFEST_MOST)
        if raw is None:
            raise UnreadableManifest(path, "missing")
        doc = load_json_text(raw.decode("utf-8"), str(path))
    except (NotOurs, TooLarge, ParseError) as exc:
        raise UnreadableManifest(path, exc.problem) from None
    except (OSError, ValueError) as exc:
        reason = (f"not valid JSON, cut off or altered: {exc}" if isinstance(exc, ValueError)
                  else str(exc))
        raise UnreadableManifest(path, reason) from None
    if not isinstance(doc, dict):
        raise UnreadableManifest(path, "not a JSON object")
    return doc


def check_version(doc: dict[str, Any], path: Path) -> int:
    version = doc.get("schema_version")
    if version not in READABLE or isinstance(version, bool):
        raise InputError(path, "schema_version", f"{version!r} is not a manifest version this "
                         f"iolab reads (written by a newer iolab, or not an iolab manifest); "
                         f"update iolab or move the run folder away",
                         allowed=", ".join(map(str, READABLE)))
    return version


def from_json(doc: dict[str, Any], path: Path) -> RunManifest:
    """A version-2 manifest from its JSON object; DamagedManifest names the file and the key
    of a field unknown, missing or of the wrong kind (InputError: a version not read here)."""
    check_version(doc, path)
    if doc["schema_version"] != SCHEMA_VERSION:
        raise InputError(path, "schema_version", "a version-1 manifest needs the experiment to "
                         "be read (use Store with the experiment, or 'iolab migrate')")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise DamagedManifest(path, unknown[0], "unknown manifest field",
                              allowed=", ".join(sorted(_FIELDS)))
    missing = sorted(_REQUIRED - set(doc))
    if missing:
        raise DamagedManifest(path, missing[0], "missing from the manifest")
    _check_kinds(doc, path)
    return RunManifest(**doc)


_KINDS = {"run_id": str, "identity": dict, "experiment": str, "environment": str, "rep": int,
          "point": dict, "status": str, "settings": dict, "knobs": dict, "files": dict}


def _check_kinds(doc: dict[str, Any], path: Path) -> None:
    """The fields the store and the tidy table rely on have their kinds; ``files`` maps
    names to ``{sha256: 64 hex digits, bytes: a whole number}``."""
    for key, kind in _KINDS.items():
        if key in doc and (not isinstance(doc[key], kind) or isinstance(doc[key], bool)):
            raise DamagedManifest(path, key, f"is {type(doc[key]).__name__}, not "
                                  f"{'an int' if kind is int else 'a ' + kind.__name__}")
    for name, record in (doc.get("files") or {}).items():
        sha = record.get("sha256") if isinstance(record, dict) else None
        size = record.get("bytes") if isinstance(record, dict) else None
        if not (isinstance(sha, str) and re.fullmatch(SHA256, sha)):
            raise DamagedManifest(path, f"files.{name}.sha256", f"{sha!r} is not a sha256 sum")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise DamagedManifest(path, f"files.{name}.bytes",
                                  f"{size!r} is not a size in bytes")


# the kinds of V1_REQUIRED's fields that the upgrade reads (config: its settings)
_V1_KINDS = {"run_id": str, "experiment": str, "environment": str, "rep": int, "params": dict,
             "config": dict}


def check_v1(doc: dict[str, Any], path: Path) -> None:
    """DamagedManifest naming the first field of V1_REQUIRED a version-1 manifest lacks, or
    holds of another kind than the upgrade reads (it would stop the listing of every run of
    the campaign, not only this one's)."""
    missing = [key for key in V1_REQUIRED if key not in doc]
    if missing:
        raise DamagedManifest(path, missing[0], "missing from the version-1 manifest",
                              allowed=", ".join(V1_REQUIRED) + " are required")
    for key, kind in _V1_KINDS.items():
        if not isinstance(doc[key], kind) or isinstance(doc[key], bool):
            raise DamagedManifest(path, key, f"is {type(doc[key]).__name__}, not "
                                  f"{'an int' if kind is int else 'a ' + kind.__name__}")
    if not isinstance(doc["config"].get("settings"), dict):
        raise DamagedManifest(path, "config.settings", "missing from the version-1 manifest, "
                              "or not a mapping", allowed="the run's settings, a mapping")


def from_v1(doc: dict[str, Any], *, identity: dict[str, Any], settings: dict[str, Any],
            config_id: str, **fields: Any) -> RunManifest:
    """A version-1 manifest as version 2, given what only its reader knows (the identity,
    the settings that apply, and any fields it maps itself, such as ``collectors``)."""
    common = dict(
        run_id=run_id(identity, doc["rep"]), identity=identity, experiment=doc["experiment"],
        environment=doc["environment"], rep=doc["rep"], point=doc["params"],
        status=doc.get("status", "ok"),
        # the runner wrote "failure", the importer "error"
        failure=doc.get("failure") or doc.get("error"), grids=doc.get("grids", []),
        settings=settings, config_id=config_id, tool=doc.get("tool"),
        tool_version=doc.get("tool_version"), driver=doc.get("driver"),
        driver_version=doc.get("driver_version"), argv=doc.get("argv", []),
        cwd=doc.get("cwd", "the run folder"), knobs=doc.get("knobs") or {},
        collectors=doc.get("collectors", []), host_fingerprint=doc.get("host_fingerprint", ""),
        iolab_version=doc.get("iolab_version", ""), spec_sources=doc.get("spec_sources", []),
        started_at=doc.get("started_at"), ended_at=doc.get("ended_at"),
        duration_s=doc.get("duration_s"), exit_code=doc.get("exit_code"),
        files=doc.get("files", {}),
        migrated_from={"schema_version": 1, "run_id": doc["run_id"], "migrated_at": None})
    return RunManifest(**{**common, **fields})


def write_plain(path: Path, manifest: RunManifest) -> None:
    """Write a manifest into a run folder that is not in place yet (the caller syncs)."""
    Path(path).write_text(json.dumps(manifest.to_json(), indent=2, sort_keys=True) + "\n")


def write(path: Path, manifest: RunManifest) -> None:
    """Write a manifest crash-safely (a crash leaves the old file or the new one)."""
    write_json_atomic(Path(path), manifest.to_json())
