"""Analysis shared by the device-initiated chapters (I/O size and queue depth scaling).

- *rows*: the runs shown, this package's own where stored, else runs imported from an AiSIO
  archive (never pooled); a run whose GPU counter watched another GPU than the benchmark's
  is left out (``gpu_io.gpu_check``).
- *device capacity* C: the CPU-initiated search's highest mean IOPS of a single-device point
  in the same environment, where stored; else AiSIO's published value, labelled so (the
  params' analysis keys ``capacity_experiment`` and ``capacity_reference`` name both). The queue-depth roofline is ndevs x C.
- *reference ceilings*: the line rate of the GPU's link (recorded by the xnvmeperf driver),
  and the one-way GPU-to-GPU P2P write figure from the PCIe chapter's p2p runs; without
  them, AiSIO's published figures, labelled (its 56.1 GB/s is a two-way aggregate).
- *model*: the Little's-law bound of :mod:`iolab.analysis.queueing`, its latency taken from
  the rows shown, or from the published points when nothing is stored.

Responsible for: those choices, each returned with where it came from. Not responsible for:
the criterion (:mod:`iolab.analysis.saturation`) or drawing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from iolab.analysis.queueing import LittleBound, latency_from
from iolab.campaign import Campaign
from iolab.experiments import gpu_io
from iolab.errors import IolabError
from iolab.experiments.cpu_search import analysis as cpu
from iolab.report import reference

def usable(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows whose counter watched the benchmark's GPU, or that had none (imports: AiSIO's)."""
    if rows.empty:
        return rows
    keep = rows["gpu_check"].isin([gpu_io.SAME_GPU, "no GPU counter"]) | \
        rows["run.source"].fillna("").str.startswith(gpu_io.IMPORTED_SOURCE)
    return rows[keep].reset_index(drop=True)


def device_capacity(analysis: dict[str, Any], environment: str, data_dir: Path) -> dict[str, Any]:
    """C and its source: measured by the experiment named by ``capacity_experiment`` (the
    CPU-initiated search) in ``environment``, else from ``capacity_reference`` (published)."""
    try:
        runs = Campaign(analysis["capacity_experiment"], environment, data_dir=data_dir).tidy()
    except IolabError:  # no params for cpu_search here: fall back to the published value
        runs = pd.DataFrame()
    if not runs.empty and (runs["ndevs"] == 1).any():
        cap = cpu.device_capacity(cpu.normalize(runs), analysis["confidence"])
        return {"iops": cap["iops"], "measured": True,
                "source": f"measured: the CPU-initiated search's best single-device point in "
                          f"{environment} ({cap['n']} runs)"}
    ref = reference.load(data_dir, analysis["capacity_reference"])
    if ref is None:
        return {"iops": float("nan"), "measured": False, "source": "unknown (no stored "
                f"{analysis['capacity_experiment']} runs in {environment} and no published "
                "reference)"}
    return {"iops": float(ref.meta["device_capacity_iops"]), "measured": False,
            "source": "published by AiSIO (its best single-device bdevperf run), not measured "
                      "here"}


def p2p_reference(analysis: dict[str, Any], environment: str,
                  data_dir: Path) -> dict[str, Any] | None:
    """The GPU-to-GPU figures of the PCIe chapter (``p2p_experiment``) in ``environment``: its
    own p2p runs, else the p2p output of an AiSIO import, else None."""
    from iolab.experiments.pcie_saturation import analysis as pcie

    try:
        campaign = Campaign(analysis["p2p_experiment"], environment, data_dir=data_dir)
        found = pcie.p2p_metrics(campaign.tidy())
        return found or pcie.imported_p2p(campaign.store.root)
    except IolabError:  # no params for the PCIe chapter in this environment
        return None


def bound(points: pd.DataFrame, outstanding: str, iops: str, capacity: dict[str, Any],
          link_bytes_per_s: float, link_source: str, ndevs: int) -> LittleBound:
    """The Little's-law bound with L from ``points`` (one row per point, mean IOPS)."""
    latency, at = latency_from(points, outstanding, iops)
    return LittleBound(latency, capacity["iops"], link_bytes_per_s, ndevs, sources={
        "latency_s": f"the smallest N / X of the points shown ({at[outstanding]:g} commands "
                     f"in flight at {at[iops]:,.0f} IOPS)",
        "device_iops": capacity["source"], "link_bytes_per_s": link_source})
