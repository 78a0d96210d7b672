"""The PCIe saturation chapter's page: what each section of ``notebooks/pcie_saturation.ipynb``
shows, as glue texts, figures and tables.

What the chapter shows, in this order of preference (never two of them pooled): this
package's runs; runs imported from AiSIO's archive (``iolab import-cijoe``); AiSIO's runs
from the committed per-run table (``data/reference/aisio_pcie_saturation_runs``, the same
measurements re-derived once from the archive, so that a clone without the archive shows
them); else only the plan and AiSIO's published values. Whichever it is, the figures, tables
and texts name it: AiSIO's runs are labelled as AiSIO's measurements, its published values as
published.

:func:`setup` gathers what every section reads into a :class:`View`; the section functions
(:func:`what_ran`, :func:`results`, :func:`bandwidth_figure`, :func:`results_table`,
:func:`devices`, :func:`published`, :func:`answer`) fill ``ch.text`` and ``ch.figures`` and
return what the notebook displays.

Responsible for: the chapter's texts, figures and tables.
Not responsible for: the statistics (``analysis`` beside this file), the run store or the
reference files' contents (:mod:`iolab.report.reference`, :mod:`iolab.importers.aisio_runs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown

from iolab.experiments import gpu_io
from iolab.experiments.pcie_saturation import analysis as an
from iolab.importers import extras
from iolab.report import escape
from iolab.report import figures as fg
from iolab.report import reference
from iolab.report.chapter import Chapter
from iolab.report.reference import Reference
from iolab.report.tables import fmt_range
from iolab.tools.base import link_gbs

GB, MB = 1e9, 1e6
RUNS_ORIGIN = "AiSIO's runs, from the per-run table derived from its archive"


@dataclass
class View:
    """What the chapter's sections share."""

    rows: pd.DataFrame          # the runs shown (see the module docstring), NVMe-to-GPU only
    origin: str | None          # where they come from, in words; None when there are none
    ref: Reference | None       # AiSIO's published values
    runs: Reference | None      # AiSIO's runs, the committed per-run table
    sweep: pd.DataFrame         # the rows at the base point along the I/O size
    table: pd.DataFrame | None  # analysis.payload_vs_total of the sweep
    total_col: str | None
    total_stat: str | None
    line: float                 # the link's one-way line rate, GB/s (NaN when unknown)
    line_src: str
    p2p: dict[str, Any] | None  # the GPU-to-GPU reference (analysis.p2p_metrics' keys)


def setup(ch: Chapter) -> View:
    """Everything the sections read; glues ``shown_what`` and ``ci``."""
    spec, environment = ch.spec, ch.environment
    ref = reference.load(ch.data_dir, spec.analysis["reference"])
    runs = reference.load(ch.data_dir, spec.analysis["aisio_runs"])
    rows, origin, left_out = gpu_io.shown(ch.df, ch.imported, spec.base, ("iosize", "ndevs"))
    rows = rows[rows["benchmark"] == an.NVME] if not rows.empty else rows
    if origin is None and runs is not None:
        table = gpu_io.at_base(an.aisio_run_rows(runs.table, runs.meta["point"]), spec.base,
                               ("iosize", "ndevs"))
        if not table.empty:
            rows, origin = table, RUNS_ORIGIN
    if origin == RUNS_ORIGIN:
        ch.text["shown_what"] = (
            f"no stored run in environment {environment}: no machine with NVMe SSDs and a GPU "
            "that exchange data peer to peer was available to this project, so the chapter "
            f"shows this package's plan and AiSIO's own {len(rows)} runs, re-derived from its "
            f"result archive ({runs.meta['archive']['file']}) and labelled as AiSIO's "
            "measurements, beside its published values")
    else:
        ch.text["shown_what"] = (
            f"{len(rows)} stored runs in environment {environment}: {origin}" if origin else
            f"no stored run in environment {environment}: no machine with NVMe SSDs and a GPU "
            "that exchange data peer to peer was available to this project, so the chapter "
            "shows this package's plan and, where the data folder holds them, AiSIO's "
            "published values, labelled as such")
    ch.text["shown_what"] += "".join(f"; {note}" for note in left_out)
    ch.text["ci"] = f"{ch.confidence * 100:g} %"

    sweep = gpu_io.at_base(rows, spec.base, ("iosize",)) if not rows.empty else rows
    table = total_col = total_stat = None
    if not sweep.empty:
        fg.one_configuration(sweep, "payload and total traffic by I/O size")
        total_col, total_stat = an.total_column(sweep)
        table = an.payload_vs_total(sweep, ["iosize"], ch.confidence)
    line, line_src = _line_rate(rows, ref)
    return View(rows, origin, ref, runs, sweep, table, total_col, total_stat, line, line_src,
                _p2p(ch, origin, runs))


