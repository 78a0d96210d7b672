"""Analysis of the GPU PCIe chapter: the copy engine's ceiling, GPU-initiated requests against
warps in flight, the requests needed to fill the link, and protocol overhead.

- *ceilings*: per mode (and copy direction), the highest mean payload bandwidth of any point.
  The *one-way ceiling into the GPU* is the higher of the host-to-device copy's and the
  GPU-initiated reads' ceilings: what a device-initiated read into GPU memory could reach.
- *requests needed*: per request size, the smallest number of warps in flight whose mean is
  within the tolerance of that size's plateau (:mod:`iolab.analysis.saturation`).
- *model*: per request size, the Little's-law bound (:mod:`iolab.analysis.queueing`) with its
  latency term from the point with the fewest warps in flight and its link term the highest
  mean of the mode (the plateau from the data); there is no device term.
- *physical limit*: the link's line rate in one direction from the generation and width
  nvidia-smi reported during the runs (:func:`iolab.tools.xnvmeperf.link_gbs`).

Responsible for: those derivations over summaries and tidy rows. Not responsible for: drawing.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from iolab.analysis.queueing import LittleBound
from iolab.analysis.saturation import saturation_points
from iolab.tools.xnvmeperf import link_gbs

INTO_GPU = (("copy", "h2d"), ("read", "none"))


def ceilings(summary: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """(mode, direction) -> the point with the highest mean ``gbs`` (its row as a dict)."""
    out = {}
    for (mode, direction), part in summary.groupby(["mode", "direction"]):
        best = part.loc[part["mean"].idxmax()]
        out[(mode, direction)] = best.to_dict()
    return out


def one_way_ceiling(found: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    """The highest ceiling into the GPU, with the mode that reached it; None without one."""
    into = [(found[k]["mean"], k) for k in INTO_GPU if k in found]
    if not into:
        return None
    value, (mode, direction) = max(into)
    return {"gbs": value, "mode": mode, "direction": direction, "point": found[(mode, direction)]}


def requests_needed(summary: pd.DataFrame, tolerance: float) -> pd.DataFrame:
    """Per mode and request size: the plateau and the smallest warps in flight reaching it."""
    return saturation_points(summary, ["mode", "iosize"], "inflight", tolerance)


def bounds(rows: pd.DataFrame, summary: pd.DataFrame) -> dict[tuple[str, int], LittleBound]:
    """(mode, iosize) -> the bound for that curve (see the module docstring): the latency term
    is the mean response time (Little's law, ``latency_us``) of the runs with the fewest
    warps in flight, the link term the highest mean bandwidth of the mode in ``summary``."""
    out = {}
    for mode, part in summary.groupby("mode"):
        plateau = part["mean"].max() * 1e9
        for iosize, curve in rows[rows["mode"] == mode].groupby("iosize"):
            lightest = curve[curve["inflight"] == curve["inflight"].min()]
            latency = lightest["latency_us"].mean() / 1e6
            if not latency > 0 or not plateau > 0:
                continue
            out[(mode, int(iosize))] = LittleBound(
                latency, math.inf, plateau, 1,
                sources={"latency_s": f"the response time at {int(lightest['inflight'].iloc[0])} "
                                      "warps in flight",
                         "link_bytes_per_s": f"the highest mean of mode {mode}"})
    return out


def physical_limit(rows: pd.DataFrame) -> float | None:
    """The line rate (GB/s, one direction) of the link nvidia-smi reported, or None."""
    links = rows[["gpu_pcie_probe.link_gen", "gpu_pcie_probe.link_width"]].dropna() \
        if "gpu_pcie_probe.link_gen" in rows else pd.DataFrame()
    if links.empty:
        return None
    gen, width = links.mode().iloc[0]
    return link_gbs(int(gen), int(width))
