"""The SMT/THP chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/smt_thp.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter`, fills ``ch.text`` (the glued texts) and
``ch.figures``, and returns what the section displays (a Styler, a figure, Markdown, or None
where there is nothing to show). Every figure of the chapter is one layout,
:func:`_panels`, drawn for another grid and other metrics.

Responsible for: the chapter's wording, number formats, figures and tables.
Not responsible for: statistics (``analysis``), loading runs and the shared chapter steps
(``iolab.report.chapter``), or which keys the prose glues (the notebook's Markdown).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from iolab.analysis import multiple, stats
from iolab.analysis.findings import by_id
from iolab.experiments.smt_thp import analysis as an
from iolab.report import escape
from iolab.report import figures as fg
from iolab.report.chapter import Chapter, Sentence
from iolab.report.tables import fmt_int, fmt_num, fmt_range, pct_with_interval, summary_table
from iolab.report.widgets import explorer as live_explorer
from iolab.report import compare

ENGINES = list(an.ENGINES)
METRICS = ["iops", "clat_p50_us", "clat_p99_us", "usr_cpu", "sys_cpu"]
# what the p99, affinity and SMT figures show; the THP part shows the system CPU time instead
IOPS_P99 = ["iops", "clat_p99_us"]


def _thp_set(ch: Chapter) -> dict[str, Any]:
    """The THP grid's own settings (its block size and direct I/O), from the params file."""
    return ch.spec.grids.get("thp", {}).get("set", {})


def _kib(nbytes: int) -> str:
    return f"{nbytes // 1024} KiB"


