"""Statistics of the tool comparison: each tool's rate at a set-up, its ratio to fio's, and
AiSIO's published means in the same shape.

The runs of one comparison, the tools' ratios and the published table are
:mod:`iolab.shared.tool_ratios`' (the CPU-initiated chapter shows them too); this module
uses them under the same names.

Responsible for: per-tool summaries (rates, CPU, the queue-depth sweep's ends), how far the
ratios spread, and the chapter's findings. Not responsible for: selecting the runs of one
comparison, the ratios or the published table (:mod:`iolab.shared.tool_ratios`), loading
runs (``iolab.report.chapter``), drawing, wording, or glue (``figures`` and ``page``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from iolab.analysis import findings as fd
from iolab.analysis.findings import Finding
from iolab.shared.tool_ratios import TOOLS, at, comparison_rows, ratios_to, setups


def apart(found: pd.DataFrame) -> int:
    """How many of :func:`ratios_to`'s intervals exclude 1 (on either side)."""
    return int((found["ci_low"] > 1).sum() + (found["ci_high"] < 1).sum())


def largest_difference(found: pd.DataFrame) -> float:
    """The largest relative difference of a ratio from 1, ``|ratio - 1|``, over
    :func:`ratios_to`'s rows (NaN for none)."""
    return float((found["ratio"] - 1).abs().max())


def ratio_ranges(found: pd.DataFrame) -> pd.DataFrame:
    """Per tool: the lowest and the highest of its ratios over the set-ups (``min``, ``max``)."""
    return found.groupby("tool")["ratio"].agg(["min", "max"])


def mean_iops(rows: pd.DataFrame) -> pd.Series:
    """Mean IOPS per tool, kernel interface and core count."""
    return rows.groupby(["tool", "engine", "ncores"])["iops"].mean()


def cpu_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean CPU over each tool's lifetime (GNU time, % of one CPU) per set-up and tool:
    set-ups in the figure's order, every tool a column, NaN where it has no runs (a campaign
    stopped part way)."""
    return (rows.groupby(["setup", "tool"])["cpu_usage_lifetime_pct"].mean()
            .unstack("tool").reindex(index=setups(rows), columns=list(TOOLS)))


def cpu_ratio_range(cpu: pd.DataFrame, tools: tuple[str, ...],
                    reference: str) -> tuple[float, float]:
    """The lowest and the highest ratio of ``tools``' mean CPU to ``reference``'s at the same
    set-up, over :func:`cpu_means`'s table."""
    times = cpu[list(tools)].div(cpu[reference], axis=0)
    return times.min().min(), times.max().max()


def cpu_per_core(rows: pd.DataFrame) -> pd.DataFrame:
    """Per tool: the lowest and the highest lifetime CPU of one run per core it drives (% of
    one CPU; ``min``, ``max``)."""
    pct = rows["cpu_usage_lifetime_pct"] / rows["ncores"]
    return pct.groupby(rows["tool"]).agg(["min", "max"])


def qdepth_sweep(summary: pd.DataFrame) -> pd.DataFrame:
    """Per tool of a queue-depth sweep's IOPS summary: the mean at the lowest queue depth
    (``lowest``), the highest mean (``best``) and the queue depth it is at (``best_at``)."""
    means = summary.pivot(index="qdepth", columns="tool", values="mean")
    return pd.DataFrame({"lowest": means.iloc[0], "best": means.max(),
                         "best_at": means.idxmax()})


def findings(df: pd.DataFrame, base: dict[str, Any], confidence: float = 0.95) -> list[Finding]:
    """The chapter's findings (:mod:`iolab.analysis.findings`) at the base point's queue
    depth and I/O size, through io_uring: xnvmeperf against bdevperf on one core, and what a
    second core adds for each of them. What this package cannot measure on a kernel path (the
    uPCIe driver, GPU buffers, SPDK's perf) is undefined with the reason."""
    rows = comparison_rows(df, base) if not df.empty else df

    def iops(tool: str, ncores: int) -> list[float]:
        return (at(rows, tool=tool, engine="io_uring", ncores=ncores)["iops"].dropna().tolist()
                if not rows.empty else [])

    def ratio(fid: str, what: str, a: list[float], b: list[float]) -> Finding:
        if not a or not b:
            return fd.undefined(fid, what, "no stored runs of one side", "ratio", confidence)
        return fd.ratio(fid, what, a, b, confidence)

    user_space = ("this host has no NVMe device to hand to a user-space driver, so its runs "
                  "read files through the kernel")
    return [
        ratio("xnvmeperf_over_bdevperf", "xnvmeperf / bdevperf mean IOPS, io_uring, one core",
              iops("xnvmeperf", 1), iops("bdevperf", 1)),
        ratio("bdevperf_over_fio", "bdevperf / fio mean IOPS, io_uring, one core",
              iops("bdevperf", 1), iops("fio", 1)),
        ratio("xnvmeperf_over_fio", "xnvmeperf / fio mean IOPS, io_uring, one core",
              iops("xnvmeperf", 1), iops("fio", 1)),
        fd.undefined("xnvmeperf_spdk_over_bdevperf", "xnvmeperf on SPDK's NVMe driver / "
                     "bdevperf", user_space + " (both tools read through io_uring here)",
                     "ratio", confidence),
        ratio("second_core_bdevperf", "bdevperf's mean IOPS on two cores / one core, io_uring",
              iops("bdevperf", 2), iops("bdevperf", 1)),
        ratio("second_core_xnvmeperf", "xnvmeperf's mean IOPS on two cores / one core, "
              "io_uring", iops("xnvmeperf", 2), iops("xnvmeperf", 1)),
        fd.undefined("upcie_over_spdk", "xnvmeperf on xNVMe's uPCIe driver / on SPDK's",
                     user_space, "ratio", confidence),
        fd.undefined("gpu_buffers", "xnvmeperf on uPCIe with GPU buffers / host buffers",
                     user_space + ", and it has no GPU", "ratio", confidence),
        fd.undefined("perf_over_bdevperf", "SPDK's perf / bdevperf mean IOPS",
                     "this package has no driver for SPDK's perf tool", "ratio", confidence),
    ]
