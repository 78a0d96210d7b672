"""A book table in the PDF: the cells the HTML table shows, typeset as a LaTeX longtable.

The book's styled tables (:func:`iolab.report.escape.table`) are HTML. The PDF build
(Jupyter Book's LaTeX builder) cannot use HTML, so each such table also offers LaTeX, made
here from the table's own HTML: the same header rows, cells and caption words, so the two
builds cannot disagree on a number. Every cell is read as text (its character references
decoded, its line-break hints dropped) and escaped for LaTeX, a control character written
as its code point, so a recorded string is shown as the characters it is in the PDF too. The table is a ``longtable``: it breaks across
pages and repeats its header rows on each; its columns share the text width by how much
they hold, and a table of many columns is set smaller, so that it fits the page.

Responsible for: turning a table's HTML into LaTeX.
Not responsible for: what a table holds or how its numbers are formatted (the pages and
:mod:`iolab.report.escape`), its CSV (:mod:`iolab.report.table_data`), or the PDF build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

# LaTeX's special characters, each as text (the order matters only for the backslash, which
# is replaced in one pass with the others)
_SPECIAL = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&",
            "#": r"\#", "%": r"\%", "_": r"\_", "^": r"\textasciicircum{}",
            "~": r"\textasciitilde{}", "<": r"\textless{}", ">": r"\textgreater{}"}
_TABLE = str.maketrans(_SPECIAL)
# the control characters (C0, DEL and C1): none is text LaTeX can set (see _shown)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BREAK_AFTER = re.compile(r"/|\\_|=")
_UNBREAKABLE = re.compile(r"\s+|(?<=[/_=])")  # where a cell's text may break
_WIDEST = 40   # characters: a column holding more shares the width as if it held this many
_NARROWEST = 4
_SMALL_FROM = 6  # columns: from this many on, a table is set in a smaller size
MOST_COLUMNS = 10  # columns of one printed table: a wider one is split (see render)
_SMALLEST_FROM = 8  # columns: from this many on, the smallest size
# the first line of every table's LaTeX (and of iolab's other LaTeX outputs): the book's
# LaTeX builds put an output that starts with it into the document as LaTeX
# (book/_ext/pdf_layout.py), where MyST-NB would take any other text/latex output for
# mathematics
MARK = "% iolab latex"


def text(value: str) -> str:
    """``value`` as LaTeX text: every special character escaped, a line break, carriage
    return or tab a blank (as the HTML shows them), any other control character as its code
    point, and a place to break after each / _ = (a path or a name wider than its column
    breaks there, as the HTML's line-break hints let it, instead of running into the next
    column)."""
    escaped = _CONTROL.sub(_shown, value.translate(_TABLE))
    return _BREAK_AFTER.sub(lambda m: m.group(0) + r"\allowbreak{}", escaped)


def _shown(match: re.Match) -> str:
    """A control character as LaTeX text: xelatex stops at DEL, NUL, ESC and the others
    ("Text line contains an invalid character"), and two carriage returns in a row end the
    paragraph a caption is in; written as the escape iolab's messages use (``\\x1b``), a
    recorded string shows what it holds."""
    c = match.group(0)
    if c in "\n\r\t":
        return " "
    return r"\textbackslash{}" + repr(c)[2:-1]  # "x1b" of repr's '\x1b'


@dataclass
class Cell:
    text: str = ""
    span: int = 1       # columns
    rows: int = 1       # rows it stands for (a label shown once for several rows)


@dataclass
class Table:
    caption: str = ""
    head: list[list[Cell]] = field(default_factory=list)
    body: list[list[Cell]] = field(default_factory=list)


class _Reader(HTMLParser):
    """The caption words (without the CSV link), header rows and body rows of one table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.table = Table()
        self._part: str | None = None    # "caption", "head" or "body"
        self._cell: Cell | None = None
        self._in_link = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "caption":
            self._part = "caption"
        elif tag in ("thead", "tbody"):
            self._part = "head" if tag == "thead" else "body"
        elif tag == "tr" and self._part in ("head", "body"):
            (self.table.head if self._part == "head" else self.table.body).append([])
        elif tag in ("th", "td") and self._part in ("head", "body"):
            self._cell = Cell(span=_whole(named.get("colspan")),
                              rows=_whole(named.get("rowspan")))
        elif tag == "a" and self._part == "caption":
            self._in_link += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            rows = self.table.head if self._part == "head" else self.table.body
            self._cell.text = " ".join(self._cell.text.split())
            rows[-1].append(self._cell)
            self._cell = None
        elif tag == "a" and self._in_link:
            self._in_link -= 1
        elif tag in ("caption", "thead", "tbody"):
            self._part = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.text += data
        elif self._part == "caption" and not self._in_link:
            self.table.caption += data


def _whole(value: str | None) -> int:
    return int(value) if value and value.isdigit() and int(value) > 0 else 1


