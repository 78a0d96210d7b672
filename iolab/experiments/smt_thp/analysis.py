"""Analysis of the SMT/THP chapter: pure functions over its tidy table.

Every comparison holds the variables it does not study at the base point of the params file,
so no row is pooled with another configuration by accident: :func:`at_base` selects.

Definitions:

- the *engine ratio* at a concurrency is mean io_uring IOPS / mean psync IOPS, with a
  log-scale interval (:func:`iolab.analysis.stats.ratio_interval`);
- an *effect* of a setting is the % change of mean IOPS against a reference setting, with
  its interval (:func:`iolab.analysis.stats.pct_change`);
- a *verdict* reads an interval against a reference value: ``above``, ``below`` or
  ``includes`` (None without an interval);
- the comparisons the chapter quotes are also judged as one family, with Holm's correction
  (:func:`quoted_family`).

Responsible for: selections, ratios, effects, peak and knee numbers. Not responsible for:
loading (``iolab.core.tidy``), wording or figures (the notebook and ``iolab.report``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from iolab.analysis import multiple, stats

ENGINES = ("psync", "io_uring")
AFFINITIES = ("unpinned", "one_core", "two_cores", "all_cores")


def at_base(df: pd.DataFrame, base: dict[str, Any], free: tuple[str, ...] = (),
            **fixed: Any) -> pd.DataFrame:
    """Rows at the base point, except the ``free`` variables (any value) and ``fixed`` ones."""
    if df.empty:
        return df
    want = {k: v for k, v in {**base, **fixed}.items() if k not in free}
    mask = np.ones(len(df), dtype=bool)
    for key, value in want.items():
        mask &= (df[key] == value).to_numpy()
    return df[mask]


def engine_ratios(rows: pd.DataFrame, by: str = "concurrency", metric: str = "iops",
                  confidence: float = 0.95) -> pd.DataFrame:
    """Per value of ``by``: both engines' means and n, and io_uring / psync with its interval."""
    out = []
    for value in sorted(rows[by].unique()) if not rows.empty else []:
        a = rows[(rows["engine"] == "io_uring") & (rows[by] == value)][metric]
        b = rows[(rows["engine"] == "psync") & (rows[by] == value)][metric]
        if len(a) and len(b):
            r = stats.ratio_interval(a, b, confidence)
            out.append({by: value, "io_uring": a.mean(), "psync": b.mean(), "n_io_uring": len(a),
                        "n_psync": len(b), "ratio": r["ratio"], "ci_low": r["ci_low"],
                        "ci_high": r["ci_high"]})
    # the columns even without a value both engines ran (a campaign stopped part way)
    return pd.DataFrame(out, columns=[by, "io_uring", "psync", "n_io_uring", "n_psync", "ratio",
                                      "ci_low", "ci_high"])


def verdict(low: float, high: float, reference: float = 1.0) -> str | None:
    """Where an interval lies against a reference value; None where it is undefined (one
    run on a side)."""
    if np.isnan(low) or np.isnan(high):
        return None
    if low > reference:
        return "above"
    if high < reference:
        return "below"
    return "includes"


def peak(summary: pd.DataFrame, metric: str = "iops") -> pd.Series:
    """The summary row with the highest mean of ``metric``."""
    return summary[summary["metric"] == metric].sort_values("mean").iloc[-1]


def means(summary: pd.DataFrame, metric: str, engine: str, by: str = "concurrency") -> pd.Series:
    s = summary[(summary["metric"] == metric) & (summary["engine"] == engine)]
    return s.set_index(by)["mean"]


def knee(summary: pd.DataFrame, engine: str, low: int, high: int) -> dict[str, float] | None:
    """From concurrency ``low`` to ``high``: % change of mean IOPS and the p99 growth factor."""
    iops, p99 = means(summary, "iops", engine), means(summary, "clat_p99_us", engine)
    if not {low, high} <= set(iops.index) or not {low, high} <= set(p99.index):
        return None
    return {"iops_pct": 100 * (iops[high] / iops[low] - 1), "p99_fold": p99[high] / p99[low]}


def effect_by_engine(rows: pd.DataFrame, variable: str, value: Any, reference: Any,
                     metric: str = "iops", confidence: float = 0.95) -> dict[str, dict[str, float]]:
    """Per engine: % change of mean ``metric`` from ``variable=reference`` to ``=value``."""
    out = {}
    for engine in ENGINES:
        new = rows[(rows["engine"] == engine) & (rows[variable] == value)][metric]
        ref = rows[(rows["engine"] == engine) & (rows[variable] == reference)][metric]
        if len(new) and len(ref):
            out[engine] = stats.pct_change(new, ref, confidence)
    return out


def quoted_family(df: pd.DataFrame, base: dict[str, Any], thp_fixed: dict[str, Any],
                  confidence: float = 0.95) -> pd.DataFrame:
    """The comparisons of mean IOPS the chapter quotes, judged as one family with Holm's
    correction (:func:`iolab.analysis.multiple.family`): io_uring against psync at the
    lowest, the base and the highest concurrency; one core against unpinned, and THP
    ``always`` against ``never`` (with ``thp_fixed``, the THP grid's own settings), for each
    engine."""
    rows: list[dict[str, Any]] = []
    if df.empty:  # nothing stored (yet): an empty family
        return multiple.family(rows, confidence)
    conc = at_base(df, base, free=("concurrency", "engine"))
    levels = sorted(int(c) for c in conc["concurrency"].unique()) if not conc.empty else []
    for c in dict.fromkeys([*levels[:1], base["concurrency"], *levels[-1:]]):
        a = conc[(conc["engine"] == "io_uring") & (conc["concurrency"] == c)]["iops"]
        b = conc[(conc["engine"] == "psync") & (conc["concurrency"] == c)]["iops"]
        if len(a) and len(b):
            r = stats.ratio_interval(a, b, confidence)
            rows.append({"comparison": f"io_uring vs psync at concurrency {c}",
                         "pct": 100 * (r["ratio"] - 1), "p": r["p"]})
    for what, variable, value, reference, fixed in (
            ("one core vs unpinned", "affinity", "one_core", "unpinned", {}),
            ("THP always vs never", "thp", "always", "never", thp_fixed)):
        rows_of = at_base(df, base, free=(variable, "engine"), **fixed)
        for engine, change in effect_by_engine(rows_of, variable, value, reference,
                                               confidence=confidence).items():
            rows.append({"comparison": f"{what}, {engine}", "pct": change["pct"],
                         "p": change["p"]})
    return multiple.family(rows, confidence)


def physical_cores(topology: list[dict[str, Any]]) -> tuple[int, int]:
    """(logical CPUs, physical cores) of a recorded topology."""
    return len({c["cpu"] for c in topology}), len({(c["package"], c["core"]) for c in topology})
