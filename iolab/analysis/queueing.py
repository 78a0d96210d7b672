"""A queueing bound for NVMe reads driven by many outstanding commands (Little's law).

With N commands in flight and each taking R seconds from submission to completion, Little's
law gives the throughput X = N / R exactly, for any system in steady state. A *bound* follows
when R cannot fall below a latency L and nothing else limits:

    X(N, s) <= min(N / L, ndevs x C, B / s)

with C the IOPS capacity of one device, B the one-way payload bandwidth of the link, and s the
I/O size in bytes. The three parameters are named, and each records where it came from:
:func:`latency_from` takes L as the smallest response time N / X of a data set (measured or
published): an estimate of one command's latency at light load, only as good as the lightest
load in the data (a point already limited by the link or the devices overstates it), C
comes from the CPU-initiated search's device capacity, B from the highest payload bandwidth
observed or a reference. Where data fall below the bound, something the bound leaves out
binds (for cuda-run: lock-step rounds of a queue's threads, the submission rate of one queue).
The expression is a bound only while its parameters come from outside the data it is set
against; with L taken from those very points (as :func:`latency_from` does) it is a model
fitted to them, and the chapters call it so, mark the fitting point and give its error on the
other points.

:func:`fitted_model` is that model with L fitted to the points given, and :func:`residuals`
its error at each of them.

Responsible for: the bound, estimating L, the fitted model and its residuals. Not responsible
for: where C and B come from (:mod:`iolab.shared.gpu_sources` finds them) or drawing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from iolab.errors import InputError


@dataclass(frozen=True)
class LittleBound:
    latency_s: float            # L: the smallest response time of one command
    device_iops: float          # C: IOPS capacity of one device (math.inf: no device term)
    link_bytes_per_s: float     # B: one-way payload ceiling of the link
    ndevs: int
    sources: dict[str, str] = field(default_factory=dict)  # parameter -> where it came from

    def __post_init__(self) -> None:
        for name in ("latency_s", "device_iops", "link_bytes_per_s", "ndevs"):
            value = getattr(self, name)
            # a device term of infinity means there is none (no SSD in the path)
            ok = value == math.inf if name == "device_iops" else np.isfinite(value)
            if not (isinstance(value, (int, float)) and (ok or np.isfinite(value)) and value > 0):
                raise InputError(None, name, f"a model parameter must be a positive number, "
                                 f"got {value!r}")

    def iops(self, outstanding, iosize) -> np.ndarray:
        """The bound on IOPS for ``outstanding`` commands of ``iosize`` bytes (arrays broadcast)."""
        n = np.asarray(outstanding, dtype=float)
        s = np.asarray(iosize, dtype=float)
        return np.minimum.reduce(np.broadcast_arrays(
            n / self.latency_s, np.full_like(n, self.ndevs * self.device_iops),
            self.link_bytes_per_s / s))

    def bytes_per_s(self, outstanding, iosize) -> np.ndarray:
        return self.iops(outstanding, iosize) * np.asarray(iosize, dtype=float)

    def binding(self, outstanding: float, iosize: float) -> str:
        """Which term binds at one point: 'latency', 'devices' or 'link'."""
        terms = {"latency": outstanding / self.latency_s,
                 "devices": self.ndevs * self.device_iops,
                 "link": self.link_bytes_per_s / iosize}
        return min(terms, key=terms.get)


def worst_residual(res: pd.DataFrame) -> pd.Series | None:
    """Of a model's residuals (columns ``residual`` and ``fitted``, True for the points it
    was fitted to), the point not used to fit whose residual is largest in size, or None."""
    tested = res[~res["fitted"]] if len(res) else res
    return tested.loc[tested["residual"].abs().idxmax()] if len(tested) else None


def latency_from(points: pd.DataFrame, outstanding: str, iops: str) -> tuple[float, dict]:
    """L as the smallest N / X over ``points`` (one row per point, X its mean IOPS): by
    Little's law N / X is the point's mean response time, and the smallest one is the
    closest the data come to a command at light load. Returns L and the row it came from."""
    rows = points.dropna(subset=[outstanding, iops])
    rows = rows[(rows[iops] > 0) & (rows[outstanding] > 0)]
    if rows.empty:
        raise InputError(None, iops, "no point with a positive rate and load to take the "
                         "latency from")
    response = rows[outstanding] / rows[iops]
    at = response.idxmin()
    return float(response[at]), rows.loc[at].to_dict()


def fitted_model(points: pd.DataFrame, outstanding: str, iops: str, capacity: dict[str, Any],
                 link_bytes_per_s: float, link_source: str, ndevs: int) -> LittleBound | None:
    """The Little's-law model with its latency term fitted to ``points`` (one row per point,
    mean IOPS; :func:`latency_from`), C ``capacity["iops"]`` and B ``link_bytes_per_s``; None
    when the points or the capacity give no parameter. Its ``sources`` name the fitting
    point's load in the latency's origin, and C's and B's as given."""
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
