"""The PCIe saturation chapter's page (``iolab.experiments.pcie_saturation.page``): on the
committed data (no run of this package, AiSIO's per-run table and its published values) it
shows AiSIO's runs labelled as AiSIO's; without the reference files it falls back to the plan;
the statistics it adds (sd, the ratio's interval) and its notebook's size."""

from __future__ import annotations

import json
import re
import shutil

import matplotlib
import nbformat
import pandas as pd
import pytest

from iolab.core import registry
from iolab.experiments.pcie_saturation import analysis as an
from iolab.experiments.pcie_saturation import page
from iolab.paths import REPO_ROOT
from iolab.report.chapter import Chapter, referenced_keys

matplotlib.use("Agg")
SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())[
    "experiments/pcie_saturation.ipynb"]
# glue keys whose values AiSIO's per-run table changes or adds (the rest keep the snapshot's)
FROM_RUNS = {"shown_what", "results_text", "ratio_text", "devices_text", "answer_text",
             "runs_vs_published"}


def render(ch: Chapter):
    """Every page function in the notebook's order; the displayed objects."""
    v = page.setup(ch)
    shown = {"what_ran": page.what_ran(ch, v)}
    page.results(ch, v)
    page.bandwidth_figure(ch, v)
    shown["results"] = page.results_table(ch, v)
    page.devices(ch, v)
    shown["published"] = page.published(ch, v)
    shown["claims"] = page.answer(ch, v)
    return v, shown


@pytest.fixture(scope="module")
def committed():
    ch = Chapter("pcie_saturation", "hpc-server", mode="replay")
    v, shown = render(ch)
    return ch, v, shown


def test_every_key_the_prose_refers_to_is_glued(committed):
    ch, _, _ = committed
    text_keys, figure_keys = referenced_keys(registry.get("pcie_saturation").notebook)
    assert set(text_keys) - {"claims"} <= set(ch.text)
    assert set(figure_keys) == {"fig_pcie_bandwidth", "fig_pcie_devices"} <= set(ch.figures)
    for key in set(SNAPSHOT) - FROM_RUNS:
        if key in ch.text:
            assert repr(ch.text[key]) == SNAPSHOT[key], key


def test_aisio_runs_are_shown_and_labelled_as_aisio_s(committed):
    ch, v, shown = committed
    assert v.origin == page.RUNS_ORIGIN and len(v.rows) == 15 and not ch.have
    T = ch.text
    assert "AiSIO's own 15 runs, re-derived from its result archive " \
           "(pcie-bandwidth-saturation.tar.gz)" in T["shown_what"]
    assert T["results_text"].startswith("These are AiSIO's measurements, re-derived from its "
                                        "archive, not this package's. With 4 devices, at 512 B "
                                        "the payload is 7.90 GB/s")
    assert ("at 4,096 B the payload is 45.17 GB/s and the total PCIe receive traffic 57.84 GB/s"
            in T["results_text"])
    assert ("28.38 GB/s of one-way P2P writes and 56.135 GB/s in its bidirectional test "
            "(AiSIO's run, from 004_cuda_bandwidth/cmd_01.output" in T["results_text"])
    assert "from 1.28035 to 1.28045 across the I/O sizes, each within ±0.00006" in T["ratio_text"]
    assert "to within 0.40 B/s" in T["runs_vs_published"]
    assert "57.836 GB/s (95 % CI 57.834 to 57.838, n = 5)" in T["answer_text"]
    assert "3.86 M IOPS" in T["answer_text"]
    assert T["devices_text"].startswith("No device sweep is stored here (AiSIO's runs have one "
                                        "device count only): with 4 devices the payload of "
                                        "4,096 B reads is 45.17 GB/s, against 58 GB/s")
    assert "published" not in T["results_text"] + T["answer_text"].split("and published")[1]


def test_the_results_table_gives_n_sd_intervals_and_the_ratio(committed):
    _, _, shown = committed
    table = shown["results"].data.set_index("I/O size (bytes)")
    assert shown["results"].caption.startswith("AiSIO's runs, from the per-run table derived "
                                               "from its archive: AiSIO's measurements, not "
                                               "this package's.")
    assert list(table["n"]) == [5, 5, 5]
    row = table.loc["4,096"]
    assert row["payload MB/s (mean)"] == "45,170.31" and row["payload sd"] == "0.36"
    assert row["payload 95 % CI"] == "45,169.87 to 45,170.75"
    assert row["total PCIe RX MB/s (mean)"] == "57,836.27" and row["total PCIe RX sd"] == "1.65"
    assert row["total / payload"] == "1.28040" and row["ratio 95 % CI"] == "1.28036 to 1.28045"
    what_ran = shown["what_ran"].data.set_index("")["what ran"]
    assert "github.com/xnvme/aisio at 31b032a" in what_ran["AiSIO's runs"]


