"""Analysis of the GPU PCIe chapter: the copy engine's ceiling, GPU-initiated requests against
warps in flight, the warps needed to fill the link, and the protocol overhead's finding
(the counters' table and the framing model are in ``counters`` beside this file).

- *ceilings*: per mode (and copy direction), the highest mean payload bandwidth of any point.
  The *one-way ceiling into the GPU* (:func:`ceiling_sentence`) is the higher of the
  host-to-device copy's and the GPU-initiated reads' ceilings: what a device-initiated read
  into GPU memory could reach.
- *model*: per request size, a Little's-law model (:mod:`iolab.analysis.queueing`) fitted to
  the data: its latency term from the point with the fewest warps in flight, its link term the
  highest mean of the mode (the plateau); there is no device term. Both terms come from the
  curves it is drawn through, so it is a model to compare the other points with (its
  *residuals*), never a bound that the data could be tested against.
- *link use*: per kind of transfer, its ceiling as a share of the line rate, and the fewest
  warps in flight (of any request size) within the tolerance of the ceiling.
- *physical limit*: the link's line rate in one direction from the generation and width
  nvidia-smi reported during the runs (:func:`iolab.tools.base.link_gbs`).

Responsible for: those derivations over summaries and tidy rows, and the chapter's findings.
Not responsible for: drawing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pandas as pd

from iolab.analysis import findings as fd
from iolab.analysis.findings import Finding
from iolab.analysis.queueing import LittleBound, worst_residual
from iolab.tools.base import link_gbs

INTO_GPU = (("copy", "h2d"), ("read", "none"))


def ceilings(summary: pd.DataFrame) -> dict[tuple[str, str], dict[str, Any]]:
    """(mode, direction) -> the point with the highest mean ``gbs`` (its row as a dict)."""
    out = {}
    for (mode, direction), part in summary.groupby(["mode", "direction"]):
        best = part.loc[part["mean"].idxmax()]
        out[(mode, direction)] = best.to_dict()
    return out


def models(rows: pd.DataFrame, summary: pd.DataFrame) -> dict[tuple[str, int], LittleBound]:
    """(mode, iosize) -> the Little's-law model of that curve, fitted to the data (see the
    module docstring): its latency term is the mean response time (Little's law,
    ``latency_us``) of the runs with the fewest warps in flight, its link term the highest
    mean bandwidth of the mode in ``summary``. The point the latency comes from is named in
    the model's ``sources`` and is a fitting point, not a test of the model."""
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
                         "link_bytes_per_s": f"the highest mean of mode {mode}",
                         "fitted_inflight": str(int(lightest["inflight"].iloc[0]))})
    return out


def residuals(summary: pd.DataFrame, fitted: dict[tuple[str, int], LittleBound],
              resident: float) -> pd.DataFrame:
    """Each measured point of a modelled curve beside its model: ``measured`` and ``model``
    (GB/s), ``residual`` (measured / model - 1) and ``fitted`` (True for the point whose
    latency the model took: its residual is zero by construction). ``resident`` caps the
    warps that can be in flight at once (the probe's ``resident_warps``)."""
    rows = []
    for (mode, iosize), model in sorted(fitted.items()):
        curve = summary[(summary["mode"] == mode) & (summary["iosize"] == iosize)]
        for _, point in curve.sort_values("inflight").iterrows():
            warps = min(float(point["inflight"]), resident)
            value = float(model.bytes_per_s(warps, iosize)) / 1e9
            rows.append({"mode": mode, "iosize": iosize, "inflight": int(point["inflight"]),
                         "measured": float(point["mean"]), "model": value,
                         "residual": float(point["mean"]) / value - 1,
                         "fitted": str(int(point["inflight"])) ==
                         model.sources.get("fitted_inflight")})
    return pd.DataFrame(rows, columns=["mode", "iosize", "inflight", "measured", "model",
                                       "residual", "fitted"])


def warps_to_reach(summary: pd.DataFrame, mode: str, target: float,
                   tolerance: float) -> pd.DataFrame:
    """Per request size of ``mode``: the fewest warps in flight whose mean is within
    ``tolerance`` of ``target`` (GB/s), or NaN where none is; columns ``iosize``, ``warps``,
    ``bytes_in_flight`` (warps x request size, NaN where not reached)."""
    rows = []
    for iosize, curve in summary[summary["mode"] == mode].groupby("iosize"):
        within = curve[curve["mean"] >= (1 - tolerance) * target]
        warps = float(within["inflight"].min()) if len(within) else math.nan
        rows.append({"iosize": int(iosize), "warps": warps, "bytes_in_flight": warps * iosize})
    return pd.DataFrame(rows, columns=["iosize", "warps", "bytes_in_flight"])


