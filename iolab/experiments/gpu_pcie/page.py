"""The GPU PCIe chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/gpu_pcie.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter` and the :class:`Link` that :func:`intro` derives once
from its runs, fills ``ch.text`` (the glued texts) and ``ch.figures``, and returns what the
section displays (a Styler, or None where there is nothing to show). A figure with nothing
measured to draw is a :class:`~iolab.report.chapter.Sentence` saying so, never empty axes
or an image of words.

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
from iolab.experiments.gpu_pcie import counters as cn
from iolab.report import escape
from iolab.report import figures as fg
from iolab.report import reference
from iolab.report.chapter import Chapter, Sentence
from iolab.report.tables import design_table, residual_table
from iolab.tools.base import link_gbs
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
    counted: pd.DataFrame            # the runs of the link's counters (cn.counted)
    counters: pd.DataFrame           # cn.table of them
    counter_env: str                 # the environment they are from
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
    counter_env, counted = _counter_runs(ch)
    return Link(
        limit=limit, summary=summary, tolerance=tolerance,
        use=an.link_use(summary, limit, tolerance) if ch.have else None,
        where=an.machine(df, env) if ch.have else None,
        residuals=an.residuals(fits, models, resident), resident=resident,
        counted=counted, counter_env=counter_env,
        counters=cn.table(counted, spec.analysis["counter_min_samples"],
                          spec.analysis["sm_tlp_bytes"], ch.confidence),
        published=reference.load(ch.data_dir, spec.analysis["reference"]))


def design(ch: Chapter) -> Styler:
    """The params file's design: every variable with its values and grids."""
    return escape.table(design_table(ch.spec, ch.experiment))


def copy_engine(ch: Chapter, link: Link) -> None:
    """The figure ``fig_gpu_copy``: copy bandwidth against the size of a copy, one line per
    direction, with the line rate."""
    copies = link.summary[link.summary["mode"] == "copy"]
    if copies.empty:
        ch.figures["fig_gpu_copy"] = Sentence(
            f"No copy-engine run is stored for environment {ch.environment}.")
        return
    grid_bytes = sorted({v for g in ch.spec.grids.values() for v in g["vary"].get("bytes", [])})
    fig, ax = plt.subplots(figsize=(ch.spec.analysis["figure_width"] * 0.8, 4.5))
    fg.band(ax, copies, "bytes", "gbs", hue="direction", rows=ch.df[ch.df["mode"] == "copy"],
            log2=True, label=ch.label("direction"))
    ax.axhline(link.limit, color="0.3", ls="--", lw=1, label="line rate, one direction")
    ax.set_xscale("log", base=2)
    ax.set_xticks(grid_bytes, [fg.size_label(b) for b in grid_bytes], rotation=45)
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
        ch.figures["fig_gpu_requests"] = Sentence(
            f"No GPU-initiated request is stored for environment {ch.environment}.")
        return
    # what was measured, not what the grids vary: a grid may hold a variable at its base
    requested = measured[measured["mode"].isin(modes)]
    sizes = sorted(requested["iosize"].unique())
    warps = sorted(requested["inflight"].unique())
    if len(warps) < 2:  # one point per curve: its values belong in a table, not a figure
        ch.figures["fig_gpu_requests"] = Sentence(
            f"Environment {ch.environment} measured its requests at {int(warps[0]):,} warps "
            "only, so there is no curve to draw; the tables give those runs.")
        return
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


def _counter_runs(ch: Chapter) -> tuple[str, pd.DataFrame]:
    """The environment whose runs measure the link's counters (the analysis setting
    ``counter_environment``, else this one) and those of its runs that count
    (:func:`counters.counted`); none where it has no stored runs."""
    env = ch.spec.analysis["counter_environment"] or ch.environment
    rows = ch.df if env == ch.environment else Chapter(
        ch.experiment.name, env, mode="replay", data_dir=ch.data_dir).df
    return env, cn.counted(rows, ch.spec.analysis["counter_min_samples"])


def _ratio(mean: float, low: float, high: float) -> str:
    return f"{mean:.4f} [{low:.4f}, {high:.4f}]"


TRANSFERS = {("copy", "h2d"): ("copy, host to GPU", "copies into the GPU"),
             ("copy", "d2h"): ("copy, GPU to host", "copies out of the GPU"),
             ("read", "none"): ("GPU-initiated reads", "GPU-initiated reads"),
             ("write", "none"): ("GPU-initiated writes", "GPU-initiated writes")}


def _transfer(mode: str, direction: str) -> str:
    return TRANSFERS[(mode, direction)][0]


