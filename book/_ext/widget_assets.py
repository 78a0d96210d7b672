"""Keep the local ipywidgets JavaScript off pages that do not need it.

Responsible for: undoing one Jupyter Book 1 default. ``jupyter-book build`` adds
every ``*.js`` file it finds under ``book/_static`` to ``html_js_files``, i.e. to
*every* page. For ``_static/widgets/`` that is wrong: RequireJS on a page makes
UMD scripts loaded after it (for example the copy button's clipboard.js) register
as anonymous AMD modules and fail, and the 3.6 MB widget bundle would be loaded
twice on widget pages. MyST-NB already adds these files, in the right order, to
the pages that carry saved widget state (``nb_ipywidgets_js`` in _config.yml), so
this extension removes them from the global list. It also drops duplicate entries
from ``html_static_path`` (Jupyter Book appends ``_static`` even when the
configuration already names it).

Not responsible for: choosing which widget files to load (that is
``nb_ipywidgets_js``) or copying them (``html_static_path``).
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

WIDGET_PREFIX = "widgets/"


def _filename(entry: Any) -> str:
    # html_js_files entries are a filename or a (filename, attributes) pair.
    return entry[0] if isinstance(entry, (tuple, list)) else str(entry)


def drop_global_widget_js(app: Sphinx, config: Config) -> None:
    config.html_js_files = [
        entry
        for entry in config.html_js_files
        if not _filename(entry).startswith(WIDGET_PREFIX)
    ]
    config.html_static_path = list(dict.fromkeys(config.html_static_path))


def setup(app: Sphinx) -> dict[str, Any]:
    # Priority < 500: run before builders read html_js_files.
    app.connect("config-inited", drop_global_widget_js, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
