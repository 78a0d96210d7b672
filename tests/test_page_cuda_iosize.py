"""The I/O-size chapter's page (``iolab.experiments.cuda_iosize.page``) and what the lab-only
chapters show in place of the building host's plan (``Chapter.lab_plan``)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from iolab.errors import InputError
from iolab.shared import gpu_io
from iolab.experiments.cuda_iosize import page
from iolab.paths import REPO_ROOT
from iolab.report.chapter import Chapter

SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())


def test_the_lab_plan_states_the_design_and_why_it_did_not_run(tmp_path):
    ch = Chapter("cuda_iosize", "hpc-server", data_dir=tmp_path / "empty")
    table = ch.lab_plan(ch.experiment.lab_needs).set_index("")["the lab campaign"]
    assert table["grid iosize-qdepth"] == ("I/O size (bytes) 512, 1024, …, 65536 (8 values) × "
                                           "queue depth 1, 2, …, 128 (8 values): 64 points, "
                                           "320 runs")
    assert table["repetitions"] == "a fixed 5 repetitions of every point"
    assert table["the whole campaign"].startswith("64 points, 320 runs, about 1h09m20s ")
    why = table["not run here"]
    assert ch.experiment.lab_needs in why and "upcie-cuda" in why
    # the host that builds the book is not the chapter's subject
    assert not any(word in " ".join(table) for word in ("cpufreq", "this host", "params:"))


def test_the_lab_plan_counts_a_point_of_several_grids_once(tmp_path):
    ch = Chapter("pcie_saturation", "hpc-server", data_dir=tmp_path / "empty")
    table = ch.lab_plan("a lab").set_index("")["the lab campaign"]
    assert table["grid devices"].endswith(": 5 points, 25 runs")
    assert table["grid p2p-reference"].endswith(": 1 point, 5 runs")
    assert table["the whole campaign"].startswith(
        "8 points (a point that several grids hold is run once), 40 runs")
    assert table["not run here"].endswith("its runs need a lab, and no machine available to "
                                          "this project had them.")


def test_the_lab_plan_counts_stored_runs_instead_of_a_reason(tmp_path):
    ch = Chapter("cuda_qdepth", "hpc-server", data_dir=tmp_path / "empty")
    ch.df = pd.DataFrame({"iops": [1.0, 2.0]})
    table = ch.lab_plan("a lab").set_index("")["the lab campaign"]
    assert table["runs stored"] == "2 runs of this package" and "not run here" not in table


def test_the_page_glues_the_books_values_from_the_published_reference():
    """No run is stored: the model, the texts and AiSIO's table come from its published
    values, as the book's snapshot holds them."""
    ch = Chapter("cuda_iosize", "hpc-server")
    dev = page.intro(ch)
    page.figure(ch, dev)
    tables = page.saturation_tables(ch, dev)
    gpu_io.lab_answer(ch)
    snapshot = SNAPSHOT["experiments/cuda_iosize.ipynb"]
    # the snapshot holds what the notebook shows of each text: its repr
    assert {k: repr(ch.text.get(k)) for k in snapshot} == snapshot
    assert "fig_cuda_iosize" in ch.figures
    assert len(tables) == 1 and tables[0].caption.startswith("Published by AiSIO")
    published = tables[0].data.set_index("I/O size (bytes)")
    assert published.loc["512"].tolist() == ["> 128 (not reached)", "> 2,048"]
    assert published.loc["2,048"].tolist() == ["64", "1,024"]
    assert page.model_errors(dev).caption.startswith("The model's error: published over model")


def test_a_chapter_without_runs_or_references_says_so(tmp_path):
    ch = Chapter("cuda_iosize", "hpc-server", data_dir=tmp_path / "empty")
    dev = page.intro(ch)
    page.figure(ch, dev)
    assert dev.model is None and page.model_errors(dev) is None
    assert ch.text["model_basis"] == "none: no parameters"
    assert ch.text["shown_what"].startswith("no stored run in environment hpc-server: no "
                                            "machine whose GPU can drive NVMe SSDs directly")
    assert page.saturation_tables(ch, dev) == []
    assert ch.text["sat_text"].startswith("No run is stored here")
    assert "fig_cuda_iosize" in ch.figures


def runs() -> pd.DataFrame:
    """Two repetitions per point: 512 B still rising at the largest queue depth, 4 KiB level
    from queue depth 2."""
    gbs = {(512, 1): 2.0, (512, 2): 4.0, (512, 4): 8.0,
           (4096, 1): 20.0, (4096, 2): 40.0, (4096, 4): 41.0}
    return pd.DataFrame([{"iosize": size, "qdepth": q, "payload_bytes_per_s": v * 1e9 * f}
                         for (size, q), v in gbs.items() for f in (0.99, 1.01)])


@pytest.fixture
def measured(monkeypatch):
    rows = runs()
    monkeypatch.setattr(gpu_io, "shown", lambda *a: (rows, "this package's runs", []))
    ch = Chapter("cuda_iosize", "hpc-server")
    return ch, page.intro(ch)


def test_measured_runs_give_the_measured_table_model_and_curves(measured):
    ch, dev = measured
    assert dev.measured and "fitted to the runs shown" in ch.text["model_text"]
    assert ch.text["shown_what"] == "12 stored runs in environment hpc-server: this package's runs"
    own, published = page.saturation_tables(ch, dev)
    table = own.data.set_index("I/O size (bytes)")
    assert table.loc["512", "GPU threads"] == "> 64", "4 x 16 devices, not reached"
    assert table.loc["4,096", "GPU threads"] == "32"
    assert ch.text["sat_text"] == ("With the 5 % criterion, the smallest I/O size that "
                                   "saturates within the grid is 4,096 bytes.")
    assert page.model_errors(dev).caption.startswith("The model's error: measured over model")
    page.figure(ch, dev)
    labels = ch.figures["fig_cuda_iosize"].axes[0].get_legend_handles_labels()[1]
    assert "queue depth 1" in labels and "published by AiSIO" not in labels


def test_the_quoted_points_come_from_the_reference_not_the_page(tmp_path):
    """Where the reference compares the model with another published point, the page words
    and names its texts for that point: no point of the published grid is named in code."""
    shutil.copytree(REPO_ROOT / "data" / "reference", tmp_path / "reference")
    yaml = tmp_path / "reference" / "aisio_cuda_iosize.yaml"
    yaml.write_text(yaml.read_text().replace("compared: pub_512_gbs", "compared: pub_64k_q1_gbs"))
    ch = Chapter("cuda_iosize", "hpc-server", data_dir=tmp_path)
    page.saturation_tables(ch, page.intro(ch))
    assert ch.text["pub_64k_q1_gbs"] == "41.7" and ch.text["pub_65536_q1_threads"] == "16"
    assert "pub_512_q128_threads" not in ch.text and "pub_qdepth_65536_q1_miops" not in ch.text
    assert ch.text["bound_text"].startswith("For 65,536 B at queue depth 1 the model allows")
    yaml.write_text(yaml.read_text().replace("qdepth: 1}", "qdepth: 4}"))
    with pytest.raises(InputError, match="key 'quoted.pub_64k_q1_gbs'.*names 0 rows"):
        page.saturation_tables(ch, page.intro(ch))
