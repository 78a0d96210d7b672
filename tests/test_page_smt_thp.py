"""The SMT/THP chapter's page (iolab.experiments.smt_thp.page), called in the notebook's order:
on the committed campaign it glues the snapshot's values and draws every figure the prose
names; on a campaign without runs, or with one engine's runs of one point, it raises nothing,
glues no 'nan' and shows no table it cannot fill. No table shows a Python repr."""

from __future__ import annotations

import copy
import html
import json
import re

import pytest
from IPython.display import Markdown
from test_partial_chapters import ENV, RAW, copy_runs, first_point

from iolab import api
from iolab.core import registry
from iolab.experiments.smt_thp import page
from iolab.paths import REPO_ROOT
from iolab.report.chapter import Chapter, Sentence, referenced_keys

NOTEBOOK = registry.get("smt_thp").notebook
SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())[
    "experiments/smt_thp.ipynb"]
# glued by Chapter.glue_all itself, not by a section of the page
BY_GLUE_ALL = {"outliers", "noise_floor"}
SECTIONS = (page.what_ran, page.repetitions, page.concurrency, page.engine_ratios,
            page.affinity, page.smt, page.thp, page.layout, page.explorer, page.all_metrics, page.summary,
            page.answer, api.quiet, page.across)
REPR = re.compile(r"[\[\]{}]|\b(None|True|False|nan)\b")


def render(ch: Chapter) -> dict[str, object]:
    """Each section's output, by the section's name."""
    return {section.__name__: section(ch) for section in SECTIONS}


def table_cells(styler) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", styler.to_html(), re.S)]


def assert_no_repr(shown: dict[str, object]) -> None:
    for name, out in shown.items():
        if hasattr(out, "to_html"):
            bad = [c for c in table_cells(out) if REPR.search(c)]
            assert not bad, f"{name} shows Python reprs: {bad}"


def assert_no_nan(ch: Chapter) -> None:
    nans = {k: v for k, v in ch.text.items() if re.search(r"\bnan\b", v, re.IGNORECASE)}
    assert not nans, nans


@pytest.fixture(scope="module")
def committed():
    if not (RAW / "smt_thp" / ENV).exists():
        pytest.skip("no committed smt_thp campaign")
    ch = Chapter("smt_thp", ENV)
    return ch, render(ch)


def assert_glues_the_snapshot(ch, notebook, snapshot) -> None:
    """The page's texts are the snapshot's (which holds what glue shows: each text's repr),
    and every key and figure the notebook's prose names is set."""
    text, figures = referenced_keys(notebook)
    expected = {k: v for k, v in snapshot.items() if k not in BY_GLUE_ALL}
    assert {k: repr(ch.text.get(k)) for k in expected} == expected
    assert set(text) - BY_GLUE_ALL <= set(ch.text), "a key the prose glues is never set"
    assert set(figures) <= set(ch.figures)


def test_the_committed_campaign_glues_the_snapshots_values(committed):
    assert_glues_the_snapshot(committed[0], NOTEBOOK, SNAPSHOT)


def test_the_committed_campaigns_tables(committed):
    _, shown = committed
    ratios = shown["engine_ratios"].data
    assert list(ratios["concurrency"]) == [1, 2, 4, 8, 16, 32, 64]
    assert list(ratios.columns)[-3:] == ["io_uring / psync", "95 % CI (each on its own)",
                                         "p, Holm-adjusted over these 7 ratios"]
    # concurrency 32 stands out even with the table's 7 ratios held together
    adjusted = dict(zip(ratios["concurrency"], ratios["p, Holm-adjusted over these 7 ratios"]))
    assert adjusted[32] == "0.047" and adjusted[16] == "1.000"
    # the VM cannot switch SMT: the section says so instead of drawing
    assert isinstance(shown["smt"], Markdown) and "hpc-server" in shown["smt"].data
    assert len(shown["summary"].data) == 24
    # kvm-2vcpu excludes the fallocated file (its host is not at hand): a sentence says why,
    # and there is no table
    assert shown["layout"] is None
    assert committed[0].text["layout_finding"].startswith(
        "The fallocated file is not read in this campaign: the runs of kvm-2vcpu were made on "
        "a host of kernel 6.18.44-fc-v669")
    assert_no_repr(shown)