def link_use(summary: pd.DataFrame, limit: float, tolerance: float) -> pd.DataFrame:
    """One row per kind of transfer measured (copy host to device, copy device to host,
    GPU-initiated reads, writes): its ceiling (the point with the highest mean, with that
    point's interval and n), the ceiling's share of the link's line rate ``limit`` (GB/s),
    and for GPU-initiated requests the fewest warps in flight, over all request sizes, whose
    mean is within ``tolerance`` of the ceiling, with the request size that needs fewest, and
    the fewest warps the grid tests (``fewest_tested``: where ``fewest_warps`` equals it, fewer
    might do).
    ``summary`` has one row per point (mode, direction, bytes, iosize, inflight)."""
    rows = []
    for (mode, direction), best in ceilings(summary).items():
        row = {"mode": mode, "direction": direction, "gbs": best["mean"],
               "ci_low": best.get("ci_low", math.nan), "ci_high": best.get("ci_high", math.nan),
               "n": best.get("n", math.nan), "share": best["mean"] / limit,
               "bytes": best["bytes"], "iosize": best["iosize"], "inflight": best["inflight"],
               "fewest_warps": math.nan, "fewest_warps_iosize": math.nan,
               "fewest_tested": summary.loc[summary["mode"] == mode, "inflight"].min()}
        if mode != "copy":
            need = warps_to_reach(summary, mode, best["mean"], tolerance).dropna()
            if len(need):
                first = need.sort_values(["warps", "iosize"]).iloc[0]
                row.update(fewest_warps=first["warps"], fewest_warps_iosize=first["iosize"])
        rows.append(row)
    order = {("copy", "h2d"): 0, ("copy", "d2h"): 1, ("read", "none"): 2, ("write", "none"): 3}
    rows.sort(key=lambda r: order.get((r["mode"], r["direction"]), 9))
    return pd.DataFrame(rows)


def machine(rows: pd.DataFrame, environment: str) -> str:
    """The GPU machine the runs were measured on, in words, from what the runs recorded:
    the GPU's name (the probe's report) and its link (nvidia-smi during the runs)."""
    names = sorted(rows["gpu_pcie_probe.gpu_name"].dropna().astype(str).unique()) \
        if "gpu_pcie_probe.gpu_name" in rows else []
    links = rows[["gpu_pcie_probe.link_gen", "gpu_pcie_probe.link_width"]].dropna() \
        if "gpu_pcie_probe.link_gen" in rows else pd.DataFrame()
    gpu = "one " + " and ".join(names) if names else "a GPU whose name was not recorded"
    link = (", PCIe Gen{:d} x{:d},".format(*map(int, links.mode().iloc[0]))
            if len(links) else "")
    return f"{gpu}{link} in environment {environment}"


def ceiling_sentence(use: pd.DataFrame, limit: float, tolerance: float, where: str) -> str | None:
    """The one-way ceiling into the GPU as the device-initiated chapters quote it: its value,
    what reached it, its share of the line rate ``limit``, what GPU-initiated reads reach and
    the fewest warps in flight that come within ``tolerance`` of that, and the machine
    (``where``, from :func:`machine`). None when no transfer into the GPU is stored."""
    into = use[[(m, d) in INTO_GPU for m, d in zip(use["mode"], use["direction"])]]
    if into.empty:
        return None
    top = into.loc[into["gbs"].idxmax()]
    how = ("by the copy engine (host-to-device copies of "
           f"{size_words(top['bytes'])})" if top["mode"] == "copy" else "by GPU-initiated reads")
    text = (f"{top['gbs']:.1f} GB/s into the GPU {how}, {top['share'] * 100:.0f} % of the "
            f"{limit:.1f} GB/s line rate")
    reads = into[into["mode"] == "read"]
    if len(reads) and top["mode"] != "read":
        r = reads.iloc[0]
        text += (f"; GPU-initiated reads reach {r['gbs']:.1f} GB/s "
                 f"({r['share'] * 100:.0f} %)")
    if len(reads) and not math.isnan(reads.iloc[0]["fewest_warps"]):
        r = reads.iloc[0]
        text += (f", within {tolerance * 100:g} % of that from {int(r['fewest_warps']):,} "
                 f"warps in flight of {int(r['fewest_warps_iosize']):,}-byte requests")
    return f"{text}; measured on {where}"


