"""Analysis shared by the device-initiated chapters (I/O size and queue depth scaling).

- *device capacity* C: the highest mean IOPS of a single-device point of the CPU-initiated
  search (the experiment the params' ``capacity_experiment`` names), from the runs its own
  params plan in the same environment, where stored; else the published value of the
  reference ``capacity_reference`` (AiSIO's), labelled so. The queue-depth roofline is
  ndevs x C.
- *GPU-to-GPU reference*: the PCIe chapter's p2p runs (``p2p_experiment``), else the p2p
  output of an AiSIO import stored there, else None.
- *model*: the Little's-law expression of :mod:`iolab.analysis.queueing` with its latency
  term fitted to the points shown (the smallest response time N / X among them, measured, or
  published when nothing is stored, named with the load it was taken at). Its latency comes
  from the very points it is drawn through, so it is a model, not a bound; the fitting point
  is named and its error on the other points is :func:`residuals`.
- *link term* B, one definition for both device-initiated chapters: the highest mean payload
  bandwidth of the I/O-size campaign (``link_experiment``) in the same environment, where
  stored; else the payload plateau AiSIO published (``link_reference``'s
  ``plateau_gbs_high``). A line rate is not a payload ceiling and is never used as B.

Which rows a chapter shows (its own or imported, one configuration) is
:mod:`iolab.experiments.gpu_io`'s. Responsible for: the choices above, each returned with
where it came from. Not responsible for: the criterion (:mod:`iolab.analysis.saturation`)
or drawing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from iolab.analysis.queueing import LittleBound, latency_from
from iolab.core import spec as specmod
from iolab.core.registry import get
from iolab.execution.campaign import Campaign
from iolab.experiments.cpu_search import analysis as cpu
from iolab.importers import extras
from iolab.report import reference


def _campaign(name: str, environment: str, data_dir: Path) -> Campaign | None:
    """The campaign of another experiment in this environment, or None without its params."""
    experiment = get(name)
    if environment not in specmod.environments(name, experiment.params_dir):
        return None
    return Campaign(experiment, environment, data_dir=data_dir)


def device_capacity(analysis: dict[str, Any], environment: str, data_dir: Path) -> dict[str, Any]:
    """C and where it came from (see the module docstring); NaN when neither exists."""
    name = analysis["capacity_experiment"]
    campaign = _campaign(name, environment, data_dir)
    # the stored runs that campaign's own params plan, as its chapter shows them
    runs = (Campaign.split(campaign.tidy(), campaign.plan(as_recorded=True))[0]
            if campaign is not None else pd.DataFrame())
    if not runs.empty and (runs["ndevs"] == 1).any():
        cap = cpu.device_capacity(cpu.normalize(runs), analysis["confidence"])
        return {"iops": cap["iops"], "measured": True,
                "source": f"measured: the best single-device point of {name} in "
                          f"{environment} ({cap['n']} runs)"}
    ref = reference.load(data_dir, analysis["capacity_reference"])
    if ref is None:
        return {"iops": float("nan"), "measured": False,
                "source": f"unknown (no stored {name} runs in {environment} and no "
                          f"published reference {analysis['capacity_reference']})"}
    return {"iops": float(ref.meta["device_capacity_iops"]), "measured": False,
            "source": "published by AiSIO (its best single-device bdevperf run), not measured "
                      "here"}


def p2p_reference(analysis: dict[str, Any], environment: str,
                  data_dir: Path) -> dict[str, Any] | None:
    """The GPU-to-GPU figures of the PCIe chapter in ``environment``, or None."""
    from iolab.experiments.pcie_saturation import analysis as pcie

    campaign = _campaign(analysis["p2p_experiment"], environment, data_dir)
    if campaign is None:
        return None
    return pcie.p2p_metrics(campaign.tidy()) or extras.imported_p2p(campaign.store.root)


def model(points: pd.DataFrame, outstanding: str, iops: str, capacity: dict[str, Any],
          link_bytes_per_s: float, link_source: str, ndevs: int) -> LittleBound | None:
    """The Little's-law model with its latency term fitted to ``points`` (one row per point,
    mean IOPS); None when the points or the capacity give no parameter. Its ``sources`` name
    the fitting point's load in the latency's origin."""
    usable = points.dropna(subset=[outstanding, iops]) if not points.empty else points
    if usable.empty or not capacity["iops"] == capacity["iops"]:
        return None
    latency, at = latency_from(usable, outstanding, iops)
    return LittleBound(latency, capacity["iops"], link_bytes_per_s, ndevs, sources={
        "latency_s": f"the smallest response time N / X of the points shown, taken at "
                     f"{at[outstanding]:,.0f} commands in flight ({at[iops]:,.0f} IOPS): the "
                     "lightest load in the data, not a command's latency at light load",
        "device_iops": capacity["source"], "link_bytes_per_s": link_source})


def residuals(points: pd.DataFrame, fitted: LittleBound, outstanding: str, iops: str,
              iosize: str | int) -> pd.DataFrame:
    """``points`` with the model's IOPS (``model``), ``residual`` (measured / model - 1) and
    ``fitted`` (True for the point the latency came from: its residual says nothing about the
    model). ``iosize`` is a column of ``points`` or one size for all."""
    out = points.dropna(subset=[outstanding, iops]).copy()
    sizes = out[iosize] if isinstance(iosize, str) else iosize
    out["model"] = fitted.iops(out[outstanding], sizes)
    out["residual"] = out[iops] / out["model"] - 1
    response = out[outstanding] / out[iops]
    out["fitted"] = False
    if len(out):
        out.loc[response.idxmin(), "fitted"] = True
    return out


def link_term(analysis: dict[str, Any], environment: str, data_dir: Path) -> tuple[float, str]:
    """B in bytes per second and where it came from (see the module docstring); infinity
    with the reason when neither source exists."""
    name = analysis["link_experiment"]
    campaign = _campaign(name, environment, data_dir)
    runs = (Campaign.split(campaign.tidy(), campaign.plan(as_recorded=True))[0]
            if campaign is not None else pd.DataFrame())
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
