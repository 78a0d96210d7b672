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
file and of the code that parses them; any change invalidates the cache. The digest file
holds the sha256 of the parquet's bytes too: a cache cut short or overwritten is built again,
and the user told why on standard error. Anything but a regular file in the place of a cache
file is neither read, followed nor removed: the table is built without the cache, saying so.
A cache file larger than iolab writes (:data:`CACHE_MOST`, :data:`CACHE_NOTE_MOST`) is not
read: the table is built again and replaces it, saying so once. Nor is one another user may
have written (its owner not this user or root, or writable by group or others: it is built
again and replaces it by a rename), nor any cache in a folder others may write into (a link,
another user's folder, one writable by others: the table is built without the cache, which is
left as it is). The cache is written 0644 in folders made 0755, whatever the umask.

Responsible for: building, caching and checking the table. Not responsible for: statistics
(``iolab.analysis``) or running anything.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import threading
from pathlib import Path
from stat import S_ISREG
from typing import Any, Protocol

import pandas as pd

from iolab.core.manifest import FILE as MANIFEST
from iolab.core.store import StoredRun, corrupt_message, open_store
from iolab.durable import write_atomic
from iolab.errors import IolabError, excerpt, listed_error, printable
from iolab.safefiles import (CACHE_FOLDER_MODE, CACHE_MODE, NotOurs, TooLarge, check_regular,
                             folder_trust_problem, linked_folder, make_folders, read_regular,
                             trust_problem)

SKIP_CORRUPT_VAR = "IOLAB_SKIP_CORRUPT"
_PACKAGE = Path(__file__).resolve().parent.parent
_ROLE = "the tidy table's cache"  # what a refusal says iolab keeps at its names
# bytes of a cached table at most: a campaign's is a few hundred kB (parquet compresses its
# repeated columns); its digest and stat files hold two lines and one
CACHE_MOST = 1 << 30
CACHE_NOTE_MOST = 64 << 10
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


def _remove(path: Path) -> None:
    """Remove ``path`` if it is a regular file: anything else there is not ours to remove."""
    try:
        if S_ISREG(os.lstat(path).st_mode):
            path.unlink()
    except OSError:
        pass


class _Cache:
    """One campaign's cached table: ``<environment>.parquet``; its ``.digest``, two lines:
    the digest of the runs and code it was built from, and the sha256 of the parquet's bytes;
    and its ``.stat``, the :func:`stat_key` it stands for. Best effort: a data directory that
    cannot be written still gives its table, only without the cache.

    A table is served only when its bytes match the sha256 written with them: a cache cut
    short or overwritten is built again, never an error. A name of the cache taken by
    anything but a regular file (a folder, a link, a FIFO, a device) is not opened, followed
    or removed, and no table is cached while it is there. ``problem`` says, in either case,
    what was done and why (the caller tells the user once)."""

    def __init__(self, path: Path):
        self.path = path
        self.digest_path = path.with_suffix(".digest")
        self.stat_path = path.with_suffix(".stat")
        self.problem = ""

    def usable(self) -> bool:
        """Whether each of the cache's names is free or a regular file, in folders only this
        user or root may write into. A cache file another user may have written is not read
        (``problem`` says so): the rebuilt table replaces it."""
        folders = folder_trust_problem(self.path.parent, 3)  # <experiment>/, tidy/, cache/
        if folders:
            self.problem = (f"{folders}: others could have written the tidy table's cache "
                            f"{self.path} there; the table was built from the stored runs "
                            "without the cache (make the folders this user's alone, e.g. "
                            "chmod go-w, or remove them)")
            return False
        try:
            for path in (self.path, self.digest_path, self.stat_path):
                st = check_regular(path, _ROLE)
                problem = trust_problem(st) if st is not None else None
                if problem and not self.problem:
                    self.problem = (f"the tidy table's cache file {path} {problem}; another "
                                    "user's file is never served: the table was built again "
                                    "from the stored runs, and replaces it")
        except NotOurs as exc:
            self._taken(exc)
            return False
        except OSError as exc:
            self.problem = (f"the tidy table's cache cannot be examined ({exc}): the table "
                            "was built from the stored runs without the cache")
            return False
        return True

    def _taken(self, exc: NotOurs) -> None:
        self.problem = f"{exc}; the table was built from the stored runs without the cache"

    def _bytes(self, path: Path) -> bytes | None:
        """The content of the regular file ``path``; None where there is none or it cannot
        be read (``problem`` says why)."""
        try:
            return read_regular(path, _ROLE, CACHE_MOST if path == self.path else CACHE_NOTE_MOST,
                                own=True)  # what was opened: another user's is never read
        except NotOurs as exc:  # put there since usable() looked
            self._taken(exc)
        except TooLarge as exc:  # not one iolab wrote: the rebuilt table replaces it
            self.problem = (f"{printable(exc.path)}: {exc.problem}; the table was built again "
                            "from the stored runs, and replaces it")
        except OSError as exc:
            self.problem = (f"the cached table's file {path} cannot be read "
                            f"({exc.strerror or exc}); the table was built again from the "
                            "stored runs")
        return None

    def stamp(self) -> str | None:
        if self.problem:
            return None
        data = self._bytes(self.stat_path)
        return data.decode(errors="replace") if data is not None else None

    def table(self, digest: str | None = None) -> pd.DataFrame | None:
        """The cached table, if its digest file vouches for it (for ``digest``, when given)
        and its bytes match the sha256 recorded with them; else None (``problem`` says why
        when the cache is damaged rather than outdated or absent)."""
        recorded = None if self.problem else self._bytes(self.digest_path)
        if recorded is None:
            return None
        lines = recorded.decode(errors="replace").split("\n")
        if digest is not None and lines[0] != digest:
            return None  # built from other runs or other code: outdated, not damaged
        data = self._bytes(self.path)
        if data is None:
            return None
        if len(lines) < 2 or hashlib.sha256(data).hexdigest() != lines[1]:
            self.problem = (f"the cached table {self.path} does not match the sha256 written "
                            f"with it in {self.digest_path.name} (cut short or overwritten); "
                            "the table was built again from the stored runs")
            return None
        try:
            return pd.read_parquet(io.BytesIO(data))
        except (OSError, ValueError) as exc:
            self.problem = (f"the cached table {self.path} cannot be read ({exc}); the table "
                            "was built again from the stored runs")
            return None

    def write(self, frame: pd.DataFrame, digest: str) -> bool:
        """Cache ``frame`` as the table of ``digest``; whether the cache now holds it."""
        if linked_folder(self.path.parent, 3) is not None:  # cache/, tidy/, <experiment>/
            return False  # a link is never followed: the table is built without a cache
        try:
            make_folders(self.path.parent, CACHE_FOLDER_MODE)  # not the umask's 0777
            _remove(self.digest_path)  # the old digest must not vouch for a table being replaced
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            data = buffer.getvalue()
            # each through a temporary file only this call made: no link beside it followed
            write_atomic(self.path, data, mode=CACHE_MODE)
            write_atomic(self.digest_path,
                         f"{digest}\n{hashlib.sha256(data).hexdigest()}\n".encode(),
                         mode=CACHE_MODE)
            return True
        except OSError:
            return False  # without its current digest, a cache is never read

    def write_stamp(self, stamp: str) -> None:
        if linked_folder(self.stat_path.parent, 3) is not None:
            return
        try:
            write_atomic(self.stat_path, stamp.encode(), mode=CACHE_MODE)
        except OSError:
            pass  # best effort, like the cache itself

    def forget_stamp(self) -> None:
        _remove(self.stat_path)


