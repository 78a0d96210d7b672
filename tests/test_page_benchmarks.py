"""The page of the harness's own cost (iolab.report.benchmarks_page): on the committed result
files it glues the snapshot's values; with no result, or results without targets, it says
so instead of drawing empty axes; every missed target is explained with its own numbers."""

from __future__ import annotations

import copy
import io
import json
import re

import pytest

from iolab.errors import InputError
from iolab.paths import REPO_ROOT
from iolab.report import benchmarks_page as bench
from iolab.report.chapter import Sentence, referenced_keys

SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())[
    "benchmarks.ipynb"]
NOTEBOOK = REPO_ROOT / "notebooks" / "benchmarks.ipynb"


@pytest.fixture
def doc() -> dict:
    """The committed result of the development machine class."""
    return copy.deepcopy(bench.load()[bench.PRIMARY])


def missed_everything(doc: dict) -> dict:
    """``doc`` with every key that has a target marked missed."""
    for r in doc["results"].values():
        if r["met"] is not None:
            r["met"] = False
    return doc


def test_the_committed_results_glue_the_snapshots_values():
    # the snapshot holds what the notebook glues: each text's repr
    glued = {k: repr(v) for k, v in bench.texts(bench.load()).items()}
    assert glued == SNAPSHOT
    text_keys, _ = referenced_keys(NOTEBOOK)
    assert set(text_keys) <= set(glued)


def test_the_table_says_each_keys_value_and_target_in_words(doc):
    table = bench.table(doc)
    assert list(table.columns) == ["key", "what it measures", "measured", "target", "met"]
    row = table.set_index("key").loc["campaign_fixed_s"]
    assert (row["measured"], row["target"], row["met"]) == ("0.227 s", "≤ 0.2 s", "no")
    fidelity = table.set_index("key").loc["fidelity_ratio"]
    assert (fidelity["measured"], fidelity["target"]) == ("1.037", "≥ 0.99")
    assert not table.isin(["None", "nan"]).any().any()


def test_no_result_committed():
    texts = bench.texts({})
    assert (texts["bench_class"], texts["bench_measured_at"], texts["bench_missed"]) == (
        "none", "never", "0")
    assert texts["bench_import_s"] == "not measured"
    # a sentence in the figure's place, never an image of words
    assert bench.targets_figure({}) == "No result with a target is committed yet: run make bench."
    assert bench.missed({}) == []


def test_a_result_without_targets_has_no_panel(doc):
    bare = copy.deepcopy(doc)
    for r in bare["results"].values():
        r["target"] = None
    assert isinstance(bench.targets_figure({"bare": bare}), Sentence)
    fig = bench.targets_figure({"bare": bare, "kvm-2vcpu": doc})
    assert [ax.get_title() for ax in fig.axes] == ["kvm-2vcpu: green met, red missed"]


def test_a_missing_key_is_not_measured(doc):
    del doc["results"]["import_s"]
    assert bench.texts({"x": doc})["bench_import_s"] == "not measured"


def test_every_missed_target_is_explained(doc):
    paragraphs = bench.missed({"x": missed_everything(doc)})
    assert len(paragraphs) == sum(r["met"] is not None for r in doc["results"].values())
    by_key = {p.split("`")[1]: p for p in paragraphs}
    for key in ("fidelity_ratio", "overhead_per_run_s", "campaign_fixed_s", "ingest_cold_s",
                "ingest_warm_s", "import_s"):
        assert "No explanation is recorded" not in by_key[key], key
    assert "No explanation is recorded" in by_key["plan_s"]
    # within 50 ms but not below bench-fio's overhead: the gap is to bench-fio
    doc["results"]["overhead_per_run_s"]["value"] = 0.02
    assert "within the target, but 0.007 s above bench-fio's 0.013 s" in \
        bench.missed({"x": doc})[1]
    assert bench.missed({"x": copy.deepcopy(bench.load()[bench.PRIMARY])})[0].startswith(
        "**x, `campaign_fixed_s`**: measured 0.227 s, target ≤ 0.2 s (a gap of 0.027 s).")


