"""The book: replay every notebook from data/ and build strictly (-W -n --keep-going).

This is what `make book` does, with the HTML written to a temporary folder (the session
fixture ``html`` of tests/conftest.py, shared with tests/test_browser.py). Any broken
reference, missing glue key, citation or image fails it. The glued values are compared with
tests/fixtures/glued_values.json: a change of code or data that changes a number the book
quotes fails here until the snapshot is renewed on purpose (`iolab book --glue-snapshot FILE`).
A page the snapshot does not name (a new experiment's chapter) is reported, not failed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from iolab.core import registry
from iolab.paths import default_data_dir
from iolab.report.book import glued_in
from test_glue_snapshot import compare_glue

pytestmark = pytest.mark.slow
SNAPSHOT = Path(__file__).parent / "fixtures" / "glued_values.json"


def test_glued_values_are_unchanged(book_copy):
    """Fails when a value of a page the snapshot names changes; a page it does not name (a
    new experiment's chapter) is reported as a warning, not failed (``compare_glue``)."""
    book = book_copy / "book"
    now = {str(p.relative_to(book)): glued_in(p) for p in sorted(book.rglob("*.ipynb"))}
    differ, uncovered = compare_glue(json.loads(SNAPSHOT.read_text()), now)
    if uncovered:
        warnings.warn("pages tests/fixtures/glued_values.json does not cover yet (renew it "
                      "with `iolab book --glue-snapshot tests/fixtures/glued_values.json` to "
                      "take them in): " + ", ".join(uncovered))
    assert not differ, (
        "glued values differ from tests/fixtures/glued_values.json (renew it with "
        "`iolab book --glue-snapshot tests/fixtures/glued_values.json` if intended):\n"
        + "\n".join(differ))


@pytest.mark.parametrize("exp", registry.all_experiments(), ids=lambda e: e.name)
def test_every_chapter_is_built_with_its_numbers_and_figures(html, exp):
    from iolab.report.chapter import referenced_keys

    page = (html / f"{exp.chapter}.html").read_text()
    # every value the prose glues is pasted (a key quoted twice counts once here)
    text_keys, _ = referenced_keys(exp.notebook)
    assert page.count('class="pasted-text"') >= max(len(text_keys), 10)
    assert '<span class="pasted-text">n/a</span>' not in page, "a glued number is missing"
    assert "No measurement is stored" not in page, "a figure is not drawn"
    assert page.count("<img") >= 1
    assert "tag_parameters" not in page and "tag_injected-parameters" not in page, \
        "the papermill parameters cells are not shown to readers"


def test_published_values_stand_beside_the_measurements(html):
    cpu = (html / f"{registry.get('cpu_search').chapter}.html").read_text()
    assert "61,720,159" in cpu, "AiSIO's published A value is shown beside the measurements"


def test_every_label_page_exists(html):
    for label_page in ("framework.html", "environments/index.html", "environments/inventory.html",
                       "experiments/pcie_saturation.html", "experiments/cuda_iosize.html",
                       "experiments/cuda_qdepth.html", "experiments/irq_affinity.html",
                       "architecture.html"):
        assert (html / label_page).exists(), label_page


def test_a_book_without_its_replayed_pages_is_refused(tmp_path):
    """A fresh clone's `jupyter-book build book/` stops with the command to run (the
    extension book/_ext/replayed_pages.py), and builds once every replayed page is there."""
    import importlib.util
    from types import SimpleNamespace

    from sphinx.errors import ExtensionError

    from iolab.paths import BOOK_DIR
    from iolab.report.book import rendered

    path = BOOK_DIR / "_ext" / "replayed_pages.py"
    spec = importlib.util.spec_from_file_location("replayed_pages", path)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    app = SimpleNamespace(srcdir=str(tmp_path))
    pages = [tmp_path / p.relative_to(BOOK_DIR) for p in rendered().values()]
    with pytest.raises(ExtensionError, match=rf"{len(pages)} of the book's {len(pages)} "
                                             r"replayed pages are missing .*`make book`"):
        ext.check_replayed_pages(app, None)
    for page in pages:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("{}")
    ext.check_replayed_pages(app, None)
    pages[0].unlink()
    with pytest.raises(ExtensionError, match=rf"^1 of the book's {len(pages)} replayed pages"):
        ext.check_replayed_pages(app, None)


@pytest.mark.parametrize("exp", registry.all_experiments(), ids=lambda e: e.name)
def test_every_chapter_ends_with_its_answer_and_the_claims_confronted(html, exp):
    """The closing section and the claims table (iolab.report.claims), computed, not typed:
    every row carries one of the verdicts."""
    import re
    import sys

    from iolab.report import claims

    page = (html / f"{exp.chapter}.html").read_text()
    headings = re.findall(r"<h[23][^>]*>(.*?)</h[23]>", page, re.S)
    words = [re.sub(r"<.*?>", "", h).strip() for h in headings]
    answer = [i for i, w in enumerate(words) if w.rstrip("#").strip() in ("The answer", "Answer")]
    assert answer, f"{exp.name}: no closing answer section"
    assert any(re.search(r"claims\b.*confronted", w) for w in words[answer[0]:]), \
        f"{exp.name}: no claims table after the answer"
    module = sys.modules[type(exp).__module__].__file__
    n = len(claims.load(claims.path_of(module)).claims)
    verdicts = sum(page.count(f"{v}: ") for v in claims.VERDICTS)
    assert verdicts >= n, f"{exp.name}: {verdicts} verdicts shown for {n} claims"


# a Python value printed as such: a list, dict or tuple repr, a bare boolean, None or nan
PYTHON_REPR = r"^\[.*\]$|^\{.*\}$|^\(.*,.*\)$|\bTrue\b|\bFalse\b|^(None|nan|NaN)$|\['|\{'"


def test_the_book_reads_as_a_book_not_a_log(html):
    """No page shows a path of the machine that built it (the checkout, a temporary folder),
    a program reported missing on that machine, or a Python repr or a bare "n/a" in a table
    cell."""
    import html as htmlmod
    import re

    from iolab.paths import REPO_ROOT

    found = []
    for page in sorted(html.rglob("*.html")):
        if "_static" in page.parts or page.name in ("genindex.html", "search.html"):
            continue
        text = page.read_text()
        name = page.relative_to(html)
        for marker in (str(REPO_ROOT), str(html.parent.parent)):
            if marker in text:
                found.append(f"{name}: the path {marker}")
        if re.search(r"(?<!/var)/tmp/", re.sub(r"<[^>]+>", "", text)):
            found.append(f"{name}: a path under /tmp")
        if "MISSING:" in text:
            found.append(f"{name}: a program reported missing on the building machine")
        for table in re.findall(r"<table.*?</table>", text, re.S):
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", table, re.S):
                value = htmlmod.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
                if re.search(PYTHON_REPR, value):
                    found.append(f"{name}: a Python repr in a table cell: {value[:80]!r}")
                if value == "n/a":
                    found.append(f"{name}: a table cell reads 'n/a' (say what is missing)")
    assert not found, "\n".join(found)


def test_braces_in_a_notebook_s_paths_are_part_of_the_name(tmp_path):
    """papermill formats both paths with the notebook's parameters: '{name}' in a folder name
    was taken for a missing parameter (exit 70); the paths are literal."""
    import nbformat

    from iolab.report.book import execute

    src = tmp_path / "{environment}" / "in.ipynb"
    dst = tmp_path / "{name}" / "out {x}.ipynb"
    src.parent.mkdir()
    dst.parent.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("mode = 'x'", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("print(mode)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, src)
    execute(src, dst, {"mode": "replay"})
    out = nbformat.read(dst, as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "replay\n"


def test_one_quantity_has_one_value_on_each_page(html):
    """A glued quantity's label (tests/book_labels.py) never carries two values on one page:
    the CPU chapter once called three different numbers its "device capacity"."""
    from book_labels import contradictions

    found = [f"{page.relative_to(html)}: {said}" for page in sorted(html.rglob("*.html"))
             if "_static" not in page.parts for said in contradictions(page.read_text())]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("exp", registry.all_experiments(), ids=lambda e: e.name)
def test_the_experiments_index_counts_the_stored_runs(html, exp):
    """The index's "stored" column is what the data folder the book was replayed from holds:
    its run folders counted here on disk, per environment, and named as the index names them."""
    import re

    from iolab.core.store import Store

    index = (html / "experiments" / "index.html").read_text()
    chapter = Path(exp.chapter).name
    rows = [r for r in re.findall(r"<tr.*?</tr>", index, re.S) if f'href="{chapter}.html#' in r]
    assert len(rows) == 1, f"{exp.name}: {len(rows)} rows of the experiments index link its chapter"
    stored = re.sub(r"<[^>]+>", "", re.findall(r"<td>(.*?)</td>", rows[0], re.S)[-1]).strip()
    data = default_data_dir()
    counts = {env.name: n for env in sorted((data / "raw" / exp.name).glob("*"))
              if (n := sum(p.is_dir() for p in Store(data, exp.name, env.name)
                           .root.joinpath("runs").glob("*")))}
    if not counts:
        assert stored == "no runs stored"
        return
    total = f"{sum(counts.values()):,} runs in "
    assert stored.startswith(total), f"{exp.name}: the index says {stored!r}, data/raw {counts}"
    for env, n in counts.items():
        assert env in stored and (len(counts) == 1 or f"{env} ({n:,})" in stored), \
            f"{exp.name}: the index says {stored!r}, data/raw {counts}"


def test_every_table_downloads_as_the_table_it_shows(html):
    """Every styled table's caption links to its data as CSV (iolab.report.table_data), and
    the file holds that table: its header row is the table's column labels and it has as
    many rows as the table."""
    import csv
    import io
    import urllib.parse

    from bs4 import BeautifulSoup

    prefix = "data:text/csv;charset=utf-8,"
    found, checked = [], 0
    for page in sorted(html.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(), "html.parser")
        for table in soup.select("div.cell_output table"):
            if not table.get("id", "").startswith("T_"):  # a plain DataFrame, not styled
                continue
            link = table.select_one("caption a.table-data")
            where = f"{page.relative_to(html)}: table {table['id']}"
            if link is None or not link["href"].startswith(prefix):
                found.append(f"{where}: no link to its data")
                continue
            lines = list(csv.reader(io.StringIO(urllib.parse.unquote(
                link["href"][len(prefix):]))))
            # the labels a reader sees (the columns', an index's name), blanks left out; a
            # label of several levels is one CSV cell, "level / level", whose last level is
            # the table's lowest header row
            levels = len(table.select("thead tr"))
            header = [th.get_text() for th in table.select("thead th")
                      if th.get_text().strip()]
            cells = [c.removeprefix("'") for c in lines[0] if c]
            whole = [c for c in cells if c in header]
            joined = [c for c in cells if c not in header and " / " in c]
            labels = whole + [c.split(" / ")[-1] for c in joined]
            upper = {c.split(" / ")[0] for c in joined}
            rows = len(table.select("tbody tr"))
            # the HTML may also show the name of the columns' level, which a CSV has no
            # place for (the CSV's order of the labels, an index's first, is its own)
            # (and a table of several header rows, the names of its levels, one per row)
            if len(labels) != len(cells) or not set(labels) <= set(header) or \
                    len(set(header) - set(labels) - upper) > max(1, levels) \
                    or len(lines) - 1 != rows:
                found.append(f"{where}: CSV {lines[0]} x {len(lines) - 1} against "
                             f"{header} x {rows}")
            checked += 1
    assert checked >= 50, f"only {checked} styled tables found"
    assert not found, "\n".join(found)


def test_every_table_of_a_markdown_page_downloads_as_its_cells(html):
    """A table written in a page's Markdown (book/_ext/table_csv.py) is followed by a link
    to its cells as CSV: the header row the page shows, and as many rows."""
    import csv
    import io
    import urllib.parse

    from bs4 import BeautifulSoup

    prefix = "data:text/csv;charset=utf-8,"
    found, checked = [], 0
    for page in sorted(html.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(), "html.parser")
        for at, table in enumerate(soup.select("article table")):
            if table.find_parent("div", class_="cell_output"):
                continue
            where = f"{page.relative_to(html)}: table {at}"
            # the theme wraps a table in a scrolling container; the link follows that
            holder = table.parent if "pst-scrollable-table-container" in \
                table.parent.get("class", []) else table
            line = holder.find_next_sibling()
            link = line.select_one("a.table-data") if line is not None else None
            if link is None or not link["href"].startswith(prefix):
                found.append(f"{where}: no link to its cells")
                continue
            lines = list(csv.reader(io.StringIO(urllib.parse.unquote(link["href"][len(prefix):]))))
            header = [" ".join(th.get_text().split()) for th in table.select("thead th")]
            if [c.removeprefix("'") for c in lines[0]] != header or \
                    len(lines) - 1 != len(table.select("tbody tr")):
                found.append(f"{where}: CSV {lines[0]} x {len(lines) - 1} against {header}")
            checked += 1
    assert checked >= 15, f"only {checked} Markdown tables found"
    assert not found, "\n".join(found)


def test_every_download_link_leads_to_its_file_and_every_page_with_runs_has_them(html):
    """A link that downloads a file of the build (the runs behind a page as CSV and Parquet,
    iolab.report.runs_data, made relative by book/_ext/static_links.py) leads, from its page,
    to that file; the CSV and the Parquet file hold as many runs as the line says; and every
    experiment whose chapter shows stored runs links them."""
    import csv
    import re

    import pandas as pd
    from bs4 import BeautifulSoup

    found, linked = [], set()
    for page in sorted(html.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(), "html.parser")
        where = page.relative_to(html)
        for link in soup.select("a[download]"):
            href = link["href"]
            if href.startswith("data:"):  # a table's own CSV: the test above reads it
                continue
            target = (page.parent / href).resolve()
            if not target.is_relative_to(html.resolve()) or not target.is_file():
                found.append(f"{where}: {href} is no file of the build")
                continue
            said = re.search(r"The ([\d,]+) runs", link.parent.get_text())
            rows = (len(list(csv.reader(target.open()))) - 1 if target.suffix == ".csv"
                    else len(pd.read_parquet(target)))
            if said is None or int(said[1].replace(",", "")) != rows:
                found.append(f"{where}: {href} holds {rows} rows; the line says "
                             f"{link.parent.get_text()!r}")
            linked.add(str(where))
        if "iolab-static:" in page.read_text():
            found.append(f"{where}: a link still names iolab-static:")
    chapters = {f"{exp.chapter}.html" for exp in registry.all_experiments()
                if Path(default_data_dir(), "raw", exp.name).is_dir()}
    assert not found, "\n".join(found)
    assert len(linked) >= 4, linked
    assert chapters - linked <= {f"{exp.chapter}.html" for exp in registry.all_experiments()
                                 if exp.name in ("cuda_iosize", "cuda_qdepth")}, \
        f"chapters with stored runs but no download: {sorted(chapters - linked)}"


def test_no_image_is_described_by_its_file_name(html):
    """Every image of the book says what it shows to a reader who cannot see it: a figure's
    image carries its caption as alt text (book/_ext/figure_alt.py); an alt text that is
    empty, the image's own file name or a hash tells that reader nothing."""
    import re

    nameless = re.compile(r"\s*|[\w./-]*\.(png|svg|jpe?g|gif|webp)|[0-9a-f]{12,}", re.I)
    found = []
    for page in sorted(html.rglob("*.html")):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text()):
            alt = re.search(r'\balt="([^"]*)"', tag)
            src = re.search(r'\bsrc="([^"]*)"', tag)
            text = alt.group(1) if alt else ""
            if nameless.fullmatch(text) or (src and text == src.group(1)):
                found.append(f"{page.relative_to(html)}: {tag[:160]}")
    assert not found, "\n".join(found)


def test_a_figure_not_drawn_says_so_in_its_caption(html):
    """A figure in whose place a chapter set a sentence (iolab.report.chapter.Sentence) keeps
    only its caption's first sentence and says it is not drawn (book/_ext/undrawn_figures.py):
    a caption describing bars and dots under a sentence misleads."""
    import re

    found = []
    for page in sorted(html.rglob("*.html")):
        for figure in re.findall(r"<figure.*?</figure>", page.read_text(), re.S):
            caption = re.sub(r"<[^>]+>", "", "".join(re.findall(r"<figcaption>(.*?)</figcaption>",
                                                                 figure, re.S)))
            if "<img" not in figure and "Not drawn" not in caption:
                found.append(f"{page.relative_to(html)}: {' '.join(caption.split())[:120]}")
    assert not found, "\n".join(found)
