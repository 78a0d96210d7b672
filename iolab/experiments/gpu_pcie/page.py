"""The GPU PCIe chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/gpu_pcie.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter` and the :class:`Link` that :func:`intro` derives once
from its runs, fills ``ch.text`` (the glued texts) and ``ch.figures``, and returns what the
section displays (a Styler, or None where there is nothing to show). A figure with nothing
measured to draw is a placeholder sentence, never empty axes.

Responsible for: the chapter's wording, number formats, figures and tables.
Not responsible for: statistics and the chapter's findings (``analysis``), loading runs and
the shared chapter steps (``iolab.report.chapter``), or which keys the prose glues (the
notebook's Markdown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from pandas.io.formats.style import Styler

from iolab.experiments.gpu_pcie import analysis as an
from iolab.report import escape
from iolab.report import figures as fg
from iolab.report import reference
from iolab.report.chapter import Chapter
from iolab.report.tables import design_table, residual_table
from iolab.tools.xnvmeperf import link_gbs
from iolab.report import compare

# the variables of a point: a ceiling is the best point's mean, never a pool of points
POINT = ["mode", "direction", "bytes", "iosize", "inflight"]
REQUESTS = ("read", "write")


@dataclass(frozen=True)
class Link:
    """What the chapter's sections share, derived once from its runs."""
    limit: float                     # the line rate in one direction, GB/s
    summary: pd.DataFrame            # one row per point: n, mean and interval of gbs
    tolerance: float                 # how close to a ceiling counts as reaching it
    use: pd.DataFrame | None         # an.link_use; None without runs
    where: str | None                # the machine in words; None without runs
    residuals: pd.DataFrame          # the Little's-law models beside the measured points
    resident: float                  # the warps that run at once (0: not recorded)
    overhead: dict[str, Any]         # an.overhead
    published: reference.Reference | None  # AiSIO's PCIe chapter's values


def intro(ch: Chapter) -> Link:
    """The chapter's opening texts (what it shows, the plan's size, the link's line rate) and
    the :class:`Link` the later sections use."""
    df, spec, T, env = ch.df, ch.spec, ch.text, ch.environment
    tolerance = spec.analysis["saturation_tolerance"]
    T["ci"] = f"{ch.confidence * 100:g} %"
    T["tolerance"] = f"{tolerance * 100:g} %"
    T["shown_what"] = (f"{len(df)} stored runs in environment {env}" if ch.have else
                       f"no stored run in environment {env}: no GPU machine was lent to "
                       "the sessions that built this chapter, so it shows the plan and the "
                       "link's physical limit only")
    T["env_name"] = env
    T["n_points"] = str(len(ch.plan.points()))
    T["reps"] = spec.repetitions_text
    T["eta"] = (f"which took {df['run.duration_s'].sum() / 60:.0f} minutes of measuring here"
                if ch.have else f"about {ch.plan.eta_all_s / 60:.0f} minutes of measuring")
    recorded = an.physical_limit(df) if ch.have else None
    gen, width = spec.analysis["link_gen"], spec.analysis["link_width"]
    limit = recorded or link_gbs(gen, width)
    source = ("the link nvidia-smi reported during the runs" if recorded else
              f"PCIe Gen{gen} x{width} as the environment's description gives it, not read "
              "from a run")
    T["limit_text"] = (f"{limit:.1f} GB/s per direction ({source}): the transfer rate times "
                       "the lanes, after line coding (128b/130b from Gen3), before packet "
                       "overhead")
    summary = ch.summarize(df, POINT, ["gbs"])
    requests = _requests(ch)
    resident = (requests["gpu_pcie_probe.resident_warps"].max()
                if "gpu_pcie_probe.resident_warps" in requests else 0)
    resident = resident if resident == resident else 0  # NaN: not recorded
    fits = summary[summary["mode"] != "copy"]
    models = an.models(requests, fits) if not requests.empty else {}
    return Link(
        limit=limit, summary=summary, tolerance=tolerance,
        use=an.link_use(summary, limit, tolerance) if ch.have else None,
        where=an.machine(df, env) if ch.have else None,
        residuals=an.residuals(fits, models, resident), resident=resident,
        overhead=an.overhead(df, spec.analysis["overhead_min_samples"]),
        published=reference.load(ch.data_dir, spec.analysis["reference"]))


