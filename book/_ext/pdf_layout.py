"""What the PDF build (Jupyter Book's LaTeX builder) shows where the HTML shows something else.

Responsible for, in LaTeX builds only:

- the book's tables: a styled table's output carries, beside its HTML, the same table as a
  LaTeX ``longtable`` (:mod:`iolab.report.table_latex`), and a widget a sentence in place of
  its controls (:mod:`iolab.report.outputs`). MyST-NB takes every ``text/latex`` output for
  mathematics; an output that starts with :data:`LATEX_MARK` is put into the document as the
  LaTeX it is instead;
- long tables: every table of a page's Markdown (the framework's fault catalogues run to
  many pages) is set as a ``longtable``, which breaks across pages and repeats its header,
  where Sphinx would keep a short one on one page and run it off the bottom, with columns
  as wide as what they hold;
- the opening page: its title is the PDF's title page, and Sphinx would make each of its
  sections a chapter of a page or less; they become the sections of one chapter,
  "Introduction", which holds the opening paragraphs too;
- the experiments: each is a chapter of its own, after the short chapter of the
  experiments' index (:func:`chapters_of_their_own`), where Sphinx would make them sections
  of one chapter of some two hundred pages, as they are nested in the table of contents;
- code cells: the HTML folds a cell tagged ``hide-input`` behind a toggle, which paper
  cannot do, so the PDF leaves its source out (as it does for ``remove-input``) and keeps
  its output.

In every other build it leaves those LaTeX forms out before any page is counted as holding
mathematics (:class:`LatexFormsOnlyInLatex`), so the HTML is as it was without them.

Not responsible for: the tables' contents (the chapters), the LaTeX preamble and engine
(``_config.yml``'s ``latex:`` and ``latex_elements``), or the HTML build, which it leaves
as it is.

It runs on ``doctree-resolved``, after MyST-NB has pasted the glued outputs.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

# pages whose pages below them in the table of contents are chapters in the PDF
CHAPTERS_BELOW = ("experiments/index",)
LATEX_MARK = "% iolab latex"  # the first line of such an output (iolab.report.table_latex.MARK)
# a column's share of the page counts its longest line as at least this many characters and
# at most that many (the bounds of iolab.report.table_latex, which the extension cannot import:
# a book built from sources alone loads it without the package)
_NARROWEST, _WIDEST = 4, 40


def tables_as_latex(doctree: nodes.document) -> int:
    """Put every output of ours MyST-NB took for mathematics in as raw LaTeX; how many."""
    done = 0
    for block in list(doctree.findall(nodes.math_block)):
        if "text_latex" in block["classes"] and block.astext().startswith(LATEX_MARK):
            block.replace_self(nodes.raw("", block.astext(), format="latex"))
            done += 1
    return done


def tables_fit_the_page(doctree: nodes.document) -> int:
    """Mark every table to be set as a ``longtable`` whose columns share the text width by
    how much they hold (their longest cell, bounded both ways, as the chapters' tables do:
    :mod:`iolab.report.table_latex`); how many."""
    done = 0
    for table in doctree.findall(nodes.table):
        if "longtable" not in table["classes"]:
            table["classes"].append("longtable")
        for group in table.findall(nodes.tgroup):
            specs = [c for c in group.children if isinstance(c, nodes.colspec)]
            widest = [_NARROWEST] * len(specs)
            for row in group.findall(nodes.row):
                for at, entry in enumerate(row.children[:len(specs)]):
                    longest = max((len(line) for line in entry.astext().splitlines()),
                                  default=0)
                    widest[at] = max(widest[at], min(longest, _WIDEST))
            for spec, width in zip(specs, widest):
                spec["colwidth"] = width
        if "colwidths-given" not in table["classes"]:
            table["classes"].append("colwidths-given")
        done += 1
    return done


def hidden_sources_left_out(doctree: nodes.document) -> int:
    """Remove the source of every code cell the HTML folds away; how many."""
    done = 0
    for cell in list(doctree.findall(nodes.container)):
        if "tag_hide-input" not in cell["classes"]:
            continue
        for part in list(cell.children):
            if isinstance(part, nodes.container) and "cell_input" in part["classes"]:
                cell.remove(part)
                done += 1
    return done


def opening_as_one_chapter(doctree: nodes.document, title: str = "Introduction") -> bool:
    """Put everything under the root page's title into one section called ``title``;
    whether there was a titled section to do it in."""
    top = next(iter(doctree.findall(nodes.section)), None)
    if top is None or not top.children or not isinstance(top[0], nodes.title):
        return False
    chapter = nodes.section(ids=["iolab-pdf-introduction"], names=[title.lower()])
    chapter += nodes.title(text=title)
    # the table of contents stays where it is, after the new chapter: the book's other
    # pages are put in at its place, as chapters of their own
    contents = [part for part in top.children[1:]
                if isinstance(part, nodes.compound) and "toctree-wrapper" in part["classes"]]
    for part in list(top.children[1:]):
        top.remove(part)
        if part not in contents:
            chapter += part
    top += chapter
    top.extend(contents)
    return True


def chapters_of_their_own(doctree: nodes.document, pages=CHAPTERS_BELOW) -> int:
    """Make the pages below each of ``pages`` in the table of contents chapters: in the one
    document the LaTeX builder assembles, each page is put in where its toctree was, so they
    lie inside the section of the page that lists them; moved to follow that section, they
    are its siblings, at its level. How many pages were moved."""
    moved = 0
    for page in list(doctree.findall(addnodes.start_of_file)):
        if page.get("docname") not in pages:
            continue
        section = next((c for c in page.children if isinstance(c, nodes.section)), None)
        if section is None:
            continue
        # its own lists only, not those of the pages inside them
        lists = [c for c in section.findall(nodes.compound)
                 if "toctree-wrapper" in c["classes"] and _directly_in(c, section)]
        at = page.index(section) + 1
        for listed in lists:
            listed.parent.remove(listed)
            page.insert(at, listed)
            at += 1
            moved += sum(isinstance(c, addnodes.start_of_file) for c in listed.children)
    return moved


def _directly_in(node: nodes.Node, section: nodes.section) -> bool:
    """Whether ``node`` belongs to ``section``'s own page, not to a page put in below it.
    Sphinx puts a page in by handing its children to a start_of_file node without making it
    their parent, so a page's nodes lead up to its own document, never to the section."""
    parent = node.parent
    while parent is not None and parent is not section:
        parent = parent.parent
    return parent is section


