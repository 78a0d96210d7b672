"""The IRQ affinity chapter's page functions: every text its notebook refers to is filled
from the committed runs, and a campaign without runs gives a page without figures, not an
error."""

from __future__ import annotations

import matplotlib

from iolab import api
from iolab.experiments.irq_affinity import page
from iolab.paths import NOTEBOOKS_DIR
from iolab.report.chapter import Chapter, referenced_keys

matplotlib.use("Agg")


def render(ch: Chapter) -> dict:
    found = page.findings(ch)
    shown = {"what ran": page.what_ran(ch), "deferred": None, "summary": None}
    page.performance(ch)
    page.events(ch)
    shown["deferred"] = page.deferred(ch, found)
    page.polled(ch)
    page.notes(ch)
    shown["summary"] = page.summary(ch)
    shown["claims"] = page.answer(ch, found)
    shown["quiet"] = api.quiet(ch)
    shown["across"] = page.across(ch)
    return shown


def test_the_committed_runs_fill_every_text_and_figure_the_notebook_refers_to():
    ch = Chapter("irq_affinity", "kvm-2vcpu")
    shown = render(ch)
    texts, figures = referenced_keys(NOTEBOOKS_DIR / "irq_affinity.ipynb")
    missing = set(texts) - set(ch.text) - {"outliers", "noise_floor"}  # glue_all's own
    assert not missing, sorted(missing)
    assert set(figures) <= set(ch.figures)
    assert ch.text["local_defer"] == "0.0927" and ch.text["task_run_defer"] == "0.0000"
    table = shown["deferred"]
    assert list(table.iloc[:, 0]) == ["default", "COOP_TASKRUN", "DEFER_TASKRUN"]
    assert table.iloc[2, 3].startswith("-51.1 %")


def test_a_campaign_without_runs_renders_without_figures(tmp_path):
    ch = Chapter("irq_affinity", "kvm-2vcpu", data_dir=tmp_path)
    shown = render(ch)
    assert ch.figures == {} and shown["deferred"] is None and shown["summary"] is None
    assert ch.text["place_defer_pct"] == "n/a"
    assert ch.text["reader_load_defer"].startswith("not measured here")


def test_the_prose_follows_the_data_not_one_campaign():
    """Which comparisons stand out and which way each mode moves are computed: the blocked
    campaign (one survivor, DEFER_TASKRUN) and another with none read differently."""
    import pandas as pd

    from iolab.experiments.irq_affinity import page as pg

    family = pd.DataFrame({"comparison": ["a", "b"], "verdict": ["significant", "not "
                                                                   "significant"]})
    assert pg._standout(family).endswith("1 stands out after the correction for testing them "
                                         "together: a.")
    family["verdict"] = "not significant"
    assert pg._standout(family).startswith("None of the 2 comparisons")
    effects = pd.DataFrame({"taskrun": ["default", "coop", "defer"],
                            "verdict": ["no clear change", "no clear change", "higher"]})
    assert pg._placement_reading(effects) == (
        "Beside the interrupt CPUs, mean IOPS are higher with DEFER_TASKRUN; not "
        "distinguishable from no change with the default mode and COOP_TASKRUN (each read on "
        "its own interval).")
    effects["verdict"] = "no clear change"
    assert pg._placement_reading(effects).startswith("In no task-run mode")