def _line_rate(rows: pd.DataFrame, ref: Reference | None) -> tuple[float, str]:
    links = rows["link_gbs"].dropna() if "link_gbs" in rows else pd.Series(dtype=float)
    if len(links):
        return float(links.median()), ("recorded by the driver: the highest rate GPU and slot "
                                       "support, after encoding")
    if ref:
        return (link_gbs(ref.meta["link_gen"], ref.meta["link_width"]),
                f"PCIe Gen{ref.meta['link_gen']} x{ref.meta['link_width']}, the link AiSIO "
                "names, after 128b/130b line coding; not recorded here")
    return float("nan"), "unknown"


def _p2p(ch: Chapter, origin: str | None, runs: Reference | None) -> dict[str, Any] | None:
    """The GPU-to-GPU reference: this package's p2p runs, else the p2p output that belongs to
    the AiSIO runs shown (an import's, or the per-run table's)."""
    own = an.p2p_metrics(ch.df)
    if own:
        return own
    if origin == RUNS_ORIGIN:
        return an.reference_p2p(runs.meta)
    archives = [src.removeprefix(gpu_io.IMPORTED_SOURCE + " ")
                for src in ch.imported["run.source"].unique()] if origin and not ch.have else []
    return extras.imported_p2p(ch.campaign.store.root, archives) if archives else None


def what_ran(ch: Chapter, v: View):
    """The stored runs' table, with the committed table of AiSIO's runs where it is shown."""
    table = ch.what_ran()
    if v.origin == RUNS_ORIGIN:
        archive = v.runs.meta["archive"]
        table.loc[len(table)] = (
            "AiSIO's runs", f"{len(v.rows)} runs, AiSIO's measurements: "
            f"{v.runs.meta['table']}, re-derived by iolab from "
            f"{archive['file']} (sha256 {archive['sha256'][:12]}…, {archive['repository']} at "
            f"{archive['commit']}); shown because this package has no run")
    return escape.table(table)


# -- bandwidth results -----------------------------------------------------------------------

