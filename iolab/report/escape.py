"""Recorded strings on the book's pages: shown as text, never read as markup.

A hostname, a CPU model, a tool's version line, a knob's reason, a params value or an
environment's name is data: the book shows it as the characters it is. Each way a page
shows a string has one function here, and every page calls it:

- :func:`table`: a DataFrame as a table (an HTML output) with a link to its data as CSV
  (:mod:`iolab.report.table_data`): every cell, row and column label,
  the text shown for a missing value and the caption escaped as HTML text, and a long word
  of a text cell or label given places to break (``<wbr>``, :func:`breakable`); a cell or label
  that is neither a string nor a plain scalar (a number, a time, a missing value), such as
  a list, a tuple, a mapping or any other object, is shown as its ``str()``, escaped (pandas
  escapes only ``str`` values and shows the others' ``str()`` as it is);
- :func:`html_text`: a string inside HTML text (a table's caption);
- :func:`markdown_text`: a string inside a Markdown output or a page's Markdown source (MyST:
  raw HTML, roles, links, math and emphasis all start with ASCII punctuation, which is
  backslash-escaped);
- :func:`markdown_code` and :func:`markdown_block`: a string as inline code or as a fenced
  block of text, whatever backticks it holds.

Glued text (``{glue:text}``) needs none of these: MyST-NB pastes it as a text node. A
DataFrame displayed as it is (its own ``_repr_html_``) is escaped by pandas; a ``Styler`` is
not, which is why every styled table of the book is made by :func:`table`.

Responsible for: how a string is escaped for each medium, and the styled table.
Not responsible for: the wording or number formats (``iolab.report.tables``, the pages).
"""

from __future__ import annotations

import datetime
import html
import numbers
import re
import string
from typing import TYPE_CHECKING, Any, Callable, Mapping

from iolab.report import table_data

if TYPE_CHECKING:  # imported where a table is made: the CLI needs no pandas
    import pandas as pd
    from pandas.io.formats.style import Styler

# CommonMark lets a backslash escape any ASCII punctuation, and every piece of Markdown or
# MyST syntax that could turn a string into markup starts with one ('<' raw HTML, '{' a role,
# '[' a link, '`' code, '$' math, '*' and '_' emphasis, '&' an entity, '#' a heading, ...)
_MARKDOWN_SPECIAL = re.compile("([" + re.escape(string.punctuation) + "])")
_LINE_BREAK = re.compile(r"\r\n|[\r\n]")
_BACKTICKS = re.compile(r"`+")
# pandas' own escaping for a Styler's cells and labels ('&', '<', '>' and both quotes)
_PANDAS_ESCAPE = "html"
# a word this long in a table's cell (a path, a program's name) gets line-break opportunities
# after / _ . : = , - and between a lower- and an upper-case letter; ';', '#' and '&' are
# not among them, so that no break falls inside a character reference
_LONG_WORD = re.compile(r"\S{13,}")
_BREAK_POINT = re.compile(r"(?<=[/_.:=,-])(?=\S)|(?<=[a-z])(?=[A-Z])")


def html_text(value: Any) -> str:
    """``value`` as text inside an HTML element: '&', '<' and '>' as character references
    (quotes end nothing there, so they stay as they are)."""
    return html.escape(str(value), quote=False)


