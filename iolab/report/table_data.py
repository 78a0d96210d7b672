"""The data behind a table of the book: the table as CSV, one click away.

Every styled table (:func:`iolab.report.escape.table`) carries a link that downloads the
table it shows as a CSV file, for a spreadsheet or a script. The file travels inside the
link (a ``data:`` URI), so every build of the book, HTML or a notebook opened alone, holds
it beside its table with nothing to copy or keep in step.

A recorded string that a spreadsheet would read as a formula (a cell starting with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return: a host name or a params reason written to
be one) is given a leading apostrophe, so it opens as the text it is; numbers are written
as numbers.

Responsible for: the CSV text of a table, its file name and the link's HTML.
Not responsible for: what a table shows or how its cells are formatted on the page (the
pages and :mod:`iolab.report.escape`), or the chapters' tidy runs (``iolab tidy``).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# what a spreadsheet takes as the start of a formula (OWASP's list for CSV injection)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NOT_IN_NAME = re.compile(r"[^a-z0-9]+")
LINK_TEXT = "download as CSV"


def csv_text(frame: "pd.DataFrame", *, index: bool = False) -> str:
    """``frame`` as CSV: its column labels as the header row (with their units, as the
    table names them), text cells that a spreadsheet would run as a formula quoted as text."""
    safe = frame.copy()
    for at in range(safe.shape[1]):
        # the column is replaced, not written into: a text column whose cells are all
        # missing maps to floats, which pandas refuses to set into its string dtype
        safe.isetitem(at, safe.iloc[:, at].map(_as_text_cell))
    if index:
        safe.index = safe.index.map(_as_text_cell)
    safe.columns = [_as_text_cell(_label(c)) for c in safe.columns]
    return safe.to_csv(index=index, lineterminator="\n")


def file_name(frame: "pd.DataFrame", caption: str | None = None) -> str:
    """A file name that says which table it is: the caption's first words, else the first
    column labels; lower case, words joined by '-'."""
    words = caption if caption else " ".join(_label(c) for c in list(frame.columns)[:3])
    stem = "-".join(_NOT_IN_NAME.sub(" ", words.lower()).split()[:6]) or "table"
    return f"{stem}.csv"


def link(frame: "pd.DataFrame", *, index: bool = False, caption: str | None = None) -> str:
    """The HTML of a link that downloads ``frame`` as CSV (class ``table-data``, and
    ``alone`` for a table without a caption, whose link stands at its right)."""
    data = urllib.parse.quote(csv_text(frame, index=index), safe="")
    name = file_name(frame, caption)
    kind = "table-data" if caption else "table-data alone"
    return (f'<a class="{kind}" download="{name}" title="this table as CSV: {name}" '
            f'href="data:text/csv;charset=utf-8,{data}">{LINK_TEXT}</a>')


def _label(label: Any) -> str:
    """A column's label as one header cell: the levels of a label with several (a table
    with a column per experiment and environment) joined by " / ", not a tuple's repr."""
    if isinstance(label, tuple):
        return " / ".join(str(level) for level in label)
    return str(label)


def _as_text_cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
