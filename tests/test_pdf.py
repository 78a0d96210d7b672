"""The book as one PDF: a table's LaTeX (``iolab.report.table_latex``), the LaTeX-only layout
(``book/_ext/pdf_layout.py``), the build's strictness (``iolab.report.pdf``) and, marked
slow, the PDF itself read back with poppler's tools against the HTML of the same book."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from iolab.core import registry
from iolab.paths import REPO_ROOT
from iolab.report import escape, outputs, pdf, table_latex

spec = importlib.util.spec_from_file_location("pdf_layout", REPO_ROOT / "book/_ext/pdf_layout.py")
pdf_layout = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pdf_layout)


def test_a_tables_latex_shows_what_its_html_shows_escaped_for_latex():
    styled = escape.table(pd.DataFrame({"a b": ["x<y & 50%", "long/path/name_with_parts.yaml"],
                                        "n": [1.5, 2.0]}),
                          caption="Cap & more $5 {x}", formats={"n": "{:.1f} %"})
    # the places a long word may break (after / _ =) aside
    latex = table_latex.render(styled.to_html()).replace(r"\allowbreak{}", "")
    assert latex.startswith(table_latex.MARK + "\n") and latex.count(r"\begin{longtable}") == 1
    # the caption's words without the CSV link; every special character as text
    assert r"\caption{Cap \& more \$5 \{x\}}" in latex and "download" not in latex
    assert r"x\textless{}y \& 50\% & 1.5 \% \\" in latex
    # the line-break hints of the HTML (<wbr>) are not text
    assert r"long/path/name\_with\_parts.yaml & 2.0 \% \\" in latex
    # the header repeats on every page the table runs to
    assert latex.count(r"a b & n \\") == 2 and r"\endhead" in latex


def test_a_recorded_string_is_text_in_the_pdf_too():
    hostile = "\\input{/etc/passwd}$x$ ^_~#"
    latex = table_latex.render(escape.table(pd.DataFrame({"host": [hostile]})).to_html())
    latex = latex.replace(r"\allowbreak{}", "")
    assert r"\input" not in latex.replace(r"\textbackslash{}input", "")
    assert (r"\textbackslash{}input\{/etc/passwd\}\$x\$ \textasciicircum{}\_"
            r"\textasciitilde{}\#") in latex


CONTROLS = {"DEL": "host\x7fname", "NUL": "a\x00b", "ESC": "fio-3.33\x1b[31m",
            "CR": "a\r\rb", "C1": "x\x85y\x0c"}


def _control_table(value: str) -> str:
    """The LaTeX of a one-cell table holding ``value``, with ``value`` in its caption too."""
    frame = pd.DataFrame({"tool version": [value]})
    return table_latex.render(escape.table(frame, caption="versions " + value).to_html())


def test_a_control_character_is_shown_as_its_code_point_in_the_pdf():
    # xelatex stopped at DEL, NUL and ESC ("invalid character"); two CRs ended the caption
    for value in CONTROLS.values():
        latex = _control_table(value)
        assert not any(c < " " and c != "\n" or "\x7f" <= c <= "\x9f" for c in latex), value
    assert r"fio-3.33\textbackslash{}x1b[31m" in _control_table(CONTROLS["ESC"])
    assert table_latex.text("h\x7fn\x00") == r"h\textbackslash{}x7fn\textbackslash{}x00"
    # a line break, carriage return or tab is a blank, as the HTML shows it
    assert table_latex.text("a\r\rb\tc\nd") == "a  b c d"


@pytest.mark.slow
def test_xelatex_sets_a_table_of_control_characters(tmp_path):
    if not shutil.which("xelatex"):
        pytest.skip("no xelatex: run `make setup` as root")
    body = "\n".join(_control_table(v).split("\n", 1)[1] for v in CONTROLS.values())
    (tmp_path / "t.tex").write_text(
        "\\documentclass{article}\\usepackage{longtable}\\usepackage{array}"
        "\\usepackage{booktabs}\\begin{document}\n" + body + "\n\\end{document}\n")
    proc = subprocess.run(["xelatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, [line for line in proc.stdout.splitlines() if line[:1] == "!"]


def test_a_wide_table_is_split_with_its_row_labels_repeated():
    frame = pd.DataFrame({f"c{i}": [f"v{i}", "w"] for i in range(12)}, index=["r1", "r2"])
    latex = table_latex.render(frame.to_html())
    assert latex.count(r"\begin{longtable}") == 2
    assert " & ".join(["r1"] + [f"v{i}" for i in range(9)]) + r" \\" in latex
    assert r"r1 & v9 & v10 & v11 \\" in latex
    # the second part says what it is, in a line that wraps, without the caption again
    assert "(the table above, continued: its columns 11 to 13)" in latex
    assert r"\scriptsize" in latex


def test_a_column_is_never_narrower_than_its_longest_word():
    word = "A" * 45  # longer than the most a long cell counts for (_WIDEST)
    frame = pd.DataFrame({"a": ["x"], "b": [f"see {word} and so on"], "c": ["y"]})
    shares = table_latex._shares(table_latex.read(frame.to_html(index=False)), 3)
    assert shares == [4 / 53, 45 / 53, 4 / 53]


def test_labels_spanning_rows_and_columns_keep_their_places():
    frame = pd.DataFrame([[1, 2], [3, 4]],
                         index=pd.MultiIndex.from_tuples([("a", "x"), ("a", "y")]),
                         columns=pd.MultiIndex.from_tuples([("g", "c1"), ("g", "c2")]))
    latex = table_latex.render(escape.table(frame, index=True).to_html())
    assert r"\multicolumn{2}{l}{g}" in latex
    assert r"a & x & 1 & 2 \\" in latex and r" & y & 3 & 4 \\" in latex


def test_a_long_path_may_break_where_the_html_lets_it():
    assert table_latex.text("/sys/a_b=c") == (r"/\allowbreak{}sys/\allowbreak{}a\_"
                                             r"\allowbreak{}b=\allowbreak{}c")


def test_no_table_is_no_latex():
    assert table_latex.render("<p>no table</p>") == ""


def test_outside_a_notebook_nothing_is_registered(monkeypatch):
    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    assert outputs.offer_print_forms() is False


def test_in_a_kernel_tables_figures_and_widgets_offer_their_print_forms(monkeypatch):
    """What a chapter's kernel registers: a styled table's LaTeX, a DataFrame's, a figure's
    PDF, and a sentence for a widget's controls (never their repr, "HBox(children=...)")."""
    from IPython.core.interactiveshell import InteractiveShell
    import ipywidgets
    import matplotlib.pyplot as plt

    # the shell made here is undone after the test: the suite's other tests run outside
    # any shell, as the package does
    monkeypatch.setattr(InteractiveShell, "_instance", InteractiveShell._instance)
    shell = InteractiveShell.instance()
    monkeypatch.setattr("IPython.get_ipython", lambda: shell)
    assert outputs.offer_print_forms() is True
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    for shown, mime, starts in [
            (escape.table(pd.DataFrame({"a": [1]})), "text/latex", table_latex.MARK),
            (pd.DataFrame({"a": [1]}), "text/latex", table_latex.MARK),
            (ipywidgets.HBox([ipywidgets.Dropdown(options=["x"])]), "text/latex",
             table_latex.MARK),
            (fig, "application/pdf", None)]:
        data, _ = shell.display_formatter.format(shown)
        assert mime in data, type(shown)
        if starts:
            assert data[mime].startswith(starts)
    plt.close(fig)


def _doctree(rst: str) -> nodes.document:
    settings = get_default_settings(Parser)
    document = new_document("<test>", settings)
    Parser().parse(rst, document)
    return document


def test_a_table_output_goes_in_as_latex_and_mathematics_stays_mathematics():
    doc = _doctree("x\n")
    doc += nodes.math_block("", table_latex.MARK + "\n\\begin{longtable}{l}\\end{longtable}",
                            classes=["output", "text_latex"])
    doc += nodes.math_block("", "E = mc^2", classes=["output", "text_latex"])
    assert pdf_layout.tables_as_latex(doc) == 1
    assert [n["format"] for n in doc.findall(nodes.raw)] == ["latex"]
    assert [n.astext() for n in doc.findall(nodes.math_block)] == ["E = mc^2"]


def test_outside_latex_our_latex_forms_are_no_equations():
    """An HTML page must not count an output's unpicked LaTeX form as an equation: it made
    the page load MathJax, and the widget scripts then failed on it (a page error)."""
    doc = _doctree("x\n")
    bundle = nodes.container(nb_element="mime_bundle")
    for mime, node in [("text/html", nodes.raw("", "<table></table>", format="html")),
                       ("text/latex", nodes.math_block("", table_latex.MARK + "\n\\par x")),
                       ("text/plain", nodes.literal_block("", "x"))]:
        bundle += nodes.container("", node, mime_type=mime)
    theirs = nodes.container(nb_element="mime_bundle")
    theirs += nodes.container("", nodes.math_block("", "E = mc^2"), mime_type="text/latex")
    doc += [bundle, theirs]
    assert pdf_layout.latex_forms_left_out(doc) == 1
    assert [c["mime_type"] for c in bundle.children] == ["text/html", "text/plain"]
    assert len(list(doc.findall(nodes.math_block))) == 1


def test_markdown_tables_break_across_pages_in_columns_as_wide_as_they_hold():
    doc = _doctree("+----+------------------------------+\n| a  | b                            |\n"
                   "+====+==============================+\n| 1  | a much longer cell of words  |\n"
                   "+----+------------------------------+\n")
    assert pdf_layout.tables_fit_the_page(doc) == 1
    [table] = doc.findall(nodes.table)
    assert {"longtable", "colwidths-given"} <= set(table["classes"])
    assert [c["colwidth"] for c in table.findall(nodes.colspec)] == [4, 27]


def test_the_source_the_html_folds_away_is_left_out():
    doc = _doctree("x\n")
    cell = nodes.container(classes=["cell", "tag_hide-input"])
    cell += nodes.container("", nodes.literal_block("", "api.table(x)"), classes=["cell_input"])
    cell += nodes.container("", nodes.paragraph("", "the output"), classes=["cell_output"])
    shown = nodes.container(classes=["cell"])
    shown += nodes.container("", nodes.literal_block("", "kept"), classes=["cell_input"])
    doc += [cell, shown]
    assert pdf_layout.hidden_sources_left_out(doc) == 1
    assert [n.astext() for n in doc.findall(nodes.literal_block)] == ["kept"]
    assert "the output" in doc.astext()


def test_the_opening_page_is_one_chapter_and_the_others_follow_it():
    doc = _doctree("Title\n=====\n\nOpening words.\n\nWho\n---\n\nText.\n")
    top = next(iter(doc.findall(nodes.section)))
    top += nodes.compound(classes=["toctree-wrapper"])
    assert pdf_layout.opening_as_one_chapter(doc)
    [chapter] = [s for s in top.children if isinstance(s, nodes.section)]
    assert chapter[0].astext() == "Introduction"
    assert "Opening words." in chapter.astext() and "Who" in chapter.astext()
    # the other pages, put in at the table of contents, stay chapters of their own
    assert isinstance(top[-1], nodes.compound) and top[-1] not in chapter.children


def test_the_experiments_are_chapters_of_their_own():
    """In the one document the LaTeX builder assembles, the pages the experiments' index
    lists lie inside its section; they are moved to follow it, at its level (chapters),
    with the pages below them (an environment's page) still inside them."""
    from sphinx import addnodes

    def page(docname: str, title: str, *below) -> addnodes.start_of_file:
        own = _doctree("")
        section = nodes.section(ids=[docname])
        own += section
        section += nodes.title(text=title)
        section += nodes.paragraph(text=f"{title} words")
        if below:
            section += nodes.compound("", *below, classes=["toctree-wrapper"])
        # as Sphinx's inline_all_toctrees does it: the page's children handed over, their
        # parent still the page's own document
        put_in = addnodes.start_of_file(docname=docname)
        put_in.children = own.children
        return put_in

    doc = _doctree("Title\n=====\n")
    index = page("experiments/index", "Experiments",
                 page("experiments/smt_thp", "SMT", page("experiments/smt_thp/x", "SMT on x")),
                 page("experiments/irq", "IRQ"))
    doc += index
    assert pdf_layout.chapters_of_their_own(doc) == 2
    section, listed = index.children
    assert "Experiments words" in section.astext() and "SMT" not in section.astext()
    assert [p["docname"] for p in listed.children] == ["experiments/smt_thp", "experiments/irq"]
    assert "SMT on x" in listed[0].astext()  # an environment's page stays in its chapter
    assert pdf_layout.chapters_of_their_own(doc) == 0, "done once, nothing is left to move"


def test_latex_own_complaints_are_problems():
    log = ("Missing character: There is no ３ (U+FF13) in font [FreeMono.otf]/OT!\n"
           "Missing character: There is no ３ (U+FF13) in font [FreeMono.otf]/OT!\n"
           "LaTeX Warning: Reference `x:y' on page 3 undefined on input line 9.\n"
           "LaTeX Warning: Citation `aisio' on page 1 undefined on input line 2.\n"
           "Package cmap Warning: pdftex not detected - exiting.\n")
    assert pdf.latex_problems(log) == [
        "Missing character: There is no ３ (U+FF13) in font [FreeMono.otf]/OT",
        "LaTeX Warning: Reference `x:y' on page 3 undefined",
        "LaTeX Warning: Citation `aisio' on page 1 undefined"]


def test_without_tex_the_build_names_the_packages(monkeypatch):
    said = []
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert pdf.build(log=said.append) == 2
    assert "xelatex (texlive-xetex)" in said[0] and "make setup" in said[0]


@pytest.fixture(scope="session")
def book_pdf(book_copy):
    """The PDF of :func:`book_copy`'s book, built as `make pdf` does; its text, one string
    per page. Slow (Sphinx and XeLaTeX)."""
    missing = pdf.missing_tools() + [t for t in ("pdftotext", "pdfinfo")
                                     if not shutil.which(t)]
    if missing:
        pytest.skip(f"the PDF needs {', '.join(missing)}: run `make setup` as root")
    proc = subprocess.run([sys.executable, "-m", "iolab", "book", "--no-render", "--pdf"],
                          cwd=book_copy, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(book_copy)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    path = book_copy / "_build" / "pdf" / "book.pdf"
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True,
                          text=True, check=True).stdout
    return path, text.split("\f")


@pytest.mark.slow
def test_the_pdf_holds_every_chapter_its_numbers_and_its_bibliography(book_pdf):
    path, pages = book_pdf
    text = "\n".join(pages)
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True,
                          check=True).stdout
    assert "Storage I/O on CPUs and GPUs" in info
    # the PDF sets typographic quotes where the sources have straight ones
    flat = " ".join(text.split()).replace("\u2019", "'")
    for title in ["Introduction", "Environments", "Experimental framework",
                  *(e.title for e in registry.all_experiments())]:
        assert title in flat, f"chapter {title!r} is not in the PDF"
    assert "??" not in text, "a reference LaTeX could not resolve"
    assert "{glue" not in text and "papermill.record" not in text
    assert "Bibliography" in flat and "AiSIO" in flat


@pytest.mark.slow
def test_the_pdf_has_every_figure_of_the_html(book_pdf, html):
    _, pages = book_pdf
    in_pdf = len(re.findall(r"^\s*Fig\. \d+\.\d+:", "\n".join(pages), re.M))
    in_html = sum(len(re.findall(r"<figcaption", p.read_text()))
                  for p in html.rglob("*.html"))
    assert in_pdf == in_html > 20


@pytest.mark.slow
def test_the_pdf_shows_no_code_and_every_table_as_a_table(book_pdf):
    _, pages = book_pdf
    text = "\n".join(pages)
    assert "api.chapter(" not in text and "from iolab import api" not in text
    assert "pandas.io.formats.style.Styler" not in text