def test_a_campaign_without_runs_shows_what_it_can(tmp_path):
    ch = Chapter("smt_thp", ENV, data_dir=tmp_path / "data")
    shown = render(ch)
    assert shown["what_ran"] is not None and shown["answer"] is not None
    assert all(shown[s] is None for s in ("repetitions", "engine_ratios", "summary"))
    assert isinstance(shown["smt"], Markdown)
    # a sentence in place of every figure, the repetitions' included
    assert set(ch.figures) == {"fig_repetitions", "fig_concurrency", "fig_affinity", "fig_thp",
                               "fig_all_metrics"}
    assert all(isinstance(f, Sentence) for f in ch.figures.values())
    assert ch.figures["fig_repetitions"] == "No run is stored for environment kvm-2vcpu."
    assert ch.figures["fig_concurrency"].startswith(
        "No concurrency sweep is stored for kvm-2vcpu: no run of it is,")
    assert ch.text["affinity_note"] == "No CPU topology is recorded for this campaign's host."
    assert ch.text["layout_finding"].startswith("The fallocated file is not read in this "
                                                "campaign")
    assert_no_nan(ch)
    assert_no_repr(shown)


def test_one_engine_at_one_concurrency_has_no_ratio_to_show(tmp_path):
    point = first_point("smt_thp", lambda p, g: p["engine"] == "psync" and p["concurrency"] == 1)
    copy_runs(tmp_path / "data", "smt_thp", lambda p, rep, g: p == point and rep < 2)
    ch = Chapter("smt_thp", ENV, data_dir=tmp_path / "data")
    shown = render(ch)
    assert shown["engine_ratios"] is None
    # one concurrency and one affinity setting: sentences, not figures
    assert all(isinstance(ch.figures[k], Sentence) for k in ("fig_concurrency", "fig_affinity"))
    assert ch.figures["fig_concurrency"].startswith(
        "No concurrency sweep is stored for kvm-2vcpu: only concurrency 1 is,")
    assert "ratio_c1" not in ch.text and "c64_verdict" not in ch.text
    assert ch.text["peak_engine"] == "psync" and ch.text["peak_conc"] == "1"
    assert_no_nan(ch)
    assert_no_repr(shown)


def test_the_layout_sentence_gives_each_engines_ratios_or_why_not():
    from types import SimpleNamespace

    import pandas as pd

    from iolab.experiments.smt_thp import analysis as an

    def row(engine, layout, iops, p99):
        return {"engine": engine, "layout": layout, "iops": iops, "clat_p99_us": p99}

    rows = pd.DataFrame([row("psync", "written", v, 2000.0 + v / 100) for v in (5e4, 6e4, 5.5e4)]
                        + [row("psync", "fallocated", v, 2.0 + v / 1e6) for v in (1e6, 1.1e6, 1.2e6)]
                        + [row("io_uring", "written", v, 4000.0) for v in (3e4, 4e4)])
    ch = SimpleNamespace(spec=SimpleNamespace(exclusions=[]), blocked_by_grid=lambda: {},
                         environment="here")
    text = page._layout_sentence(ch, {f.id: f for f in an.layout_findings(rows)})
    assert text.startswith("Reading the file laid out with fallocate, psync's mean IOPS are "
                           "20.00 (95 % CI ")
    assert "its mean p99 latency 0.0012 (95 % CI 0.0011 to 0.0013; n = 3 / 3) times" in text
    assert text.endswith("io_uring's are not measured here: no run reading the fallocated "
                         "file is stored (the layout grid).")
    none = page._layout_sentence(ch, {f.id: f for f in an.layout_findings(rows.iloc[:0])})
    assert none.startswith("No run reading the fallocated file is stored for here yet")


def part_of(committed, keep) -> Chapter:
    """The committed chapter with only the tidy rows ``keep`` accepts, its texts and figures
    its own: a campaign that measured part of its design."""
    ch = copy.copy(committed[0])
    ch.df = ch.df[keep(ch.df)].reset_index(drop=True)
    ch.text, ch.figures = {}, {}
    return ch


def at_base_point(df):
    return (df["concurrency"] == 16) & (df["affinity"] == "unpinned") & (df["thp"] == "asis") \
        & (df["smt"] == "asis")


def assert_every_key_said_in_words(ch: Chapter) -> None:
    """Every key the prose glues is set (glue_all would glue 'n/a' for one that is not), and
    none is 'n/a'."""
    text, figures = referenced_keys(NOTEBOOK)
    assert set(text) - BY_GLUE_ALL - {"across"} <= set(ch.text)
    assert set(figures) <= set(ch.figures)
    said_na = {k: v for k, v in ch.text.items() if re.search(r"(?<![\w/])n/a(?![\w/])", v)}
    assert not said_na, said_na