def design(ch: Chapter) -> Styler:
    """The params file's design: every variable with its values and grids."""
    return escape.table(design_table(ch.spec, ch.experiment))


def copy_engine(ch: Chapter, link: Link) -> None:
    """The figure ``fig_gpu_copy``: copy bandwidth against the size of a copy, one line per
    direction, with the line rate."""
    copies = link.summary[link.summary["mode"] == "copy"]
    if copies.empty:
        ch.figures["fig_gpu_copy"] = fg.placeholder(
            f"No copy-engine run is stored for environment {ch.environment}")
        return
    grid_bytes = sorted({v for g in ch.spec.grids.values() for v in g["vary"].get("bytes", [])})
    fig, ax = plt.subplots(figsize=(ch.spec.analysis["figure_width"] * 0.8, 4.5))
    fg.band(ax, copies, "bytes", "gbs", hue="direction", rows=ch.df[ch.df["mode"] == "copy"],
            log2=True, label=ch.label("direction"))
    ax.axhline(link.limit, color="0.3", ls="--", lw=1, label="line rate, one direction")
    ax.set_xscale("log", base=2)
    ax.set_xticks(grid_bytes, [f"{b // 2**20} MiB" if b >= 2**20 else f"{b // 1024} KiB"
                               for b in grid_bytes], rotation=45)
    ax.set(xlabel="bytes per copy", ylabel="GB/s (10^9 B/s)", ylim=(0, link.limit * 1.1),
           xlim=(grid_bytes[0] / 1.5, grid_bytes[-1] * 1.5))
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    ch.figures["fig_gpu_copy"] = fig
    plt.close(fig)


