"""The CPU-initiated search's figure of its one-at-a-time sweeps.

Responsible for: drawing the four sweeps (queue depth, I/O size with bandwidth on a second
axis, cores with turbo on and off, devices with the roofline) from their summaries.
Not responsible for: the summaries (``analysis.sweeps``), whether a roofline applies (the
page decides), or glue.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from iolab.report import figures as fg


def sweeps(found: dict[str, tuple[pd.DataFrame, pd.DataFrame]], experiment: Any,
           width: float, title: str, capacity: float | None = None):
    """A 2 x 2 grid, one panel per sweep of ``found`` (``analysis.sweeps``): means, interval
    bands and repetitions; along the I/O size also GiB/s on the right axis; along the devices
    the roofline ``capacity`` x devices where ``capacity`` is given."""
    fig, axes = plt.subplots(2, 2, figsize=(width, 8))
    panels = {"qdepth": axes[0, 0], "iosize": axes[0, 1], "ncores": axes[1, 0],
              "ndevs": axes[1, 1]}
    for v, ax in panels.items():
        s, rows = found[v]
        if s.empty:
            continue
        fg.band(ax, s, v, "iops", hue="turbo" if v == "ncores" else None, rows=rows,
                log2=v in ("qdepth", "iosize"), sizes=v == "iosize",
                label=lambda t: f"turbo {experiment.describe('turbo', t)}")
        # the ticks name the unit of a size (4 KiB, 1 MiB): the label need not
        ax.set(xlabel=experiment.variable_labels.get(v, v).removesuffix(" (bytes)"),
               ylabel="IOPS")
        fg.thousands(ax)
    io = found["iosize"][0]
    if not io.empty:
        twin = axes[0, 1].twinx()
        g = io[io["metric"] == "gibs"].sort_values("iosize")
        twin.plot(g["iosize"], g["mean"], marker="s", color="C1", label="GiB/s")
        twin.fill_between(g["iosize"], g["ci_low"], g["ci_high"], alpha=0.2, color="C1",
                          linewidth=0)
        twin.set_ylabel("GiB/s", color="C1")
        twin.grid(False)
    axes[1, 0].set_xlabel("physical cores (SMT held at the reference)")
    cores = found["ncores"][0]
    if not cores.empty and cores["turbo"].nunique() > 1:
        axes[1, 0].legend()
    dv = found["ndevs"][0]
    if not dv.empty and capacity is not None:
        xs = np.array(sorted(dv["ndevs"].unique()))
        axes[1, 1].plot(xs, capacity * xs, "k--", label="roofline (capacity × devices)")
        axes[1, 1].legend()
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig
