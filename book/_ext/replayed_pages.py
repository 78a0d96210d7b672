"""Refuse to build the book while the pages replayed from stored data are missing.

Responsible for: before anything is read, checking that every page `iolab book` writes into
book/ (each experiment's chapter, the environments' inventory, the benchmarks page) exists,
and stopping the build with a clear error naming the missing pages and the command that
writes them.

Not responsible for: replaying the notebooks (``iolab.report.book``) or whether a replayed
page is up to date (``iolab book`` decides that).

Why it is needed: on a fresh clone those pages do not exist yet (they are git-ignored outputs
of papermill), and a plain `jupyter-book build book/` would otherwise succeed with a book that
has no experiment chapters, its warnings scrolled away.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError


def check_replayed_pages(app: Sphinx, config: Config) -> None:
    from iolab.paths import BOOK_DIR
    from iolab.report.book import rendered

    # the pages as iolab names them, looked for in the book being built (its own checkout)
    pages = sorted(Path(app.srcdir) / page.relative_to(BOOK_DIR) for page in rendered().values())
    missing = [page for page in pages if not page.exists()]
    if missing:
        names = ", ".join(str(page.relative_to(app.srcdir)) for page in missing)
        raise ExtensionError(
            f"{len(missing)} of the book's {len(pages)} replayed pages are missing ({names}): "
            "they are written from the stored data by `make book` (or `.venv/bin/iolab book`), "
            "which then builds the book; run that instead of `jupyter-book build` on a fresh "
            "clone")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", check_replayed_pages)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
