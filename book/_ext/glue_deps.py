"""Make pages that glue values from another notebook depend on that notebook.

Responsible for: after a document is read, finding every pending cross-document
glue reference (``{glue:text}`experiments/x.ipynb::key:.1f``` and the other
``{glue}`` roles and directives that use a ``path.ipynb::key`` target) and telling
Sphinx that the page depends on the referenced notebook. When that notebook is
re-executed by papermill, its mtime changes, Sphinx marks the referencing page as
outdated, re-reads it, and the value pasted into the HTML is fresh.

Not responsible for: resolving the glue values (MyST-NB does that in a
post-transform, reading the ``<doc>.glue.json`` cache written when the notebook
itself is read) or for glue within one document (no cross-file dependency there).

Why it is needed: MyST-NB records the referenced document only on the pending node
(``PendingGlueReference.refdoc``) and never calls ``env.note_dependency``. Without
this extension an incremental ``jupyter-book build`` re-reads the changed notebook
but keeps serving the old number on every page that quotes it.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from myst_nb.ext.glue.utils import PendingGlueReference
from sphinx.application import Sphinx
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)


def note_glue_dependencies(app: Sphinx, doctree: nodes.document) -> None:
    """Record one dependency per notebook that this document glues from."""
    env = app.env
    seen: set[str] = set()
    for node in doctree.findall(PendingGlueReference):
        refdoc = node.refdoc
        if refdoc in seen or refdoc == env.docname:
            continue
        seen.add(refdoc)
        if refdoc not in env.found_docs:
            # MyST-NB reports the missing document itself; nothing to depend on.
            continue
        # doc2path gives an absolute path; Sphinx accepts absolute dependency paths.
        env.note_dependency(str(env.doc2path(refdoc)))
        LOGGER.debug("[glue_deps] %s depends on %s", env.docname, refdoc)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("doctree-read", note_glue_dependencies)
    return {
        "version": "1.0",
        # env.dependencies is merged by Sphinx after parallel reads.
        "parallel_read_safe": True,
        "parallel_write_safe": True,
    }