def link_use_table(use: pd.DataFrame, describe, tolerance: float,
                   resident: float) -> pd.DataFrame:
    """:func:`link_use` as the chapter shows it (``describe(variable, value)`` gives a
    value's words; ``resident``: the warps that run at once, which caps the warps in flight)."""
    def kind(r):
        return (f"copy, {describe('direction', r['direction'])}" if r["mode"] == "copy"
                else describe("mode", r["mode"]))

    def at(r):
        if r["mode"] == "copy":
            return f"{size_words(r['bytes'])} per copy"
        at_once = f" ({int(resident):,} at once)" if r["inflight"] > resident > 0 else ""
        return f"{int(r['iosize']):,} B requests, {int(r['inflight']):,} warps{at_once}"

    return pd.DataFrame({
        "transfer": [kind(r) for _, r in use.iterrows()],
        "ceiling GB/s": [f"{r['gbs']:.1f} ({r['ci_low']:.1f} to {r['ci_high']:.1f}, "
                         f"n = {int(r['n'])})" for _, r in use.iterrows()],
        "share of the line rate": [f"{r['share'] * 100:.1f} %" for _, r in use.iterrows()],
        "at": [at(r) for _, r in use.iterrows()],
        f"fewest warps within {tolerance * 100:g} % of it": [
            "" if r["mode"] == "copy" else "not reached" if math.isnan(r["fewest_warps"]) else
            f"{int(r['fewest_warps']):,} ({int(r['fewest_warps_iosize']):,} B requests)"
            + (", the fewest tested" if r["fewest_warps"] == r["fewest_tested"] else "")
            for _, r in use.iterrows()]})


def answer(use: pd.DataFrame, limit: float, tolerance: float, where: str,
           res: pd.DataFrame, confidence: float) -> str:
    """The chapter's answer in a few sentences, from :func:`link_use` and :func:`residuals`."""
    by = {(r["mode"], r["direction"]): r for _, r in use.iterrows()}
    parts = []
    copies = [by[k] for k in (("copy", "h2d"), ("copy", "d2h")) if k in by]
    if copies:
        moved = " and ".join(
            f"{r['gbs']:.1f} GB/s {'into the GPU' if r['direction'] == 'h2d' else 'out of it'}"
            for r in copies)
        shares = " and ".join("{:.0f} %".format(r["share"] * 100) for r in copies)
        parts.append(f"The copy engine reaches {moved} ({shares} of the {limit:.1f} GB/s "
                     f"line rate), with copies of {size_words(copies[0]['bytes'])}.")
    for mode, verb in (("read", "read host memory at"), ("write", "write host memory at")):
        if (mode, "none") in by:
            r = by[(mode, "none")]
            need = ("" if math.isnan(r["fewest_warps"]) else
                    f", and come within {tolerance * 100:g} % of that with as few as "
                    f"{int(r['fewest_warps']):,} warps in flight "
                    f"({int(r['fewest_warps_iosize']):,} B requests"
                    + (", the fewest the grid tests, so fewer may do" if
                       r["fewest_warps"] == r["fewest_tested"] else "") + ")")
            parts.append(f"GPU-initiated requests {verb} up to {r['gbs']:.1f} GB/s "
                         f"({r['share'] * 100:.0f} % of the line rate){need}.")
    worst = worst_residual(res)
    if worst is not None:
        parts.append(f"A Little's-law model fitted to each curve's lightest load and the "
                     f"plateau is within {abs(worst['residual']) * 100:.1f} % of every other "
                     f"point (the largest gap at {int(worst['inflight']):,} warps of "
                     f"{int(worst['iosize']):,} B {worst['mode']}s).")
    half = float(((use["ci_high"] - use["ci_low"]) / 2).max())
    parts.append(f"Each ceiling is the mean of {int(use['n'].min())} or more runs, its "
                 f"{confidence * 100:g} % interval no wider than ±{half:.2f} GB/s"
                 + "".join(f"; {_compared(by[a], by[b], what)}" for a, b, what in (
                     (("copy", "h2d"), ("read", "none"), "copies into the GPU and reads"),
                     (("copy", "h2d"), ("copy", "d2h"), "the two copy directions"))
                     if a in by and b in by) + ".")
    parts.append(f"Measured on {where}, with no SSD in the path: what an NVMe-to-GPU read adds "
                 "(the SSDs, their queues, the switch) is the subject of the device-initiated "
                 "chapters.")
    return " ".join(parts)


