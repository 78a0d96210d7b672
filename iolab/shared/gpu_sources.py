"""Where a device-initiated chapter (I/O size and queue depth scaling) takes the parameters
of its model and its GPU-to-GPU reference from: another experiment's stored runs in the same
environment, named in the chapter's params (:data:`iolab.shared.cuda_run.ANALYSIS`), else a
published reference. Each value comes back with where it came from, in words.

- *device capacity* C: the highest mean IOPS of a single-device point of the CPU-initiated
  search (the experiment the params' ``capacity_experiment`` names;
  :func:`iolab.analysis.capacity.device_capacity`), from the runs its own params plan in the
  same environment, where stored; else the published value of the reference
  ``capacity_reference`` (AiSIO's), labelled so. The queue-depth roofline is ndevs x C.
- *GPU-to-GPU reference*: the PCIe chapter's p2p runs (``p2p_experiment``;
  :func:`p2p_metrics`, which the PCIe chapter shows too), else the p2p output of an AiSIO
  import stored there, else None.
- *link term* B, one definition for both device-initiated chapters: the highest mean payload
  bandwidth of the I/O-size campaign (``link_experiment``) in the same environment, where
  stored; else the payload plateau AiSIO published (``link_reference``'s
  ``plateau_gbs_high``). A line rate is not a payload ceiling and is never used as B.

The other experiment is found by name through the registry and read through its
:class:`~iolab.execution.campaign.Campaign`: no experiment imports another.

Responsible for: those choices, loading the campaigns they read, and the GPU-to-GPU figures
of stored p2p runs. Not responsible for: the
model and its residuals (:mod:`iolab.analysis.queueing`), the capacity's definition
(:mod:`iolab.analysis.capacity`), the criterion (:mod:`iolab.analysis.saturation`), which
rows a chapter shows (:mod:`iolab.shared.gpu_io`) or drawing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from iolab.analysis import capacity as cap
from iolab.core import spec as specmod
from iolab.core.registry import get
from iolab.execution.campaign import Campaign
from iolab.importers import extras
from iolab.report import reference

P2P = "gpu_to_gpu"  # the benchmark value of a p2pBandwidthLatencyTest run (pcie_saturation)


def _campaign(name: str, environment: str, data_dir: Path) -> Campaign | None:
    """The campaign of another experiment in this environment, or None without its params."""
    experiment = get(name)
    if environment not in specmod.environments(name, experiment.params_dir):
        return None
    return Campaign(experiment, environment, data_dir=data_dir)


def _planned_runs(campaign: Campaign | None) -> pd.DataFrame:
    """The stored runs a campaign's own params plan, as its chapter shows them."""
    return (Campaign.split(campaign.tidy(), campaign.plan(as_recorded=True))[0]
            if campaign is not None else pd.DataFrame())


def device_capacity(analysis: dict[str, Any], environment: str, data_dir: Path) -> dict[str, Any]:
    """C and where it came from (see the module docstring); NaN when neither exists."""
    name = analysis["capacity_experiment"]
    runs = _planned_runs(_campaign(name, environment, data_dir))
    if not runs.empty and (runs["ndevs"] == 1).any():
        found = cap.device_capacity(cap.normalize(runs), analysis["confidence"])
        return {"iops": found["iops"], "measured": True,
                "source": f"measured: the best single-device point of {name} in "
                          f"{environment} ({found['n']} runs)"}
    ref = reference.load(data_dir, analysis["capacity_reference"])
    if ref is None:
        return {"iops": float("nan"), "measured": False,
                "source": f"unknown (no stored {name} runs in {environment} and no "
                          f"published reference {analysis['capacity_reference']})"}
    return {"iops": float(ref.meta["device_capacity_iops"]), "measured": False,
            "source": "published by AiSIO (its best single-device bdevperf run), not measured "
                      "here"}


def p2p_metrics(df: pd.DataFrame) -> dict[str, Any] | None:
    """The GPU-to-GPU figures of this package's stored p2p runs (means over repetitions):
    the rows whose ``benchmark`` is :data:`P2P`; None without any."""
    if df.empty:
        return None
    rows = df[df["benchmark"] == P2P]
    if rows.empty:
        return None
    return {"source": f"{len(rows)} stored run(s) of p2pBandwidthLatencyTest",
            "p2p_write_gbs": rows["p2p_write_gbs"].mean(),
            "p2p_write_min_gbs": rows["p2p_write_min_gbs"].mean()
            if "p2p_write_min_gbs" in rows else float("nan"),
            "bidir_p2p_gbs": rows["bidir_p2p_gbs"].mean(), "aisio_reference_gbs": None}


def p2p_reference(analysis: dict[str, Any], environment: str,
                  data_dir: Path) -> dict[str, Any] | None:
    """The GPU-to-GPU figures of the PCIe chapter in ``environment``, or None."""
    campaign = _campaign(analysis["p2p_experiment"], environment, data_dir)
    if campaign is None:
        return None
    return p2p_metrics(campaign.tidy()) or extras.imported_p2p(campaign.store.root)


def link_term(analysis: dict[str, Any], environment: str, data_dir: Path) -> tuple[float, str]:
    """B in bytes per second and where it came from (see the module docstring); infinity
    with the reason when neither source exists."""
    name = analysis["link_experiment"]
    campaign = _campaign(name, environment, data_dir)
    runs = _planned_runs(campaign)
    if not runs.empty and runs["payload_bytes_per_s"].notna().any():
        keys = [k for k in campaign.spec.base if k in runs]
        means = (runs.groupby(keys, dropna=False)["payload_bytes_per_s"].mean() if keys
                 else runs["payload_bytes_per_s"])
        best = means.max()
        return float(best), f"measured: the highest mean payload of {name} in {environment}"
    ref = reference.load(data_dir, analysis["link_reference"])
    if ref is None:
        return float("inf"), (f"none: no stored {name} runs in {environment} and no published "
                              f"reference {analysis['link_reference']}")
    return float(ref.meta["plateau_gbs_high"]) * 1e9, (
        "the payload plateau AiSIO published for device-initiated reads, not measured here")