def test_a_sweep_of_one_point_is_a_row_and_a_sentence_not_a_figure(committed, capsys):
    ch = part_of(committed, at_base_point)
    shown = render(ch)
    for key in ("fig_concurrency", "fig_all_metrics"):
        assert isinstance(ch.figures[key], Sentence), key
        assert ch.figures[key] == (
            "No concurrency sweep is stored for kvm-2vcpu: only concurrency 16 is, a row of "
            "the table of io_uring / psync ratios, and a sweep needs two concurrencies at "
            "least; iolab run smt_thp --env kvm-2vcpu makes its runs still to do.")
    assert list(shown["engine_ratios"].data["concurrency"]) == [16]
    assert ch.figures["fig_concurrency"].code == ("iolab run smt_thp --env kvm-2vcpu",)
    assert "HBox" not in capsys.readouterr().out  # no explorer redrawing one point
    assert ch.text["conc_prev"] == "the concurrency below 16 (none is stored here)"
    assert ch.text["knee_psync"] == ("psync's change cannot be computed, for want of a second "
                                     "concurrency")
    assert_every_key_said_in_words(ch)
    assert_no_repr(shown)


def test_an_affinity_grid_of_one_setting_says_what_is_missing(committed):
    ch = part_of(committed, at_base_point)
    page.affinity(ch)
    assert isinstance(ch.figures["fig_affinity"], Sentence)
    assert ch.figures["fig_affinity"].startswith(
        "No affinity comparison is stored for kvm-2vcpu: only affinity unpinned is stored, and "
        "a comparison needs two settings;")
    assert ch.text["aff_psync_onecore_pct"] == (
        "an amount not measured here (no run of psync with affinity one_core is stored)")
    assert ch.text["aff_io_uring_onecore_ci"] == "no interval without those runs"


def test_one_engine_pinned_to_one_core_gets_its_change_the_other_says_why(committed):
    ch = part_of(committed, lambda df: (df["concurrency"] == 16) & (df["thp"] == "asis")
                 & (df["smt"] == "asis") & ((df["affinity"] == "unpinned")
                                            | ((df["affinity"] == "one_core")
                                               & (df["engine"] == "psync"))))
    page.affinity(ch)
    assert not isinstance(ch.figures["fig_affinity"], Sentence)  # two settings: the figure
    assert ch.text["aff_psync_onecore_pct"] == SNAPSHOT["aff_psync_onecore_pct"].strip("'")
    assert ch.text["aff_io_uring_onecore_pct"] == (
        "an amount not measured here (no run of io_uring with affinity one_core is stored)")


def test_a_thp_grid_without_runs_says_so_in_place_of_its_figure(committed):
    ch = part_of(committed, at_base_point)
    page.thp(ch)
    assert ch.figures["fig_thp"] == (
        "No THP comparison is stored for kvm-2vcpu: no run of the thp grid is stored, and a "
        "comparison needs both always and never; iolab run smt_thp --env kvm-2vcpu makes its "
        "runs still to do.")
    assert ch.text["thp_psync_pct"] == (
        "an amount not measured here (no run with thp always or never is stored)")
    assert ch.text["thp_io_uring_verdict"] == "no verdict without an interval"
    assert ch.text["thp_readback"] == "none, as no THP run is stored"
    assert ch.text["thp_sys_psync"] == "an unmeasured"
    assert ch.text["thp_ratio"] == "an unmeasured number of"


def test_a_grid_the_params_file_does_not_plan_is_named_with_what_fills_it():
    from types import SimpleNamespace

    ch = SimpleNamespace(environment="xeon", spec=SimpleNamespace(grids={"layout": {}}))
    assert page._to_fill(ch, "thp") == ("its params file plans no thp grid: with one added, "
                                        "iolab run smt_thp --env xeon measures it")
    assert page._no_sweep(ch, []) == (
        "No concurrency sweep is stored for xeon: no run of it is, and a sweep needs two "
        "concurrencies at least; its params file plans no concurrency grid: with one added, "
        "iolab run smt_thp --env xeon measures it.")


def test_a_sentence_in_place_of_a_figure_is_glued_as_escaped_markdown():
    said = Sentence("a_b: run iolab run smt_thp --env a_b.", ("iolab run smt_thp --env a_b",))
    # the command as code (no '--' made a dash), the rest escaped
    assert said._repr_markdown_() == r"a\_b\: run `iolab run smt_thp --env a_b`\."
    assert repr(said) == "'a_b: run iolab run smt_thp --env a_b.'"
    assert Sentence("*x*")._repr_markdown_() == r"\*x\*"