def results(ch: Chapter, v: View) -> None:
    """Glues ``results_text``, ``ratio_text`` and ``n_per_point``."""
    T = ch.text
    p2p = v.p2p
    p2p_text = ("No GPU-to-GPU reference is stored." if not p2p else
                f"Between two GPUs, p2pBandwidthLatencyTest measured {p2p['p2p_write_gbs']:.2f} "
                f"GB/s of one-way P2P writes and {p2p['bidir_p2p_gbs']:.3f} GB/s in its "
                f"bidirectional test ({p2p['source']}); the bidirectional figure counts both "
                "directions together.")
    if v.sweep.empty:
        T["results_text"] = ("No run of the base point is stored here, so this section has no "
                             "measured value; the figure shows AiSIO's published values, "
                             "labelled as such. " + p2p_text)
        T["ratio_text"] = ("Once runs are stored, this paragraph compares total traffic and "
                           "payload with the same statistic on both sides.")
        return
    table = v.table
    T["n_per_point"] = ", ".join(map(str, sorted(set(table["n_payload"].astype(int)))))
    by_size = table.set_index("iosize")
    whose = ("These are AiSIO's measurements, re-derived from its archive, not this "
             "package's. " if v.origin == RUNS_ORIGIN else "")
    T["results_text"] = (
        whose + f"With {ch.spec.base['ndevs']} devices, "
        + "; ".join(_point_text(by_size, s, v.total_col) for s in by_size.index)
        + f". Each value is the mean of {T['n_per_point']} repetitions" + (
            f"; the total's statistic is the {v.total_stat}" if v.total_col else
            "; no GPU counter ran, so there is no total")
        + f". The link's one-way line rate is {v.line:.1f} GB/s ({v.line_src}). " + p2p_text)
    if p2p and table["mean_payload"].max() / GB > p2p["p2p_write_gbs"]:
        T["results_text"] += (
            " The SSDs deliver more payload into the GPU than one GPU writes into the other: "
            "the GPU-to-GPU figure measures another path (in AiSIO's server the two GPUs sit on "
            "different sockets), so it is a reference for peer-to-peer traffic, not a ceiling "
            "for this one.")
    T["ratio_text"] = _ratio_text(table, v.total_col, ch.text["ci"])


def _point_text(by_size: pd.DataFrame, size: int, total_col: str | None) -> str:
    pay = f"{by_size.loc[size, 'mean_payload'] / GB:.2f} GB/s"
    if total_col is None:
        return f"at {int(size):,} B the payload is {pay}"
    return (f"at {int(size):,} B the payload is {pay} and the total PCIe receive traffic "
            f"{by_size.loc[size, 'mean_total'] / GB:.2f} GB/s, a ratio of "
            f"{by_size.loc[size, 'ratio']:.2f}")


def ratio_digits(table: pd.DataFrame) -> int:
    """Decimals that show a ratio's interval: at least 3, and enough for the narrowest
    interval's half-width to show its leading digit (AiSIO's runs need 5)."""
    half = ((table["ratio_ci_high"] - table["ratio_ci_low"]) / 2).dropna()
    half = half[half > 0]
    return 3 if half.empty else max(3, -math.floor(math.log10(half.min())))


def _ratio_text(table: pd.DataFrame, total_col: str | None, ci: str) -> str:
    known = table.dropna(subset=["ratio"])
    ratios = known["ratio"]
    d = ratio_digits(known)
    if ratios.empty:
        return "Without a GPU counter there is no total traffic to compare the payload with."
    if len(ratios) == 1:  # a campaign stopped part way: no trend across sizes yet
        return (f"The ratio of total traffic to payload is {ratios.iloc[0]:.3f} at the one I/O "
                "size stored so far; how it moves with the I/O size needs the others.")
    spread = (ratios.max() - ratios.min()) / ratios.mean()
    half = ((known["ratio_ci_high"] - known["ratio_ci_low"]) / 2).max()
    within = (f", each within ±{half:.{d}f} ({ci} intervals of a ratio of means, in the table "
              "below)" if half == half else "")
    return (f"The ratio of total traffic to payload runs from {ratios.min():.{d}f} to "
            f"{ratios.max():.{d}f} across the I/O sizes{within}. " + (
                "A per-command overhead would weigh far more on small reads than on large "
                "ones, so a ratio that hardly moves is not one. " if spread < 0.02 else
                "A per-command overhead would make it largest at the smallest reads. ") + (
                "It divides a 95th percentile by a mean (AiSIO's statistic); how much of it "
                "that choice makes is not known, and a ratio this constant across I/O sizes "
                "points rather to a fixed scale between what the two counters count (for "
                "example, units of DCGM field 1010), which only a run with a known payload on "
                "the lab server can settle." if total_col == an.CAPTURE_RX else
                "Both sides are means over the measurement window."))


HALF = 0.2  # half the width of a bar: payload and total stand side by side per I/O size


