"""Give the image of every captioned figure the caption's words as its alt text.

Responsible for: the ``alt`` attribute of an image inside a figure with a caption. Without
it Sphinx writes the image's file name, which for a glued figure is a content hash: a screen
reader, a text browser or a page whose images did not load then says nothing of what the
figure shows. The caption, glued numbers included, flattened to one line, becomes the alt
text; one a page set itself is kept.

Not responsible for: the captions (the notebooks write them), figures that hold no image
(``undrawn_figures``), or images outside a figure (the book's logo has its own alt text).

It runs on ``doctree-resolved``, after MyST-NB has pasted the glued outputs (before it, a
glued figure's body is a pending node) and after the numbers in captions are filled.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx


def caption_text(figure: nodes.figure) -> str:
    """The figure's caption as one line of text ("" when it has none)."""
    caption = next(iter(figure.findall(nodes.caption)), None)
    return " ".join(caption.astext().split()) if caption is not None else ""


def describe_images(doctree: nodes.document) -> int:
    """Set the alt text of every image of a captioned figure in *doctree* that has none;
    how many it set."""
    done = 0
    for figure in doctree.findall(nodes.figure):
        text = caption_text(figure)
        if not text:
            continue
        for image in figure.findall(nodes.image):
            if not image.get("alt"):
                image["alt"] = text
                done += 1
    return done


def _on_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    describe_images(doctree)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", _on_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
