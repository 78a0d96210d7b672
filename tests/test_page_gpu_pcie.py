"""The GPU PCIe chapter's page functions (iolab.experiments.gpu_pcie.page), called as the
notebook calls them: on the runs committed from an NVIDIA H200 they glue the snapshot's
values, and on no runs or a campaign stopped part way they glue no 'nan' and draw no figure
with nothing measured in it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from matplotlib.figure import Figure

from iolab.core import registry
from iolab.experiments.gpu_pcie import page
from iolab.paths import REPO_ROOT, default_data_dir
from iolab.report.chapter import Chapter, Sentence, referenced_keys

ENV = "h200-pcie5"
SNAPSHOT = json.loads((REPO_ROOT / "tests" / "fixtures" / "glued_values.json").read_text())[
    "experiments/gpu_pcie.ipynb"]
TEXT_KEYS, FIGURE_KEYS = referenced_keys(registry.get("gpu_pcie").notebook)


def render(ch: Chapter) -> dict:
    """Every section of the page, in the notebook's order; what each displays."""
    link = page.intro(ch)
    shown = {"design": page.design(ch)}
    page.copy_engine(ch, link)
    page.requests(ch, link)
    shown["residuals"] = page.residuals(ch, link)
    shown["link_use"] = page.link_use(ch, link)
    page.overhead(ch, link)
    shown["counters"] = page.counter_table(ch, link)
    page.answer(ch, link)
    shown["claims"] = page.claims(ch, link)
    shown["across"] = page.across(ch)
    return shown


def is_placeholder(fig: Figure | Sentence) -> bool:
    """A figure not drawn is a sentence in its place, never an image of words."""
    return isinstance(fig, Sentence)


def no_nan(ch: Chapter) -> None:
    nans = {k: v for k, v in ch.text.items() if re.search(r"\bnan\b", v, re.IGNORECASE)}
    assert not nans, nans


def partial(tmp_path: Path, keep) -> Path:
    """A data folder with the committed campaign's runs that ``keep(point)`` accepts."""
    src = default_data_dir() / "raw" / "gpu_pcie" / ENV
    dst = tmp_path / "raw" / "gpu_pcie" / ENV
    (dst / "runs").mkdir(parents=True)
    for path in src.iterdir():
        if path.is_file():
            shutil.copy2(path, dst / path.name)
    for run in sorted((src / "runs").iterdir()):
        if keep(json.loads((run / "run.json").read_text())["point"]):
            shutil.copytree(run, dst / "runs" / run.name)
    shutil.copytree(REPO_ROOT / "data" / "reference", tmp_path / "reference")
    return tmp_path


def test_the_committed_runs_glue_the_snapshots_values():
    ch = Chapter("gpu_pcie", ENV)
    shown = render(ch)
    # the snapshot holds what the notebook glues: each text's repr
    assert set(TEXT_KEYS) == set(SNAPSHOT)
    assert {k: repr(ch.text.get(k)) for k in TEXT_KEYS} == {k: SNAPSHOT[k] for k in TEXT_KEYS}
    # and the forest plot of the findings across environments, which a code cell shows
    assert set(FIGURE_KEYS) | {"fig_forest"} == set(ch.figures)
    assert len(ch.figures["fig_gpu_copy"].axes) == 1
    assert [ax.get_title() for ax in ch.figures["fig_gpu_requests"].axes] == [
        "GPU-initiated reads", "GPU-initiated writes"]
    table = shown["link_use"].data
    assert list(table["transfer"]) == ["copy, host to device", "copy, device to host",
                                       "GPU-initiated reads", "GPU-initiated writes"]
    assert shown["residuals"].data.shape == (16, 7)
    assert len(shown["claims"].data) == 3


def test_without_runs_every_section_says_so(tmp_path):
    shutil.copytree(REPO_ROOT / "data" / "reference", tmp_path / "reference")
    ch = Chapter("gpu_pcie", ENV, data_dir=tmp_path)
    shown = render(ch)
    no_nan(ch)
    assert all(is_placeholder(f) for f in ch.figures.values())
    assert shown["residuals"] is None and shown["link_use"] is None
    assert ch.text["ceiling_text"].startswith("not measured yet: no run is stored")
    assert ch.text["resident"] == "n/a"
    assert "not testable here" in " ".join(shown["claims"].data["verdict"])
    assert "None of the source's 3 claims can be tested" in ch.text["claims"]
    assert ch.text["aisio_ratio"].endswith("at 4 KiB (a 95th percentile over a mean, published)")


def test_a_campaign_stopped_after_some_copies_and_reads(tmp_path):
    data = partial(tmp_path, lambda p: (p["mode"] == "copy" and p["direction"] == "h2d")
                   or (p["mode"] == "read" and p["iosize"] == 4096))
    ch = Chapter("gpu_pcie", ENV, data_dir=data)
    shown = render(ch)
    no_nan(ch)
    assert not is_placeholder(ch.figures["fig_gpu_copy"])
    # no write is stored: one panel, not an empty one beside it
    assert [ax.get_title() for ax in ch.figures["fig_gpu_requests"].axes] == [
        "GPU-initiated reads"]
    assert list(shown["link_use"].data["transfer"]) == ["copy, host to device",
                                                        "GPU-initiated reads"]
    assert ch.text["ceiling_text"].startswith("55.3 GB/s into the GPU by the copy engine")


def test_a_campaign_of_writes_only_has_no_ceiling_into_the_gpu(tmp_path):
    data = partial(tmp_path, lambda p: p["mode"] == "write" and p["inflight"] == 32)
    ch = Chapter("gpu_pcie", ENV, data_dir=data)
    shown = render(ch)
    no_nan(ch)
    assert is_placeholder(ch.figures["fig_gpu_copy"])
    assert ch.text["ceiling_text"].startswith("not measured yet: none of the runs stored")
    assert ch.text["overhead_text"].startswith(
        "No run of environment h200-pcie5-long held a measurement window of 20 or more")
    assert len(shown["claims"].data) == 3



def test_the_long_window_runs_judge_the_overhead_against_the_framing_model():
    ch = Chapter("gpu_pcie", ENV)
    shown = render(ch)
    table = shown["counters"].data
    assert list(table["TLP payload (model)"].unique()) == ["256 B", "128 B"]
    assert set(table["n"]) == {3}
    assert "every measured ratio lies within 0.46 % of it" in ch.text["overhead_text"]
    assert "implies TLPs of 128 B and 256 B" in ch.text["overhead_text"]
    assert "not the 28 % AiSIO reported" in ch.text["answer_text"]
    claims = shown["claims"].data.set_index("the source says")
    overhead = claims.loc[next(c for c in claims.index if "28 %" in c)]
    assert overhead["verdict"].startswith("contradicted")