def _compared(a: pd.Series, b: pd.Series, what: str) -> str:
    """Whether two ceilings' intervals are apart, in words."""
    gap = abs(a["gbs"] - b["gbs"])
    if a["ci_low"] > b["ci_high"] or b["ci_low"] > a["ci_high"]:
        return f"{what} differ by {gap:.1f} GB/s, outside both intervals"
    return f"{what} ({a['gbs']:.2f} and {b['gbs']:.2f} GB/s) cannot be told apart"


def size_words(n: float) -> str:
    """A size in bytes as the chapter writes it: 4 KiB, 256 MiB, 512 B."""
    n = int(n)
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def physical_limit(rows: pd.DataFrame) -> float | None:
    """The line rate (GB/s, one direction) of the link nvidia-smi reported, or None."""
    links = rows[["gpu_pcie_probe.link_gen", "gpu_pcie_probe.link_width"]].dropna() \
        if "gpu_pcie_probe.link_gen" in rows else pd.DataFrame()
    if links.empty:
        return None
    gen, width = links.mode().iloc[0]
    return link_gbs(int(gen), int(width))


def findings(rows: pd.DataFrame, use: pd.DataFrame, reference: dict[str, Any],
             overhead: Finding, confidence: float = 0.95) -> list[Finding]:
    """The chapter's findings (:mod:`iolab.analysis.findings`): the host-to-device copy's
    ceiling against AiSIO's published peak P2P bandwidth (``reference["p2p_bidir_gbs"]``, a
    constant, so the interval is the ceiling point's own), the protocol overhead against
    AiSIO's factor (``overhead``, :func:`overhead_finding`), and payload from NVMe devices
    into the GPU, which this machine cannot measure."""
    reference_gbs = reference.get("p2p_bidir_gbs")
    what = "the host-to-device copy's ceiling over AiSIO's published peak P2P bandwidth"
    h2d = use[(use["mode"] == "copy") & (use["direction"] == "h2d")] if not use.empty else use
    if h2d.empty or not reference_gbs:
        copy = fd.undefined("copy_h2d_vs_p2p", what, "no host-to-device copy is stored, or no "
                            "published reference", "ratio", confidence)
    else:
        best = h2d.iloc[0]
        at = rows[(rows["mode"] == "copy") & (rows["direction"] == "h2d")
                  & (rows["bytes"] == best["bytes"])]["gbs"].dropna().tolist()
        copy = dataclasses.replace(fd.ratio("copy_h2d_vs_p2p", what, at, [reference_gbs] * 2,
                                            confidence), n=f"{len(at)} / a published value")
    return [
        copy,
        fd.undefined("nvme_traffic_share", "the GPU's total receive traffic while NVMe "
                     "devices read into it, over 90 % of the line rate", "this machine has no "
                     "NVMe devices to read into the GPU", "ratio", confidence),
        overhead,
    ]


def overhead_finding(shown: pd.DataFrame, rows: pd.DataFrame, factor: float | None,
                     why_none: str, confidence: float = 0.95) -> Finding:
    """AiSIO's protocol overhead factor against the link's counters, like with like: an
    NVMe SSD's DMA into GPU memory arrives as posted writes of up to the max payload size,
    and the copy engine's device-to-host copies send such writes (in the other direction;
    a packet's framing does not depend on it). The finding is their traffic over payload
    (``rows``: the counted runs, :func:`counters.counted`) over ``factor``; undefined, saying
    ``why_none``, without such runs."""
    what = ("PCIe traffic over payload of posted writes at the max payload size, the packets "
            "an SSD's DMA into GPU memory sends (here device-to-host copies, whose packets are "
            "framed alike; the link's byte counters over windows of 2 s and more), over "
            "AiSIO's published factor")
    if not factor:
        return fd.undefined("protocol_overhead", what, "no published factor", "ratio",
                            confidence)
    writes = rows[(rows["mode"] == "copy") & (rows["direction"] == "d2h")] \
        if not rows.empty else rows
    if shown.empty or writes.empty:
        return fd.undefined("protocol_overhead", what, why_none, "ratio", confidence)
    return dataclasses.replace(
        fd.level("protocol_overhead", what, writes["total_over_payload"].tolist(), factor,
                 confidence), n=f"{len(writes)} / a published value")