def bandwidth_figure(ch: Chapter, v: View) -> None:
    """``fig_pcie_bandwidth``: payload and total side by side per I/O size (each with its own
    statistic, never stacked), with the line rate, the GPU-to-GPU reference and AiSIO's
    published values."""
    spec, pub = ch.spec, v.ref.table if v.ref else None
    fig, ax = plt.subplots(figsize=(spec.analysis["figure_width"] * 0.8, 5.6))
    colors = fg.colors(["payload", "overhead"], spec.analysis["palette"])
    if not v.sweep.empty:
        table = v.table
        x = np.arange(len(table))
        pay, tot = table["mean_payload"] / GB, table["mean_total"] / GB
        # payload and total side by side, never stacked: the total may be another statistic
        # (a 95th percentile) than the payload's mean
        ax.bar(x - HALF, pay, 2 * HALF, color=colors["payload"], label="payload, mean "
               "(xnvmeperf)")
        if v.total_col:
            ax.bar(x + HALF, tot, 2 * HALF, color=colors["overhead"],
                   label="total PCIe RX, " + ("p95 over the whole capture"
                                              if v.total_col == an.CAPTURE_RX
                                              else "mean over the window"))
        ax.errorbar(x - HALF, pay, yerr=[pay - table["ci_low_payload"] / GB,
                                         table["ci_high_payload"] / GB - pay],
                    fmt="none", color="0.2", capsize=4)
        for i, size in enumerate(table["iosize"]):
            dots = v.sweep[v.sweep["iosize"] == size]["payload_bytes_per_s"] / GB
            ax.plot(np.full(len(dots), i - HALF), dots, "o", color="0.15", ms=3)
        if pub is not None:
            p = pub.set_index("iosize").reindex(table["iosize"])
            ax.plot(x - HALF, p["payload_bytes_per_s"] / GB, "k_", ms=14, mew=2,
                    label="payload, published by AiSIO")
            ax.plot(x + HALF, p["rx_p95_bytes_per_s"] / GB, "_", color="0.45", ms=14, mew=2,
                    label="total RX p95, published by AiSIO")
        ticks, title = table["iosize"], v.origin
    elif pub is not None:
        x = np.arange(len(pub))
        pay = pub["payload_bytes_per_s"] / GB
        ax.bar(x - HALF, pay, 2 * HALF, color=colors["payload"], alpha=0.5, hatch="//",
               label="payload, mean, published by AiSIO (not measured here)")
        ax.bar(x + HALF, pub["rx_p95_bytes_per_s"] / GB, 2 * HALF, color=colors["overhead"],
               alpha=0.5, hatch="//", label="total RX p95, published by AiSIO")
        ticks, title = pub["iosize"], "published by AiSIO; no measurement stored here"
    if not v.sweep.empty or pub is not None:
        box = dict(fc="white", ec="none", alpha=0.85, pad=1)
        ax.axhline(v.line, color="0.3", ls="--", lw=1)
        ax.text(-0.45, v.line, f"line rate, one direction ({v.line:.1f} GB/s)", ha="left",
                va="bottom", fontsize=8, bbox=box)
        if v.p2p:
            write = v.p2p["p2p_write_gbs"]
            ax.axhline(write, color="0.3", ls=":", lw=1)
            ax.text(-0.45, write, f"GPU-to-GPU P2P write, one direction ({write:.1f} GB/s)",
                    ha="left", va="bottom", fontsize=8, bbox=box)
        ax.set_xticks(np.arange(len(ticks)), [fg.size_label(int(s)) for s in ticks])
        ax.set(xlabel="I/O size", ylabel="GB/s (10^9 B/s)", title=title)
        ax.set_ylim(0, max(v.line if v.line == v.line else 0, ax.get_ylim()[1]) * 1.12)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        fig.tight_layout()
        ch.figures["fig_pcie_bandwidth"] = fig
    plt.close(fig)


