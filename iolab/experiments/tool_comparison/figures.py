"""The tool comparison's own figure: its queue-depth sweep.

Responsible for: the sweep of mean IOPS against queue depth, one band per tool.
Not responsible for: the bars both this chapter and the CPU-initiated one show
(:func:`iolab.shared.tool_bars.tools_bars`), selecting or summarizing runs (``analysis``
and the chapter), or glue.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from iolab.report import figures as fg
from iolab.shared import tool_ratios as tr


def qdepth_bands(summary: pd.DataFrame, rows: pd.DataFrame, width: float):
    """Mean IOPS against queue depth, one line and interval band per tool, each repetition
    as a dot."""
    fig, ax = plt.subplots(figsize=(width, 4))
    fg.band(ax, summary, "qdepth", "iops", hue="tool", order=list(tr.TOOLS),
            colors_by=fg.colors(list(tr.TOOLS)), rows=rows, label=lambda t: tr.TOOL_NAMES[t])
    ax.set_xlabel("queue depth")
    ax.set_ylabel("IOPS")
    fg.thousands(ax)
    ax.legend(title="tool")
    fig.tight_layout()
    plt.close(fig)
    return fig
