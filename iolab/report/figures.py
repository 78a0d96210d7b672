"""Figures for the chapters: one style, means with their intervals, and every repetition shown.

Every plotting helper takes a summary (:func:`iolab.analysis.stats.summarize`) for the means
and intervals and, optionally, the tidy rows behind it, whose repetitions it draws as points
beside the means; a repetition that is an outlier of its point (:mod:`iolab.analysis.outliers`)
is drawn as a red cross, with a legend entry that says so. Axes of whole-number variables get ticks at the measured values only (no
"1.2 cores"), categorical axes get readable labels from the experiment, and a figure fed rows
of more than one configuration refuses to draw (see :func:`one_configuration`).

Every text of a figure is drawn as the characters it is (:func:`plain_text`, set when this
module is imported, which every module that draws a figure does): titles, labels, tick labels
and legends quote recorded strings (a machine class made from a hostname, an environment's
or a tool's name), and matplotlib would read a ``$...$`` in one as math (``$\\nosuchcmd$``
stopped the page being built).

Responsible for: the look and the drawing. Not responsible for: the numbers (analysis) or
where the figure goes (``iolab.report.chapter``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter, NullFormatter, NullLocator

from iolab.analysis import outliers
from iolab.core.repetitions import REASON_TEXT
from iolab.errors import IolabError

Label = Callable[[Any], str]
OUTLIER_LABEL = f"outlier run (|modified z| > {outliers.THRESHOLD:g})"


def plain_text() -> None:
    """Figures draw every text as its characters: no ``$...$`` math, no TeX (a user's
    matplotlibrc may ask for either). No figure of the book writes math."""
    plt.rcParams["text.parse_math"] = False
    plt.rcParams["text.usetex"] = False


plain_text()  # at import: a figure's texts are made with the settings of their time


def theme(palette: str = "colorblind") -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=1.1, palette=palette)
    plain_text()


def colors(keys: Sequence[Any], palette: str = "colorblind") -> dict[Any, Any]:
    return dict(zip(keys, sns.color_palette(palette, len(keys))))


def one_configuration(rows: pd.DataFrame, what: str) -> None:
    """Refuse to draw rows made with different execution settings as if they were one."""
    if "run.config" in rows and rows["run.config"].nunique() > 1:
        found = ", ".join(f"{c} ({n} runs)" for c, n in rows["run.config"].value_counts().items())
        raise IolabError(f"{what}: the rows come from {rows['run.config'].nunique()} "
                         f"configurations ({found}); select one (see iolab.core.tidy."
                         "configurations) instead of pooling them")


def log_when_wide(ax, decade: float = 10.0) -> bool:
    """A log y axis when what is drawn spans a decade or more (latencies from tens of µs to
    milliseconds): on a linear axis the small values flatten into one line at its foot and a
    claim about them (82 against 115 µs) cannot be read. Its label says so. True if set."""
    low, high = ax.dataLim.y0, ax.dataLim.y1
    if not low > 0 or high / low < decade:
        return False
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"{ax.get_ylabel()} (log scale)")
    return True


def plain_log_ticks(ax, axis: str = "x") -> None:
    """A log axis labelled in plain numbers (0.2, 0.5, 1, 2, 5, 10): matplotlib's own log
    labels are math (``$\\mathdefault{10^{-1}}$``), which the book's figures print as its
    characters (:func:`plain_text`)."""
    def minor(value: float, _: Any) -> str:
        lead = round(value / 10 ** np.floor(np.log10(value))) if value > 0 else 0
        return f"{value:g}" if lead in (2, 5) else ""

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(minor))


def thousands(ax, axis: str = "y") -> None:
    """Large counts as 120k instead of 120000."""
    # one decimal where the ticks need it (62.5k), none where they do not (65k)
    fmt = FuncFormatter(lambda v, _: f"{v / 1e3:.1f}".removesuffix(".0") + "k"
                        if abs(v) >= 1e3 else f"{v:.0f}")
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(fmt)


def size_label(nbytes: int) -> str:
    """A size in bytes as a tick reads it, in the largest binary unit that divides it:
    512 B, 4 KiB, 1536 KiB, 1 MiB, 2 GiB (a raw 1048576 is read digit by digit)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def value_ticks(ax, values: Sequence[Any], *, log2: bool = False, sizes: bool = False) -> None:
    """Ticks exactly at the measured values of a whole-number variable, labelled as such
    (``sizes``: a size in bytes, labelled in B, KiB, MiB or GiB)."""
    values = sorted({int(v) for v in values})
    if log2:
        ax.set_xscale("log", base=2)
    ax.set_xticks(values, [size_label(v) if sizes else str(v) for v in values])
    ax.xaxis.set_minor_locator(NullLocator())


def _repetitions(ax, rows: pd.DataFrame | None, x: str, metric: str, where: dict[str, Any],
                 color, positions: Callable[[pd.Series], np.ndarray] | None = None) -> None:
    if rows is None or rows.empty:
        return
    sub = rows
    for key, value in where.items():
        sub = sub[sub[key] == value]
    if sub.empty:
        return
    xs = positions(sub[x]) if positions else sub[x].to_numpy(dtype=float)
    # a run far from its point's others (iolab.analysis.outliers) is drawn as a cross
    far = outliers.flag(sub, [x], metric).to_numpy()
    ax.scatter(xs[~far], sub[metric][~far], s=14, color=color, alpha=0.55, linewidths=0,
               zorder=3)
    if far.any():
        seen = any(h.get_label() == OUTLIER_LABEL for h in ax.collections)
        ax.scatter(xs[far], sub[metric][far], s=44, marker="x", color="#c0392b", linewidths=1.6,
                   zorder=4, label="_nolegend_" if seen else OUTLIER_LABEL)