def latex_forms_left_out(doctree: nodes.document) -> int:
    """Remove the LaTeX form of every output of ours from its bundle of forms; how many."""
    done = 0
    for bundle in list(doctree.findall(nodes.container)):
        if bundle.get("nb_element") != "mime_bundle":
            continue
        for form in list(bundle.children):
            if form.get("mime_type") == "text/latex" and form.astext().startswith(LATEX_MARK):
                bundle.remove(form)
                done += 1
    return done


class LatexFormsOnlyInLatex(SphinxTransform):
    """In every build but LaTeX, leave our outputs' LaTeX out before Sphinx's math domain
    looks for equations: MyST-NB keeps all forms of an output until it picks one for the
    builder, so an unpicked LaTeX form still counted as an equation and made the HTML page
    load MathJax, which the widget scripts then took for MathJax 2 (a page error)."""

    default_priority = 840  # before SphinxDomains (850), which records a page's equations

    def apply(self, **kwargs: Any) -> None:
        if self.app.builder.format != "latex":
            latex_forms_left_out(self.document)


def _on_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format == "latex":
        if docname == app.config.root_doc:
            opening_as_one_chapter(doctree)
            chapters_of_their_own(doctree)
        tables_as_latex(doctree)
        tables_fit_the_page(doctree)
        hidden_sources_left_out(doctree)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", _on_resolved)
    app.add_transform(LatexFormsOnlyInLatex)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
