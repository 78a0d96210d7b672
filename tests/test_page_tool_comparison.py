"""The tool comparison chapter's page (iolab.experiments.tool_comparison.page), called in the
notebook's order: on the committed campaign it glues the snapshot's values and draws every
figure the prose names; on a campaign without runs (and without the published reference), or
with one tool's runs only, it raises nothing, glues no 'nan' and shows no table it cannot
fill. No table shows a Python repr."""

from __future__ import annotations

import json
import shutil

import pytest
from IPython.display import Markdown
from test_page_smt_thp import assert_glues_the_snapshot, assert_no_nan, assert_no_repr
from test_partial_chapters import ENV, RAW, copy_runs

from iolab import api
from iolab.core import registry
from iolab.experiments.tool_comparison import page
from iolab.paths import REPO_ROOT
from iolab.report.chapter import Chapter

NOTEBOOK = registry.get("tool_comparison").notebook
SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())[
    "experiments/tool_comparison.ipynb"]
SECTIONS = (page.design, page.lab_plan, page.what_ran, page.tools, page.qdepth,
            page.published, page.answer, api.quiet, page.across)


def render(ch: Chapter) -> dict[str, object]:
    """Each section's output, by the section's name; the tables of ``tools`` one by one."""
    shown = {section.__name__: section(ch) for section in SECTIONS}
    shown.update({f"tools_{i}": table for i, table in enumerate(shown.pop("tools"))})
    return shown


@pytest.fixture
def no_spdk(tmp_path, monkeypatch):
    """No SPDK built, as for a reader who replays a part of a campaign (as in
    test_partial_chapters): the plan names bdevperf as missing instead of failing."""
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path / "no-tools"))


# the environment the chapter's notebook names: its interleaved campaign
MAIN = "xeon-2vcpu-v657"


@pytest.fixture(scope="module")
def committed():
    if not (RAW / "tool_comparison" / MAIN).exists():
        pytest.skip("no committed tool_comparison campaign")
    ch = Chapter("tool_comparison", MAIN)
    return ch, render(ch)


def test_the_committed_campaign_glues_the_snapshots_values(committed):
    assert_glues_the_snapshot(committed[0], NOTEBOOK, SNAPSHOT)


def test_the_committed_campaigns_tables(committed):
    _, shown = committed
    iops, cpu = shown["tools_0"].data, shown["tools_1"].data
    assert list(iops.columns) == ["fio", "SPDK bdevperf", "xNVMe xnvmeperf"]
    assert list(iops.index) == list(cpu.index) == ["io_uring, 1 core", "io_uring, 2 cores",
                                                   "libaio, 1 core", "libaio, 2 cores"]
    assert iops.notna().all().all()
    assert shown["published"].data.loc["SPDK bdevperf", "1 thread"] > 6e6
    assert "params:" not in shown["lab_plan"].data
    assert_no_repr(shown)


@pytest.mark.usefixtures("no_spdk")
def test_a_campaign_without_runs_or_reference_shows_what_it_can(tmp_path):
    ch = Chapter("tool_comparison", ENV, data_dir=tmp_path / "data")
    shown = render(ch)
    assert not any(k.startswith("tools_") for k in shown)
    assert shown["qdepth"] is None and ch.figures == {}
    assert isinstance(shown["published"], Markdown)
    assert "not in" in shown["published"].data and "pub_bdevperf_1" not in ch.text
    assert ch.text["n_runs"] == "0" and int(ch.text["hpc_runs"]) > 0
    assert_no_nan(ch)
    assert_no_repr(shown)


@pytest.mark.usefixtures("no_spdk")
def test_one_tool_at_the_base_point_leaves_the_others_not_measured(tmp_path):
    data = tmp_path / "data"
    copy_runs(data, "tool_comparison", lambda p, rep, g: p["tool"] == "bdevperf"
              and p["qdepth"] == 32 and p["engine"] == "io_uring" and p["ncores"] == 1)
    shutil.copytree(REPO_ROOT / "data" / "reference", data / "reference")
    ch = Chapter("tool_comparison", ENV, data_dir=data)
    shown = render(ch)
    assert "not measured" in shown["tools_0"].to_html()
    assert "fig_tools" in ch.figures
    # one queue depth: a sentence where the sweep's figure would be, and none quoted as n/a
    assert ch.figures["fig_qdepth"].startswith("No figure here: this campaign measured one "
                                               "queue depth")
    assert ch.text["qd_text"].startswith("Without a sweep of queue depth")
    assert ch.text["n_bdevperf"] == "3" and ch.text["n_fio"] == "0"
    assert ch.text["n_ratios"] == "0" and "max_apart_pct" not in ch.text
    assert ch.text["pub_spdk_over_bdevperf"] == SNAPSHOT["pub_spdk_over_bdevperf"].strip("'")
    assert_no_nan(ch)
    assert_no_repr(shown)


def test_the_spread_of_ratios_and_the_sweeps_ends_on_a_small_table():
    import pandas as pd

    from iolab.experiments.tool_comparison import analysis as ta

    found = pd.DataFrame({"tool": ["bdevperf", "bdevperf", "xnvmeperf"],
                          "ratio": [0.9, 1.3, 1.05], "ci_low": [0.8, 1.1, 0.95],
                          "ci_high": [0.95, 1.5, 1.2]})
    assert ta.apart(found) == 2  # one below 1, one above, one containing it
    assert ta.largest_difference(found) == pytest.approx(0.3)
    assert ta.ratio_ranges(found).loc["bdevperf"].tolist() == [0.9, 1.3]
    summary = pd.DataFrame({"qdepth": [1, 4, 16, 1, 4, 16], "tool": ["fio"] * 3 + ["bdevperf"] * 3,
                            "mean": [10.0, 40.0, 30.0, 12.0, 20.0, 50.0]})
    ends = ta.qdepth_sweep(summary)
    assert ends.loc["fio"].tolist() == [10.0, 40.0, 4] and ends.loc["bdevperf", "best_at"] == 16
