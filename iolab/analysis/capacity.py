"""The device capacity of a CPU-initiated search, and the table conventions it is read with.

Works on the tidy table of a ``cpu_search`` campaign *or* of an imported AiSIO archive: both
use AiSIO's column names where they exist (:data:`VARIABLES`, ``iops``, ``mibs``);
:func:`normalize` maps AiSIO's 0/1 flags and ``fixed_freq`` onto this package's values.

*Device capacity*: the highest mean IOPS over the repetitions of any single-device point
(AiSIO used the highest single run; both are given). The CPU-initiated chapter draws its
roofline with it, and the device-initiated chapters take it as the Little's-law model's
device term (:mod:`iolab.shared.gpu_sources` finds the runs).

Responsible for: normalizing such a table, per-point means and the capacity. Not responsible
for: loading a campaign (its callers), the search's other analysis
(``iolab.experiments.cpu_search.analysis``) or drawing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iolab.analysis import stats

VARIABLES = ["cpu_governor", "turbo", "smt", "thr_sib", "stress", "qdepth", "iosize", "ncores", "ndevs"]


def _onoff(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)) or value in (0, 1):
        return "on" if bool(value) else "off"
    return value


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Give AiSIO-style and iolab-style tables the same columns and value spellings."""
    out = df.copy()
    for col in ("smt", "turbo"):
        if col in out:
            out[col] = out[col].map(_onoff)
    for col in ("thr_sib", "stress"):
        if col in out:
            out[col] = out[col].astype(bool)
    if "fixed_freq" in out and "cpu_governor" in out:
        fixed = pd.to_numeric(out["fixed_freq"], errors="coerce").fillna(0)
        out.loc[fixed > 0, "cpu_governor"] = [f"userspace-{f:.1f}GHz" for f in fixed[fixed > 0]]
    if "ncores" not in out and "ncpus" in out:
        # AiSIO counts logical CPUs; with siblings two of them share one physical core
        out["ncores"] = np.where(out.get("thr_sib", False), out["ncpus"] // 2, out["ncpus"])
    if "mibs" in out:
        out["gibs"] = out["mibs"] / 1024
    return out


def point_means(df: pd.DataFrame, variables: list[str] | None = None,
                confidence: float = 0.95) -> pd.DataFrame:
    cols = [v for v in (variables or VARIABLES) if v in df]
    return stats.summarize(df, cols, ["iops"], confidence).drop(columns=["metric", "method"])


def device_capacity(df: pd.DataFrame, confidence: float = 0.95) -> dict[str, Any]:
    single = df[df["ndevs"] == 1]
    if single.empty:
        return {"iops": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "max_single_run": float("nan"), "n": 0, "point": {}}
    means = point_means(single, confidence=confidence)
    best = means.sort_values("mean").iloc[-1]
    cols = [v for v in VARIABLES if v in means]
    return {"iops": float(best["mean"]), "ci_low": float(best["ci_low"]), "ci_high": float(best["ci_high"]),
            "n": int(best["n"]), "max_single_run": float(single["iops"].max()),
            "point": {c: best[c] for c in cols}}
