"""The PCIe saturation chapter's analysis, and its reproduction of AiSIO's published numbers
from AiSIO's archive (``../shared/aisio/``; skipped, saying why, where it is absent)."""

from __future__ import annotations

import math
import shutil

import nbformat
import pandas as pd
import pytest
from test_import_cijoe import PCIE, make_cijoe

from iolab.core import registry
from iolab.execution.campaign import Campaign
from iolab.shared import gpu_io, gpu_sources
from iolab.experiments.pcie_saturation import analysis as an
from iolab.importers import extras
from iolab.importers.cijoe import import_archive
from iolab.paths import REPO_ROOT
from iolab.report.book import execute


def rows(**columns):
    base = {"benchmark": "nvme_to_gpu", "iosize": 4096, "gpu_check": "same GPU",
            "run.source": "iolab", "payload_bytes_per_s": 4.5e10,
            "gpu_pcie_rx_mean_bytes_per_s": 5.0e10,
            "gpu_pcie_rx_capture_p95_bytes_per_s": 5.8e10}
    return pd.DataFrame([{**base, **c} for c in columns.get("each", [{}])])


def test_runs_whose_counter_watched_another_gpu_are_left_out():
    df = rows(each=[{}, {"gpu_check": "the counter watched 0000:01:00.0, the benchmark used "
                                       "0000:02:00.0"},
                    {"gpu_check": "no GPU counter"}])
    kept, notes = gpu_io.usable(df)
    assert len(kept) == 2
    assert notes == ["1 run(s) left out: the counter watched 0000:01:00.0, the benchmark used "
                     "0000:02:00.0"]


def test_total_uses_the_window_mean_where_there_is_one():
    assert an.total_column(rows())[0] == an.WINDOW_RX
    imported = rows(each=[{"gpu_pcie_rx_mean_bytes_per_s": float("nan")}])
    column, said = an.total_column(imported)
    assert column == an.CAPTURE_RX and "AiSIO's statistic" in said


def test_without_a_counter_there_is_payload_and_no_total():
    df = rows(each=[{"gpu_pcie_rx_mean_bytes_per_s": float("nan"),
                     "gpu_pcie_rx_capture_p95_bytes_per_s": float("nan"), "gpu_check": "no GPU counter"}] * 2)
    assert an.total_column(df) == (None, None)
    table = an.payload_vs_total(df, ["iosize"], 0.95)
    assert table.loc[0, "mean_payload"] == 4.5e10
    assert math.isnan(table.loc[0, "mean_total"]) and math.isnan(table.loc[0, "ratio"])


def test_payload_vs_total_per_point():
    df = rows(each=[{"payload_bytes_per_s": p, "gpu_pcie_rx_mean_bytes_per_s": t, "iosize": s}
                    for s, p, t in [(512, 8e9, 1e10), (512, 8.2e9, 1.02e10), (4096, 45e9, 57e9),
                                    (4096, 45e9, 57e9)]])
    table = an.payload_vs_total(df, ["iosize"], 0.95).set_index("iosize")
    assert table.loc[512, "mean_payload"] == pytest.approx(8.1e9)
    assert table.loc[4096, "ratio"] == pytest.approx(57 / 45)
    assert table.loc[512, "n_payload"] == 2


def test_p2p_figures_of_stored_runs_and_of_an_import(tmp_path):
    assert gpu_sources.p2p_metrics(rows()) is None
    p2p = rows(each=[{"benchmark": "gpu_to_gpu", "p2p_write_gbs": 28.0, "p2p_write_min_gbs": 27.5,
                      "bidir_p2p_gbs": 56.0}])
    assert gpu_sources.p2p_metrics(p2p)["p2p_write_gbs"] == 28.0
    assert extras.imported_p2p(tmp_path) is None
    data = tmp_path / "data"
    import_archive(make_cijoe(tmp_path / "src"), "pcie_saturation", "hpc-server", data,
                   progress=False)
    found = extras.imported_p2p(Campaign("pcie_saturation", "hpc-server", data_dir=data).store.root)
    assert found is not None and "AiSIO" in found["source"]


real = pytest.mark.skipif(not PCIE.exists(), reason=f"AiSIO's archive {PCIE} not found (public "
                          "data, never committed); the reproduction needs it")


def glued(path):
    out = {}
    for cell in nbformat.read(path, as_version=4).cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            text = output.get("data", {}).get("application/papermill.record/text/plain")
            if name and text is not None:
                out[name] = text
    return out


@real
def test_chapter_reproduces_aisio_from_its_archive(tmp_path):
    data = tmp_path / "data"
    report = import_archive(PCIE, "pcie_saturation", "hpc-server", data, progress=False)
    assert (report.imported, report.failed, len(report.disagreements)) == (15, 0, 0)
    df = Campaign("pcie_saturation", "hpc-server", data_dir=data).tidy()
    assert {"iosize", "mibs", "gpu_pcie_rx_capture_p95_bytes_per_s"} <= set(df.columns)
    table = an.payload_vs_total(gpu_io.usable(df)[0], ["iosize"], 0.95).set_index("iosize")
    assert round(table.loc[4096, "mean_payload"] / 1e9, 2) == 45.17
    assert round(table.loc[4096, "mean_total"] / 1e9, 2) == 57.84

    shutil.copytree(REPO_ROOT / "data" / "reference", data / "reference")
    exp = registry.get("pcie_saturation")
    out = tmp_path / "chapter.ipynb"
    execute(exp.notebook, out, {"environment": "hpc-server", "data_dir": str(data)})
    text = glued(out)
    assert "AiSIO's runs, imported from its archive" in text["shown_what"]
    results = text["results_text"]
    assert ("at 4,096 B the payload is 45.17 GB/s and the total PCIe receive traffic "
            "57.84 GB/s") in results
    assert "56.135 GB/s in its bidirectional test" in results
    assert "95th percentile" in results, "the statistic of AiSIO's total is named"
