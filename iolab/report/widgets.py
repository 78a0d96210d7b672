"""An explorer for the chapters: controls that redraw a figure in a live kernel.

The controls are plain ipywidgets and the figure an ordinary display that a change of a
control replaces (``update_display``). No Output widget takes the figure: executing an Output
widget's drawing under papermill can leave the kernel and the client waiting on each other
(nbclient issue 312), which stops the whole book build. The rendered book shows the controls
and the initial figure; a static companion figure shows the rest.

Responsible for: wiring controls to a drawing function. Not responsible for: what is drawn.
"""

from __future__ import annotations

from typing import Any, Callable

import matplotlib.pyplot as plt
from IPython.display import display

from iolab.report import figures  # noqa: F401 (figures draw their texts as plain characters)


def explorer(draw: Callable[..., Any], controls: dict[str, Any]) -> None:
    """Show ``controls`` (name -> widget) and ``draw(**values)``'s figure, redrawn on change."""
    import ipywidgets as widgets

    def figure():
        fig = draw(**{name: w.value for name, w in controls.items()})
        plt.close(fig)  # shown through the display below only, never twice
        return fig

    display(widgets.HBox(list(controls.values())))
    handle = display(figure(), display_id=True)
    for control in controls.values():
        control.observe(lambda _change: handle.update(figure()), names="value")
