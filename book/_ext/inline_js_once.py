"""Write each inline script once per page, working around a Sphinx 7.4 bug.

Responsible for: dropping the second copy of an inline ``<script>`` (one with a body and no
``src``) from a page. Sphinx 7.4, which Jupyter Book 1 pins, keeps a script that an
extension adds with ``app.add_js_file(None, body=...)`` after the builder started twice: once
under the file name ``None`` and again, when the pages are written, under ``''``; the two do
not compare equal, so both are written (fixed in later Sphinx releases, sphinx-doc/sphinx pull
request 13402). sphinx-thebe's ``const THEBE_JS_URL = ...`` is one such script, and a browser
stops at its second declaration with "Identifier 'THEBE_JS_URL' has already been declared" on
every page; tests/test_browser.py fails on that error.

Not responsible for: which scripts a page loads (the extensions and ``nb_ipywidgets_js``
decide that) or their order (Sphinx sorts them by priority after this runs).
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _key(script: Any) -> tuple:
    # _JavaScript objects carry filename and attributes (the body among them); very old
    # Sphinx passed plain strings.
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {})
    return str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def drop_repeated_scripts(app: Sphinx, pagename: str, templatename: str,
                          context: dict[str, Any], doctree: Any) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    # a new list: the builder's own list is restored after every page anyway
    context["script_files"] = unique


def setup(app: Sphinx) -> dict[str, Any]:
    # late, so that scripts other handlers add for this page (MathJax, widgets) count too
    app.connect("html-page-context", drop_repeated_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
