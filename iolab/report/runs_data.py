"""The runs behind a chapter's page as files a reader downloads: CSV and Parquet.

A page shows summaries; the runs they come from are its tidy table (one row per repetition:
the point's variables, the run's record, each metric of the tool). When a notebook is
replayed, :func:`offer` writes the rows its page shows into the book's static files
(``book/_static/runs/<experiment>-<environment>-runs.csv`` and ``.parquet``, which the HTML
build copies into ``_build/html/_static/runs/``) and returns a line that links both. Its
links name the files as ``iolab-static:runs/...``; ``book/_ext/static_links.py`` turns that
into a path relative to the page, which only the build knows (a chapter's page and an
environment's page lie at different depths), and fails the build if a linked file is missing.

The CSV quotes a text cell that a spreadsheet would run as a formula (a host name written to
be one) as :mod:`iolab.report.table_data` does; the Parquet file keeps every column's type.

Responsible for: writing the two files and the line that links them (HTML, and LaTeX for the
PDF, which names the files). Not responsible for: what the rows are (the chapter's runs,
:class:`iolab.report.chapter.Chapter`), the tables' own CSV links
(:mod:`iolab.report.table_data`), or ``iolab tidy`` (the whole campaign, on request).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from iolab import paths
from iolab.report import table_data, table_latex
from iolab.safefiles import own_folder, replace_output

if TYPE_CHECKING:
    import pandas as pd

# the links' scheme, resolved per page by book/_ext/static_links.py
SCHEME = "iolab-static:"
SUBFOLDER = "runs"
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9.-]+")


def static_folder() -> Path:
    """Where the files go: book/_static/runs/ of this checkout (ignored by git)."""
    return paths.BOOK_DIR / "_static" / SUBFOLDER


def stem(experiment: str, environment: str) -> str:
    """The files' common name: experiment and environment, any character outside letters,
    digits, '.' and '-' as '_' (an environment's name is checked already; this keeps a
    hostile one from naming a path)."""
    return _NOT_IN_NAME.sub("_", f"{experiment}-{environment}-runs").lstrip(".")


@dataclass(frozen=True)
class RunsData:
    """The written files of one page's runs, displayed as the line that links them."""

    csv: str          # file names inside the runs folder
    parquet: str
    rows: int
    columns: int

    def _repr_html_(self) -> str:
        links = " · ".join(
            f'<a class="runs-data" download="{html.escape(name)}" '
            f'href="{SCHEME}{SUBFOLDER}/{html.escape(name)}">{kind}</a>'
            for kind, name in (("CSV", self.csv), ("Parquet", self.parquet)))
        return (f'<p class="runs-data">The {self.rows:,} runs this page shows, one row per '
                f"repetition with all {self.columns} columns of the tidy table: {links}.</p>")

    def _repr_latex_(self) -> str:
        names = " and ".join(f"\\texttt{{{table_latex.text(n)}}}"
                             for n in (self.csv, self.parquet))
        return (f"{table_latex.MARK}\n\\par\\textit{{The {self.rows:,} runs this section "
                f"shows, one row per repetition, download from the HTML book as {names}.}}"
                "\\par\n")


def offer(frame: "pd.DataFrame", experiment: str, environment: str,
          folder: Path | None = None) -> RunsData | None:
    """Write ``frame`` (the page's runs) as CSV and Parquet into ``folder`` (default
    :func:`static_folder`), each file whole or not at all; the line linking them, or None
    (nothing written, nothing shown) for a page without runs."""
    if frame.empty:
        return None
    where = static_folder() if folder is None else folder
    own_folder(where, "the book's runs to download", depth=2)
    name = stem(experiment, environment)
    text = table_data.csv_text(frame)
    replace_output(where / f"{name}.csv", lambda tmp: tmp.write_text(text, encoding="utf-8"),
                   "the runs as CSV")
    replace_output(where / f"{name}.parquet", lambda tmp: _parquet(frame, tmp),
                   "the runs as Parquet")
    return RunsData(f"{name}.csv", f"{name}.parquet", len(frame), frame.shape[1])


def _parquet(frame: "pd.DataFrame", path: Path) -> None:
    # a column of Python objects (a run's CPU list) goes in as its text: Parquet needs one
    # type per column, and the CSV shows the same text
    out = frame.copy()
    for column in out.columns[out.dtypes == object]:
        if not out[column].map(lambda v: isinstance(v, str) or _missing(v)).all():
            out[column] = out[column].map(lambda v: None if _missing(v) else str(v))
    out.to_parquet(path, index=False)


def _missing(value: object) -> bool:
    import pandas as pd

    return value is None or (not hasattr(value, "__len__") and bool(pd.isna(value)))
