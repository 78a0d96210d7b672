"""The CPU-initiated search's page functions (iolab.experiments.cpu_search.page).

On the committed campaign they give every text the notebook's prose glues with the value
of the glue snapshot, the figures it shows, and a design table in words; on a campaign
without runs (and without references, replication or tool comparison) they raise nothing
and leave the measured values unset.
"""

from __future__ import annotations

import json
import re

import pytest

from iolab import api
from iolab.experiments import cpu_search
from iolab.experiments.cpu_search import adaptive, page
from iolab.paths import REPO_ROOT, default_data_dir
from iolab.report.chapter import Chapter, referenced_keys

SNAPSHOT = REPO_ROOT / "tests" / "fixtures" / "glued_values.json"
# computed by Chapter.glue_all itself, not by a section
GLUE_ALL_KEYS = {"outliers", "noise_floor"}
SECTIONS = (page.design, page.results, page.repetitions, page.optimum, page.confirmed,
            page.replication, page.ad, page.effects, page.sweeps, page.tools, adaptive.proof,
            adaptive.replays, adaptive.live, page.answer, api.quiet, page.across)


def render(ch: Chapter) -> dict:
    """Every section in the notebook's order: what each returns, by name."""
    return {section.__name__: section(ch) for section in SECTIONS}


@pytest.fixture(scope="module")
def committed():
    ch = Chapter("cpu_search", "epyc-2vcpu-v782")
    return ch, render(ch)


def test_the_sections_glue_the_snapshot_values(committed):
    ch, _ = committed
    snapshot = json.loads(SNAPSHOT.read_text())[cpu_search.EXPERIMENT.chapter + ".ipynb"]
    text_keys, figure_keys = referenced_keys(cpu_search.EXPERIMENT.notebook)
    assert set(text_keys) - GLUE_ALL_KEYS <= set(ch.text)
    # the snapshot holds each glued string as the notebook shows it: its repr
    assert {k: repr(ch.text[k]) for k in snapshot if k in ch.text} == \
        {k: v for k, v in snapshot.items() if k in ch.text}
    assert set(figure_keys) <= set(ch.figures)


def test_the_design_table_shows_settings_in_words(committed):
    _, shown = committed
    table = shown["design"].data.set_index("grid")
    for text in table["varies"].tolist() + table["sets"].tolist():
        assert not any(r in text for r in ("[", "]", "True", "False", "'")), text
    assert "thread siblings: both threads of each core, one thread per core" in \
        table.loc["search", "varies"]
    assert table.loc["smt-off-3ghz", "sets"] == "SMT=off, governor=userspace at 3.0 GHz"
    html = shown["design"].to_html()
    assert "[True" not in html and "False]" not in html and "['" not in html


def test_the_sections_show_their_tables(committed):
    _, shown = committed
    assert len(shown["results"]) == 2 and len(shown["optimum"]) == 2
    ad = shown["ad"][-1].data
    assert list(ad.index) == ["A", "B", "C", "D"]
    assert set(ad["thread siblings"]) == {"both threads of each core", "one thread per core"}
    # A and B have no runs here: their interval is "not measured" like their mean, not "n/a"
    html = shown["ad"][-1].to_html()
    assert "n/a" not in html and html.count("not measured") >= 6, html
    assert shown["confirmed"] is not None and shown["effects"] is not None
    assert shown["replication"] is None and shown["sweeps"] is None
    assert shown["tools"] is None        # the tool comparison's environment exists


