"""The tidy table: one row per stored repetition, re-derived from raw files.

Columns, namespaced so that nothing overwrites anything:

==========================  ================================================================
``<variable>``              the point's variables (bare names, the experiment's vocabulary)
``<metric>``                the experiment's metrics (bare names; see ``Experiment.metrics``)
``run.<field>``             id, rep, environment, host_fingerprint, config (the configuration
                            id: runs with equal ones may be pooled), tool, tool_version,
                            driver_version, started_at, duration_s, grids, cpus
``config.<setting>``        the execution settings the run was made with (lists as JSON)
``<tool>.<metric>``         what the tool's adapter parses, e.g. ``fio.iops``, ``fio.version``
``<collector>.<metric>``    what a collector's parser gives, e.g. ``gnu_time.cpu_pct``
``knob.<name>``             the knob state read back from the kernel (JSON for structures)
==========================  ================================================================

The table is cached as parquet under ``data/cache/`` with a digest of every manifest, raw
file and of the code that parses them; any change invalidates the cache.

Responsible for: building, caching and checking the table. Not responsible for: statistics
(``iolab.analysis``) or running anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Protocol

import pandas as pd

from iolab.core.manifest import FILE as MANIFEST
from iolab.core.store import StoredRun, corrupt_message, open_store
from iolab.errors import IolabError
from iolab.tools import registry

SKIP_CORRUPT_VAR = "IOLAB_SKIP_CORRUPT"
WINDOW_FILE = "driver-window.json"  # wall-clock start and end of the driver (the runner writes it)
_PACKAGE = Path(__file__).resolve().parent.parent
# Code whose change can change a row; the experiment's own package is added per table.
_PARSING_CODE = ("tools", "parsers", "core/tidy.py", "core/manifest.py", "experiments/base.py")


class TidySource(Protocol):
    """What a campaign kind gives the tidy table (an experiment, or an importer's campaigns)."""

    name: str

    def tidy_row(self, run: StoredRun) -> dict[str, Any]: ...
    def upgrade_v1(self, doc: dict, path: Path, host: dict | None) -> Any: ...
    def code_files(self) -> list[Path]: ...


def _flat(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def driver_window(run_dir: Path) -> tuple[int, int] | None:
    path = Path(run_dir) / WINDOW_FILE
    if not path.exists():
        return None
    w = json.loads(path.read_text())
    return int(w["start_ns"]), int(w["end_ns"])


def standard_row(run: StoredRun, derive: Callable[[dict[str, Any]], dict[str, Any]],
                 variables: list[str]) -> dict[str, Any]:
    """The row of a run made by this package: see the module docstring for the columns.

    Columns come in a fixed order (variables as the experiment declares them, settings
    sorted), whatever order a manifest stored them in.
    """
    m = run.manifest
    row: dict[str, Any] = {v: m.point[v] for v in variables if v in m.point}
    row.update({k: v for k, v in m.point.items() if k not in row})
    row.update({
        "run.id": m.run_id, "run.rep": m.rep, "run.environment": m.environment,
        "run.host_fingerprint": m.host_fingerprint, "run.config": m.config_id,
        "run.tool": m.tool, "run.tool_version": m.tool_version,
        "run.driver_version": m.driver_version, "run.started_at": m.started_at,
        "run.duration_s": m.duration_s, "run.grids": ",".join(m.grids),
        "run.cpus": ",".join(map(str, m.cpus)) if m.cpus is not None else None,
    })
    row.update({f"config.{k}": _flat(v) for k, v in sorted(m.settings.items())})
    adapter = registry.adapter(m.tool)
    row.update({f"{m.tool}.{k}": v for k, v in adapter.parse(run.path).items()})
    window = adapter.window(run.path) or driver_window(run.path)
    for name in m.collectors:
        parsed = registry.collector(name).parse(run.path, window)
        row.update({f"{name}.{k}": _flat(v) for k, v in parsed.items()})
    for name, rec in (m.knobs or {}).items():
        row[f"knob.{name}"] = _flat(rec.get("after") if isinstance(rec, dict) else rec)
    row.update(derive(row))
    return row


def _digest(runs: list[StoredRun], code: str) -> str:
    """Of the code and every manifest: the runs were verified against their manifests'
    sha256 sums, so the manifests stand for the raw bytes."""
    h = hashlib.sha256(code.encode())
    for run in runs:
        h.update(run.run_id.encode())
        h.update((run.path / MANIFEST).read_bytes())
    return h.hexdigest()


def _code(source: TidySource) -> str:
    paths: list[Path] = []
    for rel in _PARSING_CODE:
        target = _PACKAGE / rel
        paths += sorted(target.rglob("*.py")) if target.is_dir() else [target]
    paths += source.code_files()
    return "\n".join(p.read_text() for p in paths)


def _write_cache(frame: pd.DataFrame, cpath: Path, dpath: Path, digest: str) -> None:
    """Best effort: a data directory that cannot be written (read-only, full) still gives
    its table, only without the cache."""
    try:
        cpath.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(cpath, index=False)
        dpath.write_text(digest)
    except OSError:
        pass  # the digest is written last: a cache without its current digest is never read


def cache_path(data_dir: Path, experiment: str, environment: str) -> Path:
    return Path(data_dir) / "cache" / "tidy" / experiment / f"{environment}.parquet"


def build(source: TidySource, runs: list[StoredRun]) -> pd.DataFrame:
    """Parse every given run into rows (no cache)."""
    return pd.DataFrame([source.tidy_row(run) for run in runs])


def load(data_dir: Path, source: TidySource, environments: str | list[str], *,
         allow_mixed_hosts: bool = False, use_cache: bool = True,
         skip_corrupt: bool | None = None) -> pd.DataFrame:
    """The tidy table of one or more environments; refuses to pool different hosts.

    Every run's raw files are verified against its manifest first; a corrupt run fails the
    table, naming it, unless ``skip_corrupt`` (default: ``$IOLAB_SKIP_CORRUPT``, which
    ``iolab book --skip-corrupt`` sets), and then ``df.attrs["corrupt_skipped"]`` counts them.
    """
    if skip_corrupt is None:
        skip_corrupt = os.environ.get(SKIP_CORRUPT_VAR) == "1"
    skipped = 0
    envs = [environments] if isinstance(environments, str) else list(environments)
    code = _code(source)
    frames = []
    for env in envs:
        store = open_store(source, env, data_dir)
        if not store.root.exists():
            raise IolabError(f"{store.root}: no stored campaign for experiment '{source.name}', "
                             f"environment '{env}'")
        runs, corrupt = store.scan()
        if corrupt and not skip_corrupt:
            raise IolabError(corrupt_message(corrupt, "its table") + "; or pass "
                             "--skip-corrupt to leave them out")
        skipped += len(corrupt)
        digest = _digest(runs, code)
        cpath = cache_path(data_dir, source.name, env)
        dpath = cpath.with_suffix(".digest")
        if use_cache and cpath.exists() and dpath.exists() and dpath.read_text() == digest:
            frame = pd.read_parquet(cpath)
        else:
            frame = build(source, runs)
            if use_cache:
                _write_cache(frame, cpath, dpath, digest)
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not df.empty and df["run.host_fingerprint"].nunique() > 1 and not allow_mixed_hosts:
        found = ", ".join(f"{fp} ({n} rows)" for fp, n in
                          df["run.host_fingerprint"].value_counts().items())
        raise IolabError(f"experiment '{source.name}' environments {envs}: rows come from "
                         f"different hosts ({found}); pass allow_mixed_hosts=True (CLI: "
                         "--allow-mixed-hosts) to pool them deliberately")
    df.attrs["corrupt_skipped"] = skipped
    return df


def configurations(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration in a table: its id, runs, and the settings that differ."""
    if df.empty or "run.config" not in df:
        return pd.DataFrame()
    settings = [c for c in df.columns if c.startswith("config.")]
    out = df.groupby("run.config", sort=True).agg(
        runs=("run.id", "size"), **{c: (c, "first") for c in settings}).reset_index()
    varying = [c for c in settings if out[c].astype(str).nunique() > 1]
    return out[["run.config", "runs", *varying]]
