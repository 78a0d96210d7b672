"""The I/O-size chapter's page (``iolab.experiments.cuda_iosize.page``) and what the lab-only
chapters show in place of the building host's plan (``Chapter.lab_plan``)."""

from __future__ import annotations

import pandas as pd

from iolab.report.chapter import Chapter


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