def _grid(ch: Chapter, variable: str, values: list[str] | None = None,
          **fixed: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of one grid (the base point but for ``variable`` and the engine, limited to
    ``values``) and their summary by engine and ``variable``."""
    rows = an.at_base(ch.df, ch.spec.base, free=(variable, "engine"), **fixed)
    if values is not None and ch.have:
        rows = rows[rows[variable].isin(values)]
    return rows, ch.summarize(rows, ["engine", variable], METRICS)


def _panel(ch: Chapter, ax, rows: pd.DataFrame, summary: pd.DataFrame, x: str, metric: str,
           order: list[str] | None = None, engines: list[str] = ENGINES) -> None:
    """One metric against ``x``: a band along a numeric ``x`` (no ``order``), else bars in
    ``order``; the repetitions as dots unless the params file turns them off."""
    palette = fg.colors(ENGINES, ch.spec.analysis["palette"])
    dots = rows if ch.spec.analysis["show_repetitions"] else None
    if order is None:
        fg.band(ax, summary, x, metric, hue="engine", order=engines, colors_by=palette,
                rows=dots)
    else:
        fg.bars(ax, summary, x, metric, order=order, hue="engine", hue_order=ENGINES,
                colors_by=palette, rows=dots, label=ch.label(x))


def _panels(ch: Chapter, rows: pd.DataFrame, summary: pd.DataFrame, x: str,
            metrics: list[str], *, order: list[str] | None = None, xlabel: str | None = None,
            title: str | None = None, layout: tuple[int, int] = (1, 2),
            size: tuple[float, float] | None = None):
    """One panel per metric, both engines in each, one legend beside them; panels left over
    in ``layout`` are blank."""
    fig, grid = plt.subplots(*layout, figsize=size or (ch.spec.analysis["figure_width"], 4.2))
    axes = np.ravel(grid)
    for ax, metric in zip(axes, metrics):
        _panel(ch, ax, rows, summary, x, metric, order)
        ax.set(xlabel=xlabel or ch.axis_label(x), ylabel=ch.metric_label(metric))
        if metric.startswith("clat_"):
            fg.log_when_wide(ax)
    fg.thousands(axes[0])
    fg.legend_beside(fig, axes[:len(metrics)], "engine")
    for ax in axes[len(metrics):]:
        ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


def what_ran(ch: Chapter):
    """The design in words (for headings, prose and titles) and the table of what ran."""
    T, spec, df = ch.text, ch.spec, ch.df
    T["env_name"] = ch.environment
    T["n_runs"] = str(len(df))
    T["ci"] = f"{ch.confidence * 100:g} %"
    T["base_bs"], T["base_conc"] = _kib(spec.base["bs"]), str(spec.base["concurrency"])
    T["thp_bs"] = _kib(_thp_set(ch).get("bs", spec.base["bs"]))
    if ch.have:
        T["runtime"] = ", ".join(map(str, sorted(df["config.runtime_s"].unique())))
        T["ramp"] = ", ".join(map(str, sorted(df["config.ramp_s"].unique())))
        sizes = df.groupby(spec.variables).size()
        T["reps_min"], T["reps_max"] = str(sizes.min()), str(sizes.max())
        T["reps"] = (T["reps_min"] if sizes.min() == sizes.max()
                     else f"{sizes.min()} to {sizes.max()}")
        T["fio_version"] = ", ".join(sorted(df["fio.version"].unique()))
        for key, n in (("t_quantile", sizes.min()), ("t_quantile_max", sizes.max())):
            T[key] = f"{stats.t_quantile(ch.confidence, n - 1):.1f}" if n > 1 else "undefined"
    return escape.table(ch.what_ran())


def repetitions(ch: Chapter):
    """The repetition rule's outcome (texts and figure) and its table; None without runs."""
    table = ch.repetitions()
    if table.empty:
        return None
    return escape.table(table, formats={c: "{:,.0f}" for c in table.columns
                                        if c.startswith("mean")})


def _run(ch: Chapter) -> str:
    """The command that makes this environment's runs still to do."""
    return f"iolab run smt_thp --env {ch.environment}"


def _to_fill(ch: Chapter, grid: str) -> str:
    """What measures a grid's missing points on this environment: the run that makes them, or
    the params file that has to plan the grid first."""
    run = _run(ch)
    if grid in ch.spec.grids:
        return f"{run} makes its runs still to do"
    return f"its params file plans no {grid} grid: with one added, {run} measures it"


def _no_sweep(ch: Chapter, levels: list[int]) -> str:
    """Why the concurrency section draws no sweep: the concurrencies stored (fewer than two)
    and what measures the others."""
    stored = (f"only concurrency {levels[0]} is, a row of the table of io_uring / psync "
              "ratios" if levels else "no run of it is")
    return (f"No concurrency sweep is stored for {ch.environment}: {stored}, and a sweep "
            f"needs two concurrencies at least; {_to_fill(ch, 'concurrency')}.")


def _levels(rows: pd.DataFrame) -> list[int]:
    return sorted(int(c) for c in rows["concurrency"].unique()) if not rows.empty else []


def concurrency(ch: Chapter) -> None:
    """The concurrency sweep's figure of IOPS and p99 latency; with fewer than two
    concurrencies stored, the sentence that says so in its place (the table of ratios below
    shows the one point)."""
    rows, summary = _grid(ch, "concurrency")
    if len(_levels(rows)) < 2:
        ch.figures["fig_concurrency"] = Sentence(_no_sweep(ch, _levels(rows)),
                                                  (_run(ch),))
        return
    ch.figures["fig_concurrency"] = _panels(
        ch, rows, summary, "concurrency", IOPS_P99,
        title=f"{_kib(ch.spec.base['bs'])} random read, direct I/O ({ch.environment})")


def engine_ratios(ch: Chapter):
    """io_uring against psync along the sweep: the ratios the prose quotes at the lowest, the
    base and the highest concurrency, the peak, p99 growth and knee, and the verdict at the
    highest; returns the table of ratios (None without a concurrency both engines ran)."""
    T = ch.text
    rows, summary = _grid(ch, "concurrency")
    ratios = an.engine_ratios(rows, confidence=ch.confidence)
    levels = _levels(rows)
    named = ({"c1": levels[0], "c16": ch.spec.base["concurrency"], "c64": levels[-1]}
             if levels else {})
    for key, c in named.items():
        r = ratios[ratios["concurrency"] == c]
        if not r.empty:
            T[f"conc_{key}"] = str(c)
            T[f"ratio_{key}"] = f"{r['ratio'].iloc[0]:.2f}"
            T[f"ratio_{key}_ci"] = _or(
                fmt_range(r["ci_low"].iloc[0], r["ci_high"].iloc[0], fmt_num),
                "no interval: one engine has a single run there")
    if len(levels) > 1:
        T["conc_prev"] = str(levels[-2])
    elif levels:
        T["conc_prev"] = f"the concurrency below {levels[0]} (none is stored here)"
    if not rows.empty:
        _sweep_texts(ch, summary, levels, named)
        _verdict_at_highest(ch, ratios[ratios["concurrency"] == named["c64"]])
    if ratios.empty:
        return None
    ci = f"{T['ci']} CI (each on its own)"
    holm = f"p, Holm-adjusted over these {len(ratios)} ratios"
    shown = (ratios.assign(
        n=ratios["n_io_uring"].astype(str) + " / " + ratios["n_psync"].astype(str),
        ci=[fmt_range(a, b, lambda v: f"{v:.2f}")
            for a, b in zip(ratios["ci_low"], ratios["ci_high"])],
        p_holm=[fmt_p(p) for p in ratios["p_holm"]])
        [["concurrency", "io_uring", "psync", "n", "ratio", "ci", "p_holm"]]
        .rename(columns={"io_uring": "io_uring IOPS (mean)", "psync": "psync IOPS (mean)",
                         "n": "n (io_uring / psync)", "ratio": "io_uring / psync", "ci": ci,
                         "p_holm": holm}))
    return escape.table(shown, formats={"io_uring IOPS (mean)": "{:,.0f}",
                                        "psync IOPS (mean)": "{:,.0f}",
                                        "io_uring / psync": "{:.2f}"})


def fmt_p(p: float) -> str:
    """A p-value for a table: three decimals, '< 0.001' below, 'n/a' where undefined."""
    if p != p:
        return "n/a"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _sweep_texts(ch: Chapter, summary: pd.DataFrame, levels: list[int],
                 named: dict[str, int]) -> None:
    """The sweep's peak, each engine's p99 at both ends and its knee between the two highest
    concurrencies."""
    T = ch.text
    best = an.peak(summary)
    T["peak_iops"], T["peak_engine"] = fmt_int(best["mean"]), best["engine"]
    T["peak_conc"] = str(int(best["concurrency"]))
    T["peak_ci"] = fmt_range(best["ci_low"], best["ci_high"])
    for eng in ENGINES:
        p99 = an.means(summary, "clat_p99_us", eng)
        T[f"p99_{eng}_c1"] = fmt_num(p99.get(named["c1"]), 0)
        T[f"p99_{eng}_c64"] = fmt_num(p99.get(named["c64"]), 0)
        k = an.knee(summary, eng, levels[-2], levels[-1]) if len(levels) > 1 else None
        if k:
            T[f"knee_{eng}"] = (f"{eng}'s mean IOPS change by {k['iops_pct']:+.0f} % while "
                                f"its p99 latency grows {k['p99_fold']:.1f}-fold")
        else:
            T[f"knee_{eng}"] = (f"{eng}'s change cannot be computed, for want of "
                                f"{'a second concurrency' if len(levels) < 2 else 'its runs'}")


def _or(text: str, why: str) -> str:
    """A formatted value, or why it cannot be computed where the formatter found nothing."""
    return why if text == "n/a" else text


def _verdict_at_highest(ch: Chapter, at_highest: pd.DataFrame) -> None:
    """Which engine is ahead at the highest concurrency; no verdict without an interval (one
    run of an engine there)."""
    if at_highest.empty:
        return
    r = at_highest.iloc[0]
    said = an.verdict(r["ci_low"], r["ci_high"])
    if not said:
        return
    ratio = f"ratio {r['ratio']:.2f}, {ch.text['ci']} CI {r['ci_low']:.2f} – {r['ci_high']:.2f}"
    ch.text["c64_verdict"] = {"above": f"io_uring is ahead of psync ({ratio})",
                              "below": f"psync is ahead of io_uring ({ratio})",
                              "includes": f"neither engine is clearly ahead ({ratio} includes 1)"
                              }[said]


def affinity(ch: Chapter) -> None:
    """The affinity figure, one core against unpinned per engine, and what this host's
    topology makes of the settings."""
    T = ch.text
    rows, summary = _grid(ch, "affinity")
    settings = [a for a in an.AFFINITIES if a in set(rows.get("affinity", []))]
    if len(settings) > 1:
        ch.figures["fig_affinity"] = _panels(
            ch, rows, summary, "affinity", IOPS_P99, order=list(an.AFFINITIES),
            title=f"Concurrency {ch.spec.base['concurrency']}, {_kib(ch.spec.base['bs'])} "
                  "random read, direct I/O")
    else:
        ch.figures["fig_affinity"] = Sentence(
            f"No affinity comparison is stored for {ch.environment}: "
            f"{_only(settings, 'affinity')}, and a comparison needs two settings; "
            f"{_to_fill(ch, 'affinity')}.", (_run(ch),))
    _changes(ch, rows, "aff_{}_onecore", "affinity", "one_core", "unpinned",
             "no run with affinity one_core or unpinned")
    T["affinity_note"] = _topology_note(ch.host.get("topology", []))


def _only(values: list[str], variable: str) -> str:
    """Which settings of ``variable`` are stored, in words."""
    if not values:
        return f"no run of the {variable} grid is stored"
    return f"only {variable} {' and '.join(values)} is stored"


def _changes(ch: Chapter, rows: pd.DataFrame, key: str, variable: str, value: str,
             reference: str, neither: str) -> dict[str, dict[str, float]]:
    """Each engine's % change of mean IOPS from ``reference`` to ``value`` and its interval
    ("95 % CI -3.4 % to +7.6 %", the level with it, so that the text reads where there is
    none) into ``key.format(engine)`` + ``_pct`` / ``_ci``; where a side has no run, or one
    run leaves the interval undefined, the texts say so instead. Returns the changes found."""
    found = (an.effect_by_engine(rows, variable, value, reference, confidence=ch.confidence)
             if not rows.empty else {})
    for eng in ENGINES:
        k = key.format(eng)
        if eng not in found:
            sides = rows[rows["engine"] == eng][variable] if not rows.empty else []
            missing_side = [v for v in (value, reference) if v not in set(sides)]
            why = (neither if len(missing_side) == 2 else
                   f"no run of {eng} with {variable} {missing_side[0]}")
            ch.text[f"{k}_pct"] = f"an amount not measured here ({why} is stored)"
            ch.text[f"{k}_ci"] = "no interval without those runs"
            continue
        pct, ci = pct_with_interval(found[eng])
        ch.text[f"{k}_pct"] = _or(pct, "an amount not computed here")
        ch.text[f"{k}_ci"] = _or(ci if ci == "n/a" else f"{ch.confidence * 100:g} % CI {ci}",
                                 "no interval: one run on a side")
    return found


def _topology_note(topology: list[dict[str, Any]]) -> str:
    """What the recorded topology makes of the affinity settings."""
    if not topology:
        return "No CPU topology is recorded for this campaign's host."
    n_cpus, n_cores = an.physical_cores(topology)
    said = f"The host of this campaign has {n_cpus} logical CPUs on {n_cores} cores"
    if n_cores > 2:
        return said + "."
    return (said + ", so 'two cores' and 'all cores' are the same CPU set here, and 'one core' "
            "already halves the CPUs; the settings separate better on larger machines.")


def smt(ch: Chapter):
    """The host's SMT control and what the planner blocked; the SMT figure, or a note saying
    which host would fill the section."""
    smt_inv = (ch.host.get("knobs") or {}).get("smt")
    ch.text["smt_state"] = ("no SMT control at all" if smt_inv is None else
                            f"SMT control '{smt_inv['control']}', sibling threads "
                            f"{'active' if smt_inv.get('active') else 'not active'}")
    blockers = ch.plan.blockers()
    ch.text["blocked_reason"] = ("nothing is blocked" if not blockers else
                                 "; ".join(f"{n} runs: {why}" for why, n in blockers.items()))
    rows, summary = _grid(ch, "smt", ["on", "off"])
    if rows.empty:
        return Markdown(f"No SMT on/off measurement is stored for "
                        f"{escape.markdown_code(ch.environment)}: "
                        f"{len(ch.plan.by_status('blocked'))} planned runs were blocked because "
                        "the host cannot switch SMT. Run this notebook with `environment` set to "
                        "a host whose SMT control reads `on` or `off` (for example "
                        "`hpc-server`) to fill this section.")
    return _panels(ch, rows, summary, "smt", IOPS_P99, order=["on", "off"])


def thp(ch: Chapter) -> None:
    """THP always against never on buffered reads: the figure, the states read back, each
    engine's change with its verdict and system CPU time, and every quoted comparison of
    the chapter judged as one family (Holm)."""
    T = ch.text
    rows, summary = _grid(ch, "thp", ["always", "never"], **_thp_set(ch))
    settings = [v for v in ("never", "always") if v in set(rows.get("thp", []))]
    if len(settings) > 1:
        ch.figures["fig_thp"] = _panels(
            ch, rows, summary, "thp", ["iops", "sys_cpu"], order=["never", "always"],
            xlabel="THP setting", title=f"Concurrency {ch.spec.base['concurrency']}, "
            f"{_kib(_thp_set(ch).get('bs', ch.spec.base['bs']))} buffered random read")
    else:
        ch.figures["fig_thp"] = Sentence(
            f"No THP comparison is stored for {ch.environment}: {_only(settings, 'thp')}, "
            f"and a comparison needs both always and never; "
            f"{_to_fill(ch, 'thp')}.", (_run(ch),))
    T["thp_readback"] = (", ".join(sorted(set(rows["knob.thp"].dropna().astype(str))))
                         if not rows.empty else "none, as no THP run is stored")
    found = _changes(ch, rows, "thp_{}", "thp", "always", "never",
                     "no run with thp always or never")
    for eng in ENGINES:
        change = found.get(eng)
        said = an.verdict(change["ci_low"], change["ci_high"], 0) if change else None
        T[f"thp_{eng}_verdict"] = (
            "the interval includes zero, so no effect is shown at this sample size"
            if said == "includes" else "the interval excludes zero" if said else
            "no verdict without an interval")
        sys_cpu = (an.mean_of_means(summary, "sys_cpu", eng, "thp")
                   if not rows.empty and (rows["engine"] == eng).any() else None)
        T[f"thp_sys_{eng}"] = _or(fmt_num(sys_cpu, 0), "an unmeasured")
    ratio = (an.mean_of_means(summary, "iops", "io_uring", "thp")
             / an.mean_of_means(summary, "iops", "psync", "thp")
             if not rows.empty and set(ENGINES) <= set(rows["engine"]) else None)
    T["thp_ratio"] = _or(fmt_num(ratio), "an unmeasured number of")
    T["iops_family"] = multiple.family_text(
        an.quoted_family(ch.df, ch.spec.base, _thp_set(ch), ch.confidence),
        "comparisons of mean IOPS", ch.noise_floor().floor)


def layout(ch: Chapter):
    """Is the device read at all? The layout grid's table (IOPS, p50 and p99 latency per engine
    and layout) and the sentence of its ratios, fallocated over written; without a run
    reading the fallocated file, the sentence says so and there is no table."""
    rows, _ = _grid(ch, "layout", list(an.LAYOUTS))
    found = by_id(an.layout_findings(rows, ch.confidence, _not_here(ch)))
    ch.text["layout_finding"] = _layout_sentence(ch, found)
    if rows.empty or not (rows["layout"] == "fallocated").any():
        return None
    keys = ["engine", "layout"]
    table = summary_table(
        ch.summarize(rows, keys, ["iops", "clat_p50_us", "clat_p99_us"]), keys,
        {"iops": "IOPS", "clat_p50_us": "p50 µs", "clat_p99_us": "p99 µs"},
        digits={"clat_p50_us": 1, "clat_p99_us": 1},
        label=lambda k, v: ch.experiment.describe(k, v),
        key_names={k: ch.axis_label(k) for k in keys}, confidence=ch.confidence,
        outliers=ch.outlier_counts(rows, keys))
    return escape.table(table)


def _not_here(ch: Chapter) -> str:
    """Why this campaign does not read the fallocated file: its host cannot (the plan's
    blockers) or its params exclude it (their reason); "" when it does."""
    excluded = [rule["why"] for rule in ch.spec.exclusions
                if "fallocated" in rule["when"].get("layout", [])]
    return "; ".join(excluded) or ch.blocked_by_grid().get("layout", "")


def _layout_sentence(ch: Chapter, found: dict[str, Any]) -> str:
    """One sentence of the layout ratios (fallocated over written) per engine, or why there
    are none."""
    if not any(f.defined for f in found.values()):
        if _not_here(ch):
            return f"The fallocated file is not read in this campaign: {_not_here(ch)}."
        return (f"No run reading the fallocated file is stored for {ch.environment} yet, so "
                "there is nothing to compare; iolab run smt_thp --env "
                f"{ch.environment} --where layout=fallocated measures it.")
    parts = []
    for engine in ENGINES:
        iops, p99 = found[f"layout_{engine}_iops"], found[f"layout_{engine}_clat_p99_us"]
        if iops.defined and p99.defined:
            parts.append(f"{engine}'s mean IOPS are {iops.text()} times those of the written "
                         f"file and its mean p99 latency {p99.text()} times")
        else:
            parts.append(f"{engine}'s are {(p99 if iops.defined else iops).text()}")
    return f"Reading the file laid out with fallocate, {'; '.join(parts)}."


def _explored(ch: Chapter, rows: pd.DataFrame, summary: pd.DataFrame, metric: str,
              engine: str):
    """The explorer's figure: one metric of the sweep for one engine."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    _panel(ch, ax, rows, summary, "concurrency", metric, engines=[engine])
    ax.set(xlabel=ch.axis_label("concurrency"), ylabel=ch.metric_label(metric),
           title=f"{engine}: {ch.metric_label(metric)}")
    if metric == "iops":
        fg.thousands(ax)
    return fig


def explorer(ch: Chapter) -> None:
    """Controls for a metric and an engine that redraw the sweep in a live kernel; nothing
    without a sweep of two concurrencies at least."""
    import ipywidgets as widgets

    rows, summary = _grid(ch, "concurrency")
    if len(_levels(rows)) < 2:  # no sweep to redraw: the sentence below says why
        return
    live_explorer(partial(_explored, ch, rows, summary), {
        "metric": widgets.Dropdown(options=[(ch.metric_label(m), m) for m in METRICS],
                                   value="iops", description="metric"),
        "engine": widgets.ToggleButtons(options=ENGINES, value="psync", description="engine")})


def all_metrics(ch: Chapter) -> None:
    """The explorer's static companion: every metric of the sweep for both engines."""
    rows, summary = _grid(ch, "concurrency")
    if len(_levels(rows)) < 2:
        ch.figures["fig_all_metrics"] = Sentence(_no_sweep(ch, _levels(rows)),
                                                  (_run(ch),))
    else:
        ch.figures["fig_all_metrics"] = _panels(
            ch, rows, summary, "concurrency", METRICS, layout=(2, 3),
            size=(ch.spec.analysis["figure_width"] + 2, 7.5),
            title="Every metric of the concurrency sweep (static companion of the explorer)")


def summary(ch: Chapter):
    """One row per point, by the variables that tell the points apart (all of them for a
    single point); None without runs."""
    if not ch.have:
        return None
    keys = [v for v in ch.spec.variables if ch.df[v].nunique() > 1] or ch.spec.variables
    table = summary_table(ch.summarize(ch.df, keys, ["iops", "clat_p99_us"]), keys,
                          {"iops": "IOPS", "clat_p99_us": "p99 µs"},
                          label=lambda k, v: ch.experiment.describe(k, v),
                          key_names={k: ch.axis_label(k) for k in keys},
                          confidence=ch.confidence, outliers=ch.outlier_counts(ch.df, keys))
    return escape.table(table)


def findings(ch: Chapter) -> list:
    blocked = {**ch.blocked_by_grid(), **({"layout": _not_here(ch)} if _not_here(ch) else {})}
    return an.findings(ch.df, ch.spec.base, _thp_set(ch), blocked, ch.confidence)


def answer(ch: Chapter):
    """The findings the answer quotes, the host, the noise floor, and the claims table."""
    found = findings(ch)
    ch.text.update({f"f_{f.id}": f.text() for f in found})
    ch.text["host_words"] = ch.host_words()
    if ch.noise_floor().defined:  # none from a single run: the glue stays unset, not 'nan'
        ch.text["floor_pct"] = fmt_num(100 * ch.noise_floor().floor, 1)
    return escape.table(ch.claims_table(findings))


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare)."""
    return compare.across(ch, findings)