def results_table(ch: Chapter, v: View):
    """Per I/O size: n, mean, sd and interval of the payload and of the total, and their
    ratio with its interval; whose runs they are in the caption."""
    if v.sweep.empty:
        return Markdown("No run is stored, so there is no measured table here.")
    table, ci = v.table, f"{ch.text['ci']} CI"
    mbs = lambda x: "n/a" if x != x else f"{x / MB:,.2f}"  # noqa: E731
    show = pd.DataFrame({"I/O size (bytes)": table["iosize"].map(lambda s: f"{int(s):,}"),
                         "n": table["n_payload"].astype(int)})
    sides = [("payload", "payload")] + ([("total", "total PCIe RX")] if v.total_col else [])
    for side, said in sides:
        show[f"{said} MB/s (mean)"] = table[f"mean_{side}"].map(mbs)
        show[f"{said} sd"] = table[f"sd_{side}"].map(mbs)
        show[f"{said} {ci}"] = [fmt_range(a, b, mbs, " to ") for a, b in
                                zip(table[f"ci_low_{side}"], table[f"ci_high_{side}"])]
    if v.total_col:
        d = ratio_digits(table)
        ratio = lambda r: f"{r:.{d}f}"  # noqa: E731
        show["total / payload"] = table["ratio"].map(ratio)
        show[f"ratio {ci}"] = [fmt_range(a, b, ratio, " to ") for a, b in
                               zip(table["ratio_ci_low"], table["ratio_ci_high"])]
    whose = "" if ch.have else ": AiSIO's measurements, not this package's"
    caption = f"{v.origin[0].upper()}{v.origin[1:]}{whose}. " + (
        f"Total PCIe RX: {v.total_stat}." if v.total_col else "No GPU counter ran.")
    return escape.table(show, caption=caption)


# -- devices ------------------------------------------------------------------------------------

def devices(ch: Chapter, v: View) -> None:
    """``fig_pcie_devices``, and glues ``dev_range`` and ``devices_text``."""
    spec, T = ch.spec, ch.text
    grid_devs = sorted({n for g in spec.grids.values() for n in g["vary"].get("ndevs", [])}) \
        or [spec.base["ndevs"]]
    T["dev_range"] = f"{grid_devs[0]} to {grid_devs[-1]}"
    dev = gpu_io.at_base(v.rows, spec.base, ("ndevs",)) if not v.rows.empty else v.rows
    fig, ax = plt.subplots(figsize=(spec.analysis["figure_width"] * 0.7, 4.2))
    n = np.array(grid_devs)
    if v.ref and v.line == v.line:
        # a bound from published and recorded figures: each SSD at its rated bandwidth, or the link
        rated = v.ref.meta["ssd_rated_gbs"]
        ax.plot(n, np.minimum(n * rated, v.line), "--", color="0.4",
                label=f"bound: {rated:g} GB/s per SSD (rated, published by AiSIO) or the line rate")
    if not dev.empty and dev["ndevs"].nunique() > 1:
        summary = ch.summarize(dev, ["ndevs"], ["payload_bytes_per_s"])
        s = summary.assign(mean=summary["mean"] / GB, ci_low=summary["ci_low"] / GB,
                           ci_high=summary["ci_high"] / GB)
        fg.band(ax, s, "ndevs", "payload_bytes_per_s", rows=dev.assign(
            payload_bytes_per_s=dev["payload_bytes_per_s"] / GB))
        T["devices_text"] = (f"From {int(s['ndevs'].min())} to {int(s['ndevs'].max())} devices "
                             f"the payload goes from {s['mean'].iloc[0]:.2f} to "
                             f"{s['mean'].iloc[-1]:.2f} GB/s (figure above).")
    elif dev.empty:
        T["devices_text"] = ("No device sweep is stored here, so the figure shows only the "
                             "bound and this question stays open.")
    else:  # one device count: its payload against the bound all the same
        one = ch.summarize(dev, ["ndevs"], ["payload_bytes_per_s"]).iloc[0]
        ndevs, size = int(one["ndevs"]), int(dev["iosize"].iloc[0])
        ax.errorbar([ndevs], [one["mean"] / GB], fmt="o", color="0.15", capsize=4,
                    yerr=[[(one["mean"] - one["ci_low"]) / GB],
                          [(one["ci_high"] - one["mean"]) / GB]] if one["n"] > 1 else None,
                    label=f"payload at {size:,} B, mean of {int(one['n'])} runs")
        whose = "" if ch.have else " (AiSIO's runs have one device count only)"
        bound = (f", against {v.ref.meta['ssd_rated_gbs'] * ndevs:.0f} GB/s for {ndevs} SSDs at "
                 "their rated bandwidth" if v.ref else "")
        T["devices_text"] = (f"No device sweep is stored here{whose}: with {ndevs} devices the "
                             f"payload of {size:,} B reads is {one['mean'] / GB:.2f} GB/s{bound} "
                             "(the dot in the figure above); whether more devices raise it "
                             "stays open.")
    if v.line == v.line:
        ax.axhline(v.line, color="0.3", ls=":", lw=1,
                   label=f"line rate, one direction ({v.line:.1f} GB/s)")
    ax.set_xscale("log", base=2)
    fg.value_ticks(ax, list(n), log2=True)
    ax.set(xlabel="devices", ylabel="payload GB/s (10^9 B/s)", ylim=(0, None),
           title=(v.origin or "bound only; no measurement stored here"))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    ch.figures["fig_pcie_devices"] = fig
    plt.close(fig)


