"""The runs behind a page as downloads (``iolab.report.runs_data``) and the build's links to
them (``book/_ext/static_links.py``); the built book's links are checked in test_book.py."""

from __future__ import annotations

import csv
import importlib.util
import io
import os

import pandas as pd
import pytest

from iolab.errors import IolabError
from iolab.paths import REPO_ROOT
from iolab.report import runs_data, table_latex

spec = importlib.util.spec_from_file_location("static_links",
                                              REPO_ROOT / "book/_ext/static_links.py")
static_links = importlib.util.module_from_spec(spec)
spec.loader.exec_module(static_links)


def runs() -> pd.DataFrame:
    return pd.DataFrame({
        "engine": ["psync", "io_uring"], "concurrency": [1, 16],
        "run.host": ["=HYPERLINK(\"http://x\")", "lab"],  # a host name made to be a formula
        "run.cpus": [[0, 1], None],                        # a column of Python objects
        "iops": [1234.5, float("nan")]})


def test_the_runs_are_written_as_csv_and_parquet_that_read_back(tmp_path):
    shown = runs_data.offer(runs(), "smt_thp", "kvm-2vcpu", folder=tmp_path)
    assert (shown.csv, shown.parquet) == ("smt_thp-kvm-2vcpu-runs.csv",
                                          "smt_thp-kvm-2vcpu-runs.parquet")
    assert (shown.rows, shown.columns) == (2, 5)
    lines = list(csv.reader(io.StringIO((tmp_path / shown.csv).read_text())))
    assert lines[0] == list(runs().columns) and len(lines) == 3
    assert lines[1][2].startswith("'="), "a formula opens as text in a spreadsheet"
    back = pd.read_parquet(tmp_path / shown.parquet)
    assert list(back.columns) == list(runs().columns) and len(back) == 2
    assert back["run.cpus"].iloc[0] == "[0, 1]" and pd.isna(back["run.cpus"].iloc[1])
    assert back["iops"].iloc[0] == 1234.5 and pd.isna(back["iops"].iloc[1])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary left"


def test_a_page_without_runs_writes_and_shows_nothing(tmp_path):
    assert runs_data.offer(runs().iloc[:0], "smt_thp", "kvm-2vcpu", folder=tmp_path) is None
    assert not list(tmp_path.iterdir())


def test_a_link_in_place_of_the_folder_is_never_followed(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "book").mkdir()
    os.symlink(elsewhere, tmp_path / "book" / "runs")
    with pytest.raises(IolabError, match="symbolic link"):
        runs_data.offer(runs(), "smt_thp", "kvm-2vcpu", folder=tmp_path / "book" / "runs")
    assert not list(elsewhere.iterdir())


def test_a_hostile_environment_name_names_no_path():
    assert runs_data.stem("smt_thp", "../../x y<z>") == "smt_thp-.._.._x_y_z_-runs"
    assert "/" not in runs_data.stem("a", "/etc/passwd")
    assert not runs_data.stem("..", "x").startswith(".")


def test_the_line_links_both_files_and_the_pdf_names_them(tmp_path):
    shown = runs_data.offer(runs(), "smt_thp", "kvm-2vcpu", folder=tmp_path)
    html = shown._repr_html_()
    assert html.count('href="iolab-static:runs/smt_thp-kvm-2vcpu-runs.') == 2
    assert "The 2 runs" in html and "all 5 columns" in html
    latex = shown._repr_latex_()
    assert latex.startswith(table_latex.MARK) and r"\texttt{smt\_\allowbreak{}thp-kvm-2vcpu-runs.csv}" in latex


def test_a_link_becomes_the_path_from_its_page(tmp_path):
    static = tmp_path / "_static"
    (static / "runs").mkdir(parents=True)
    (static / "runs" / "x.csv").write_text("a\n")
    text = '<a href="iolab-static:runs/x.csv">CSV</a>'
    assert static_links.resolve(text, "experiments/smt_thp.html", static) == \
        ('<a href="../_static/runs/x.csv">CSV</a>', [])
    assert static_links.resolve(text, "experiments/smt_thp/env.html", static)[0] == \
        '<a href="../../_static/runs/x.csv">CSV</a>'


def test_a_link_to_a_missing_file_or_outside_the_static_folder_is_reported(tmp_path):
    static = tmp_path / "_static"
    static.mkdir()
    (tmp_path / "secret").write_text("x")
    text = 'href="iolab-static:runs/gone.csv" href="iolab-static:../secret"'
    _, missing = static_links.resolve(text, "index.html", static)
    assert missing == ["runs/gone.csv", "../secret"]