def cache_path(data_dir: Path, experiment: str, environment: str) -> Path:
    return Path(data_dir) / "cache" / "tidy" / experiment / f"{environment}.parquet"


def forget(data_dir: Path, experiment: str, environment: str) -> None:
    """Let no cached table of the campaign be served again without a scan of its runs (after
    'iolab verify' found one altered in a way the cache's keys cannot see)."""
    cpath = cache_path(data_dir, experiment, environment)
    for path in (cpath.with_suffix(".stat"), cpath.with_suffix(".digest")):
        _remove(path)


def cache_disagreement(data_dir: Path, source: TidySource, environment: str,
                       runs: list[StoredRun]) -> str:
    """Why the campaign's cached table, one :func:`load` would serve for ``runs`` (verified
    runs), is not the table they give ("" when it is, or when no cache would be served): its
    digest file vouches for the parquet by a sha256 it records beside it, which whoever edits
    the parquet can write again, so only the runs re-derived tell a forged table from theirs.
    The table is built again from every run (in worker processes from
    :data:`VERIFY_PARALLEL_FROM` runs), about as long as reading their files again."""
    cache = _Cache(cache_path(data_dir, source.name, environment))
    cached = cache.table(_digest(runs, _code(source))) if cache.usable() else None
    if cached is None:
        return ""  # outdated, absent or damaged: the next table is built from the runs anyway
    buffer = io.BytesIO()  # through parquet as the cache went, so only the values are compared
    build(source, runs, VERIFY_PARALLEL_FROM).to_parquet(buffer, index=False)
    derived = pd.read_parquet(buffer)
    if cached.equals(derived):
        return ""
    return (f"the cached table {cache.path} is not the table its {len(runs)} stored runs give "
            f"({_first_difference(cached, derived)}), though the sha256 beside it matches: "
            "it was edited, and is no longer served (the next table is built from the runs)")