def test_a_campaign_without_runs_leaves_its_measurements_unset(tmp_path):
    ch = Chapter("cpu_search", "epyc-2vcpu-v782", data_dir=tmp_path)
    shown = render(ch)
    assert not ch.have
    assert shown["optimum"] == [] and shown["confirmed"] is None and shown["answer"] is None
    # no published reference in this data folder: said, not hidden
    assert "not in" in shown["ad"][0].data
    assert ch.text["n_runs"] == "0" and ch.text["hpc_search_points"] == "3,840"
    assert ch.text["sibling_note"].startswith("no host is recorded")
    for key in ("opt_iops", "cap_iops", "best_qdepth", "rep_ratio", "tc_fio", "d_vs_c"):
        assert key not in ch.text
    assert "fig_cpu_sweeps" not in ch.figures and "fig_cpu_tools" not in ch.figures
    assert shown["proof"] is None and shown["replays"] is None
    assert ch.text["live_text"].startswith("The live search of environment")


def test_the_adaptive_section_sets_the_live_search_against_the_full_grid(committed):
    ch, shown = committed
    assert "fig_search_replay" in ch.figures
    table = shown["replays"].data
    assert set(table["strategy"]) == set(adaptive.NAMES.values()) - {"full grid"}
    assert len(table) == 3 * 4   # three strategies at four budgets
    assert "best set" in ch.text["live_text"] and "answered" in ch.text["live_text"]
    assert ch.text["proof_env"] == "epyc-2vcpu-v782-grid"
    assert "at most 1,100 runs" in ch.text["hpc_adaptive"] and "of the full sweep's time" in \
        ch.text["hpc_adaptive"]


def test_replays_of_another_grid_are_refused(tmp_path):
    import shutil

    from iolab.core.search import replay
    from iolab.errors import InputError

    data = tmp_path / "data"
    shutil.copytree(default_data_dir(), data, ignore=shutil.ignore_patterns("cache"))
    info = replay.derived_path(data, "cpu_search", "epyc-2vcpu-v782-grid").with_suffix(".yaml")
    # another grid's digest (a digest of another form is refused as one: tests/test_search.py)
    info.write_text(re.sub(r"(?m)^grid_digest: .*$", "grid_digest: " + "ab" * 32,
                           info.read_text()))
    ch = Chapter("cpu_search", "epyc-2vcpu-v782", data_dir=data)
    with pytest.raises(InputError, match="changed since these replays were derived"):
        adaptive.replays(ch)


def test_a_chapter_without_a_search_campaign_glues_every_key():
    """The kvm-2vcpu environment page has runs but no proof grid or live search: every text
    its prose glues is set all the same (the built book must hold no 'n/a')."""
    ch = Chapter("cpu_search", "kvm-2vcpu")
    render(ch)
    text_keys, _ = referenced_keys(cpu_search.EXPERIMENT.notebook)
    assert set(text_keys) - GLUE_ALL_KEYS - set(ch.text) == set()
    assert ch.text["replay_text"].startswith("No replays")
    # the replay figure is a sentence saying why, not "no measurement is stored"
    assert ch.figures["fig_search_replay"] == ("Environment kvm-2vcpu stores no full grid, so no "
                                               "search was replayed against one.")


def test_across_environments_compares_each_quotient_once(committed):
    ch, shown = committed
    statements = list(shown["across"]["finding"])
    # bandwidth at 4096 against 512 bytes is the IOPS quotient times 8: compared once
    assert any("mean IOPS at 4096-byte against 512-byte reads" in s for s in statements)
    assert not any("bandwidth at 4096-byte" in s for s in statements)
    assert "(exploratory)" in ch.text["across"]


def test_the_tool_comparison_is_the_experiment_the_params_name(tmp_path):
    """No experiment imports another: the chapter opens the tool comparison the params name
    (analysis: tool_comparison_experiment), and says so where they name none."""
    ch = Chapter("cpu_search", "epyc-2vcpu-v782", data_dir=tmp_path)
    assert ch.spec.analysis["tool_comparison_experiment"] == "tool_comparison"
    ch.spec.analysis["tool_comparison_experiment"] = None
    note = page.tools(ch)
    assert note.data == ("No tool comparison: the params name none (analysis: "
                         "tool_comparison_experiment)")
    assert not any(key.startswith("tc_") and key != "tc_intro" for key in ch.text)
