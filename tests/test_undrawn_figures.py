"""book/_ext/undrawn_figures.py: a figure whose body is a sentence, not an image, keeps the
first sentence of its caption and says it is not drawn; a drawn figure is left alone."""

from __future__ import annotations

import importlib.util

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from iolab.paths import BOOK_DIR


def _extension():
    spec = importlib.util.spec_from_file_location("undrawn_figures",
                                                  BOOK_DIR / "_ext" / "undrawn_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figure(body: nodes.Node, *caption: nodes.Node) -> nodes.figure:
    return nodes.figure("", body, nodes.caption("", "", *caption), ids=["fig-x"])


def _document(*figures: nodes.figure) -> nodes.document:
    doc = new_document("page", get_default_settings(Parser))
    doc.extend(figures)
    return doc


def test_a_figure_in_whose_place_a_sentence_stands_says_it_is_not_drawn():
    ext = _extension()
    undrawn = _figure(nodes.paragraph("", "No sweep is stored: only concurrency 16 is."),
                      nodes.Text("IOPS per affinity setting at concurrency "),
                      nodes.inline("", "16.5", classes=["pasted-text"]),
                      nodes.Text(". Bars: means; whiskers: intervals. Dots: repetitions."))
    drawn = _figure(nodes.image(uri="fig.png"), nodes.Text("IOPS. Bars: means."))
    doc = _document(undrawn, drawn)
    assert ext.caption_undrawn(doc) == 1
    caption = undrawn.next_node(nodes.caption).astext()
    assert caption == ("IOPS per affinity setting at concurrency 16.5. "
                       "Not drawn: the sentence in its place says why.")
    assert drawn.next_node(nodes.caption).astext() == "IOPS. Bars: means."
    assert undrawn["ids"] == ["fig-x"], "the figure keeps its name: references still resolve"


def test_a_caption_of_one_sentence_without_a_full_stop_is_kept_whole_and_ended():
    ext = _extension()
    figure = _figure(nodes.paragraph("", "No figure here."),
                     nodes.Text("All metrics of the sweep (means and bands)"))
    ext.caption_undrawn(_document(figure))
    assert figure.next_node(nodes.caption).astext() == (
        "All metrics of the sweep (means and bands). Not drawn: the sentence in its place "
        "says why.")
