"""The tidy table: one row per stored repetition, re-derived from raw files.

Each row holds the point's variables, the metrics parsed from the run's raw files by the
experiment's pure parser, the run id, repetition, environment, host fingerprint, tool
version and the knob states read back. The table is cached as parquet under
``data/cache/`` with a digest of every manifest and raw file; any change to raw data (or
to the parser code) invalidates the cache.

Responsible for: building, caching and checking the table. Not responsible for: statistics
(``stats``) or running anything.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

import pandas as pd

from . import experiments
from .errors import IolabError
from .store import Store


def _knob_columns(knobs: dict) -> dict[str, object]:
    out = {}
    for name, rec in (knobs or {}).items():
        after = rec.get("after") if isinstance(rec, dict) else rec
        out[f"knob_{name}"] = json.dumps(after, sort_keys=True) if isinstance(after, (dict, list)) else after
    return out


def _digest(store: Store, parser_source: str) -> str:
    h = hashlib.sha256(parser_source.encode())
    for run in store.complete_runs():
        h.update(run.run_id.encode())
        for f in sorted(run.path.iterdir()):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _parser_source(experiment: str) -> str:
    """The code that turns raw files into rows: a change to it invalidates the cache."""
    from . import collectors, parsers

    exp = experiments.get(experiment)
    pkg = Path(parsers.__file__).parent
    sources = [inspect.getsource(exp), inspect.getsource(collectors), inspect.getsource(build)]
    sources += [p.read_text() for p in sorted(pkg.glob("*.py"))]
    return "\n".join(sources)


def cache_path(data_dir: Path, experiment: str, environment: str) -> Path:
    return Path(data_dir) / "cache" / "tidy" / experiment / f"{environment}.parquet"


def build(data_dir: Path, experiment: str, environment: str) -> pd.DataFrame:
    """Parse every complete run of one campaign into rows (no cache)."""
    exp = experiments.get(experiment)
    store = Store(data_dir, experiment, environment)
    rows = []
    for run in store.complete_runs():
        m = run.manifest
        rows.append({**m["params"], **exp.parse_run(run.path), "run_id": run.run_id, "rep": m["rep"],
                     "environment": environment, "host_fingerprint": m["host_fingerprint"],
                     "tool_version": m.get("tool_version"), "started_at": m.get("started_at"),
                     **_knob_columns(m.get("knobs"))})
    return pd.DataFrame(rows)


def load(data_dir: Path, experiment: str, environments: str | list[str], *,
         allow_mixed_hosts: bool = False, use_cache: bool = True) -> pd.DataFrame:
    """The tidy table of one or more environments; refuses to pool different hosts."""
    envs = [environments] if isinstance(environments, str) else list(environments)
    parser_source = _parser_source(experiment)
    frames = []
    for env in envs:
        store = Store(data_dir, experiment, env)
        if not store.root.exists():
            raise IolabError(f"{store.root}: no stored campaign for experiment '{experiment}', "
                             f"environment '{env}'")
        digest = _digest(store, parser_source)
        cpath = cache_path(data_dir, experiment, env)
        dpath = cpath.with_suffix(".digest")
        if use_cache and cpath.exists() and dpath.exists() and dpath.read_text() == digest:
            frame = pd.read_parquet(cpath)
        else:
            frame = build(data_dir, experiment, env)
            if use_cache:
                cpath.parent.mkdir(parents=True, exist_ok=True)
                frame.to_parquet(cpath, index=False)
                dpath.write_text(digest)
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not df.empty and df["host_fingerprint"].nunique() > 1 and not allow_mixed_hosts:
        found = ", ".join(f"{fp} ({n} rows)" for fp, n in df["host_fingerprint"].value_counts().items())
        raise IolabError(f"experiment '{experiment}' environments {envs}: rows come from different "
                         f"hosts ({found}); pass allow_mixed_hosts=True (CLI: --allow-mixed-hosts) "
                         "to pool them deliberately")
    return df
