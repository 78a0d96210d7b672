"""What a chapter's outputs offer each build of the book, set up in the notebook's kernel.

The HTML build shows a styled table as HTML, a figure as PNG and a widget as live controls.
The PDF build (Jupyter Book's LaTeX builder) can use none of them at its best: once
:func:`offer_print_forms` has run in a notebook's kernel, every styled table (and DataFrame)
displayed or glued there carries its LaTeX too (:mod:`iolab.report.table_latex`), every
matplotlib figure a vector PDF beside its PNG, and every widget a sentence in place of its
controls. Each build then picks the form it can show (MyST-NB's render priorities), so the
HTML pages are unchanged.

Responsible for: registering those forms with IPython. Not responsible for: making the
tables or figures (the pages), the LaTeX of a table (:mod:`iolab.report.table_latex`), or
the PDF build (``iolab book --pdf``).
"""

from __future__ import annotations

from iolab.report import table_latex

# what the PDF shows of a widget's controls (book/_ext/pdf_layout.py puts it in as LaTeX)
WIDGET_LATEX = (f"{table_latex.MARK}\n\\par\\textit{{These controls work in the HTML book "
                "with a live kernel, or in the notebook; what they drew first follows.}\\par\n")


def offer_print_forms() -> bool:
    """Register the LaTeX of styled tables and the PDF of figures with the running IPython
    kernel; False (and nothing done) outside one."""
    try:
        from IPython import get_ipython
    except ImportError:  # the package runs without IPython everywhere but in notebooks
        return False
    shell = get_ipython()
    if shell is None:
        return False
    import pandas as pd
    from matplotlib_inline.backend_inline import set_matplotlib_formats
    from pandas.io.formats.style import Styler

    latex = shell.display_formatter.formatters["text/latex"]
    latex.for_type(Styler, lambda styler: table_latex.render(styler.to_html()))
    # a frame shown as it is (the inventory's columns of host records): pandas' own HTML,
    # which escapes every cell
    latex.for_type(pd.DataFrame, lambda frame: table_latex.render(frame.to_html()))
    # a widget's controls need a live page; on paper a sentence says where they work (the
    # output they drew first, a figure, follows them as it is)
    latex.for_type_by_name("ipywidgets.widgets.widget", "Widget", lambda _: WIDGET_LATEX)
    set_matplotlib_formats("png", "pdf")
    # the PDF's text in TrueType (Type 42), not Type 3 fonts, which some viewers draw
    # blurred and publishers' checks refuse; the PNG is the same either way
    import matplotlib

    matplotlib.rcParams["pdf.fonttype"] = 42
    return True
