"""The queue-depth chapter's page (``iolab.experiments.cuda_qdepth.page``): the book's values
from AiSIO's published rates, a chapter with nothing to stand on, and measured runs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from iolab.shared import gpu_io
from iolab.experiments.cuda_qdepth import page
from iolab.paths import REPO_ROOT
from iolab.report.chapter import Chapter

SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())


def test_the_page_glues_the_books_values_from_the_published_reference():
    ch = Chapter("cuda_qdepth", "hpc-server")
    dev = page.intro(ch)
    page.figure(ch, dev)
    tables = page.saturation_tables(ch, dev)
    gpu_io.lab_answer(ch)
    snapshot = SNAPSHOT["experiments/cuda_qdepth.ipynb"]
    # the snapshot holds what the notebook shows of each text: its repr
    assert {k: repr(ch.text.get(k)) for k in snapshot} == snapshot
    assert "fig_cuda_qdepth" in ch.figures
    assert len(tables) == 1 and tables[0].caption.startswith("Published by AiSIO")
    published = tables[0].data.set_index("queues per device")
    # one queue never saturated up to queue depth 512; two did at 128: 128 x 2 x 16 threads
    assert published.loc[1].tolist() == ["> 512 (not reached)", "> 8,192"]
    assert published.loc[2].tolist() == ["128", "4,096"]
    assert page.model_errors(dev).caption.startswith("The model's error: published over model")


def test_the_lab_design_shows_the_grid_and_the_hardware_it_needs(tmp_path):
    ch = Chapter("cuda_qdepth", "hpc-server", data_dir=tmp_path / "empty")
    design, lab = gpu_io.lab_design(ch)
    assert "queues per device" in design.data["variable"].tolist()
    plan = lab.data.set_index("")["the lab campaign"]
    assert plan["grid qdepth-nqueues"].endswith(": 50 points, 250 runs")
    assert "GPU whose threads submit NVMe commands themselves" in plan["not run here"]


def test_a_chapter_without_runs_or_references_says_so(tmp_path):
    ch = Chapter("cuda_qdepth", "hpc-server", data_dir=tmp_path / "empty")
    dev = page.intro(ch)
    page.figure(ch, dev)
    assert dev.model is None and page.model_errors(dev) is None
    assert ch.text["model_text"].startswith("Neither stored runs nor published values")
    assert ch.text["qdepth_values"] == "1, 2, 4, 8, 16, 32, 64, 128, 256, 512"
    assert page.saturation_tables(ch, dev) == []
    assert "fig_cuda_qdepth" in ch.figures
    assert gpu_io.lab_answer(ch).data["verdict"].str.startswith("not testable here").all()


def runs() -> pd.DataFrame:
    """Two repetitions per point: one queue still rising at the largest queue depth, two
    queues level from queue depth 2."""
    iops = {(1, 1): 1e6, (1, 2): 2e6, (1, 4): 4e6, (2, 1): 3e6, (2, 2): 6e6, (2, 4): 6.1e6}
    return pd.DataFrame([{"nqueues": n, "qdepth": q, "iops": v * f}
                         for (n, q), v in iops.items() for f in (0.99, 1.01)])


@pytest.fixture
def measured(monkeypatch):
    rows = runs()
    monkeypatch.setattr(gpu_io, "shown", lambda *a: (rows, "this package's runs", []))
    ch = Chapter("cuda_qdepth", "hpc-server")
    return ch, page.intro(ch)


def test_measured_runs_give_the_measured_table_model_and_curves(measured):
    ch, dev = measured
    assert dev.measured and "fitted to the runs shown" in ch.text["model_text"]
    own, published = page.saturation_tables(ch, dev)
    table = own.data.set_index("queues per device")
    assert table.loc[1, "GPU threads"] == "> 64", "queue depth 4 x 1 queue x 16 devices"
    assert table.loc[2, "GPU threads"] == "64"
    assert table.loc[2, "of the roofline"].endswith(" %")
    assert ch.text["sat_text"] == "The table above is computed from the stored runs."
    page.figure(ch, dev)
    labels = ch.figures["fig_cuda_qdepth"].axes[0].get_legend_handles_labels()[1]
    assert "2 queue(s) per device" in labels
    assert not any(label.startswith("published by AiSIO") for label in labels)