def test_startup_times_not_recorded(doc):
    doc["details"].pop("startup", None)
    text = bench.why("campaign_fixed_s", doc)
    assert "starting Python takes an unrecorded time" in text and "nan" not in text


def test_a_recorded_class_key_or_method_is_shown_as_text(doc):
    """A machine class (a result file's name), a key and the fidelity's method come from a
    result file: the page's Markdown shows them as the characters they are."""
    from test_escape import _myst_html, payload

    klass, key, method = payload("m1"), payload("m2"), payload("m3")
    doc["details"]["fidelity"]["method"] = method
    doc["results"] = {key: {**doc["results"]["campaign_fixed_s"], "met": False},
                      "fidelity_ratio": {**doc["results"]["fidelity_ratio"], "met": False}}
    shown = [bench.heading(klass), *bench.missed({klass: doc})]
    assert len(shown) == 3
    for markdown in shown:
        body = _myst_html(markdown)
        assert not body.find_all(["script", "img", "sub", "a"]), body
    text = " ".join(_myst_html(markdown).get_text() for markdown in shown)
    assert all(text.count(s) for s in (klass, key, method)), text


@pytest.mark.parametrize("klass", ["lab$\\alpha^2$-2cpu", "lab$\\nosuchcmd$-2cpu"])
def test_a_recorded_class_or_key_is_drawn_as_its_characters(doc, klass):
    """A machine class is made from a hostname: matplotlib read its ``$...$`` as math (α² for
    the first; the second stopped the page being built with 'Unknown symbol')."""
    import matplotlib

    matplotlib.use("Agg")
    key = "key$\\nosuchcmd$"
    doc["results"][key] = doc["results"].pop("fidelity_ratio")
    fig = bench.targets_figure({klass: doc})
    fig.savefig(io.BytesIO(), format="png")  # math is parsed when a text is drawn
    ax = fig.axes[0]
    assert ax.get_title() == f"{klass}: green met, red missed"
    assert key in [t.get_text() for t in ax.get_yticklabels()]
    texts = [t for t in fig.findobj(matplotlib.text.Text) if "$" in t.get_text()]
    assert texts and not any(t.get_parse_math() for t in texts)


def test_every_module_that_draws_sets_plain_text_first():
    """:func:`iolab.report.figures.plain_text` is set when that module is imported: every
    module that draws imports it (or the chapter module, which does) before it draws."""
    from iolab.paths import REPO_ROOT as root

    drawing = [p for p in sorted((root / "iolab").rglob("*.py"))
               if "matplotlib.pyplot" in p.read_text() and p.name != "figures.py"
               or p.name == "figures.py" and p.parent.name != "report"]
    assert len(drawing) >= 10, drawing
    imports = re.compile(r"^from iolab\.report(?:\.figures| import .*\bfigures\b|\.chapter import)",
                         re.MULTILINE)
    assert [str(p.relative_to(root)) for p in drawing if not imports.search(p.read_text())] == []


def _result_file(tmp_path, doc: dict, name: str = "kvm-2vcpu"):
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(doc))
    return results / f"{name}.json"


def test_a_committed_result_reads_back_as_it_is(tmp_path, doc):
    path = _result_file(tmp_path, doc)
    assert bench.load(path.parent) == {"kvm-2vcpu": doc}