def markdown_text(value: Any) -> str:
    """``value`` as inline text of a Markdown (MyST) paragraph, read as the characters it is:
    every ASCII punctuation mark backslash-escaped, a line break as a blank (a recorded
    string is one run of text in its sentence, never a new block)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _LINE_BREAK.sub(" ", str(value)))


def markdown_code(value: Any) -> str:
    """``value`` as an inline code span: fenced by one backtick more than its longest run of
    backticks, padded with a blank where it starts or ends with a backtick or a blank (which
    CommonMark strips again)."""
    text = _LINE_BREAK.sub(" ", str(value))
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_block(value: Any, info: str = "text") -> str:
    """``value`` as a fenced code block (``info``: its language), closed only by its own
    fence: one backtick longer than any run of backticks in it, and at least three."""
    text = str(value)
    fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def table(frame: pd.DataFrame, *, index: bool = False,
          formats: str | Callable | Mapping[Any, str | Callable] | None = None,
          na_rep: str | None = None, caption: str | None = None, wide: bool = False) -> Styler:
    """``frame`` as a table of the book: its cells escaped before ``formats`` (a format
    string, a function, or one per column, as ``Styler.format`` takes them) format them, its
    row and column labels escaped, its ``caption`` escaped; the index shown only with
    ``index``. Numbers come out as ``Styler`` formats them, escaped or not. ``wide``: a
    table with columns per environment, which more environments widen; it is set smaller and
    scrolls sideways once it outgrows the page (class ``wide``, book/_static/wrap.css), where
    every other table fits the page. Its caption ends with a link that downloads ``frame``
    as CSV."""
    shown, formats = _as_text(frame, formats)
    formats = _long_words_breakable(shown, formats)
    styler = _with_escaped_names(shown).style.format(
        formats, na_rep=None if na_rep is None else html_text(na_rep), escape=_PANDAS_ESCAPE)
    for axis in ("index", "columns"):
        labels = shown.index if axis == "index" else shown.columns
        styler = styler.format_index(_breakable_cell if _all_text(labels) else None,
                                     escape=_PANDAS_ESCAPE, axis=axis)
    if not index:
        styler = styler.hide(axis="index")
    # the data behind the table, one click away: a CSV of the frame as given (numbers as
    # numbers, not as formatted), in the caption beside its words
    data = table_data.link(frame, index=index, caption=caption)
    styler = styler.set_caption(data if caption is None else f"{html_text(caption)} {data}")
    if wide:
        styler = styler.set_table_attributes('class="wide"')
    return styler


def breakable(escaped: str) -> str:
    """An escaped cell's text with ``<wbr>`` (a place a line may break, no character) inside
    each long word (after / _ . : = , - and between a lower- and an upper-case letter), so
    that a path, a program's or an environment's name breaks there instead of widening its
    table past the page (copied, the text is unchanged); short words are left as they are."""
    return _LONG_WORD.sub(lambda word: _BREAK_POINT.sub("<wbr>", word.group(0)), escaped)


def _breakable_cell(value: Any) -> str:
    # pandas escapes a string cell before its formatter sees it ("Escaping is done before
    # formatter", Styler.format), so the <wbr> added here stays markup
    return breakable(value) if isinstance(value, str) else str(value)


def _long_words_breakable(frame: pd.DataFrame, formats: Any) -> Any:
    """``formats`` with :func:`_breakable_cell` for each column of text (every cell a string
    or missing) that has no format of its own; a single format for all columns is kept."""
    import pandas as pd

    if formats is not None and not isinstance(formats, Mapping):
        return formats
    formats = dict(formats or {})
    for at, label in enumerate(frame.columns):
        column = frame.iloc[:, at]
        if (label not in formats
                and (column.dtype == object or pd.api.types.is_string_dtype(column.dtype))
                and column.map(lambda v: isinstance(v, str) or _missing(v)).all()):
            formats[label] = _breakable_cell
    return formats


def _all_text(labels: pd.Index) -> bool:
    """Whether every label (every level's part of it) is a string: only then are they given
    places to break, a number being shown as pandas formats it."""
    return all(isinstance(part, str) for label in labels
               for part in (label if isinstance(label, tuple) else (label,)))


def _missing(value: Any) -> bool:
    import pandas as pd

    return _plain(value) and not isinstance(value, str) and bool(pd.isna(value))


def _with_escaped_names(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the names of its index and column levels escaped: a Styler shows them
    as they are (``format_index`` escapes the labels only)."""
    def escaped(names) -> list:
        return [html_text(n) if isinstance(n, str) else n for n in names]

    if not any(isinstance(n, str) for n in [*frame.index.names, *frame.columns.names]):
        return frame
    shown = frame.copy(deep=False)
    shown.index = shown.index.set_names(escaped(frame.index.names))
    shown.columns = shown.columns.set_names(escaped(frame.columns.names))
    return shown


def _plain(value: Any) -> bool:
    """Whether pandas shows ``value`` escaped or as what cannot hold markup: a string (it
    escapes those), a number, a time or a missing value."""
    import numpy as np
    import pandas as pd

    return (value is None or value is pd.NaT
            or isinstance(value, (str, numbers.Number, datetime.date, datetime.time,
                                  datetime.timedelta, np.bool_, np.datetime64, np.timedelta64)))


def _text(value: Any) -> Any:
    return value if _plain(value) else str(value)


def _as_text(frame: pd.DataFrame, formats: Any) -> tuple[pd.DataFrame, Any]:
    """``frame`` with every cell and label that is not :func:`_plain` as its ``str()``, so
    that pandas escapes it, and ``formats`` keyed by the labels so shown."""
    shown = frame.copy(deep=False)
    for at in range(frame.shape[1]):
        column = frame.iloc[:, at]
        if column.dtype == object and not column.map(_plain).all():
            shown.isetitem(at, column.map(_text))
    columns = _index_as_text(frame.columns)
    shown.index, shown.columns = _index_as_text(frame.index), columns
    if isinstance(formats, Mapping) and columns is not frame.columns:
        formats = {_label_text(key, frame.columns.nlevels): value
                   for key, value in formats.items()}
    return shown, formats


def _label_text(label: Any, levels: int) -> Any:
    return tuple(map(_text, label)) if levels > 1 else _text(label)


def _index_as_text(index: pd.Index) -> pd.Index:
    """``index`` with each label (each level's, in a MultiIndex) that is not :func:`_plain`
    as its ``str()``; ``index`` itself when all are."""
    import pandas as pd

    labels = list(index)
    if index.nlevels > 1:
        if all(_plain(part) for label in labels for part in label):
            return index
        return pd.MultiIndex.from_tuples([tuple(map(_text, label)) for label in labels],
                                         names=index.names)
    if all(map(_plain, labels)):
        return index
    return pd.Index([_text(label) for label in labels], dtype=object, name=index.name)
