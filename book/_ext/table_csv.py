"""Give every table written in a page's Markdown a link to its cells as CSV.

Responsible for: the tables of the Markdown pages (the framework's fault catalogues, the
experiments index, the architecture's lists), in HTML builds: after each, a link
"download as CSV" holding the table's cells as the page shows them, header row first, in a
``data:`` URI made by ``iolab.report.table_data`` (so a cell a spreadsheet would run as a
formula opens as text), as a notebook's styled tables carry one in their caption.

Not responsible for: the tables of notebook outputs (each styled table has its link
already); the PDF, which has no links to download.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx


def rows(table: nodes.table) -> list[list[str]]:
    """The table's cells as text, row by row (header rows first), each on one line."""
    return [[" ".join(entry.astext().split()) for entry in row.findall(nodes.entry)]
            for row in table.findall(nodes.row)]


def in_output(node: nodes.Node) -> bool:
    """Whether ``node`` lies in a notebook cell's output (whose tables are styled, with
    their own link)."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.Element) and "cell_output" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def link(table: nodes.table, docname: str, number: int) -> nodes.raw:
    import pandas as pd

    from iolab.report import table_data

    cells = rows(table)
    width = max(len(r) for r in cells)
    header = cells[0] + [""] * (width - len(cells[0]))
    frame = pd.DataFrame([r + [""] * (width - len(r)) for r in cells[1:]], columns=header)
    caption = f"{docname.rsplit('/', 1)[-1]} table {number}"
    html = table_data.link(frame, caption=caption)
    return nodes.raw("", f'<p class="table-data-line">{html}</p>', format="html")


def _on_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html":
        return
    tables = [t for t in doctree.findall(nodes.table) if not in_output(t) and rows(t)]
    for number, table in enumerate(tables, start=1):
        table.parent.insert(table.parent.index(table) + 1, link(table, docname, number))


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", _on_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