@pytest.mark.parametrize("change, key, allowed", [
    # recorded strings where the explanations put numbers into Markdown: raw HTML there
    (lambda d: d["details"]["fidelity"].update(pairs="<img src=x onerror=alert(1)>"),
     "details.fidelity.pairs", "a whole number, 0 or more"),
    (lambda d: d["details"]["ingest"].update(workers="<script>alert(2)</script>"),
     "details.ingest.workers", "a whole number, 0 or more"),
    # a target that is not a number ended the page with a TypeError
    (lambda d: d["results"]["campaign_fixed_s"].update(target="0.2"),
     "results.campaign_fixed_s.target", "a finite number, or null (no target)"),
    (lambda d: d["results"]["campaign_fixed_s"].update(value=[1]),
     "results.campaign_fixed_s.value", "a finite number, or null (not measured)"),
    (lambda d: d["results"]["campaign_fixed_s"].update(target_is="most"),
     "results.campaign_fixed_s.target_is", "min, max or null"),
    (lambda d: d["results"]["campaign_fixed_s"].update(met="no"),
     "results.campaign_fixed_s.met", "true, false or null"),
    (lambda d: d["results"]["campaign_fixed_s"].update(value=None),
     "results.campaign_fixed_s.met", "null"),
    (lambda d: d["results"].update(plan_s="fast"), "results.plan_s", "a mapping"),
    (lambda d: d.update(measured_at=20261124), "measured_at", "the time measured"),
    (lambda d: d["details"]["fidelity"].update(bare_iops=[0, 0]),
     "details.fidelity.bare_iops", "a list of positive numbers"),
    (lambda d: d["details"]["sweeps"]["seconds"].pop("bare"),
     "details.sweeps.seconds", "a mapping of bare, iolab"),
    (lambda d: d["details"]["startup"].update(python_s="29 ms"),
     "details.startup.python_s", "a finite number"),
    (lambda d: (d["details"].pop("fidelity"), d["results"]["fidelity_ratio"].update(met=False)),
     "details.fidelity", "what benchmarks/run.py records"),
])
def test_a_result_field_of_another_kind_is_named_in_one_line(tmp_path, doc, capsys, change,
                                                             key, allowed):
    """Fields of a result file went into the page's Markdown as they were: a string where
    the fidelity's pairs or the ingest's workers are became raw HTML on the page."""
    change(doc)
    path = _result_file(tmp_path, doc)
    with pytest.raises(InputError) as caught:
        bench.load(path.parent)
    message = str(caught.value)
    assert message.startswith(f"{path}: key '{key}': ") and f"(allowed: {allowed}" in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["[1, 2]", '{"results": {}, "results": {}}', "{", "\xff"])
def test_a_result_file_that_is_not_a_result_object_is_named(tmp_path, text):
    results = tmp_path / "results"
    results.mkdir()
    path = results / "x.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}: ") as caught:
        bench.load(results)
    assert "\n" not in str(caught.value)


def test_a_result_file_that_is_a_link_is_refused_never_followed(tmp_path, doc):
    from iolab.safefiles import NotOurs

    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(doc))
    results = tmp_path / "results"
    results.mkdir()
    (results / "x.json").symlink_to(secret)
    with pytest.raises(NotOurs, match="symbolic link"):
        bench.load(results)


def test_every_recorded_string_of_a_missed_target_is_shown_as_text(tmp_path, doc):
    """What a result file holds reaches the page's Markdown only as a checked number or an
    escaped string: with markup in every text field of a file whose targets are all missed,
    no paragraph renders an element from the file."""
    from test_escape import _myst_html

    def marked(value, key=None):
        if isinstance(value, dict):
            return {k: marked(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [marked(v) for v in value]
        return "<img src=x onerror=alert(1)>" if isinstance(value, str) and \
            key != "target_is" else value

    path = _result_file(tmp_path, marked(missed_everything(doc)), name="lab")
    shown = bench.missed({"<script>alert(3)</script>": bench.load(path.parent)["lab"]})
    assert len(shown) == sum(r["met"] is not None for r in doc["results"].values())
    for markdown in shown:
        body = _myst_html(markdown)
        assert not body.find_all(["script", "img"]), body


def test_the_targets_figure_labels_its_log_axis_in_plain_numbers():
    """matplotlib labels a log axis in math (``$\\mathdefault{10^{-1}}$``), which the book's
    figures print as its characters: the axis is labelled 0.1, 0.2, 0.5, 1 instead."""
    import matplotlib

    matplotlib.use("Agg")
    fig = bench.targets_figure(bench.load())
    fig.canvas.draw()
    labels = [t.get_text() for ax in fig.axes
              for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True) if t.get_text()]
    assert labels and not [x for x in labels if "$" in x or "mathdefault" in x], labels