def read(html: str) -> Table:
    """The table an HTML ``<table>`` shows (the first one in ``html``)."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    table = reader.table
    table.caption = " ".join(table.caption.split())
    table.body = _rows_filled(table.body)
    return table


def _rows_filled(rows: list[list[Cell]]) -> list[list[Cell]]:
    """Rows with a blank cell where a label above stands for them (``rowspan``)."""
    waiting: dict[int, int] = {}   # column -> rows still covered by a label above
    out = []
    for row in rows:
        cells, given = [], iter(row)
        column = 0
        while True:
            if waiting.get(column, 0) > 0:
                waiting[column] -= 1
                cells.append(Cell())
                column += 1
                continue
            cell = next(given, None)
            if cell is None:
                break
            if cell.rows > 1:
                waiting[column] = cell.rows - 1
            cells.append(cell)
            column += cell.span
        out.append(cells)
    return out


def render(html: str) -> str:
    """The LaTeX of the table in ``html``: one ``longtable`` with its caption, its header
    rows (repeated on every page it runs to) and its body, in columns sized by what they
    hold; a table of more than :data:`MOST_COLUMNS` columns is split into several, each
    repeating the first column (the row's label) beside the next columns in turn."""
    table = read(html)
    columns = max((sum(c.span for c in row) for row in table.head + table.body), default=0)
    if not columns:
        return ""
    parts = _split(table, columns)
    return f"{MARK}\n" + "".join(
        _longtable(part, None if at == 0 else f"(the table above, continued: its columns "
                   f"{first + 1} to {last})")
        for at, (part, first, last) in enumerate(parts))


def _split(table: Table, columns: int) -> list[tuple[Table, int, int]]:
    """``table`` whole, or cut into tables of the first column and at most
    :data:`MOST_COLUMNS` - 1 others each (spans written out cell by cell); with the range
    of the original columns each holds."""
    if columns <= MOST_COLUMNS:
        return [(table, 1, columns)]
    head = [_spread(row, columns) for row in table.head]
    body = [_spread(row, columns) for row in table.body]
    step = MOST_COLUMNS - 1
    parts = []
    for start in range(1, columns, step):
        keep = [0, *range(start, min(start + step, columns))]
        parts.append((Table(table.caption if start == 1 else "",
                            [[row[i] for i in keep] for row in head],
                            [[row[i] for i in keep] for row in body]),
                      start, keep[-1] + 1))
    return parts


def _spread(row: list[Cell], columns: int) -> list[Cell]:
    """``row`` one cell per column: a spanning cell's text in its first column."""
    out: list[Cell] = []
    for cell in row:
        out.append(Cell(cell.text))
        out += [Cell() for _ in range(cell.span - 1)]
    return (out + [Cell() for _ in range(columns - len(out))])[:columns]


def _longtable(table: Table, note: str | None) -> str:
    columns = max(sum(c.span for c in row) for row in table.head + table.body)
    spec = "".join(f">{{\\raggedright\\arraybackslash}}p{{\\dimexpr {share:.3f}\\linewidth"
                   "-2\\tabcolsep\\relax}" for share in _shares(table, columns))
    head = "".join(_row(row) for row in table.head)
    size = (r"\scriptsize" if columns >= _SMALLEST_FROM else
            r"\footnotesize" if columns >= _SMALL_FROM else r"\small")
    caption = (f"\\caption{{{text(table.caption)}}}\\\\\n" if table.caption else
               f"\\multicolumn{{{columns}}}{{p{{\\dimexpr\\linewidth-2\\tabcolsep\\relax}}}}"
               f"{{\\textit{{{text(note)}}}}}\\\\\n" if note
               else "")
    return (f"\\begingroup{size}\n\\begin{{longtable}}{{{spec}}}\n{caption}"
            f"\\toprule\n{head}\\midrule\n\\endfirsthead\n"
            f"\\multicolumn{{{columns}}}{{l}}{{\\textit{{(continued)}}}}\\\\\n"
            f"\\toprule\n{head}\\midrule\n\\endhead\n\\bottomrule\n\\endlastfoot\n"
            + "".join(_row(row) for row in table.body)
            + "\\end{longtable}\n\\endgroup\n")


def _row(cells: list[Cell]) -> str:
    return " & ".join(text(c.text) if c.span == 1 else
                      f"\\multicolumn{{{c.span}}}{{l}}{{{text(c.text)}}}"
                      for c in cells) + " \\\\\n"


def _shares(table: Table, columns: int) -> list[float]:
    """Each column's share of the line: by its longest cell, bounded both ways, and never
    below its longest piece that cannot break (a word, or a path's part between / _ =)."""
    widest = [_NARROWEST] * columns
    for row in table.head + table.body:
        at = 0
        for cell in row:
            if cell.span == 1 and at < columns:
                piece = max(map(len, _UNBREAKABLE.split(cell.text)), default=0)
                widest[at] = max(widest[at], min(len(cell.text), _WIDEST), piece)
            at += cell.span
    total = sum(widest)
    return [w / total for w in widest]