# -- what AiSIO published ---------------------------------------------------------------------

def published(ch: Chapter, v: View):
    """Glues the ``pub_*`` values, ``line_rate`` and ``runs_vs_published``; returns the
    published table (None without the reference)."""
    ref, T = v.ref, ch.text
    T["runs_vs_published"] = _runs_vs_published(v)
    if not ref:
        return None
    meta = ref.meta
    T["pub_line_rate"] = f"{meta['line_rate_gbs']:.1f}"
    T["line_rate"] = f"{link_gbs(meta['link_gen'], meta['link_width']):.1f}"
    T["pub_p2p"] = f"{meta['p2p_bidir_gbs']:.1f}"
    T["pub_overhead"] = f"{meta['overhead_factor']:.2f}"
    T["pub_interval_ms"] = str(meta["dcgm_interval_ms"])
    T["pub_ssd_gbs"] = f"{meta['ssd_rated_gbs']:.1f}"
    T["pub_ndevs"] = {4: "four"}.get(meta["ndevs"], str(meta["ndevs"]))
    T["pub_ssd_sum"] = f"{meta['ssd_rated_gbs'] * meta['ndevs']:.0f}"
    rx4k = ref.table.set_index("iosize").loc[4096, "rx_p95_bytes_per_s"]
    T["pub_rx_of_line"] = f"{rx4k / GB / meta['line_rate_gbs'] * 100:.0f} %"
    t = ref.table
    return escape.table(pd.DataFrame({
        "I/O size (bytes)": t["iosize"].map(lambda s: f"{s:,}"),
        "payload GB/s (published)": (t["payload_bytes_per_s"] / GB).map(lambda x: f"{x:.1f}"),
        "total PCIe RX p95 GB/s (published)": (t["rx_p95_bytes_per_s"] / GB).map(
            lambda x: f"{x:.1f}"),
    }), caption=f"Published by AiSIO, not measured here. Source: {meta['source']}")