def test_the_claims_stay_untestable_here(committed):
    ch, _, shown = committed
    assert repr(ch.text["claims"]) == SNAPSHOT["claims"]
    verdicts = shown["claims"].data.filter(like="verdict").iloc[:, 0]
    assert verdicts.str.startswith("not testable here").all()


def test_without_reference_files_the_chapter_shows_its_plan(tmp_path):
    ch = Chapter("pcie_saturation", "hpc-server", mode="replay", data_dir=tmp_path / "empty")
    v, shown = render(ch)
    assert v.origin is None and v.ref is None and v.p2p is None
    assert ch.text["shown_what"].endswith("AiSIO's published values, labelled as such")
    assert ch.text["results_text"] == ("No run of the base point is stored here, so this section "
                                       "has no measured value; the figure shows AiSIO's "
                                       "published values, labelled as such. No GPU-to-GPU "
                                       "reference is stored.")
    assert "fig_pcie_bandwidth" not in ch.figures and shown["published"] is None
    assert "per-run table" in ch.text["runs_vs_published"]


def test_published_values_alone_are_not_taken_for_runs(tmp_path):
    data = tmp_path / "data"
    (data / "reference").mkdir(parents=True)
    for name in ("aisio_pcie_saturation.yaml", "aisio_pcie_saturation.csv"):
        shutil.copy(REPO_ROOT / "data" / "reference" / name, data / "reference" / name)
    ch = Chapter("pcie_saturation", "hpc-server", mode="replay", data_dir=data)
    v, _ = render(ch)
    # without AiSIO's per-run table the chapter says published values, never runs
    assert v.origin is None and "15 runs" not in ch.text["shown_what"]
    assert ch.text["shown_what"].endswith("AiSIO's published values, labelled as such")
    assert ch.text["answer_text"].startswith(
        "It therefore gives no measured answer of its own") and "own runs" not in \
        ch.text["answer_text"]
    assert ch.text["pub_overhead"] == "1.28"


# --- the statistics -------------------------------------------------------------------------

def test_payload_vs_total_has_sd_and_the_interval_of_the_ratio():
    df = pd.DataFrame({"iosize": [512] * 3 + [4096],
                       "payload_bytes_per_s": [8e9, 8.2e9, 8.1e9, 45e9],
                       an.CAPTURE_RX: [1.0e10, 1.05e10, 1.02e10, 57e9]})
    table = an.payload_vs_total(df, ["iosize"], 0.95).set_index("iosize")
    assert table.loc[512, "sd_payload"] == pytest.approx(0.1e9)
    assert table.loc[512, "ratio"] == pytest.approx(3.07e10 / 2.43e10)
    assert table.loc[512, "ratio_ci_low"] < table.loc[512, "ratio"] < table.loc[512, "ratio_ci_high"]
    # one run: the ratio without an interval
    assert table.loc[4096, "ratio"] == pytest.approx(57 / 45)
    assert pd.isna(table.loc[4096, "ratio_ci_low"]) and pd.isna(table.loc[4096, "sd_payload"])


def test_runs_vs_published_reports_each_difference():
    runs = pd.DataFrame({"iosize": [512, 512], "payload_bytes_per_s": [10.0, 12.0],
                         "rx_p95_bytes_per_s": [20.0, 20.0]})
    pub = pd.DataFrame({"iosize": [512, 4096], "payload_bytes_per_s": [11.5, 1.0],
                        "rx_p95_bytes_per_s": [20.0, 1.0]})
    diff = an.runs_vs_published(runs, pub).set_index("metric")
    assert list(diff["iosize"]) == [512, 512]
    assert diff.loc["payload_bytes_per_s", "difference"] == pytest.approx(-0.5)
    assert diff.loc["rx_p95_bytes_per_s", "difference"] == 0


def test_aisio_run_rows_take_the_experiment_s_schema():
    runs = pd.DataFrame({"iosize": [512], "rep": [3], "iops": [1.5e7],
                         "payload_bytes_per_s": [7.9e9], "rx_p95_bytes_per_s": [1.01e10]})
    point = {"qdepth": 128, "ncpus": 1, "ndevs": 4, "cpu_governor": "performance",
             "turbo": 1, "smt": 0}
    row = an.aisio_run_rows(runs, point).iloc[0]
    assert (row["benchmark"], row["ncores"], row["turbo"], row["smt"], row["run.rep"]) == (
        an.NVME, 1, "on", "off", 3)
    assert row[an.CAPTURE_RX] == 1.01e10 and row["run.source"] == an.RUNS_TABLE_SOURCE
    assert an.total_column(an.aisio_run_rows(runs, point))[0] == an.CAPTURE_RX


# --- the notebook ------------------------------------------------------------------------------

def test_the_notebook_only_renders():
    nb = nbformat.read(registry.get("pcie_saturation").notebook, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert sum(len(s.splitlines()) for s in code) <= 90
    assert not any(re.search(r"^\s*(def|class) |=\s*lambda\b", s, re.M) for s in code)
