"""What the chapters share: glue keys found in the prose, what ran from the manifests, figures
that refuse to pool configurations, and tables that name their interval method."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # this test draws without a display; the notebooks keep the inline backend

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from conftest import scratch_dir  # noqa: E402

from iolab.analysis import stats  # noqa: E402
from iolab.errors import IolabError  # noqa: E402
from iolab.paths import default_data_dir  # noqa: E402
from iolab.report import figures as fg  # noqa: E402
from iolab.report.chapter import Chapter, referenced_keys  # noqa: E402
from iolab.report.tables import summary_table  # noqa: E402


def test_glue_keys_are_read_from_the_prose(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("At {glue:text}`n_runs` runs ({glue:text}`n_runs`) and "
                                              "{glue:text}`peak:.1f`.\n\n```{glue:figure} fig_a\n"
                                              ":name: x\n```"),
                nbformat.v4.new_code_cell("x = '{glue:text}`not_this`'")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    assert referenced_keys(path) == (["n_runs", "peak"], ["fig_a"])


def test_a_figure_refuses_rows_of_two_configurations():
    rows = pd.DataFrame({"x": [1, 1, 2, 2], "iops": [1.0, 2.0, 3.0, 4.0],
                         "run.config": ["a", "a", "a", "b"]})
    summary = stats.summarize(rows, ["x"], ["iops"])
    fig, ax = plt.subplots()
    with pytest.raises(IolabError, match="2 configurations"):
        fg.band(ax, summary, "x", "iops", rows=rows)
    fg.band(ax, summary, "x", "iops", rows=rows[rows["run.config"] == "a"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"], "ticks at the values only"
    plt.close(fig)


def test_summary_table_names_the_interval():
    df = pd.DataFrame({"k": ["a"] * 3, "iops": [1.0, 2.0, 3.0], "p99": [1.0, 2.0, 4.0]})
    summary = stats.summarize(df, ["k"], ["iops", "p99"], methods={"p99": "lognormal"})
    table = summary_table(summary, ["k"], {"iops": "IOPS", "p99": "p99 µs"})
    assert any("modified Cox" in c for c in table.columns)
    assert any("Student's t" in c for c in table.columns) and table["n"].iloc[0] == 3
    assert "outlier runs" not in table


def test_summary_table_counts_each_points_outlier_runs():
    """The committed cpu_search runs hold four outlier runs, one each at four points: the
    table counts them per point, and the chapter's best set carries the same column."""
    if not (default_data_dir() / "raw" / "cpu_search" / "kvm-2vcpu").exists():
        pytest.skip("no committed cpu_search/kvm-2vcpu campaign")
    ch = Chapter("cpu_search", "kvm-2vcpu")
    keys = ["qdepth", "iosize", "ncores", "ndevs", "stress"]
    rows = ch.df[ch.df["cpu_governor"].eq("asis") & ch.df["turbo"].eq("asis")
                 & ch.df["smt"].eq("asis") & ~ch.df["thr_sib"].astype(bool)]
    counts = ch.outlier_counts(rows, keys)
    table = summary_table(ch.summarize(rows, keys, ["iops"]), keys, {"iops": "IOPS"},
                          outliers=counts)
    assert table["outlier runs"].sum() == 4 and table["outlier runs"].max() == 1
    assert len(table) == len(counts)


def test_what_ran_comes_from_the_manifests():
    if not (default_data_dir() / "raw" / "smt_thp" / "kvm-2vcpu").exists():
        pytest.skip("no committed smt_thp/kvm-2vcpu campaign")
    ch = Chapter("smt_thp", "kvm-2vcpu")
    table = ch.what_ran().set_index("")["what ran"]
    assert table["runs shown"].startswith(f"{len(ch.df)}: ")
    assert "fio-3.33" in table["tool"]
    assert any(k.startswith("runtime_s") for k in table.index)


def test_a_chapter_without_data_says_so(tmp_path):
    ch = Chapter("smt_thp", "kvm-2vcpu", data_dir=tmp_path,
                 overrides={"target_path": str(scratch_dir() / "smt_thp.dat")})
    assert not ch.have and ch.plan.counts()["to run"] > 0
    assert "none" in ch.what_ran().set_index("")["what ran"]["stored runs"]


def test_a_reference_is_read_from_the_data_folder(tmp_path):
    from iolab.errors import InputError
    from iolab.report import reference
    assert reference.load(tmp_path, "aisio_cpu_search") is None
    folder = tmp_path / "reference"
    folder.mkdir()
    (folder / "x.yaml").write_text("source: a paper\ntable: x.csv\nvalue: 3\n")
    (folder / "x.csv").write_text("id,iops\nA,1\n")
    ref = reference.load(tmp_path, "x")
    assert ref.meta["value"] == 3 and list(ref.table["iops"]) == [1]
    (folder / "y.yaml").write_text("value: 3\n")
    with pytest.raises(InputError, match="source"):
        reference.load(tmp_path, "y")


def test_configurations_lists_the_settings_that_differ():
    from iolab.core.tidy import configurations
    df = pd.DataFrame({"run.id": ["a", "b", "c"], "run.config": ["x", "x", "y"],
                       "config.runtime_s": [3, 3, 1], "config.tool": ["fio"] * 3})
    out = configurations(df).set_index("run.config")
    assert out.loc["x", "runs"] == 2 and list(out.columns) == ["runs", "config.runtime_s"]


def test_points_in_words():
    from iolab.core.registry import get
    words = get("cpu_search").describe_point({"cpu_governor": "asis", "thr_sib": False,
                                              "qdepth": 128})
    assert words == "governor as found, one thread per core, queue depth 128"


def test_design_table_lists_every_value_a_grid_gives():
    from iolab.core import registry
    from iolab.core import spec as specmod
    from iolab.report.tables import design_table

    exp = registry.get("pcie_saturation")
    table = design_table(specmod.load(exp, "hpc-server"), exp).set_index("variable")
    assert table.loc["benchmark", "values"] == ("NVMe to GPU (xnvmeperf), GPU to GPU "
                                                "(p2pBandwidthLatencyTest)")
    assert table.loc["benchmark", "varied in"] == "p2p-reference"
    assert table.loc["devices", "values"] == "1, 2, 4, 8, 16"
    assert table.loc["I/O size (bytes)", "values"] == "512, 4096, 8192"
    assert table.loc["queue depth", "varied in"] == "(base value)"


def test_bars_draw_an_interval_that_excludes_the_bar(tmp_path):
    """A log-normal interval is about the log-normal mean: with an outlier it can lie wholly
    above or below the arithmetic mean the bar shows, and the whisker must still span it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from iolab.report import figures as fg

    summary = pd.DataFrame({"metric": ["lat"] * 2, "kind": ["a", "b"], "mode": ["m", "m"],
                            "mean": [10.0, 20.0], "ci_low": [11.0, 15.0],
                            "ci_high": [13.0, 25.0]})
    fig, ax = plt.subplots()
    fg.bars(ax, summary, "kind", "lat", order=["a", "b"], hue="mode", hue_order=["m"],
            colors_by={"m": "C0"})
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    spans = sorted((round(min(y for _, y in seg), 6), round(max(y for _, y in seg), 6))
                   for seg in segments if len(seg) == 2 and seg[0][0] == seg[1][0])
    assert (11.0, 13.0) in spans and (15.0, 25.0) in spans
    plt.close(fig)
