"""Analysis of the SMT/THP chapter: pure functions over its tidy table.

Every comparison holds the variables it does not study at the base point of the params file,
so no row is pooled with another configuration by accident: :func:`at_base` selects.

Definitions:

- the *engine ratio* at a concurrency is mean io_uring IOPS / mean psync IOPS, with a
  log-scale interval (:func:`iolab.analysis.stats.ratio_interval`);
- an *effect* of a setting is the % change of mean IOPS against a reference setting, with
  its interval (:func:`iolab.analysis.stats.pct_change`);
- the *mean of means* over a grid's points weighs each point the same
  (:func:`mean_of_means`);
- a *verdict* reads an interval against a reference value: ``above``, ``below`` or
  ``includes`` (None without an interval);
- the comparisons the chapter quotes are also judged as one family, with Holm's correction
  (:func:`quoted_family`);
- a *layout ratio* is, per engine, mean IOPS or mean p99 latency reading the file laid out
  with fallocate and never written over the same reads of the written file, at the base point
  (:func:`layout_findings`): far below 1 for the p99 says the fallocated file's reads never
  reach the device, as the study this chapter repeats measured its own.

Responsible for: selections, ratios, effects, peak and knee numbers. Not responsible for:
loading (``iolab.core.tidy``), wording or figures (``page`` and ``iolab.report``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from iolab.analysis import findings as fd
from iolab.analysis import multiple, stats
from iolab.analysis.findings import Finding

ENGINES = ("psync", "io_uring")
LAYOUTS = ("written", "fallocated")
# what a layout ratio measures, by metric
LAYOUT_METRICS = {"iops": "IOPS", "clat_p99_us": "p99 latency"}
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
    """Per value of ``by``: both engines' means and n, and io_uring / psync with its interval
    and Welch's p-value on the log scale (``p``), and that p-value Holm-adjusted over the
    table's rows, one family (``p_holm``)."""
    out = []
    for value in sorted(rows[by].unique()) if not rows.empty else []:
        a = rows[(rows["engine"] == "io_uring") & (rows[by] == value)][metric]
        b = rows[(rows["engine"] == "psync") & (rows[by] == value)][metric]
        if len(a) and len(b):
            r = stats.ratio_interval(a, b, confidence)
            out.append({by: value, "io_uring": a.mean(), "psync": b.mean(), "n_io_uring": len(a),
                        "n_psync": len(b), "ratio": r["ratio"], "ci_low": r["ci_low"],
                        "ci_high": r["ci_high"], "p": r["p"]})
    # the columns even without a value both engines ran (a campaign stopped part way)
    table = pd.DataFrame(out, columns=[by, "io_uring", "psync", "n_io_uring", "n_psync",
                                       "ratio", "ci_low", "ci_high", "p"])
    table["p_holm"] = multiple.holm(table["p"].tolist()) if len(table) else []
    return table


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


def mean_of_means(summary: pd.DataFrame, metric: str, engine: str, by: str) -> float:
    """The mean of one engine's point means of ``metric`` over the values of ``by``: each
    point weighs the same, since its number of runs is the repetition rule's, not a weight."""
    return float(means(summary, metric, engine, by=by).mean())


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


def findings(df: pd.DataFrame, base: dict[str, Any], thp_fixed: dict[str, Any],
             blocked: dict[str, str], confidence: float = 0.95) -> list[Finding]:
    """The chapter's findings (:mod:`iolab.analysis.findings`), each at the base point except
    for what it varies: the concurrency sweep's scaling and engine ratios, one core against
    unpinned, SMT on against off and THP always against never, per engine. ``blocked`` names,
    per grid, why this campaign's host could not make its runs (``Chapter.blocked_by_grid``),
    which is what a finding without runs says."""
    c_base = base["concurrency"]
    judge = _Judge(blocked, confidence)
    conc = _grid_rows(df, base, ("concurrency", "engine"))
    aff = _grid_rows(df, base, ("affinity", "engine"))
    smt = _grid_rows(df, base, ("smt", "engine"))
    thp = _grid_rows(df, base, ("thp", "engine"), thp_fixed)
    return [*_concurrency_findings(judge, conc, c_base),
            *_affinity_findings(judge, aff), *_setting_findings(judge, smt, thp),
            *layout_findings(_grid_rows(df, base, ("layout", "engine")), confidence,
                             blocked.get("layout", ""))]


def layout_findings(rows: pd.DataFrame, confidence: float = 0.95,
                    blocked: str = "") -> list[Finding]:
    """Per engine and metric (IOPS, p99 latency), ``layout_<engine>_<metric>``: the mean over
    the fallocated file's runs over the mean over the written file's, of ``rows`` (the layout
    grid's, at the base point). Undefined, saying why, without runs of one side: ``blocked``
    (why this host could not make them) or that none is stored."""
    out = []
    for engine in ENGINES:
        for metric, word in LAYOUT_METRICS.items():
            fid = f"layout_{engine}_{metric}"
            statement = (f"{engine}'s mean {word} reading a file laid out with fallocate and "
                         "never written, over the same reads of the written file")
            new, ref = (_at(rows, metric, engine=engine, layout=lay) for lay in LAYOUTS[::-1])
            if not new or not ref:
                side = "the fallocated" if not new else "the written"
                out.append(fd.undefined(fid, statement, blocked or f"no run reading {side} "
                                        "file is stored (the layout grid)", "ratio",
                                        confidence))
            else:
                out.append(fd.ratio(fid, statement, new, ref, confidence))
    return out


