"""The link's own counters: PCIe traffic over payload per kind of transfer, beside what the
framing of PCIe's transaction-layer packets (TLPs) predicts.

*The framing model.* On a PCIe link of generation 3 to 5 (128b/130b coding, not flit mode)
each TLP carries, besides its payload, a header and 8 bytes of framing: the 4-byte STP token,
which holds the packet's length and sequence number, and the 4-byte LCRC. The header is 3
double words (12 B) for a completion with data and 4 (16 B) for a memory read or write
request with a 64-bit address (PCI Express Base Specification, transaction and data link
layers). Data-link packets (acknowledgements, flow-control updates) are left out. A transfer
into the GPU from host memory arrives as completions, asked for by read requests that leave
the GPU; a transfer out of it leaves as posted writes, which ask for no answer. So, per byte
of payload moved in TLPs of ``s`` bytes:

- along the payload: ``1 + (header + 8) / s`` (completions: 1 + 20/s; writes: 1 + 24/s);
- against it: ``(16 + 8) / s`` for reads (one request per ``s`` bytes), 0 for writes.

``s`` is the model's one assumption per transfer: the max payload size recorded from the
GPU's configuration space for the copy engine, and a declared size for the requests of the
GPU's multiprocessors (``sm_tlp_bytes``). The request traffic tests it: its ratio gives ``s``
back. A fixed scale in the counter would instead give one ratio for every transfer.

*The measurement* (:func:`table`): runs whose measurement window held at least
``min_samples`` readings of NVML's byte counters, grouped by transfer and size; the counters'
traffic along and against the payload over the payload, each a mean over the runs with its
Student's t interval, and NVML's sampled throughput over the counter (how far the other
interface agrees).

Responsible for: the model and those derivations over tidy rows. Not responsible for:
reading NVML (:mod:`iolab.collectors.nvml`), wording, or drawing.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from iolab.analysis import stats

FRAMING_BYTES = 8
HEADER_BYTES = {"completion": 12, "read request": 16, "write": 16}
# (mode, direction) -> the TLPs along the payload, and against it (None: nothing answers)
TLPS = {("copy", "h2d"): ("completion", "read request"),
        ("read", "none"): ("completion", "read request"),
        ("copy", "d2h"): ("write", None),
        ("write", "none"): ("write", None)}
INTO_GPU = (("copy", "h2d"), ("read", "none"))


def framing(mode: str, direction: str, tlp_bytes: float) -> tuple[float, float]:
    """The framing model's traffic along and against the payload, over the payload, for
    TLPs of ``tlp_bytes`` (NaN, NaN for an unknown size)."""
    along, against = TLPS[(mode, direction)]
    if not tlp_bytes or tlp_bytes != tlp_bytes:
        return math.nan, math.nan
    over = (HEADER_BYTES[along] + FRAMING_BYTES) / tlp_bytes
    return 1 + over, ((HEADER_BYTES[against] + FRAMING_BYTES) / tlp_bytes if against else 0.0)


def tlp_size(mode: str, max_payload: float, sm_tlp_bytes: int) -> float:
    """The TLP payload the model takes: the copy engine's the recorded max payload size, the
    multiprocessors' the declared size."""
    return max_payload if mode == "copy" else float(sm_tlp_bytes)


def counted(rows: pd.DataFrame, min_samples: int) -> pd.DataFrame:
    """The runs whose window held at least ``min_samples`` counter readings and whose
    counters give a ratio."""
    need = {"nvml.counter_samples", "total_over_payload"}
    if rows.empty or not need <= set(rows):
        return rows.iloc[0:0]
    return rows[(rows["nvml.counter_samples"] >= min_samples)
                & rows["total_over_payload"].notna()]


def _along(row: pd.Series) -> str:
    return "rx" if (row["mode"], row["direction"]) in INTO_GPU else "tx"


def table(rows: pd.DataFrame, min_samples: int, sm_tlp_bytes: int,
          confidence: float = 0.95) -> pd.DataFrame:
    """One row per transfer and size (the copy's bytes, or the request's): ``n``, the
    payload's mean (GB/s), the ratios along and against the payload (``along``, ``against``:
    mean, ``*_low`` and ``*_high`` of the t interval), the model's (``model_along``,
    ``model_against``), the TLP size it took, and NVML's throughput readings over the counter
    along the payload (``throughput_over_counter``, mean over the runs)."""
    kept = counted(rows, min_samples)
    out = []
    if kept.empty:
        return pd.DataFrame(out)
    kept = kept.assign(size=[r["bytes"] if r["mode"] == "copy" else r["iosize"]
                             for _, r in kept.iterrows()])
    for (mode, direction, size), runs in kept.groupby(["mode", "direction", "size"], sort=True):
        along = _along(runs.iloc[0])
        mps = (runs["nvml.max_payload_bytes"].dropna().mode()
               if "nvml.max_payload_bytes" in runs else pd.Series(dtype=float))
        tlp = tlp_size(mode, float(mps.iloc[0]) if len(mps) else math.nan, sm_tlp_bytes)
        model_along, model_against = framing(mode, direction, tlp)
        a = stats.t_interval(runs["total_over_payload"], confidence)
        b = stats.t_interval(runs["requests_over_payload"], confidence)
        sampled = (runs[f"nvml.{along}_mean_bytes_per_s"]
                   / runs[f"nvml.{along}_counter_bytes_per_s"])
        out.append({"mode": mode, "direction": direction, "size": int(size), "n": a["n"],
                    "gbs": float(runs["gbs"].mean()), "tlp_bytes": tlp,
                    "along": a["mean"], "along_low": a["ci_low"], "along_high": a["ci_high"],
                    "against": b["mean"], "against_low": b["ci_low"],
                    "against_high": b["ci_high"], "model_along": model_along,
                    "model_against": model_against,
                    "throughput_over_counter": float(sampled.mean()),
                    "samples_min": int(runs["nvml.counter_samples"].min())})
    return pd.DataFrame(out)


def model_error(shown: pd.DataFrame) -> float:
    """The largest relative gap between a measured ratio and the model's, along or against
    the payload (NaN without a modelled row)."""
    gaps = []
    for _, r in shown.iterrows():
        gaps.append(abs(r["along"] / r["model_along"] - 1))
        if r["model_against"]:
            gaps.append(abs(r["against"] / r["model_against"] - 1))
    gaps = [g for g in gaps if g == g]
    return max(gaps) if gaps else math.nan


def implied_tlp(shown: pd.DataFrame) -> dict[tuple[str, str, int], float]:
    """The TLP size each read transfer's request traffic implies under the model (one read
    request of 16 + 8 bytes per TLP of data): the check on the model's assumed sizes."""
    per = HEADER_BYTES["read request"] + FRAMING_BYTES
    return {(r["mode"], r["direction"], r["size"]): per / r["against"]
            for _, r in shown.iterrows() if r["model_against"] and r["against"] > 0}


def summary(shown: pd.DataFrame) -> dict[str, Any]:
    """Across the transfers into the GPU: the lowest and highest ratio along the payload
    (with their rows), for the chapter's answer."""
    if shown.empty:
        return {}
    into = shown[[(m, d) in INTO_GPU for m, d in zip(shown["mode"], shown["direction"])]]
    if into.empty:
        return {}
    low, high = into.loc[into["along"].idxmin()], into.loc[into["along"].idxmax()]
    return {"low": low, "high": high}
