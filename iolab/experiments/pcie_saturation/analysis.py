"""Analysis of the PCIe saturation chapter: payload against total traffic, and the references.

- *payload*: xnvmeperf's MiB/s x 2^20, in bytes/s; *total*: the GPU's PCIe receive traffic.
  For this package's runs both are means over the measurement window, so their ratio is a
  ratio of like quantities. For runs imported from AiSIO only AiSIO's statistic exists (the
  p95 of every DCGM sample of the capture, idle ones included), and the ratio is AiSIO's
  p95-over-mean, labelled so.
- *references*: the line rate of the GPU's link (recorded by the driver, one direction, after
  encoding), and the GPU-to-GPU figures of p2pBandwidthLatencyTest: the one-way P2P write
  figure (a ceiling for one direction) and the bidirectional one (two directions together,
  AiSIO's figure, not a one-way ceiling). Runs of this package store the test as a point;
  an AiSIO import stores its output under ``extras/`` (:func:`imported_p2p`).

Responsible for: those derivations over the tidy table. Not responsible for: drawing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from iolab.analysis import stats
from iolab.errors import ParseError
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.tools import p2p_bandwidth

NVME, P2P = "nvme_to_gpu", "gpu_to_gpu"
WINDOW_RX = "gpu_pcie_rx_mean_bytes_per_s"
CAPTURE_RX = "gpu_pcie_rx_capture_p95_bytes_per_s"


def total_column(rows: pd.DataFrame) -> tuple[str | None, str | None]:
    """The total-traffic column these rows have values in, and its statistic in words; (None,
    None) when no GPU counter ran."""
    for column, said in ((WINDOW_RX, "mean of the samples in the measurement window"),
                         (CAPTURE_RX, "95th percentile of every sample of the capture "
                                      "(AiSIO's statistic)")):
        if column in rows and rows[column].notna().any():
            return column, said
    return None, None


def payload_vs_total(rows: pd.DataFrame, by: list[str], confidence: float) -> pd.DataFrame:
    """Per point: n, payload and total (means over the repetitions, with t intervals), and
    total / payload; the total columns are NaN when no GPU counter ran."""
    total, _ = total_column(rows)
    metrics = ["payload_bytes_per_s"] + ([total] if total else [])
    summary = stats.summarize(rows, by, metrics, confidence)
    wide = summary.pivot_table(index=by, columns="metric",
                               values=["n", "mean", "ci_low", "ci_high"]).reset_index()
    wide.columns = [f"{a}_{b}" if b else a for a, b in wide.columns]
    wide = wide.rename(columns={f"{s}_{total}": f"{s}_total" for s in ("mean", "ci_low", "ci_high", "n")})
    wide = wide.rename(columns={f"{s}_payload_bytes_per_s": f"{s}_payload"
                                for s in ("mean", "ci_low", "ci_high", "n")})
    # pivot_table drops a column that is all NaN: the interval with one run per point, the
    # total without a GPU counter
    for column in (f"{s}_{side}" for side in ("payload", "total")
                   for s in ("mean", "ci_low", "ci_high", "n")):
        if column not in wide:
            wide[column] = float("nan")
    wide["ratio"] = wide["mean_total"] / wide["mean_payload"]
    return wide


def p2p_metrics(df: pd.DataFrame) -> dict[str, Any] | None:
    """The GPU-to-GPU figures of this package's stored p2p runs (means over repetitions)."""
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


def imported_p2p(store_root: Path, archives: list[str] | None = None) -> dict[str, Any] | None:
    """The figures of the p2pBandwidthLatencyTest output an AiSIO import stored under
    ``extras/<archive>/``, from the first of ``archives`` (archive names, as ``run.source``
    gives them; any when None) that has one, or None. An output that cannot be parsed counts
    as none."""
    stems = [a.removesuffix(".tar.gz").removesuffix(".tgz") for a in archives or []]
    outputs = [p for p in sorted(Path(store_root).glob("extras/*/p2pBandwidthLatencyTest-*.output"))
               if archives is None or p.parent.name in stems]
    if not outputs:
        return None
    path = outputs[0]
    try:
        parsed = parse_p2p_bandwidth(path.read_text(encoding="utf-8", errors="replace"), str(path))
        figures = p2p_bandwidth.metrics(parsed, str(path))
    except ParseError:
        return None
    return {"source": f"AiSIO's p2pBandwidthLatencyTest output ({path.parent.name})",
            "p2p_write_gbs": figures["p2p_write_gbs"],
            "p2p_write_min_gbs": figures.get("p2p_write_min_gbs", float("nan")),
            "bidir_p2p_gbs": figures["bidir_p2p_gbs"],
            "aisio_reference_gbs": p2p_bandwidth.aisio_reference(parsed)}