def requests(ch: Chapter, link: Link) -> None:
    """The text ``resident`` and the figure ``fig_gpu_requests``: payload bandwidth of
    GPU-initiated requests against warps in flight, one panel per mode measured, one colour
    per request size, each with its Little's-law model and the line rate."""
    ch.text["resident"] = f"{int(link.resident):,}" if link.resident else "n/a"
    measured = _requests(ch)
    modes = [m for m in REQUESTS if (measured["mode"] == m).any()] if ch.have else []
    if not modes:
        ch.figures["fig_gpu_requests"] = fg.placeholder(
            f"No GPU-initiated request is stored for environment {ch.environment}")
        return
    grid = [g["vary"] for g in ch.spec.grids.values()]
    sizes = sorted({v for g in grid for v in g.get("iosize", [])})
    warps = sorted({v for g in grid for v in g.get("inflight", [])})
    points, res = link.summary[link.summary["mode"] != "copy"], link.residuals
    fig, axes = plt.subplots(1, len(modes), figsize=(ch.spec.analysis["figure_width"] + 1, 4.5),
                             sharey=True, squeeze=False)
    cmap = plt.get_cmap("viridis", len(sizes))
    for ax, which in zip(axes[0], modes):
        for i, size in enumerate(sizes):
            curve = points[(points["mode"] == which) & (points["iosize"] == size)]
            curve = curve.sort_values("inflight")
            ax.plot(curve["inflight"], curve["mean"], "o-", color=cmap(i), label=f"{size:,} B")
            ax.fill_between(curve["inflight"], curve["ci_low"], curve["ci_high"],
                            color=cmap(i), alpha=0.15)
            fit = res[(res["mode"] == which) & (res["iosize"] == size)]
            ax.plot(fit["inflight"], fit["model"], "--", color=cmap(i), lw=1)
            ax.plot(fit.loc[fit["fitted"], "inflight"], fit.loc[fit["fitted"], "measured"], "s",
                    mfc="none", mec="black", ms=9)
        ax.axhline(link.limit, color="0.3", ls="--", lw=1)
        ax.set_xscale("log", base=2)
        fg.value_ticks(ax, warps, log2=True)
        ax.set(xlabel="warps in flight", title=ch.experiment.describe("mode", which),
               ylim=(0, link.limit * 1.1), xlim=(warps[0] / 1.5, warps[-1] * 1.5))
    axes[0][0].set_ylabel("payload GB/s (10^9 B/s)")
    axes[0][-1].legend(title="request size", fontsize=8, loc="upper left",
                       bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    ch.figures["fig_gpu_requests"] = fig
    plt.close(fig)


def residuals(ch: Chapter, link: Link) -> Styler | None:
    """The models' residuals, one row per mode and request size, one column per warps in
    flight; None where no model was fitted."""
    if link.residuals.empty:
        return None
    return escape.table(residual_table(
        link.residuals, ["mode", "iosize"], "inflight",
        lambda m, s: f"{ch.experiment.describe('mode', m)}, {int(s):,} B",
        lambda c: f"{int(c):,} warps", "requests"))


def link_use(ch: Chapter, link: Link) -> Styler | None:
    """The text ``ceiling_text`` and the table of each kind of transfer's ceiling against the
    line rate; None without runs."""
    env = ch.environment
    ceiling = (an.ceiling_sentence(link.use, link.limit, link.tolerance, link.where)
               if ch.have else None)
    ch.text["ceiling_text"] = ceiling or (
        f"not measured yet: none of the runs stored in environment {env} moves data into "
        "the GPU (a host-to-device copy or a read)" if ch.have else
        f"not measured yet: no run is stored in environment {env} (no GPU machine was lent "
        "to the sessions that built this book)")
    if not ch.have:
        return None
    return escape.table(an.link_use_table(link.use, ch.experiment.describe, link.tolerance,
                                          link.resident))


def overhead(ch: Chapter, link: Link) -> None:
    """The texts ``aisio_ratio`` (AiSIO's published receive traffic over payload at 4 KiB)
    and ``overhead_text`` (the ratio measured here, or why the runs cannot measure it)."""
    if link.published:
        t = link.published.table.set_index("iosize")
        rx, payload = t.loc[4096, "rx_p95_bytes_per_s"], t.loc[4096, "payload_bytes_per_s"]
        ch.text["aisio_ratio"] = (f"{rx / 1e9:.2f} / {payload / 1e9:.2f} GB/s = "
                                  f"{rx / payload:.2f} at 4 KiB (a 95th percentile over a mean, "
                                  "published)")
    found, least = link.overhead, ch.spec.analysis["overhead_min_samples"]
    if found["kept"]:
        ch.text["overhead_text"] = (
            f"Measured here, over the {found['kept']} runs whose window held at least {least} "
            f"counter samples, the ratio runs from {found['ratios'].min():.2f} to "
            f"{found['ratios'].max():.2f}.")
    elif len(found["ratios_all"]):
        ch.text["overhead_text"] = (
            f"The runs stored here cannot measure it: their measurement windows last tens of "
            f"milliseconds or less, and those of the {found['runs']} runs that carry payload "
            f"into the GPU held a median of {found['median_samples']:.0f} NVML samples (asked "
            f"for every {ch.spec.settings['sample_interval_ms']} ms, delivered less often); "
            f"NVML's figure is an average over its own sampling period, so their ratios (from "
            f"{found['ratios_all'].min():.4f} to {found['ratios_all'].max():.2f}) describe "
            f"the counter's timing, not the link. None reaches {least} samples, the least the "
            "chapter takes; a longer window (more iterations per run) would.")
    else:
        ch.text["overhead_text"] = ("No run with NVML samples is stored here, so there is no "
                                    "measured ratio yet.")


def answer(ch: Chapter, link: Link) -> None:
    """The text ``answer_text``: the chapter's answer from its ceilings and models."""
    ch.text["answer_text"] = (
        an.answer(link.use, link.limit, link.tolerance, link.where, link.residuals,
                  ch.confidence) if ch.have else
        "Nothing is measured in this environment yet, so this chapter has no answer of its "
        "own: it shows the plan and the link's line rate.")


def findings(ch: Chapter, link: Link | None = None) -> list:
    """The chapter's findings (none without runs); ``link``: :func:`intro`'s, if at hand."""
    if not ch.have:
        return []
    link = link or intro(ch)
    return an.findings(ch.df, link.use, link.published.meta if link.published else {},
                       link.overhead, ch.spec.analysis["overhead_min_samples"], ch.confidence)


def claims(ch: Chapter, link: Link) -> Styler:
    """AiSIO's claims about the link, each with its verdict (the text ``claims``); without
    runs every claim is not testable here."""
    found = findings(ch, link) or None
    robust = ch.robust_findings(lambda other: findings(other, link)) if found else None
    return escape.table(ch.claims_table(
        found, why=f"no run is stored in environment {ch.environment}", robust=robust))


def _requests(ch: Chapter) -> pd.DataFrame:
    """The runs of GPU-initiated requests (every mode but copy)."""
    return ch.df[ch.df["mode"] != "copy"] if ch.have else ch.df


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare)."""
    return compare.across(ch, findings)
