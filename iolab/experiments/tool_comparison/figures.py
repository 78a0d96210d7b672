"""The tool comparison's figures: the bars drawn for its own chapter and for the
CPU-initiated one, and its queue-depth sweep.

Responsible for: the figure both chapters show (mean IOPS per tool at each interface and
core count, with intervals and repetitions) and the sweep of mean IOPS against queue depth.
Not responsible for: selecting or summarizing runs (``analysis`` and the chapter), or glue.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from iolab.experiments.tool_comparison import analysis as ta
from iolab.report import figures as fg


def tools_bars(summary: pd.DataFrame, rows: pd.DataFrame, width: float):
    """Grouped bars: one group per set-up (interface, cores), one bar per tool."""
    fig, ax = plt.subplots(figsize=(width, 4.2))
    fg.bars(ax, summary, "setup", "iops", order=ta.setups(rows), hue="tool",
            hue_order=list(ta.TOOLS), colors_by=fg.colors(list(ta.TOOLS)), rows=rows,
            hue_label=lambda t: ta.TOOL_NAMES[t])
    ax.set_ylabel("IOPS")
    ax.set_xlabel("kernel interface, physical cores (one file each)")
    fg.thousands(ax)
    # above the axes: inside, it would hide the first group's bars
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(ta.TOOLS),
              frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def qdepth_bands(summary: pd.DataFrame, rows: pd.DataFrame, width: float):
    """Mean IOPS against queue depth, one line and interval band per tool, each repetition
    as a dot."""
    fig, ax = plt.subplots(figsize=(width, 4))
    fg.band(ax, summary, "qdepth", "iops", hue="tool", order=list(ta.TOOLS),
            colors_by=fg.colors(list(ta.TOOLS)), rows=rows, label=lambda t: ta.TOOL_NAMES[t])
    ax.set_xlabel("queue depth")
    ax.set_ylabel("IOPS")
    fg.thousands(ax)
    ax.legend(title="tool")
    fig.tight_layout()
    plt.close(fig)
    return fig
