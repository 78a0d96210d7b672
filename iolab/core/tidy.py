"""The tidy table: one row per stored repetition, re-derived from raw files.

Columns, namespaced so that nothing overwrites anything:

==========================  ================================================================
``<variable>``              the point's variables (bare names, the experiment's vocabulary)
``<metric>``                the experiment's metrics (bare names; see ``Experiment.metrics``)
``run.<field>``             id, rep, environment, host_fingerprint, config (the configuration
                            id: runs with equal ones may be pooled), tool, tool_version,
                            driver_version, started_at, duration_s, grids, cpus, and
                            confirm (a confirmation run's label; see iolab.core.confirm)
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
import os
import threading
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from iolab.core.manifest import FILE as MANIFEST
from iolab.core.store import StoredRun, corrupt_message, open_store
from iolab.errors import IolabError

SKIP_CORRUPT_VAR = "IOLAB_SKIP_CORRUPT"
_PACKAGE = Path(__file__).resolve().parent.parent
# Code whose change can change a row; the experiment's own package is added per table.
_PARSING_CODE = ("tools", "collectors", "parsers", "importers", "core/rows.py", "core/tidy.py",
                 "core/manifest.py", "core/experiment.py", "core/tool_registry.py")


class TidySource(Protocol):
    """What a campaign kind gives the tidy table (an experiment, or an importer's campaigns)."""

    name: str

    def tidy_row(self, run: StoredRun) -> dict[str, Any]: ...
    def upgrade_v1(self, doc: dict, path: Path, host: dict | None) -> Any: ...
    def code_files(self) -> list[Path]: ...


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


def stat_key(campaign: Path, code: str) -> str | None:
    """A key of the campaign as the file system describes it: every run folder's files
    with their sizes and modification times, host.json's, and the parsing code. Equal keys
    mean nothing was added, removed or rewritten since a table was built and its files
    verified, so that table stands without reading a single manifest again. None when a
    folder changed while it was read: then there is no key to trust."""
    try:
        return _stat_key(campaign, code)
    except OSError:
        return None


def _stat_key(campaign: Path, code: str) -> str:
    h = hashlib.sha256(code.encode())
    host = campaign / "host.json"
    if host.exists():
        st = host.stat()
        h.update(f"host.json\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    runs = campaign / "runs"
    if not runs.is_dir():
        return h.hexdigest()
    with os.scandir(runs) as it:
        # followed like the store follows them (Store.run_folders, os.stat)
        folders = sorted((e.name, e.path) for e in it
                         if not e.name.startswith(".") and e.is_dir())
    stat = os.stat
    for name, path in folders:
        # one stat per file is the floor; the rest is kept to plain strings, once per file
        with os.scandir(path) as it:
            files = sorted(e.name for e in it)
        parts = [name]
        for f in files:
            st = stat(f"{path}/{f}")
            parts.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
        h.update("\0".join(parts).encode())
    return h.hexdigest()


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass  # best effort, like the cache itself


def _write_cache(frame: pd.DataFrame, cpath: Path, dpath: Path, digest: str) -> bool:
    """Best effort: a data directory that cannot be written (read-only, full) still gives
    its table, only without the cache. Whether the cache now holds this table."""
    tmp = cpath.with_name(f".{cpath.name}.{os.getpid()}.tmp")
    try:
        cpath.parent.mkdir(parents=True, exist_ok=True)
        _remove(dpath)  # the old digest must not vouch for a table being replaced
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, cpath)
        dpath.write_text(digest)
        return True
    except OSError:
        _remove(tmp)
        return False  # without its current digest, a cache is never read


def cache_path(data_dir: Path, experiment: str, environment: str) -> Path:
    return Path(data_dir) / "cache" / "tidy" / experiment / f"{environment}.parquet"


def forget(data_dir: Path, experiment: str, environment: str) -> None:
    """Let no cached table of the campaign be served again without a scan of its runs (after
    'iolab verify' found one altered in a way the cache's keys cannot see)."""
    cpath = cache_path(data_dir, experiment, environment)
    for path in (cpath.with_suffix(".stat"), cpath.with_suffix(".digest")):
        _remove(path)


# From this many runs on, rows are parsed in forked worker processes, one per CPU (at most
# MAX_WORKERS), where a worker's start is a small part of what it saves.
PARALLEL_FROM = 2000
MAX_WORKERS = 8


def _rows(source: TidySource, runs: list[StoredRun]) -> list[dict[str, Any]]:
    return [source.tidy_row(run) for run in runs]


# the job of forked workers: inherited, not pickled (pickling the manifests to them cost
# more than parsing the runs in-line)
_JOB: tuple[TidySource, list[StoredRun]] | None = None


def _rows_of_slice(start: int, stop: int) -> list[dict[str, Any]]:
    source, runs = _JOB
    return _rows(source, runs[start:stop])


def build(source: TidySource, runs: list[StoredRun]) -> pd.DataFrame:
    """Parse every given run into rows (no cache), in parallel for large campaigns."""
    workers = min(os.cpu_count() or 1, MAX_WORKERS)
    # Forked only from a process without other threads: a fork copies the calling thread
    # alone, and a lock another thread held stays held in the copy. A notebook's kernel has
    # threads, so it parses in-line. (Spawned workers would avoid that, but they import the
    # caller's main script again, which a user's script may not be written to survive.)
    if len(runs) < PARALLEL_FROM or workers < 2 or threading.active_count() > 1:
        return pd.DataFrame(_rows(source, runs))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _JOB
    size = -(-len(runs) // (workers * 4))  # a few slices per worker evens out their speeds
    starts = range(0, len(runs), size)
    _JOB = (source, runs)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = pool.map(_rows_of_slice, starts, [i + size for i in starts])
            return pd.DataFrame([row for part in parts for row in part])
    finally:
        _JOB = None


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
        cpath = cache_path(data_dir, source.name, env)
        dpath, spath = cpath.with_suffix(".digest"), cpath.with_suffix(".stat")
        # taken before the scan: a file that changes during it cannot match the next time
        stamp = (stat_key(store.root, code) or "") if use_cache else ""
        if stamp and _read(spath) == stamp and cpath.exists():
            frames.append(pd.read_parquet(cpath))
            continue
        if use_cache:
            _remove(spath)  # until this table is built, no key may vouch for the cache
        runs, corrupt = store.scan()
        if corrupt and not skip_corrupt:
            raise IolabError(corrupt_message(corrupt, "its table") + "; or pass "
                             "--skip-corrupt to leave them out")
        skipped += len(corrupt)
        digest = _digest(runs, code)
        cached = use_cache and cpath.exists() and _read(dpath) == digest
        if cached:
            frame = pd.read_parquet(cpath)
        else:
            frame = build(source, runs)
            cached = use_cache and _write_cache(frame, cpath, dpath, digest)
        if cached and stamp and not corrupt:
            # a table that left corrupt runs out is rebuilt each time, so they are reported
            _write_text(spath, stamp)
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
