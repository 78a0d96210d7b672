"""iolab/report/table_data.py: every styled table links to its data as CSV, the frame as
given (numbers as numbers, the column labels with their units as the header row); a text
cell a spreadsheet would run as a formula opens as text; the link is one element whose
attributes hold no character of the table."""

from __future__ import annotations

import io
import urllib.parse

import pandas as pd
from bs4 import BeautifulSoup

from iolab.report import escape, table_data


def _downloaded(html: str) -> tuple[str, pd.DataFrame]:
    link = BeautifulSoup(html, "html.parser").find("a", class_="table-data")
    prefix = "data:text/csv;charset=utf-8,"
    assert link["href"].startswith(prefix)
    text = urllib.parse.unquote(link["href"][len(prefix):])
    return link["download"], pd.read_csv(io.StringIO(text))


def test_a_tables_csv_is_the_frame_as_given_not_as_formatted():
    frame = pd.DataFrame({"engine": ["psync", "io_uring"], "mean IOPS": [123456.789, 2e5],
                          "runs (n)": [3, 5]})
    html = escape.table(frame, formats={"mean IOPS": "{:,.0f}"},
                        caption="IOPS per engine at concurrency 16").to_html()
    name, data = _downloaded(html)
    assert name == "iops-per-engine-at-concurrency-16.csv"
    assert list(data.columns) == ["engine", "mean IOPS", "runs (n)"]
    assert data["mean IOPS"].tolist() == [123456.789, 2e5], "numbers unformatted"
    assert data["runs (n)"].tolist() == [3, 5]


def test_a_table_without_caption_is_named_by_its_columns_and_keeps_its_index():
    frame = pd.DataFrame({"ratio": [1.5]}, index=pd.Index(["kvm-2vcpu"], name="environment"))
    name, data = _downloaded(escape.table(frame, index=True).to_html())
    assert name == "ratio.csv"
    assert data.to_dict("list") == {"environment": ["kvm-2vcpu"], "ratio": [1.5]}


def test_a_cell_a_spreadsheet_would_run_opens_as_text():
    hostile = ["=HYPERLINK(\"http://x\")", "+1+2", "-2+3", "@SUM(A1)", "\tx", "plain"]
    frame = pd.DataFrame({"=why": hostile, "delta": [-1.5, 2, 3, 4, 5, 6]})
    text = table_data.csv_text(frame)
    data = pd.read_csv(io.StringIO(text))
    assert list(data.columns) == ["'=why", "delta"]
    assert data["'=why"].tolist() == ["'" + h for h in hostile[:5]] + ["plain"]
    assert data["delta"].tolist() == [-1.5, 2, 3, 4, 5, 6], "a negative number stays a number"


def test_the_link_holds_no_character_of_the_table_outside_its_encoded_data():
    frame = pd.DataFrame({'"><script>x</script>': ["' onmouseover='y"]})
    link = table_data.link(frame, caption='"><b>caption</b>')
    soup = BeautifulSoup(link, "html.parser")
    assert [e.name for e in soup.find_all(True)] == ["a"]
    assert set(soup.a.attrs) == {"class", "download", "title", "href"}
    assert soup.a["download"] == "b-caption-b.csv"
    assert "<" not in soup.a["href"] and '"' not in soup.a["href"] and "'" not in soup.a["href"]


def test_a_text_column_with_no_value_is_written_as_empty_cells():
    # pandas' string dtype refused the floats that mapping an all-missing column gives
    frame = pd.DataFrame({"name": pd.Series([None, None], dtype="str"), "n": [1, 2]})
    assert table_data.csv_text(frame) == "name,n\n,1\n,2\n"


def test_a_column_label_of_several_levels_is_one_header_cell_not_a_tuple():
    frame = pd.DataFrame([[1, 2]], columns=pd.MultiIndex.from_tuples(
        [("smt_thp", "kvm-2vcpu"), ("smt_thp", "xeon")]))
    assert table_data.csv_text(frame).splitlines()[0] == "smt_thp / kvm-2vcpu,smt_thp / xeon"
    assert table_data.file_name(frame) == "smt-thp-kvm-2vcpu-smt-thp.csv"  # six words at most