def _first_difference(cached: pd.DataFrame, derived: pd.DataFrame) -> str:
    """Where two tables first differ, in words: a column, a row count, or a run's value."""
    if list(cached.columns) != list(derived.columns):
        extra = sorted(set(cached.columns) ^ set(derived.columns))
        return f"columns differ: {', '.join(map(str, extra[:3])) or 'their order'}"
    if len(cached) != len(derived):
        return f"{len(cached)} rows where the runs give {len(derived)}"
    for column in cached.columns:
        if not cached[column].equals(derived[column]):
            differs = cached[column].ne(derived[column]) & ~(cached[column].isna()
                                                            & derived[column].isna())
            row = int(differs.to_numpy().argmax()) if differs.any() else 0
            was, given = (_plain(frame[column].iloc[row]) for frame in (cached, derived))
            return (f"{column} of run {derived['run.id'].iloc[row]} reads {excerpt(was)} "
                    f"where the run gives {excerpt(given)}")
    return "their column types differ"


def _plain(value: Any) -> Any:
    """A table's value as Python holds it (numpy's scalars print as np.float64(...))."""
    return value.item() if hasattr(value, "item") else value


# From this many runs on, rows are parsed in forked worker processes, one per CPU (at most
# MAX_WORKERS), where a worker's start is a small part of what it saves.
PARALLEL_FROM = 2000
MAX_WORKERS = 8
# verify builds every cached table again, and waits on each: there the workers pay from a few
# hundred runs (they brought the committed data's verify from twice the time without the check
# to an eighth more)
VERIFY_PARALLEL_FROM = 200


def _rows(source: TidySource, runs: list[StoredRun]) -> list[dict[str, Any]]:
    return [source.tidy_row(run) for run in runs]


# the job of forked workers: inherited, not pickled (pickling the manifests to them cost
# more than parsing the runs in-line)
_JOB: tuple[TidySource, list[StoredRun]] | None = None


def _rows_of_slice(start: int, stop: int) -> list[dict[str, Any]]:
    source, runs = _JOB
    return _rows(source, runs[start:stop])


def build(source: TidySource, runs: list[StoredRun], parallel_from: int | None = None
          ) -> pd.DataFrame:
    """Parse every given run into rows (no cache), in parallel from ``parallel_from`` runs
    (:data:`PARALLEL_FROM`, read when called, unless given)."""
    count = min(os.cpu_count() or 1, MAX_WORKERS)
    parallel_from = PARALLEL_FROM if parallel_from is None else parallel_from
    # Forked only from a process without other threads: a fork copies the calling thread
    # alone, and a lock another thread held stays held in the copy. A notebook's kernel has
    # threads, so it parses in-line. (Spawned workers would avoid that, but they import the
    # caller's main script again, which a user's script may not be written to survive.)
    if len(runs) < parallel_from or count < 2 or threading.active_count() > 1:
        return pd.DataFrame(_rows(source, runs))
    import multiprocessing

    from iolab import workers

    global _JOB
    size = -(-len(runs) // (count * 4))  # a few slices per worker evens out their speeds
    starts = range(0, len(runs), size)
    _JOB = (source, runs)
    try:
        with workers.pool(count, mp_context=multiprocessing.get_context("fork")) as pool:
            parts = pool.map(_rows_of_slice, starts, [i + size for i in starts])
            return pd.DataFrame([row for part in parts for row in part])
    finally:
        _JOB = None


def _from_runs(source: TidySource, store: Any, code: str, cache: _Cache | None,
               skip_corrupt: bool) -> tuple[pd.DataFrame, int, bool]:
    """(The table of the store's verified runs: from the cache where its digest still holds
    for them, else built and cached; how many corrupt runs it left out, which fail it unless
    ``skip_corrupt``; whether the cache holds it now)."""
    runs, corrupt = store.scan()
    if corrupt and not skip_corrupt:
        raise listed_error(corrupt_message(corrupt, "its table") + "; or pass "
                         "--skip-corrupt to leave them out")
    digest = _digest(runs, code)
    frame = cache.table(digest) if cache is not None else None
    if frame is not None:
        return frame, len(corrupt), True
    frame = build(source, runs)
    return frame, len(corrupt), cache is not None and cache.write(frame, digest)


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
        # the rows' host_fingerprint vouch for the host record: one changed after it was
        # made (read_host refuses it) describes another host than the runs ran on
        store.read_host()
        cache = _Cache(cache_path(data_dir, source.name, env))
        usable = use_cache and cache.usable()
        # taken before the scan: a file that changes during it cannot match the next time
        stamp = (stat_key(store.root, code) or "") if usable else ""
        frame = cache.table() if stamp and cache.stamp() == stamp else None
        if frame is None:
            if usable:
                cache.forget_stamp()  # until this table is built, no key may vouch for it
            frame, corrupt, cached = _from_runs(source, store, code,
                                                cache if usable else None, skip_corrupt)
            skipped += corrupt
            if cached and stamp and not corrupt:
                # a table that left corrupt runs out is rebuilt each time, so they are reported
                cache.write_stamp(stamp)
        if cache.problem:  # a damaged cache is said once: it holds the rebuilt table now
            print(f"iolab: {printable(cache.problem)}", file=sys.stderr)  # a path: one line
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
