"""Give a figure that a chapter could not draw a caption that says so.

Responsible for: every figure of a built page whose body holds no image, because the page
glued a sentence in the figure's place (``iolab.report.chapter.Sentence``: a sweep of one
point, a comparison with one arm stored), keeping its caption's first sentence (what the
figure shows) and replacing the rest (its lines, bars, bands and dots, which are not there)
with "Not drawn: the sentence in its place says why." The figure keeps its number and name,
so references to it still resolve.

Not responsible for: whether a figure is drawn (the chapter's page module decides and says
why in the sentence) or the captions of drawn figures (the notebooks write them).

It runs on ``doctree-resolved``, after MyST-NB's post-transform has pasted the glued outputs
(before it, a glued figure's body is a pending node, image or not), for every builder.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

NOT_DRAWN = "Not drawn: the sentence in its place says why."
_SENTENCE_END = re.compile(r"\.(?=\s|$)")


def first_sentence(caption: nodes.caption) -> tuple[list[nodes.Node], bool]:
    """The caption's children up to the end of its first sentence (a full stop in its own
    text followed by a space or the end; one inside a glued number or code is not an end),
    and whether that full stop was found."""
    kept: list[nodes.Node] = []
    for child in caption.children:
        if isinstance(child, nodes.Text):
            end = _SENTENCE_END.search(str(child))
            if end:
                kept.append(nodes.Text(str(child)[:end.end()]))
                return kept, True
        kept.append(child)
    return kept, False


def caption_undrawn(doctree: nodes.document) -> int:
    """Recaption every figure of *doctree* without an image; how many it recaptioned."""
    done = 0
    for figure in list(doctree.findall(nodes.figure)):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None or next(iter(figure.findall(nodes.image)), None) is not None:
            continue
        lead, ended = first_sentence(caption)
        joint = (" " if ended else ". ") if lead else ""
        caption[:] = [*lead, nodes.Text(joint + NOT_DRAWN)]
        done += 1
    return done


def _on_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    caption_undrawn(doctree)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-resolved", _on_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
