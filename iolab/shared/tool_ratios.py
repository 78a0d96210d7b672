"""The tool comparison's result in the shape two chapters show it: its own chapter
(``tool_comparison``) and the CPU-initiated search's, which sets it beside the search.

Each tool's runs at one set-up (:func:`at`), the runs of one comparison at the base point's
queue depth and I/O size with a ``setup`` label (:func:`comparison_rows`), a tool's mean IOPS
over a reference tool's at the same set-up with its log-scale interval (:func:`ratio_to`,
:func:`ratios_to`) and AiSIO's published means reshaped (:func:`published`); the bars both
chapters draw from them are :func:`iolab.shared.tool_bars.tools_bars`.

Responsible for: those selections, ratios and the published table. Not responsible for:
drawing (:mod:`iolab.shared.tool_bars`), loading the comparison's runs
(``iolab.report.chapter``), the tool comparison's own summaries and findings
(``iolab.experiments.tool_comparison.analysis``), or any chapter's wording.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from iolab.analysis import stats

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


def published(table: pd.DataFrame) -> pd.DataFrame:
    """AiSIO's means as one row per tool, one column per thread count, in its order."""
    wide = table.pivot(index="tool", columns="threads", values="iops")
    wide = wide.reindex([t for t in PUBLISHED_NAMES if t in wide.index])
    wide.index = [PUBLISHED_NAMES[t] for t in wide.index]
    wide.columns = [f"{n} thread{'s' if n > 1 else ''}" for n in wide.columns]
    return wide
