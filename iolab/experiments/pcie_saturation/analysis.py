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
  an AiSIO import stores its output under ``extras/``
  (:func:`iolab.importers.extras.imported_p2p` reads it), and the
  committed table of AiSIO's runs carries it in its YAML (:func:`reference_p2p`); the
  figures of this package's own runs are :func:`iolab.shared.gpu_sources.p2p_metrics`, shared
  with the device-initiated chapters.
- *AiSIO's runs*: the committed per-run table (``data/reference/aisio_pcie_saturation_runs``,
  written by :mod:`iolab.importers.aisio_runs`) as rows of this experiment's tidy schema
  (:func:`aisio_run_rows`), so that a clone without the archive shows the same statistics of
  AiSIO's runs as an import would; and its means against AiSIO's published ones
  (:func:`runs_vs_published`).

Responsible for: those derivations over the tidy table.
Not responsible for: drawing or wording (``page`` beside this file).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from iolab.analysis import stats

NVME = "nvme_to_gpu"
WINDOW_RX = "gpu_pcie_rx_mean_bytes_per_s"
CAPTURE_RX = "gpu_pcie_rx_capture_p95_bytes_per_s"
# what run.source says of a row of the committed table of AiSIO's runs
RUNS_TABLE_SOURCE = "AiSIO's runs (reference table)"
# AiSIO's 0/1 switches as this experiment's knob values
_SWITCH = {0: "off", 1: "on"}


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
    """Per point: n, payload and total (means over the repetitions, with sd and t
    intervals), and total / payload with the interval of a ratio of means
    (:func:`iolab.analysis.stats.ratio_interval`: ``ratio_ci_low``, ``ratio_ci_high``); the
    total columns are NaN when no GPU counter ran, the intervals with one run per point."""
    total, _ = total_column(rows)
    metrics = ["payload_bytes_per_s"] + ([total] if total else [])
    summary = stats.summarize(rows, by, metrics, confidence)
    shown = ("mean", "sd", "ci_low", "ci_high", "n")
    wide = summary.pivot_table(index=by, columns="metric", values=list(shown)).reset_index()
    wide.columns = [f"{a}_{b}" if b else a for a, b in wide.columns]
    wide = wide.rename(columns={f"{s}_{total}": f"{s}_total" for s in shown})
    wide = wide.rename(columns={f"{s}_payload_bytes_per_s": f"{s}_payload" for s in shown})
    # pivot_table drops a column that is all NaN: the interval with one run per point, the
    # total without a GPU counter
    for column in (f"{s}_{side}" for side in ("payload", "total") for s in shown):
        if column not in wide:
            wide[column] = float("nan")
    wide["ratio"] = wide["mean_total"] / wide["mean_payload"]
    wide["ratio_ci_low"] = wide["ratio_ci_high"] = float("nan")
    if total:
        groups = dict(iter(rows.groupby(by, sort=True, dropna=False)))
        for i, key in enumerate(wide[by].itertuples(index=False, name=None)):
            group = groups[key]
            r = stats.ratio_interval(group[total], group["payload_bytes_per_s"], confidence)
            wide.loc[i, ["ratio_ci_low", "ratio_ci_high"]] = r["ci_low"], r["ci_high"]
    return wide


def aisio_run_rows(runs: pd.DataFrame, point: dict[str, Any]) -> pd.DataFrame:
    """The committed table of AiSIO's runs (one row per run) and the ``point`` its YAML says
    they share, as rows of this experiment's tidy schema: the payload, AiSIO's total
    (:data:`CAPTURE_RX`, its only statistic) and the variables, with ``run.source``
    :data:`RUNS_TABLE_SOURCE`."""
    return pd.DataFrame({
        "benchmark": NVME, "iosize": runs["iosize"], "qdepth": point["qdepth"],
        "ncores": point["ncpus"], "ndevs": point["ndevs"],
        "cpu_governor": point["cpu_governor"], "turbo": _SWITCH.get(point["turbo"]),
        "smt": _SWITCH.get(point["smt"]), "run.rep": runs["rep"], "iops": runs["iops"],
        "payload_bytes_per_s": runs["payload_bytes_per_s"],
        CAPTURE_RX: runs["rx_p95_bytes_per_s"], "run.source": RUNS_TABLE_SOURCE})


def reference_p2p(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU-to-GPU figures the YAML of AiSIO's runs carries (its archive's one
    p2pBandwidthLatencyTest run), as :func:`iolab.importers.extras.imported_p2p` gives them;
    None without them."""
    p2p = meta.get("p2p")
    if not p2p:
        return None
    return {"source": f"AiSIO's run, from {p2p['source_file']} of its archive "
                      f"{meta['archive']['file']}",
            **{key: p2p.get(key, float("nan")) for key in
               ("p2p_write_gbs", "p2p_write_min_gbs", "bidir_p2p_gbs", "aisio_reference_gbs")}}


def runs_vs_published(runs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Per I/O size: the mean of AiSIO's runs, its published value and their difference
    (bytes/s), for the payload and the total PCIe RX p95; the sizes both tables hold."""
    means = runs.groupby("iosize")[["payload_bytes_per_s", "rx_p95_bytes_per_s"]].mean()
    pub = published.set_index("iosize")
    rows = []
    for size in means.index.intersection(pub.index):
        for column in ("payload_bytes_per_s", "rx_p95_bytes_per_s"):
            mean, value = means.loc[size, column], pub.loc[size, column]
            rows.append({"iosize": size, "metric": column, "runs_mean": mean,
                         "published": value, "difference": mean - value})
    return pd.DataFrame(rows, columns=["iosize", "metric", "runs_mean", "published",
                                       "difference"])
