"""Statistics of the tool comparison: each tool's rate at a set-up, its ratio to fio's, and
AiSIO's published means in the same shape.

Responsible for: selecting the runs of one comparison (the base point's queue depth and I/O
size), per-tool summaries (rates, CPU, the queue-depth sweep's ends), ratios with their
intervals and how far they spread, the published table reshaped, and the chapter's findings.
Not responsible for: loading runs (``iolab.report.chapter``), drawing, wording, or glue
(``figures`` and ``page``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from iolab.analysis import findings as fd
from iolab.analysis import stats
from iolab.analysis.findings import Finding

TOOLS = ("fio", "bdevperf", "xnvmeperf")
TOOL_NAMES = {"fio": "fio", "bdevperf": "SPDK bdevperf", "xnvmeperf": "xNVMe xnvmeperf"}
# AiSIO's tool labels (barplot-tool.yaml) in the order of its figure, and how to name them.
PUBLISHED_NAMES = {"spdk_bdevperf": "SPDK bdevperf", "spdk_nvme_perf": "SPDK perf",
                   "xnvmeperf_spdk": "xnvmeperf, SPDK back end",
                   "xnvmeperf_upcie": "xnvmeperf, uPCIe back end",
                   "xnvmeperf_upcie_cuda": "xnvmeperf, uPCIe back end, GPU buffers"}


def at(df: pd.DataFrame, **values: Any) -> pd.DataFrame:
    """The rows whose variables equal ``values``."""
    rows = df
    for key, value in values.items():
        rows = rows[rows[key] == value]
    return rows


def comparison_rows(df: pd.DataFrame, base: dict[str, Any]) -> pd.DataFrame:
    """The runs of the tools grid: the base point's queue depth and I/O size, every tool,
    kernel interface and core count, with a ``setup`` label for the figure's groups."""
    rows = at(df, qdepth=base["qdepth"], iosize=base["iosize"]).copy()
    rows["setup"] = [f"{engine}, {n} core{'s' if n > 1 else ''}"
                     for engine, n in zip(rows["engine"], rows["ncores"])]
    return rows


def setups(rows: pd.DataFrame) -> list[str]:
    """The figure's groups in order: by interface (io_uring first), then cores."""
    order = rows.sort_values(["engine", "ncores"], key=lambda c: c.map(
        {"io_uring": 0, "libaio": 1}).fillna(c) if c.name == "engine" else c)
    return list(dict.fromkeys(order["setup"]))


def ratio_to(rows: pd.DataFrame, tool: str, reference: str, confidence: float,
             **where: Any) -> dict[str, float] | None:
    """Mean IOPS of ``tool`` over ``reference``'s at the same set-up (log-scale interval),
    or None when either has no runs there."""
    a = at(rows, tool=tool, **where)["iops"]
    b = at(rows, tool=reference, **where)["iops"]
    if a.empty or b.empty:
        return None
    return {**stats.ratio_interval(a, b, confidence), "n_a": len(a), "n_b": len(b)}


def ratios_to(rows: pd.DataFrame, reference: str, tools: tuple[str, ...],
              confidence: float) -> pd.DataFrame:
    """:func:`ratio_to` of each tool at every set-up (interface, cores) both have runs at:
    one row per tool and set-up with ``ratio``, ``ci_low``, ``ci_high``."""
    out = []
    for (engine, ncores), _ in rows.groupby(["engine", "ncores"]):
        for tool in tools:
            r = ratio_to(rows, tool, reference, confidence, engine=engine, ncores=ncores)
            if r:
                out.append({"tool": tool, "engine": engine, "ncores": ncores, **r})
    return pd.DataFrame(out, columns=["tool", "engine", "ncores", "ratio", "ci_low", "ci_high",
                                      "n_a", "n_b"])


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


def published(table: pd.DataFrame) -> pd.DataFrame:
    """AiSIO's means as one row per tool, one column per thread count, in its order."""
    wide = table.pivot(index="tool", columns="threads", values="iops")
    wide = wide.reindex([t for t in PUBLISHED_NAMES if t in wide.index])
    wide.index = [PUBLISHED_NAMES[t] for t in wide.index]
    wide.columns = [f"{n} thread{'s' if n > 1 else ''}" for n in wide.columns]
    return wide


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