def overhead(ch: Chapter, link: Link) -> None:
    """The texts ``aisio_ratio`` (AiSIO's published receive traffic over payload at 4 KiB),
    ``overhead_text`` (what the link's counters measured, against the framing model) and
    ``counter_trust_text`` (which NVML interface the numbers come from, and how far the
    other agrees)."""
    if link.published:
        t = link.published.table.set_index("iosize")
        rx, payload = t.loc[4096, "rx_p95_bytes_per_s"], t.loc[4096, "payload_bytes_per_s"]
        ch.text["aisio_ratio"] = (f"{rx / 1e9:.2f} / {payload / 1e9:.2f} GB/s = "
                                  f"{rx / payload:.2f} at 4 KiB (a 95th percentile over a mean, "
                                  "published)")
    shown, least = link.counters, ch.spec.analysis["counter_min_samples"]
    if shown.empty:
        ch.text["overhead_text"] = (
            f"No run of environment {link.counter_env} held a measurement window of {least} "
            "or more readings of NVML's byte counters, so the link's overhead is not measured "
            "yet: the runs of the first campaign lasted tens of milliseconds. A campaign of "
            "long windows (params with copy_bytes_per_iteration and 16 GiB launches, as "
            "h200-pcie5-long) measures it.")
        ch.text["counter_trust_text"] = ""
        return
    windows = link.counted["nvml.window_s"]
    gap = cn.model_error(shown)
    implied = cn.implied_tlp(shown)
    copies = shown[shown["mode"] == "copy"]
    mps = copies["tlp_bytes"].dropna()
    ch.text["overhead_text"] = (
        f"The link's own counters answer it. In environment {link.counter_env}, "
        f"{len(link.counted)} runs each held one transfer for a measurement window of "
        f"{windows.min():.1f} to {windows.max():.1f} s, in which NVML's byte counters were "
        f"read {int(shown['samples_min'].min())} or more times; the table gives, per transfer, "
        f"the traffic along the payload's direction and against it, each over the payload "
        f"(mean of {int(shown['n'].min())} or more runs, {ch.confidence * 100:g} % t "
        f"interval), beside the framing model. The model takes TLPs of "
        + (f"{int(mps.iloc[0])} B for the copy engine (the max payload size read from the "
           f"GPU's configuration space) and " if len(mps) else "")
        + f"{ch.spec.analysis['sm_tlp_bytes']} B for the multiprocessors' requests, and "
        f"every measured ratio lies within {gap * 100:.2f} % of it. The read requests say "
        f"the same from the other side: their traffic implies TLPs of "
        + " and ".join(sorted({f"{v:.0f} B" for v in implied.values()}))
        + ". A fixed scale in the counter would give every transfer one ratio; the ratios "
        f"instead run from {shown['along'].min():.3f} to {shown['along'].max():.3f} with the "
        "packets' size and kind, and stay put across request sizes where the packets do "
        "(a request from the multiprocessors goes out as packets of one size whatever its "
        "length). So the counters count packet bytes, headers and framing included, and the "
        "overhead is the framing's: "
        + "; ".join(f"{TRANSFERS[(m, d)][1]} {100 * (g['along'].mean() - 1):.1f} %"
                    for (m, d), g in shown.groupby(["mode", "direction"]))
        + "." + _same_packets(shown, link.limit))
    ch.text["counter_trust_text"] = _counter_trust(ch, link, shown)


def _counter_trust(ch: Chapter, link: Link, shown: pd.DataFrame) -> str:
    """Which NVML interface the chapter's numbers come from, and how far the other agrees."""
    sampled = shown["throughput_over_counter"]
    above = int(ch.df["implausible"].fillna("").ne("").sum()) if "implausible" in ch.df else 0
    return (
        "NVML's other interface, nvmlDeviceGetPcieThroughput (documented as a byte counter "
        "read over a 20 ms interval and returned in KB/s), gives no number in this chapter. "
        f"In the same windows its readings came to {sampled.min():.2f} to "
        f"{sampled.max():.2f} times the counters, depending on the transfer, and above the "
        f"link's {link.limit:.1f} GB/s line rate for some: no conversion of its unit "
        "(KB as 1,000 or 1,024 bytes) explains that. "
        + _coincidence(shown, link)
        + "It is what produced the first "
        "campaign's 114.4 GB/s. Every rate over the link is now held to the line rate of "
        "the link the run recorded: a value above it is left out of the tidy table with its "
        f"reason ({above} runs of {ch.environment}; iolab verify lists them), and the raw "
        "files keep it.")


def _same_packets(shown: pd.DataFrame, limit: float) -> str:
    """A sentence on the ceilings into the GPU in packet bytes: the framing explains the gap
    between copies and GPU-initiated reads when both move about as many packet bytes ("" when
    one of the two is not measured)."""
    into = {k: shown[(shown["mode"] == k[0]) & (shown["direction"] == k[1])]
            for k in cn.INTO_GPU}
    if any(t.empty for t in into.values()):
        return ""
    moved = {k: float((t["along"] * t["gbs"]).mean()) for k, t in into.items()}
    (copy, read) = (moved[k] for k in cn.INTO_GPU)
    return (f" The same framing explains why copies into the GPU reach more payload than "
            f"GPU-initiated reads: in packet bytes the two move about the same, {copy:.1f} and "
            f"{read:.1f} GB/s ({copy / limit * 100:.0f} % and {read / limit * 100:.0f} % of the "
            "line rate), but the reads' smaller packets leave less of it to payload.")