def _runs_vs_published(v: View) -> str:
    if not (v.ref and v.runs):
        return ("Without AiSIO's per-run table in the data folder, these means cannot be set "
                "against the runs behind them.")
    diff = an.runs_vs_published(v.runs.table, v.ref.table)
    if diff.empty:
        return "AiSIO's per-run table holds none of these I/O sizes."
    worst = diff["difference"].abs().max()
    n = len(v.runs.table)
    if worst <= 0.5:
        return (f"The byte counts behind the published values below are the means of AiSIO's "
                f"{n} runs: its per-run table, re-derived from its archive, gives them to within "
                f"{worst:.2f} B/s, AiSIO having rounded its means to whole bytes per second.")
    row = diff.loc[diff["difference"].abs().idxmax()]
    share = abs(row["difference"]) / row["published"] * 100
    return (f"The means of AiSIO's {n} runs, re-derived from its archive, differ from the "
            f"published values below by up to {worst:,.0f} B/s ({share:.2g} % of the published "
            f"value, at {int(row['iosize']):,} B), more than rounding explains.")


# -- the answer ---------------------------------------------------------------------------------

def answer(ch: Chapter, v: View):
    """Glues ``answer_text``; returns the claims table."""
    environment = ch.environment
    if ch.have:
        ch.text["answer_text"] = ("Its findings are not yet computed from runs: the figures "
                                  "above show the runs themselves.")
    else:
        evidence = ("AiSIO's own runs and published values" if v.origin == RUNS_ORIGIN else
                    "AiSIO's published values")
        ch.text["answer_text"] = (
            "It therefore gives no measured answer of its own: what it gives is the plan that "
            f"would measure it, the model of what to expect, and {evidence}, labelled as theirs. "
            + _aisio_numbers(ch, v)
            + "Each claim of AiSIO's chapter below waits for the lab run named beside it.")
    return escape.table(ch.claims_table(
        why=f"no run is stored in environment {environment}" if not ch.have
        else "this chapter computes no findings from runs yet"))


def _aisio_numbers(ch: Chapter, v: View) -> str:
    """AiSIO's runs' own numbers for its claims, with their intervals (a sentence and a
    space), where the chapter shows the per-run table; else nothing."""
    if v.origin != RUNS_ORIGIN or v.table is None or 4096 not in set(v.table["iosize"]):
        return ""
    t, ci = v.table.set_index("iosize"), ch.text["ci"]
    k4 = t.loc[4096]
    gbs = lambda x: f"{x / GB:.3f}"  # noqa: E731
    text = (f"AiSIO's own runs put the total PCIe receive traffic at 4,096 B at "
            f"{gbs(k4['mean_total'])} GB/s ({ci} CI {gbs(k4['ci_low_total'])} to "
            f"{gbs(k4['ci_high_total'])}, n = {int(k4['n_total'])}), "
            f"{k4['mean_total'] / GB / v.line * 100:.1f} % of the {v.line:.1f} GB/s line rate")
    if v.ref:
        text += (f" ({k4['mean_total'] / GB / v.ref.meta['line_rate_gbs'] * 100:.1f} % of the "
                 f"{v.ref.meta['line_rate_gbs']:.1f} GB/s AiSIO drew)")
    d = ratio_digits(v.table)
    ratio = lambda r: f"{r:.{d}f}"  # noqa: E731
    intervals = ", ".join(f"{fmt_range(a, b, ratio, ' to ')} at {int(size):,} B" for size, a, b
                          in zip(t.index, t["ratio_ci_low"], t["ratio_ci_high"]))
    text += (f", and the total at {ratio(t['ratio'].min())} to {ratio(t['ratio'].max())} times "
             f"the payload across its I/O sizes ({ci} CIs {intervals})")
    if 512 in t.index:
        small = v.rows[v.rows["iosize"] == 512]
        share = t.loc[512, "mean_payload"] / k4["mean_payload"] * 100
        text += (f"; at 512 B its payload is {share:.1f} % of that at 4,096 B, each device "
                 f"completing {(small['iops'] / small['ndevs']).mean() / 1e6:.2f} M IOPS")
    return (text + ". These are AiSIO's measurements, a 95th percentile set against a mean, so "
            "they restate its evidence rather than test it. ")
