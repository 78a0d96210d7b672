"""book/_ext/figure_alt.py: the image of a captioned figure gets the caption's words as its
alt text (Sphinx would write the image's file name, a hash for a glued figure); an alt text
already set, and a figure without a caption, are left alone."""

from __future__ import annotations

import importlib.util

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from iolab.paths import BOOK_DIR


def _extension():
    spec = importlib.util.spec_from_file_location("figure_alt",
                                                  BOOK_DIR / "_ext" / "figure_alt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _document(*children: nodes.Node) -> nodes.document:
    doc = new_document("page", get_default_settings(Parser))
    doc.extend(children)
    return doc


def test_a_figures_image_is_described_by_its_caption_glued_numbers_included():
    ext = _extension()
    image = nodes.image(uri="6f1c0e9a2b.png")
    figure = nodes.figure("", image, nodes.caption(
        "", "", nodes.Text("IOPS per affinity setting at concurrency "),
        nodes.inline("", "16", classes=["pasted-text"]), nodes.Text(".\n  Bars: means.")))
    assert ext.describe_images(_document(figure)) == 1
    assert image["alt"] == "IOPS per affinity setting at concurrency 16. Bars: means."


def test_an_alt_text_set_and_a_figure_without_caption_are_left_alone():
    ext = _extension()
    kept = nodes.image(uri="a.png", alt="Throughput against queue depth")
    bare = nodes.image(uri="b.png")
    doc = _document(nodes.figure("", kept, nodes.caption("", "Other words.")),
                    nodes.figure("", bare))
    assert ext.describe_images(doc) == 0
    assert kept["alt"] == "Throughput against queue depth" and "alt" not in bare
