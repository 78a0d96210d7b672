"""What a chapter's notebook may use of the package: this module, and nothing else of it.

A notebook opens its campaign as a :class:`Chapter` with :func:`chapter` (which, in mode
"run", runs the campaign first: running and rendering are two steps) and calls its
experiment's page, the functions that fill the chapter's texts, tables and figures section
by section::

    from iolab import api

    ch = api.chapter(experiment, environment, mode=mode, data_dir=data_dir,
                     overrides=overrides, run_options=run_options)
    sections = api.page(experiment)
    sections.design(ch)

Everything named in ``__all__`` is kept working across versions of the package, or changed
with a note in the changelog; the modules behind it may move. ``tests/test_api.py`` holds that
every notebook of the book (and the scaffold's) imports from ``iolab`` only this module.

Responsible for: the one surface the notebooks use, each name documented, and finding an
experiment's page by name. Not responsible for: any other behaviour: every other name is
defined in the module that owns it.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from iolab.core import registry
from iolab.core.store import Store, campaigns
from iolab.shared.gpu_io import lab_answer, lab_design
from iolab.host.inventory import summary_row
from iolab.paths import resolve_data_dir
from iolab.report import benchmarks_page as benchmarks
from iolab.report import figures, quiet_runs, runs_data as runs_files
from iolab.report import chapter as chapters
from iolab.report.chapter import Chapter
from iolab.report.escape import table
from iolab.report.machines import measured_by_machine, stored_by_experiment
from iolab.report.outputs import offer_print_forms
from iolab.report.tables import design_table

__all__ = [
    "chapter",              # a notebook's campaign run (mode "run") and opened as a Chapter
    "Chapter",              # a campaign loaded for its chapter: runs, spec, texts to glue
    "page",                 # an experiment's page (or another of its modules) by name
    "design_table",         # the params file's design as a table
    "table",                # a DataFrame as the book's tables show it: every string escaped
    "figures",              # the figure helpers a small chapter draws with
    "forest",               # the forest plot of a chapter's findings across machines
    "quiet",                # how quiet the machine was: the runs under foreign load, apart
    "lab_design",           # a lab-only GPU chapter's design and lab plan
    "lab_answer",           # a lab-only GPU chapter's answer and claims
    "benchmarks",           # the benchmarks appendix's page
    "Store",                # a campaign's stored runs (the machines appendix)
    "campaigns",            # every stored (experiment, environment)
    "summary_row",          # a stored host inventory in one column
    "measured_by_machine",  # which machine measured which campaigns
    "stored_by_experiment",  # each experiment's stored runs, in words (the experiments index)
    "resolve_data_dir",     # the data directory a notebook parameter names
    "runs_data",            # the runs a page shows, written as CSV and Parquet, and their links
]

# every notebook imports this module first: from here on, its tables and figures carry the
# forms the PDF build shows (LaTeX, vector PDF) beside those of the HTML
offer_print_forms()


def chapter(experiment: str, environment: str, *, mode: str = "replay",
            data_dir: str | Path | None = None, overrides: dict[str, Any] | None = None,
            run_options: dict[str, Any] | None = None) -> Chapter:
    """A notebook's campaign in its two steps, from the notebook's parameters: in mode "run"
    its runs still to do are made first (:func:`iolab.report.chapter.run`, with
    ``run_options``, the options of ``iolab notebook``); then it is opened as a
    :class:`Chapter`, which only reads. An unknown mode or run option is refused in every
    mode."""
    chapters.check_mode(mode)
    chapters.check_run_options(run_options)
    if mode == "run":
        chapters.run(experiment, environment, data_dir=data_dir, overrides=overrides,
                     run_options=run_options)
    return Chapter(experiment, environment, mode=mode, data_dir=data_dir, overrides=overrides)


def page(experiment: str, part: str = "page") -> ModuleType:
    """The module ``part`` of an experiment's package: ``page`` (default) holds the functions
    that fill its chapter; the CPU search's adaptive sections are ``page("cpu_search",
    "adaptive")``. An unknown experiment or part is an error that names what exists."""
    return registry.part(registry.get(experiment), part)


def forest(ch: Chapter):
    """The forest plot of the chapter's findings across machines, which its "Across
    environments" table drew (``iolab.report.compare.across``); None, so nothing is shown,
    where fewer than two environments estimate any finding."""
    return ch.figures.get("fig_forest")


def runs_data(ch: Chapter):
    """The runs the chapter's page shows, one row per repetition, written as CSV and Parquet
    into the book's static files (:mod:`iolab.report.runs_data`), shown as the line that
    links both; None (nothing shown) where the page shows no run."""
    return runs_files.offer(ch.df, ch.experiment.name, ch.environment)


def quiet(ch: Chapter):
    """The runs of the chapter measured under foreign load, with their point (None, so
    nothing is shown, where there is none); the text ``quiet`` says how quiet the machine
    was over all its runs (``iolab.report.quiet_runs``)."""
    ch.text["quiet"] = quiet_runs.text(ch.df)
    shown = quiet_runs.table(ch.df, list(ch.spec.variables))
    return None if shown is None else table(shown)
