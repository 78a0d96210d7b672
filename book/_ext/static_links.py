"""Point the links of notebook outputs at the book's static files, wherever the page lies.

Responsible for: links in raw HTML outputs that name a file of ``book/_static`` as
``iolab-static:PATH`` (``iolab.report.runs_data`` writes them: the runs behind a page, as CSV
and Parquet). A chapter's page and an environment's page lie at different depths of the
built book, which only the build knows; here each such link becomes the path from its page to
``_static/PATH``. A link to a file that is not there is a warning, so the strict build fails
instead of publishing a dead link (the notebooks write the files when they are replayed:
``make book``, or ``iolab book --force`` where the notebooks count as up to date).

Not responsible for: writing the files (the notebooks' kernels do) or copying them (Sphinx
copies ``_static`` into the build); the PDF, which has no raw HTML.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

SCHEME = "iolab-static:"  # iolab.report.runs_data.SCHEME
_LINK = re.compile(re.escape(SCHEME) + r'([^"\'<>\s]*)')
logger = logging.getLogger(__name__)


def resolve(text: str, page_uri: str, static: Path) -> tuple[str, list[str]]:
    """``text`` with each ``iolab-static:PATH`` as the path from ``page_uri`` (the page's
    target, e.g. ``experiments/smt_thp.html``) to ``_static/PATH``; and the PATHs not found
    under ``static`` (the book's _static folder), or that leave it."""
    missing = []

    def one(match: re.Match) -> str:
        path = match.group(1)
        target = (static / path).resolve()
        if not target.is_relative_to(static.resolve()) or not target.is_file():
            missing.append(path)
        return relative_uri(page_uri, f"_static/{path}")

    return _LINK.sub(one, text), missing


def _on_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html":
        return
    static = Path(app.srcdir) / "_static"
    page = app.builder.get_target_uri(docname)
    for raw in list(doctree.findall(nodes.raw)):
        if "html" not in raw.get("format", "").split() or SCHEME not in raw.astext():
            continue
        text, missing = resolve(raw.astext(), page, static)
        for path in missing:
            logger.warning(f"{docname}: an output links _static/{path}, which is not there "
                           "(the notebooks write it when replayed: iolab book --force)",
                           location=raw)
        raw.replace(raw.children[0], nodes.Text(text))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", _on_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