def _coincidence(shown: pd.DataFrame, link: Link) -> str:
    """A sentence where the throughput interface's excess over the counters, for some
    transfer, rounds to AiSIO's factor; "" otherwise."""
    factor = link.published.meta.get("overhead_factor") if link.published else None
    close = shown[(shown["throughput_over_counter"] - factor).abs() < 0.005] if factor else []
    if not len(close):
        return ""
    sizes = " and ".join(an.size_words(v) for v in close["size"])
    return (f"For {TRANSFERS[(close['mode'].iloc[0], close['direction'].iloc[0])][1]} of "
            f"{sizes} it reads {close['throughput_over_counter'].mean():.2f} times the "
            f"counters, the factor AiSIO published ({factor:.2f}); AiSIO's came from DCGM, "
            "another interface, so the coincidence is noted here, not explained. ")


def counter_table(ch: Chapter, link: Link) -> Styler | None:
    """The link's counters per transfer beside the framing model (None without runs)."""
    shown = link.counters
    if shown.empty:
        return None
    out = pd.DataFrame({
        "transfer": [_transfer(m, d) for m, d in zip(shown["mode"], shown["direction"])],
        "size": [an.size_words(v) for v in shown["size"]],
        "n": shown["n"], "payload (GB/s)": shown["gbs"].map(lambda v: f"{v:.2f}"),
        "TLP payload (model)": shown["tlp_bytes"].map(
            lambda v: "unknown" if v != v else f"{int(v)} B"),
        "along / payload": [_ratio(r["along"], r["along_low"], r["along_high"])
                            for _, r in shown.iterrows()],
        "model, along": shown["model_along"].map(lambda v: f"{v:.4f}"),
        "against / payload": [_ratio(r["against"], r["against_low"], r["against_high"])
                              for _, r in shown.iterrows()],
        "model, against": shown["model_against"].map(lambda v: f"{v:.4f}"),
        "NVML throughput / counter": shown["throughput_over_counter"].map(
            lambda v: f"{v:.2f}")})
    return escape.table(out, caption=(
        f"The link's byte counters per transfer (environment {link.counter_env}): the traffic "
        "along the payload's direction and against it, each over the payload (mean of the "
        f"runs, {ch.confidence * 100:g} % t interval), beside the framing model's ratios for "
        "the TLP payload it takes; the last column is NVML's sampled throughput over the "
        "counter in the same windows, which gives no number here."))


def answer(ch: Chapter, link: Link) -> None:
    """The text ``answer_text``: the chapter's answer from its ceilings and models."""
    ch.text["answer_text"] = (
        an.answer(link.use, link.limit, link.tolerance, link.where, link.residuals,
                  ch.confidence) + _overhead_answer(link) if ch.have else
        "Nothing is measured in this environment yet, so this chapter has no answer of its "
        "own: it shows the plan and the link's line rate.")


def _overhead_answer(link: Link) -> str:
    """The answer's sentence on the protocol overhead ("" where the counters measured none)."""
    ends = cn.summary(link.counters)
    if not ends:
        return ""
    low, high = ends["low"], ends["high"]
    return (f" The link's byte counters put the protocol overhead of payload into the GPU at "
            f"{(low['along'] - 1) * 100:.1f} % ({TRANSFERS[(low['mode'], low['direction'])][1]},"
            f" packets of {int(low['tlp_bytes'])} B) to {(high['along'] - 1) * 100:.1f} % "
            f"({TRANSFERS[(high['mode'], high['direction'])][1]}, {int(high['tlp_bytes'])} B), "
            "as the packets' framing predicts, not the 28 % AiSIO reported.")


def findings(ch: Chapter, link: Link | None = None) -> list:
    """The chapter's findings (none without runs); ``link``: :func:`intro`'s, if at hand."""
    if not ch.have:
        return []
    link = link or intro(ch)
    reference_meta = link.published.meta if link.published else {}
    overhead = an.overhead_finding(
        link.counters, link.counted, reference_meta.get("overhead_factor"),
        f"no run of environment {link.counter_env} held {ch.spec.analysis['counter_min_samples']}"
        " or more readings of the link's byte counters", ch.confidence)
    return an.findings(ch.df, link.use, reference_meta, overhead, ch.confidence)


def claims(ch: Chapter, link: Link) -> Styler:
    """AiSIO's claims about the link, each with its verdict (the text ``claims``); without
    runs every claim is not testable here."""
    return escape.table(ch.claims_table(
        lambda chapter: findings(chapter, link),
        why=f"no run is stored in environment {ch.environment}"))


def _requests(ch: Chapter) -> pd.DataFrame:
    """The runs of GPU-initiated requests (every mode but copy)."""
    return ch.df[ch.df["mode"] != "copy"] if ch.have else ch.df


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare)."""
    return compare.across(ch, findings)