def _grid_rows(df: pd.DataFrame, base: dict[str, Any], free: tuple[str, ...],
               fixed: dict[str, Any] | None = None) -> pd.DataFrame:
    """:func:`at_base`, also of an empty table."""
    return at_base(df, base, free=free, **(fixed or {})) if not df.empty else df


def _at(sub: pd.DataFrame, metric: str, **where: Any) -> list[float]:
    """The values of ``metric`` in the rows of ``sub`` that match ``where``."""
    for k, v in where.items():
        sub = sub[sub[k] == v] if not sub.empty else sub
    return sub[metric].dropna().tolist() if not sub.empty else []


@dataclass
class _Judge:
    """Makes a finding of two samples, or an undefined one saying why a side has none
    (``blocked``: why, per grid, the host could not make its runs)."""
    blocked: dict[str, str]
    confidence: float

    def why_not(self, grid: str) -> str:
        return self.blocked.get(grid) or "no stored runs of one side"

    def pair(self, fid: str, statement: str, kind: str, new: list[float], ref: list[float],
             grid: str) -> Finding:
        """A ``change`` (``kind``) or a ratio of ``new`` against ``ref``."""
        if not new or not ref:
            return fd.undefined(fid, statement, self.why_not(grid),
                                "change" if kind == "change" else "ratio", self.confidence)
        build = fd.change if kind == "change" else fd.ratio
        return build(fid, statement, new, ref, self.confidence)


def _concurrency_findings(judge: _Judge, conc: pd.DataFrame, c_base: int) -> list[Finding]:
    """psync's scaling and the engines' ratios along the concurrency sweep, between its
    lowest and highest concurrency (1 and 64 without runs) and the base one. With the base
    concurrency alone (a campaign of another grid, such as the layout grid, ran it) there is
    no sweep: what compares two levels is undefined, never one level with itself."""
    levels = sorted(int(c) for c in conc["concurrency"].unique()) if not conc.empty else []
    low, high = (levels[0], levels[-1]) if levels else (1, 64)

    def across(fid: str, statement: str, kind: str, new: list[float],
               ref: list[float]) -> Finding:
        if len(levels) == 1:
            return fd.undefined(fid, statement, "no concurrency sweep is stored here (only "
                                f"concurrency {levels[0]})", kind, judge.confidence)
        return judge.pair(fid, statement, kind, new, ref, "concurrency")

    return [
        across("psync_scaling_iops", f"psync's mean IOPS at concurrency {high} against "
               f"{c_base}", "change", _at(conc, "iops", engine="psync", concurrency=high),
               _at(conc, "iops", engine="psync", concurrency=c_base)),
        judge.pair("engine_ratio_iops", f"io_uring / psync mean IOPS at concurrency {c_base}",
                   "ratio", _at(conc, "iops", engine="io_uring", concurrency=c_base),
                   _at(conc, "iops", engine="psync", concurrency=c_base), "concurrency"),
        across("psync_p99_sweep", f"psync's mean p99 latency at concurrency {high} against "
               f"{low}", "change", _at(conc, "clat_p99_us", engine="psync", concurrency=high),
               _at(conc, "clat_p99_us", engine="psync", concurrency=low)),
        across("engine_ratio_p99_low", f"io_uring / psync mean p99 latency at concurrency "
               f"{low}", "ratio", _at(conc, "clat_p99_us", engine="io_uring", concurrency=low),
               _at(conc, "clat_p99_us", engine="psync", concurrency=low)),
        judge.pair("engine_ratio_p99_base", f"io_uring / psync mean p99 latency at concurrency "
                   f"{c_base}, unpinned", "ratio",
                   _at(conc, "clat_p99_us", engine="io_uring", concurrency=c_base),
                   _at(conc, "clat_p99_us", engine="psync", concurrency=c_base), "concurrency"),
    ]


def _affinity_findings(judge: _Judge, aff: pd.DataFrame) -> list[Finding]:
    """One core against unpinned: psync's change, and io_uring's ratio over psync's."""
    one = [_at(aff, "iops", engine=e, affinity=a) for e in ("io_uring", "psync")
           for a in ("one_core", "unpinned")]
    gap = "io_uring's one-core/unpinned IOPS ratio over psync's"
    return [
        judge.pair("one_core_psync_iops", "psync's mean IOPS on one core against unpinned",
                   "change", _at(aff, "iops", engine="psync", affinity="one_core"),
                   _at(aff, "iops", engine="psync", affinity="unpinned"), "affinity"),
        fd.interaction("one_core_engine_gap", gap, *one, confidence=judge.confidence)
        if all(one) else fd.undefined("one_core_engine_gap", gap, judge.why_not("affinity"),
                                      "ratio", judge.confidence),
    ]


def _setting_findings(judge: _Judge, smt: pd.DataFrame, thp: pd.DataFrame) -> list[Finding]:
    """Per engine and metric (IOPS, p99 latency): SMT on against off, THP always against
    never."""
    out = []
    for engine in ENGINES:
        for metric, word in (("iops", "IOPS"), ("clat_p99_us", "p99 latency")):
            out.append(judge.pair(f"smt_{engine}_{metric}", f"{engine}'s mean {word} with SMT "
                                  "on against off", "change",
                                  _at(smt, metric, engine=engine, smt="on"),
                                  _at(smt, metric, engine=engine, smt="off"), "smt"))
            out.append(judge.pair(f"thp_{engine}_{metric}", f"{engine}'s mean {word} with THP "
                                  "always against never (buffered reads)", "change",
                                  _at(thp, metric, engine=engine, thp="always"),
                                  _at(thp, metric, engine=engine, thp="never"), "thp"))
    return out