def band(ax, summary: pd.DataFrame, x: str, metric: str, *, hue: str | None = None,
         order: Sequence[Any] = (), colors_by: dict[Any, Any] | None = None,
         rows: pd.DataFrame | None = None, label: Label = str, log2: bool = True,
         scale: float = 1.0, sizes: bool = False) -> None:
    """Mean and interval band along a whole-number ``x``, one line per ``hue`` value, and each
    repetition as a dot (``rows``); ``sizes``: ``x`` is a size in bytes."""
    if rows is not None:
        one_configuration(rows, f"figure of {metric} against {x}")
    if "metric" not in summary:  # no rows summarized (Chapter.summarize of none): nothing to draw
        return
    s = summary[summary["metric"] == metric]
    groups = list(order) or (sorted(s[hue].unique()) if hue else [None])
    for g in groups:
        part = s if hue is None else s[s[hue] == g]
        part = part.sort_values(x)
        if part.empty:
            continue
        name = label(g) if hue else None
        line, = ax.plot(part[x], part["mean"] * scale, marker="o", label=name,
                        color=(colors_by or {}).get(g))
        color = line.get_color()  # the band and the dots take the line's colour
        ax.fill_between(part[x], part["ci_low"] * scale, part["ci_high"] * scale, alpha=0.22,
                        color=color, linewidth=0)
        if rows is not None:
            scaled = rows.assign(**{metric: rows[metric] * scale})
            _repetitions(ax, scaled, x, metric, {} if hue is None else {hue: g}, color)
    if not s.empty:
        value_ticks(ax, s[x].unique(), log2=log2, sizes=sizes)


def bars(ax, summary: pd.DataFrame, x: str, metric: str, *, order: Sequence[Any],
         hue: str, hue_order: Sequence[Any], colors_by: dict[Any, Any],
         rows: pd.DataFrame | None = None, label: Label = str, hue_label: Label = str) -> None:
    """Grouped bars of the means with interval whiskers, each repetition as a dot."""
    if rows is not None:
        one_configuration(rows, f"figure of {metric} by {x}")
    if "metric" not in summary:  # no rows summarized (Chapter.summarize of none): nothing to draw
        return
    width = 0.8 / len(hue_order)
    xs = np.arange(len(order))
    s = summary[summary["metric"] == metric]
    for i, h in enumerate(hue_order):
        part = s[s[hue] == h].set_index(x).reindex(order)
        offset = (i - (len(hue_order) - 1) / 2) * width
        ax.bar(xs + offset, part["mean"], width, label=hue_label(h), color=colors_by[h],
               alpha=0.85)
        # whiskers from the interval's own ends: a log-normal (modified Cox) interval is about
        # the log-normal mean and need not contain the arithmetic mean the bar shows
        half = (part["ci_high"] - part["ci_low"]) / 2
        ax.errorbar(xs + offset, part["ci_low"] + half, yerr=half, fmt="none", ecolor="0.2",
                    capsize=4)
        index = {v: k for k, v in enumerate(order)}
        shown = None if rows is None else rows[rows[x].isin(order)]
        _repetitions(ax, shown, x, metric, {hue: h}, "0.15",
                     positions=lambda col, off=offset: np.array([index[v] for v in col]) + off)
    ax.set_xticks(xs, [label(v) for v in order])


def legend_beside(fig, axes, title: str) -> None:
    """One legend to the right of the panels, so it never covers data."""
    found = {}
    for ax in axes:  # every panel's entries, once, the outlier mark last
        for handle, text in zip(*ax.get_legend_handles_labels()):
            found.setdefault(text, handle)
    labels = sorted(found, key=lambda t: t == OUTLIER_LABEL)
    handles = [found[t] for t in labels]
    for ax in axes:
        if ax.get_legend():
            ax.get_legend().remove()
    axes[-1].legend(handles, labels, title=title, loc="upper left", bbox_to_anchor=(1.02, 1.0))


def half_widths(decisions: pd.DataFrame, target: float, low: int, high: int, width: float,
                palette: str = "colorblind", title: str = ""):
    """Each point's relative half-width of its interval (%) against its number of runs, by
    the reason its rule settled it, with the target as a dashed line. Points at the same n
    are spread sideways so that none hides another."""
    fig, ax = plt.subplots(figsize=(width, 4.2))
    shown = decisions.dropna(subset=["rel_half_pct"])
    reasons = [r for r in REASON_TEXT if r in set(shown["reason"])]
    palette_of = colors(list(REASON_TEXT), palette)
    for reason in reasons:
        part = shown[shown["reason"] == reason]
        # a fixed spread of each n's points (not random: the figure is the same every build)
        offsets = part.groupby("n").cumcount() / part.groupby("n")["n"].transform("size")
        x = part["n"] + 0.5 * (offsets - 0.5 + 0.5 / part.groupby("n")["n"].transform("size"))
        # a log axis has no 0: runs that agreed exactly are drawn at its floor
        ax.scatter(x, part["rel_half_pct"].clip(lower=0.01), s=36, color=palette_of[reason],
                   label=f"{REASON_TEXT[reason]} ({len(part)})", edgecolor="white", zorder=3)
    ax.axhline(target, color="black", linestyle="--", linewidth=1,
               label=f"target ±{target:g} %")
    ax.set_yscale("log")
    values = list(shown["rel_half_pct"].clip(lower=0.01)) + [target]
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500)
             if min(values) / 2.5 <= t <= max(values) * 2.5]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(range(low, high + 1))
    ax.set_xlim(low - 0.6, high + 0.6)
    ax.set(xlabel="runs of the point (n)", ylabel="CI half-width, % of the mean")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
