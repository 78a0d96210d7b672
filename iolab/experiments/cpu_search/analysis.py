"""Analysis of the CPU-initiated parameter search: capacity, roofline, optimum, A–D, effects.

Works on the tidy table of a ``cpu_search`` campaign *or* of an imported AiSIO archive: both
use AiSIO's column names where they exist (``qdepth``, ``iosize``, ``ndevs``, ``thr_sib``,
``smt``, ``turbo``, ``stress``, ``cpu_governor``, ``iops``, ``mibs``); :func:`normalize` maps
AiSIO's 0/1 flags and ``fixed_freq`` onto this package's values.

Definitions (stated because AiSIO left some implicit):

- *device capacity*: the highest mean IOPS over the repetitions of any single-device point
  (AiSIO used the highest single run; both are reported;
  :func:`iolab.analysis.capacity.device_capacity`, with :data:`VARIABLES` and
  :func:`normalize`, shared with the device-initiated chapters); where the campaign has a
  confirmation step, the mean of that point's fresh confirmation runs
  (:func:`confirmed_estimates`), which its choice does not bias;
- *roofline* for n devices: capacity x n, computed from the data, never a constant;
- *optimum*: the point of the search grid with the highest mean IOPS; being the largest of
  many noisy means it is biased upwards, so beside it stands the *best set*, the points that
  cannot be told apart from it (:func:`best_points`);
- *A–D*: the optimum with thread siblings used/not used x stress off/on;
- an *effect*: the % change of mean IOPS from a reference point to a changed point, with a
  95 % interval (on the log scale, see :func:`iolab.analysis.stats.pct_change`).

Responsible for: these computations. Not responsible for: loading (``tidy``) or plotting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from iolab.analysis import confirmation, stats
from iolab.analysis import findings as fd
from iolab.analysis.capacity import VARIABLES, device_capacity, normalize, point_means
from iolab.analysis.findings import Finding
from iolab.analysis.selection import BestSet, best_set

AD_IDS = {("A"): (True, False), ("B"): (True, True), ("C"): (False, False), ("D"): (False, True)}


def select(df: pd.DataFrame, point: dict[str, Any]) -> pd.DataFrame:
    mask = np.ones(len(df), dtype=bool)
    for key, value in point.items():
        if key in df:
            mask &= (df[key] == value).to_numpy()
    return df[mask]


def optimum(df: pd.DataFrame) -> dict[str, Any]:
    means = point_means(df)
    best = means.sort_values("mean").iloc[-1]
    return {c: best[c] for c in VARIABLES if c in means}


def point_estimate(df: pd.DataFrame, point: dict[str, Any],
                   confidence: float = 0.95) -> dict[str, float]:
    """n, mean, sd and t-interval of the mean IOPS of one point."""
    return stats.t_interval(select(df, point)["iops"], confidence)


def roofline_share(quoted: dict[str, Any]) -> tuple[float, float]:
    """The roofline at the optimum's devices (the quoted capacity x its devices) and the
    quoted optimum in % of it (``quoted`` as :func:`confirmed_estimates` gives it)."""
    roof = quoted["capacity"] * quoted["ndevs"]
    return roof, 100 * quoted["optimum"] / roof


def published_change(published: pd.Series, new: str = "D", old: str = "C") -> float:
    """% change between two published A–D means (``published``: IOPS by id)."""
    return 100 * (published[new] / published[old] - 1)


def largest_departure_pct(ratios: pd.DataFrame) -> float:
    """The largest distance from 1 of a table of ratios (a column ``ratio``), in %."""
    return 100 * (ratios["ratio"] - 1).abs().max()


def best_points(df: pd.DataFrame, confidence: float = 0.95) -> tuple[BestSet, pd.DataFrame]:
    """The points whose mean IOPS cannot be told apart from the best point's
    (:func:`iolab.analysis.selection.best_set`), and one row per point: its variables, n,
    mean, interval, whether it is in the set and, if not, the point that beats it. Rows sorted
    by mean, highest first."""
    means = point_means(df, confidence=confidence)
    cols = [v for v in VARIABLES if v in means]
    if means.empty:
        return best_set({}, confidence), means.assign(best=[], beaten_by=[])
    keys = [tuple(row) for row in means[cols].itertuples(index=False)]
    label = {k: str(i) for i, k in enumerate(keys)}
    samples = {label[k]: g["iops"].tolist()
               for k, g in df.groupby(cols, sort=False, dropna=False)}
    found = best_set(samples, confidence)
    by_label = {v: dict(zip(cols, k)) for k, v in label.items()}
    table = means.assign(
        best=[label[k] in found.members for k in keys],
        beaten_by=[by_label.get(found.beaten_by.get(label[k])) for k in keys])
    return found, table.sort_values("mean", ascending=False, ignore_index=True)


def confirmed_estimates(df: pd.DataFrame, confirmed: pd.DataFrame,
                        confidence: float = 0.95) -> dict[str, Any]:
    """The confirmation step's estimates (``iolab.analysis.confirmation``): ``table``, one
    row per confirmed point; ``optimum``, the confirmed point the search ranked highest, and
    ``capacity``, the single-device one it ranked highest (rows of the table, None where the
    step confirmed none); ``quoted``, the optimum's and the capacity's IOPS the chapter quotes
    and the optimum's devices: the confirmation means where there are some, else the search's
    (``source`` says which of the two)."""
    keys = [v for v in VARIABLES if v in df and v in confirmed]
    table = confirmation.confirmed_points(df, confirmed, keys, "iops", confidence)
    single = table[table["ndevs"] == 1] if "ndevs" in table else table.iloc[0:0]
    opt_row = table.iloc[0] if len(table) else None
    cap_row = single.iloc[0] if len(single) else None
    opt = optimum(df) if not df.empty else {}
    search_opt = float(select(df, opt)["iops"].mean()) if opt else float("nan")
    quoted = {
        "optimum": float(opt_row["mean"]) if opt_row is not None else search_opt,
        "optimum_source": "confirmation" if opt_row is not None else "search",
        "ndevs": int(opt_row["ndevs"]) if opt_row is not None else int(opt.get("ndevs", 0)),
        "capacity": (float(cap_row["mean"]) if cap_row is not None
                     else device_capacity(df, confidence)["iops"]),
        "capacity_source": "confirmation" if cap_row is not None else "search"}
    return {"table": table, "optimum": opt_row, "capacity": cap_row, "quoted": quoted}


def replication(df: pd.DataFrame, other: pd.DataFrame,
                confidence: float = 0.95) -> dict[str, Any]:
    """The same search on two hosts: each one's best set (:func:`best_points`), how many
    points the two sets share of the points both measured, whether each host's top point is in
    the other's set, and the ratio of the two top means (``stats.ratio_interval``, this
    campaign's over the other's)."""
    found, rows = best_points(df, confidence)
    theirs, their_rows = best_points(other, confidence)
    cols = [v for v in VARIABLES if v in rows and v in their_rows]

    def members(table: pd.DataFrame) -> set[tuple]:
        return {tuple(r) for r in table.loc[table["best"], cols].itertuples(index=False)}

    ours, other_set = members(rows), members(their_rows)
    both = ({tuple(r) for r in rows[cols].itertuples(index=False)}
            & {tuple(r) for r in their_rows[cols].itertuples(index=False)})
    top = tuple(rows.iloc[0][cols]) if len(rows) else None
    their_top = tuple(their_rows.iloc[0][cols]) if len(their_rows) else None
    ratio = stats.ratio_interval(select(df, dict(zip(cols, top)))["iops"] if top else [],
                                 select(other, dict(zip(cols, their_top)))["iops"]
                                 if their_top else [], confidence)
    return {"ours": len(ours), "theirs": len(other_set), "common_points": len(both),
            "shared": len(ours & other_set & both),
            "agree": top in other_set and their_top in ours,
            "top_in_theirs": top in other_set, "their_top_in_ours": their_top in ours,
            "same_top": top == their_top, "top": dict(zip(cols, top)) if top else {},
            "their_top": dict(zip(cols, their_top)) if their_top else {}, "ratio": ratio}


def ad_table(df: pd.DataFrame, opt: dict[str, Any], confidence: float = 0.95) -> pd.DataFrame:
    rows = []
    for pid, (sib, stress) in AD_IDS.items():
        sub = select(df, {**opt, "thr_sib": sib, "stress": stress})["iops"]
        rows.append({"id": pid, "thr_sib": sib, "stress": stress, **stats.t_interval(sub, confidence)})
    return pd.DataFrame(rows)


def effect(df: pd.DataFrame, reference: dict[str, Any], change: dict[str, Any],
           confidence: float = 0.95) -> dict[str, Any]:
    """% change of mean IOPS from ``reference`` to ``reference | change``, with its 95 % interval."""
    ref = select(df, reference)["iops"]
    new = select(df, {**reference, **change})["iops"]
    if ref.empty or new.empty:
        return {"pct": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "n_ref": len(ref), "n_new": len(new), "iops": float("nan")}
    return {**stats.pct_change(new, ref, confidence), "n_ref": len(ref), "n_new": len(new),
            "iops": float(new.mean())}


def sweep_rows(df: pd.DataFrame, reference: dict[str, Any], variable: str,
               by: str | None = None) -> pd.DataFrame:
    """The rows along one variable with every other at ``reference`` (``by`` kept free)."""
    return select(df, {k: v for k, v in reference.items() if k not in (variable, by)})


def sweep(df: pd.DataFrame, reference: dict[str, Any], variable: str,
          metrics: tuple[str, ...] = ("iops",), by: str | None = None,
          confidence: float = 0.95) -> pd.DataFrame:
    """Summaries along one variable with every other variable at ``reference`` (``by`` kept free)."""
    sub = sweep_rows(df, reference, variable, by)
    keys = [variable] + ([by] if by else [])
    return stats.summarize(sub, keys, list(metrics), confidence) if not sub.empty else pd.DataFrame()


# the cores sweep shows turbo on and off with SMT held, so the two are never mixed
SWEEP_BY = {"ncores": "turbo"}
SWEPT = ("qdepth", "iosize", "ncores", "ndevs")


def sweeps(df: pd.DataFrame, base: dict[str, Any],
           confidence: float = 0.95) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """Each one-at-a-time sweep around the base point: its summary (:func:`sweep`; IOPS, and
    GiB/s along the I/O size) and its rows (:func:`sweep_rows`)."""
    ref = {k: v for k, v in base.items() if k in VARIABLES}
    return {v: (sweep(df, ref, v, by=SWEEP_BY.get(v), confidence=confidence,
                      metrics=("iops", "gibs") if v == "iosize" else ("iops",)),
                sweep_rows(df, ref, v, by=SWEEP_BY.get(v)))
            for v in SWEPT}


def sweep_facts(summaries: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """What the prose reads off the sweeps' summaries (a key is absent where its sweep has no
    rows): the queue depth of the highest mean and whether it is the largest tested
    (``best_qdepth``, ``qdepth_at_end``); the mean GiB/s at the smallest and the largest I/O
    size (``gibs_small``, ``gibs_large``, ``io_small``, ``io_large``); the mean IOPS at the
    most devices over that at the fewest (``dev_scaling``, ``dev_n``)."""
    out: dict[str, Any] = {}
    q = summaries["qdepth"]
    if not q.empty:
        top = int(q.sort_values("mean").iloc[-1]["qdepth"])
        out.update(best_qdepth=top, qdepth_at_end=top == q["qdepth"].max())
    io = summaries["iosize"]
    if not io.empty:
        g = io[io["metric"] == "gibs"].set_index("iosize")["mean"]
        out.update(gibs_small=g.iloc[0], gibs_large=g.iloc[-1], io_small=int(g.index[0]),
                   io_large=int(g.index[-1]))
    dv = summaries["ndevs"]
    if not dv.empty:
        d = dv.set_index("ndevs")["mean"]
        out.update(dev_scaling=d.iloc[-1] / d.iloc[0], dev_n=int(d.index[-1]))
    return out


# -- the design, and comparisons with published values -------------------------------------

# (what changes, the change against the reference point, AiSIO's name of its table)
EFFECTS = (("powersave governor", {"cpu_governor": "powersave"}, "powersave"),
           ("turbo off", {"turbo": "off"}, "turbo_off"),
           ("SMT off", {"smt": "off"}, "smt_off"),
           ("SMT off, userspace governor at 3.0 GHz",
            {"smt": "off", "cpu_governor": "userspace-3.0GHz"}, "smt_off_3ghz"))


def design_summary(points: list, repetitions: int) -> dict[str, int]:
    """Sizes of a plan's design: the search grid, its exclusions, the one-at-a-time points,
    and its runs with ``repetitions`` per point (under a rule, pass its max: the most)."""
    search = [p for p in points if "search" in p.grids]
    return {"search_points": len(search),
            "search_excluded": sum(bool(p.excluded_by) for p in search),
            "search_runnable": sum(not p.excluded_by for p in search),
            "expansion_points": sum("search" not in p.grids for p in points),
            "runs": sum(not p.excluded_by for p in points) * repetitions}


def grid_table(grids: dict[str, dict], points: list,
               describe: Callable[[str, Any], str] = lambda k, v: str(v),
               label: Callable[[str], str] = str) -> pd.DataFrame:
    """One row per grid: what it varies and sets, its points and how many are excluded.
    Variables and values are written as ``label`` and ``describe`` (the experiment's
    ``axis_label`` and ``describe``) give them, so a reader sees words, not Python lists."""
    rows = []
    for name, grid in grids.items():
        pts = [p for p in points if name in p.grids]
        varies = "; ".join(f"{label(k)}: " + ", ".join(describe(k, v) for v in values)
                           for k, values in grid["vary"].items())
        rows.append({"grid": name, "varies": varies,
                     "sets": ", ".join(f"{label(k)}={describe(k, v)}"
                                       for k, v in grid["set"].items()) or "—",
                     "points": len(pts), "excluded": sum(bool(p.excluded_by) for p in pts)})
    return pd.DataFrame(rows)


def ad_comparison(df: pd.DataFrame, opt: dict[str, Any], published: pd.Series | None,
                  confidence: float = 0.95) -> pd.DataFrame:
    """A–D at the optimum, measured (n, mean, sd, interval) beside the published IOPS."""
    ad = ad_table(df, opt, confidence).set_index("id")
    if published is not None:
        ad["published"] = published.reindex(ad.index)
        ad["measured / published"] = ad["mean"] / ad["published"]
    return ad


def effects(df: pd.DataFrame, opt: dict[str, Any], published: pd.DataFrame | None,
            confidence: float = 0.95) -> pd.DataFrame:
    """Each knob effect of :data:`EFFECTS` for each A–D id that AiSIO published, measured
    where this campaign has the points (``n`` 0 where it has not)."""
    rows = []
    for label, change, setting in EFFECTS:
        pub = (published[published["setting"] == setting].set_index("id")
               if published is not None else pd.DataFrame())
        for pid, (sib, stress) in AD_IDS.items():
            if published is not None and pid not in pub.index:
                continue
            eff = effect(df, {**opt, "thr_sib": sib, "stress": stress}, change, confidence)
            rows.append({"change": label, "id": pid, "n": eff["n_new"], "iops": eff["iops"],
                         "pct": eff["pct"], "ci_low": eff["ci_low"], "ci_high": eff["ci_high"],
                         "published_iops": pub.loc[pid, "iops"] if pid in pub.index else np.nan,
                         "published_pct": (pub.loc[pid, "published_change_pct"]
                                           if pid in pub.index else np.nan)})
    return pd.DataFrame(rows)


def findings(df: pd.DataFrame, base: dict[str, Any], opt: dict[str, Any],
             blocked: dict[str, str], confidence: float = 0.95,
             files: bool = False) -> list[Finding]:
    """The chapter's findings (:mod:`iolab.analysis.findings`): the one-at-a-time sweeps
    around the base point (queue depth 128 against the best other depth, I/O size, scaling
    with cores and devices), stress with and without thread siblings at the optimum ``opt``,
    and the knob effects at the base point. ``blocked`` names, per grid, why the campaign's
    host could not make its runs (``Chapter.blocked_by_grid``); ``files``: the "devices" are
    files on one file system, which add no device capacity, so device scaling is not tested."""
    ref = {k: v for k, v in base.items() if k in VARIABLES}
    c = _Comparisons(df, ref, blocked, confidence, files)
    return [*_sweep_findings(c), *_stress_findings(c, opt), *_knob_findings(c)]


@dataclass
class _Comparisons:
    """How :func:`findings` compares two points of the table ``df`` (``ref``: the base
    point's variables; the other fields as :func:`findings` takes them)."""
    df: pd.DataFrame
    ref: dict[str, Any]
    blocked: dict[str, str]
    confidence: float
    files: bool

    def values(self, point: dict[str, Any], metric: str = "iops") -> list[float]:
        return select(self.df, point)[metric].dropna().tolist() if not self.df.empty else []

    def change(self, fid: str, what: str, new: dict[str, Any], old: dict[str, Any], grid: str,
               metric: str = "iops") -> Finding:
        """The % change of ``metric`` from ``old`` to ``new``, undefined (saying why) where a
        side has no values."""
        a, b = self.values(new, metric), self.values(old, metric)
        if not a or not b:
            df = self.df
            # runs on both sides, yet no value: the host could not give this metric
            unsampled = (not df.empty and not select(df, new).empty
                         and not select(df, old).empty)
            return fd.undefined(fid, what, f"the stored runs have no {metric} (the campaign's "
                                "host did not give it)" if unsampled else
                                self.blocked.get(grid) or "no stored runs of one side",
                                confidence=self.confidence)
        return fd.change(fid, what, a, b, self.confidence)

    def per_unit(self, fid: str, what: str, variable: str, grid: str) -> Finding:
        """IOPS at the sweep's largest value over IOPS at 1, divided by that value: 1 is
        linear scaling."""
        ref, confidence = self.ref, self.confidence
        levels = sorted(select(self.df, {k: v for k, v in ref.items() if k != variable})
                        [variable].unique()) if not self.df.empty else []
        top = int(levels[-1]) if levels else 0
        a, b = self.values({**ref, variable: top}), self.values({**ref, variable: 1})
        why = (self.blocked.get(grid) or "the sweep has no second value"
               if top < 2 or not a or not b else self.out_of_range(variable, top))
        if why:
            return fd.undefined(fid, what, why, "ratio", confidence)
        r = fd.ratio(fid, f"{what} ({top} against 1)", a, b, confidence)
        return fd.Finding(r.id, r.statement, "ratio", r.estimate / top, r.ci_low / top,
                          r.ci_high / top, r.n, confidence,
                          r.method + f", divided by {top}", r.undefined)

    def out_of_range(self, variable: str, top: int) -> str:
        """Why the claim does not cover scaling up to ``top`` ("" where it does)."""
        if variable == "ndevs" and self.files:
            return ("the 'devices' here are files on one file system, which add no device "
                    "capacity")
        if variable == "ncores" and self.ref["ndevs"] < 2 * top:
            return (f"the sweep's {top} cores at {self.ref['ndevs']} devices lie outside the "
                    "claim's range of at most one core per two devices")
        return ""


def _best_other_qdepth(df: pd.DataFrame, ref: dict[str, Any]) -> int | None:
    """The queue depth other than 128 with the highest mean IOPS along the sweep."""
    qd = select(df, {k: v for k, v in ref.items() if k != "qdepth"}) if not df.empty else df
    others = (qd[qd["qdepth"] != 128].groupby("qdepth")["iops"].mean()
              if not qd.empty else pd.Series(dtype=float))
    return int(others.idxmax()) if len(others) else None


def _sweep_findings(c: _Comparisons) -> list[Finding]:
    """Along the one-at-a-time sweeps: queue depth, I/O size, cores and devices."""
    ref = c.ref
    best_other = _best_other_qdepth(c.df, ref)
    return [
        c.change("qdepth_128_vs_best_other", f"mean IOPS at queue depth 128 against the best "
                 f"other depth of the sweep ({best_other})", {**ref, "qdepth": 128},
                 {**ref, "qdepth": best_other}, "expand-qdepth"),
        c.change("iosize_4096_iops", "mean IOPS at 4096-byte against 512-byte reads",
                 {**ref, "iosize": 4096}, {**ref, "iosize": 512}, "expand-iosize"),
        c.change("iosize_4096_bandwidth", "mean bandwidth at 4096-byte against 512-byte "
                 "reads", {**ref, "iosize": 4096}, {**ref, "iosize": 512}, "expand-iosize",
                 "mibs"),
        c.per_unit("core_scaling", "IOPS per core relative to one core", "ncores",
                   "expand-ncores"),
        c.per_unit("device_scaling", "IOPS per device relative to one device", "ndevs",
                   "expand-ndevs"),
    ]


def _stress_findings(c: _Comparisons, opt: dict[str, Any]) -> list[Finding]:
    """Stress at the optimum, with one thread per core (C to D) and with both (A to B)."""
    opt_c = {**opt, "thr_sib": False}
    return [
        c.change("stress_without_siblings", "mean IOPS at the optimum with stress-ng on the "
                 "idle CPUs against without (one thread per core, C to D)",
                 {**opt_c, "stress": True}, {**opt_c, "stress": False}, "search"),
        c.change("stress_with_siblings", "mean IOPS at the optimum with stress against "
                 "without, both threads of each core used (A to B)",
                 {**opt, "thr_sib": True, "stress": True},
                 {**opt, "thr_sib": True, "stress": False}, "thr-sib"),
    ]


def _knob_findings(c: _Comparisons) -> list[Finding]:
    """The knob effects at the base point: governor, turbo (also with twice the cores, and
    on the CPUs' frequency) and SMT (also with SMT off at a fixed 3.0 GHz, and stress then)."""
    ref = c.ref
    return [
        c.change("governor_powersave", "mean IOPS with the powersave governor against as "
                 "found", {**ref, "cpu_governor": "powersave"}, ref, "governor"),
        c.change("turbo_off", "mean IOPS with turbo off against as found",
                 {**ref, "turbo": "off"}, ref, "turbo"),
        c.change("smt_off", "mean IOPS with SMT off against as found", {**ref, "smt": "off"},
                 ref, "smt"),
        c.change("turbo_off_double_cores", "mean IOPS with turbo off and twice the cores "
                 "against turbo on", {**ref, "turbo": "off", "ncores": 2 * ref["ncores"]},
                 {**ref, "turbo": "on"}, "turbo"),
        c.change("turbo_off_frequency", "mean frequency of the run's CPUs in its measurement "
                 "window with turbo off against as found", {**ref, "turbo": "off"}, ref,
                 "turbo", "cpufreq_mean_khz"),
        c.change("smt_off_3ghz_vs_performance", "mean IOPS with SMT off at a fixed 3.0 GHz "
                 "(userspace governor) against SMT off with the performance governor",
                 {**ref, "smt": "off", "cpu_governor": "userspace-3.0GHz"},
                 {**ref, "smt": "off"}, "smt-off-3ghz"),
        c.change("stress_smt_off", "mean IOPS with SMT off at 3.0 GHz with stress on the idle "
                 "CPUs against without (C to D)",
                 {**ref, "smt": "off", "cpu_governor": "userspace-3.0GHz", "stress": True},
                 {**ref, "smt": "off", "cpu_governor": "userspace-3.0GHz", "stress": False},
                 "smt-off-3ghz"),
    ]
