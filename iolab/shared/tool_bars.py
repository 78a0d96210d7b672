"""The tool comparison's bars, drawn in its own chapter and in the CPU-initiated one: mean
IOPS per tool at each kernel interface and core count, with intervals and repetitions.

Responsible for: that figure. Not responsible for: selecting or summarizing the runs
(:mod:`iolab.shared.tool_ratios`, the chapter), or glue.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from iolab.report import figures as fg
from iolab.shared import tool_ratios as tr


def tools_bars(summary: pd.DataFrame, rows: pd.DataFrame, width: float):
    """Grouped bars: one group per set-up (interface, cores), one bar per tool."""
    fig, ax = plt.subplots(figsize=(width, 4.2))
    fg.bars(ax, summary, "setup", "iops", order=tr.setups(rows), hue="tool",
            hue_order=list(tr.TOOLS), colors_by=fg.colors(list(tr.TOOLS)), rows=rows,
            hue_label=lambda t: tr.TOOL_NAMES[t])
    ax.set_ylabel("IOPS")
    ax.set_xlabel("kernel interface, physical cores (one file each)")
    fg.thousands(ax)
    # above the axes: inside, it would hide the first group's bars
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(tr.TOOLS),
              frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig
