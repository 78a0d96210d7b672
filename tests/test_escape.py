"""Recorded strings are shown as text on the book's pages (iolab.report.escape).

The fast tests put markup through each function of ``iolab.report.escape`` and render the
result as the book does (a Styler's HTML; Markdown through the MyST parser with the book's
extensions) to check that nothing of it becomes an element, a role or a link. A scan holds
every styled table of the pages and notebooks to :func:`iolab.report.escape.table`.

The slow test stores markup in every string of a copied ``host.json`` (each field of
``iolab.host.inventory.FIELDS``, so a new field is covered as it comes), in the runs' tool
fields (version, driver version, the knob states read back) and in fio's own version line,
replays the chapters that show them (an environment's page, a chapter whose Markdown lists
the host's reasons, the measured hosts) with papermill, builds them with jupyter-book as the
book is built, and parses the HTML: no element or attribute of the markup may exist, and
what is shown is the string as it was recorded.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from bs4 import BeautifulSoup

from iolab.core import registry
from iolab.core.store import Store
from iolab.host.inventory import FIELDS, record_fingerprint
from iolab.paths import NOTEBOOKS_DIR, REPO_ROOT
from iolab.report import escape

RAW = REPO_ROOT / "data" / "raw"
ENV = "kvm-2vcpu"


def payload(tag: str) -> str:
    """Markup a recorded string might hold: an HTML element with a script, one with an
    event handler, MyST roles and a Markdown link and emphasis; ``tag`` (letters and digits)
    names where it was stored."""
    return (f"<script>alert({tag})</script><img src=x onerror=alert({tag})>"
            f"{{sub}}`{tag}` {{raw}}`html` [a](javascript:alert({tag})) **{tag}** $x$ &amp;")


MARKUP = [payload("m0"), "<!-- c -->", "# heading", "- item", "| a | b |", "a\\*b",
          "```{raw} html\n<script>alert(m1)</script>\n```", "`code`", " ``` ", "x\n\ny",
          "&lt;script&gt;", ":::{note}\nz\n:::"]


def _elements(soup: BeautifulSoup) -> set[str]:
    return {e.name for e in soup.find_all(True)}


def _without_data_link(soup: BeautifulSoup) -> BeautifulSoup:
    """``soup`` without its table's one CSV link (iolab.report.table_data), checked to be
    that link and nothing else: a CSV as a data: URI, its own attributes only."""
    links = soup.find_all("a")
    assert len(links) == 1 and links[0]["class"] in (["table-data"], ["table-data", "alone"])
    assert set(links[0].attrs) == {"class", "download", "title", "href"}
    assert links[0]["href"].startswith("data:text/csv;charset=utf-8,")
    assert links[0].get_text() == "download as CSV"
    links[0].extract()
    return soup


# -- HTML ---------------------------------------------------------------------------------


def test_html_text_escapes_what_html_reads_as_markup():
    assert escape.html_text("<a href='x' title=\"y\">&amp;</a>") == (
        "&lt;a href='x' title=\"y\"&gt;&amp;amp;&lt;/a&gt;")
    assert escape.html_text(3) == "3"


def test_a_table_shows_every_cell_label_name_and_caption_as_text():
    text = payload("m0")
    frame = pd.DataFrame({text: [text, 1234.5], "n": [1, 2]},
                         index=pd.Index([text, "b"], name=text))
    frame.columns.name = text
    for index in (True, False):
        html = escape.table(frame, index=index, formats={"n": "{:,.0f}"}, na_rep="—",
                            caption=text).to_html()
        soup = _without_data_link(BeautifulSoup(html, "html.parser"))
        assert _elements(soup) <= {"style", "table", "caption", "thead", "tbody", "tr", "th",
                                   "td", "wbr"}
        cells = [c.get_text().strip() for c in soup.find_all(["th", "td", "caption"])]
        # the caption, the column label and a cell; with the index, its label and name and
        # the name of the columns' level too
        assert cells.count(text) == (6 if index else 3), cells


def test_a_table_escapes_cells_and_labels_of_every_type_and_the_missing_text():
    """pandas escapes only ``str`` values: a list, a tuple, a mapping (or any object whose
    ``str()`` holds markup) came out as raw elements, and so did ``na_rep``."""
    text = payload("m4")
    frame = pd.DataFrame({"c": [[text], (text,), {text: 1}, None],
                          (text, 1): [1.5, 2.0, 3.0, None]})
    html = escape.table(frame, formats={(text, 1): "{:.1f}"}, na_rep=text).to_html()
    soup = _without_data_link(BeautifulSoup(html, "html.parser"))
    # <wbr>: where a long word may break (escape.breakable), no character
    assert _elements(soup) <= {"style", "table", "caption", "thead", "tbody", "tr", "th", "td",
                               "wbr"}, html
    cells = [c.get_text() for c in soup.find_all(["th", "td"])]
    assert cells == ["c", str((text, 1)), str([text]), "1.5", str((text,)), "2.0",
                     str({text: 1}), "3.0", text, text], cells


def test_a_long_word_of_a_text_cell_may_break_and_reads_the_same():
    """A path or a program's name in a claims table widened it past the page: its long words
    get <wbr> after / _ . : = , and between a lower- and an upper-case letter, never inside a
    character reference; short words, numbers and the text as read are unchanged."""
    said = ("p2pBandwidthLatencyTest's matrix at /sys/devices/system/cpu/cpu*/cpufreq: "
            "61,720,159 IOPS <b>&nope;</b>")
    frame = pd.DataFrame({"the source says": [said, None], "ratio": [0.98, 1.0],
                          "kvm-2vcpu against epyc-2vcpu-v782": ["a", "b"]})
    html = escape.table(frame, formats={"ratio": "{:.2f}"}).to_html()
    soup = BeautifulSoup(html, "html.parser")
    label = soup.find_all("th")[-1]
    assert label.get_text() == "kvm-2vcpu against epyc-2vcpu-v782"
    assert "epyc-<wbr/>2vcpu-<wbr/>v782" in str(label), "a label's long word breaks too"
    cells = [c for c in soup.find_all("td") if c.get_text() not in ("a", "b")]
    assert [c.get_text() for c in cells] == [said, "0.98", "nan", "1.00"]
    assert str(cells[0]).count("<wbr/>") == 10, str(cells[0])
    assert "p2p<wbr/>Bandwidth<wbr/>Latency<wbr/>Test's" in str(cells[0])
    assert "61,720,159 IOPS" in str(cells[0]), "a word of 12 characters or fewer is kept whole"
    assert not soup.find("b") and "&amp;nope;" in html, "markup is still escaped"


def test_a_table_formats_numbers_as_a_styler_does():
    frame = pd.DataFrame({"iops": [1234567.891, None], "ratio": [1.23456, 2.0],
                          "n": [3, 4], "flag": [True, False]})
    uuid = re.compile(r"T_[0-9a-f_]+")
    for formats, na_rep in ((None, None), ({"iops": "{:,.0f}", "ratio": "{:.2f}"}, "—"),
                            ("{:,.1f}", "not measured")):
        plain = frame.style.format(formats, na_rep=na_rep).hide(axis="index").to_html()
        shown = escape.table(frame, formats=formats, na_rep=na_rep).to_html()
        # the same table, with the link to its data as the caption
        shown = re.sub(r"\s*<caption>.*?</caption>", "", shown, flags=re.S)
        assert uuid.sub("T_", shown) == uuid.sub("T_", plain)


# -- Markdown -----------------------------------------------------------------------------


def _myst_html(source: str) -> BeautifulSoup:
    """``source`` rendered by the MyST parser with the book's extensions, as HTML."""
    from docutils.core import publish_string
    from myst_parser.parsers.docutils_ import Parser

    extensions = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())["parse"][
        "myst_enable_extensions"]
    html = publish_string(source, parser=Parser(), writer_name="html5", settings_overrides={
        "myst_enable_extensions": extensions, "report_level": 5, "halt_level": 5,
        "output_encoding": "unicode", "embed_stylesheet": False})
    return BeautifulSoup(html, "html.parser").find("main") or BeautifulSoup(html, "html.parser")


@pytest.mark.parametrize("text", MARKUP)
def test_markdown_text_is_read_as_the_characters_it_is(text):
    body = _myst_html(f"Recorded: {escape.markdown_text(text)}.")
    assert _elements(body) <= {"main", "div", "p"}, body
    assert body.find("p").get_text() == f"Recorded: {' '.join(text.splitlines())}."


@pytest.mark.parametrize("text", MARKUP)
def test_markdown_code_is_one_code_span_of_the_text(text):
    body = _myst_html(f"Recorded: {escape.markdown_code(text)}.")
    assert _elements(body) <= {"main", "div", "p", "span"}, body
    assert [c.get_text() for c in body.select(".literal")] == [" ".join(text.splitlines())]


@pytest.mark.parametrize("text", MARKUP)
def test_markdown_block_is_one_block_of_the_text(text):
    body = _myst_html(escape.markdown_block(text) + "\n\nAfter.")
    assert _elements(body) <= {"main", "div", "pre", "p", "span", "code"}, body
    assert [b.get_text() for b in body.find_all("pre")] == [f"{text}\n"]
    assert body.find("p").get_text() == "After."


def test_without_escaping_the_same_markup_is_markup():
    """The renderer above would show an escaping that does nothing: the raw strings do
    become elements."""
    body = _myst_html(f"Recorded: {payload('m0')}.")
    assert {"script", "img", "sub", "strong"} <= _elements(body)


# -- every styled table goes through escape.table -------------------------------------------

_STYLER = re.compile(r"\.style\b(?!\s+import)")


def _sources() -> list[tuple[str, str]]:
    """(where, code) of every page module and notebook code cell of the package."""
    out = [(str(p.relative_to(REPO_ROOT)), p.read_text())
           for p in sorted((REPO_ROOT / "iolab").rglob("*.py")) if p.name != "escape.py"]
    notebooks = [*sorted(NOTEBOOKS_DIR.glob("*.ipynb")),
                 REPO_ROOT / "iolab" / "templates" / "experiment" / "notebook.ipynb.tmpl"]
    for nb in notebooks:
        cells = json.loads(nb.read_text())["cells"]
        out += [(f"{nb.relative_to(REPO_ROOT)} cell {i}", "".join(c["source"]))
                for i, c in enumerate(cells, 1) if c["cell_type"] == "code"]
    return out


def test_every_styled_table_is_made_by_escape_table():
    """A Styler shows its cells as HTML as they are: a page that styles a DataFrame itself
    would show a recorded string as markup."""
    found = [where for where, code in _sources() if _STYLER.search(code)]
    assert not found, f"DataFrame.style used outside iolab.report.escape.table: {found}"


# -- the built book ---------------------------------------------------------------------------


# lsblk's device type stays as recorded: the inventory lists the devices of type "disk", so
# that their names, sizes and models are shown
KEPT = {"type"}


def _mark(value, path: str, marks: dict[str, str]):
    """``value`` with every string in it (but those under :data:`KEPT`) replaced by a
    payload whose tag names ``path``."""
    if isinstance(value, dict):
        return {k: v if k in KEPT else _mark(v, f"{path}.{k}", marks) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark(v, f"{path}[{i}]", marks) for i, v in enumerate(value)]
    if isinstance(value, str):
        tag = f"iolabmark{len(marks)}x"
        marks[tag] = path
        return payload(tag)
    return value


def _copy_campaign(data: Path, experiment: str, keep) -> Path:
    """The committed campaign's files with the runs ``keep(manifest)`` accepts."""
    src, dst = RAW / experiment / ENV, data / "raw" / experiment / ENV
    (dst / "runs").mkdir(parents=True)
    for path in src.iterdir():
        if path.is_file():
            shutil.copy2(path, dst / path.name)
    for run in sorted((src / "runs").iterdir()):
        if keep(json.loads((run / "run.json").read_text())):
            shutil.copytree(run, dst / "runs" / run.name)
    assert any((dst / "runs").iterdir()), f"no stored run of {experiment} kept"
    return dst


def _mark_host(campaign: Path, marks: dict[str, str]) -> None:
    """Every string of every field of host.json (inventory.FIELDS: one that is missing is
    added as a string where it may be one), markup; and a tool named with markup."""
    host = json.loads((campaign / "host.json").read_text())
    for field, (types, _) in FIELDS.items():
        if field in host:
            host[field] = _mark(host[field], field, marks)
        elif "string" in types:
            host[field] = _mark("", field, marks)
    name = _mark("", "a tool's name in tools", marks)
    host["tools"][name] = _mark(next(iter(host["tools"].values())), "tools.<name>", marks)
    # the fingerprint is the record's own (a record edited under its fingerprint is refused
    # by every reader, so a marked one would never reach a page)
    host["fingerprint"] = record_fingerprint(host)
    (campaign / "host.json").write_text(json.dumps(host, indent=1))


def _mark_runs(campaign: Path, marks: dict[str, str]) -> None:
    """Each run's tool fields (tool and driver version, the knob states read back) and fio's
    version line in its report, markup; the manifest's sums follow the report."""
    for run in sorted((campaign / "runs").iterdir()):
        manifest = json.loads((run / "run.json").read_text())
        for field in ("tool_version", "driver_version"):
            manifest[field] = _mark(manifest[field], f"run.{field}", marks)
        for knob, state in manifest["knobs"].items():
            if isinstance(state.get("after"), str):
                state["after"] = _mark(state["after"], f"run.knobs.{knob}.after", marks)
        report = run / "fio.json"
        if report.exists():
            doc = json.loads(report.read_text())
            doc["fio version"] = _mark(doc["fio version"], "fio.json 'fio version'", marks)
            report.write_text(json.dumps(doc))
        manifest["files"] = Store.file_records(run)
        (run / "run.json").write_text(json.dumps(manifest, indent=2))


def _book(folder: Path, pages: list[str]) -> Path:
    """A book of ``pages`` (executed notebooks in ``folder``) with the book's MyST settings,
    built by jupyter-book as `make book` builds (not strict: the pages refer to others)."""
    config = yaml.safe_load((REPO_ROOT / "_config.yml").read_text())
    (folder / "_config.yml").write_text(yaml.safe_dump({
        "title": "escape", "only_build_toc_files": True,
        "execute": {"execute_notebooks": "off"}, "parse": config["parse"]}))
    (folder / "_toc.yml").write_text(yaml.safe_dump({
        "format": "jb-book", "root": pages[0],
        "chapters": [{"file": p} for p in pages[1:]]}))
    exe = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(exe), "build", str(folder)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return folder / "_build" / "html"


@pytest.fixture(scope="module")
def marked_book(tmp_path_factory):
    """The smt_thp page of an environment, the CPU search chapter and the measured hosts,
    replayed from campaigns whose every recorded string is markup; (the HTML folder, the
    page names, tag -> where each payload was stored)."""
    from iolab.report.book import execute, relabel

    tmp = tmp_path_factory.mktemp("escape")
    data, marks = tmp / "data", {}
    shutil.copytree(REPO_ROOT / "data" / "reference", data / "reference")
    smt = _copy_campaign(data, "smt_thp", lambda m: m["point"]["concurrency"] == 2
                         and m["point"]["affinity"] == "unpinned" and m["rep"] < 2)
    cpu = _copy_campaign(data, "cpu_search", lambda m: m["rep"] < 2 and m["point"]["ndevs"] == 1
                         and m["point"]["qdepth"] == 32)
    for campaign in (smt, cpu):
        _mark_host(campaign, marks)
        _mark_runs(campaign, marks)
    book = tmp / "book"
    book.mkdir()
    params = {"mode": "replay", "data_dir": str(data)}
    with pytest.MonkeyPatch.context() as mp:
        # no SPDK at hand, as for a reader: the plan names bdevperf as missing
        mp.setenv("IOLAB_TOOLS_DIR", str(tmp / "no-tools"))
        for name in ("smt_thp", "cpu_search"):
            execute(registry.get(name).notebook, book / f"{name}.ipynb",
                    {**params, "environment": ENV})
        execute(NOTEBOOKS_DIR / "inventory.ipynb", book / "inventory.ipynb", params)
    relabel(book / "smt_thp.ipynb", ENV)  # as an environment's page under its chapter
    pages = ["smt_thp", "cpu_search", "inventory"]
    return _book(book, pages), pages, marks


@pytest.mark.slow
def test_no_recorded_string_becomes_markup_in_the_built_book(marked_book):
    html, pages, _ = marked_book
    for page in pages:
        soup = BeautifulSoup((html / f"{page}.html").read_text(), "html.parser")
        # a table's CSV link carries its cells percent-encoded in a data: URI (table_data):
        # data, not markup, as long as it is that link alone
        links = [a for a in soup.find_all("a", class_="table-data")
                 if a["href"].startswith("data:text/csv;charset=utf-8,")
                 and set(a.attrs) == {"class", "download", "title", "href"}]
        injected = [str(e)[:120] for e in soup.find_all(["script", "img", "sub", "strong", "a"])
                    if e not in links and re.search(r"iolabmark\d+x|alert\(|javascript:", str(e))]
        injected += [str(e)[:120] for e in soup.find_all(attrs={"onerror": True})]
        assert not injected, f"{page}: recorded markup became elements: {injected}"


@pytest.mark.slow
def test_recorded_strings_are_shown_as_they_were_recorded(marked_book):
    html, pages, marks = marked_book
    shown: dict[str, set[str]] = {}
    title = BeautifulSoup((html / "smt_thp.html").read_text(), "html.parser").title.get_text()
    assert f"(environment {ENV})" in title, "the environment's page names it as it is"
    for page in pages:
        text = BeautifulSoup((html / f"{page}.html").read_text(), "html.parser").get_text()
        # a payload shown at all is shown whole (a shortened one loses its tag with it)
        for tag in set(re.findall(r"iolabmark\d+x", text)):
            assert payload(tag) in text, f"{page}: {marks[tag]} is not shown as recorded"
            shown.setdefault(marks[tag], set()).add(page)
    # what the chapters name of the host and the tools: in the tables and the prose
    for where, page in (("hostname", "smt_thp"), ("cpu.model_name", "smt_thp"),
                        ("kernel_release", "inventory"), ("cpu.model_name", "inventory"),
                        ("run.tool_version", "cpu_search"), ("fio.json 'fio version'",
                                                              "smt_thp")):
        assert page in shown.get(where, set()), f"{where} is not shown on {page}: {shown}"
    for where in ("block_devices[1].name", "a tool's name in tools"):
        assert "inventory" in shown.get(where, set()), f"{where} is not shown: {shown}"
    reasons = {w for w in shown if w.startswith("knobs_not_controllable.")}
    assert reasons, "the host's reasons are not shown (the CPU search lists them)"


def test_a_table_with_columns_per_environment_is_marked_wide():
    """Only such a table may outgrow the page (book/_static/wrap.css, tests/test_browser.py):
    every other table of the book is held to its width."""
    frame = pd.DataFrame({"finding": ["x"], "kvm-2vcpu": ["1"]})
    assert 'class="wide"' in escape.table(frame, wide=True).to_html()
    assert "wide" not in escape.table(frame).to_html()
