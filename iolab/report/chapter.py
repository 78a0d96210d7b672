"""What a chapter notebook opens with and ends with.

A chapter is made in two steps. :func:`run` runs its campaign (the notebook's mode "run":
``run_options`` are those of ``iolab notebook``, :mod:`iolab.execution.options`, as ``iolab
notebook`` and the jobs of ``iolab submit`` pass them; a campaign that a signal stopped at
once stops the notebook too, with :class:`~iolab.execution.signals.Interrupted`).
``Chapter(experiment, environment, mode=..., data_dir=..., overrides=...)`` never runs
anything: it plans the campaign, and loads the tidy rows of the runs the params file plans,
matched by run identity (any other stored run is kept apart and listed, never pooled; runs
imported from an AiSIO archive are kept in :attr:`imported`). ``iolab.api.chapter`` takes
both steps for a notebook. A chapter states what ran from the stored manifests
(:meth:`what_ran`) or, for a chapter whose runs need a lab, what the lab campaign measures and
why it did not run here (:meth:`lab_plan`), summarises with the interval each metric calls
for (:meth:`summarize`), collects the chapter's glued text and figures, and at the end glues
every key the notebook's prose refers to (:meth:`glue_all`), "n/a" for a missing text and a
:class:`Sentence` for a missing figure, so a chapter without data still builds and says so; a
page sets a :class:`Sentence` in place of any figure it cannot draw, glued as that text (no
figure is an image of words).

Responsible for: those steps, shared by every chapter. Not responsible for: a chapter's
analysis (its experiment's ``analysis`` module) or figures' drawing (``figures``).
"""

from __future__ import annotations

import copy
import re
import signal
import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pandas as pd

from iolab.analysis import confirmation, noise, order, outliers, stats
from iolab.analysis.findings import Finding
from iolab.core.planner import format_duration
from iolab.core.repetitions import REASON_TEXT
from iolab.errors import InputError, printable
from iolab.execution import options
from iolab.execution.campaign import Campaign
from iolab.execution.runner import CampaignResult
from iolab.execution.signals import Interrupted
from iolab.importers.aisio import IMPORTED_SOURCE
from iolab.report import claims, escape, reference
from iolab.report.figures import half_widths, one_configuration, theme
from iolab.report.tables import fmt_num, missing

MODES = ("replay", "plan", "run")
# a key of this notebook (optionally with a format); `page.ipynb::key` is another page's
_TEXT_KEY = re.compile(r"\{glue(?::text|:md)?\}`([A-Za-z0-9_]+)(?::[^`]*)?`")
_FIGURE_KEY = re.compile(r"\{glue:figure\}\s*`?([A-Za-z0-9_]+)")


def referenced_keys(notebook: Path) -> tuple[list[str], list[str]]:
    """The text and figure glue keys a notebook's Markdown cells refer to, in order."""
    nb = nbformat.read(notebook, as_version=4)
    text, figures = [], []
    for c in nb.cells:
        if c.cell_type != "markdown":
            continue
        text += _TEXT_KEY.findall(c.source)
        figures += _FIGURE_KEY.findall(c.source)
    return list(dict.fromkeys(text)), list(dict.fromkeys(figures))


class Sentence(str):
    """What a page glues in place of a figure it cannot draw (a grid without runs, a sweep of
    one point): one sentence, shown as text where the figure would be, with no placeholder
    image. Glued as Markdown, every punctuation mark escaped, so it reads as the characters
    it is, and each of its ``code`` fragments (a command to type) as inline code, which no
    typography turns into other characters ('--' into a dash); its plain text is the
    sentence itself. The figure keeps its number and its caption's first sentence, followed by
    "Not drawn" (book/_ext/undrawn_figures.py), so its caption never describes marks that
    are not there."""

    code: tuple[str, ...]

    def __new__(cls, text: str, code: tuple[str, ...] = ()) -> "Sentence":
        said = super().__new__(cls, text)
        said.code = tuple(c for c in code if c)
        return said

    def _repr_markdown_(self) -> str:
        if not self.code:
            return escape.markdown_text(str(self))
        parts = re.split("(" + "|".join(map(re.escape, self.code)) + ")", str(self))
        return "".join(escape.markdown_code(p) if p in self.code else escape.markdown_text(p)
                       for p in parts)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def setting_words(value: Any) -> str:
    """A setting as a reader reads it: yes/no for a flag, a list as its items, never a
    Python repr."""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(setting_words(v) for v in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {setting_words(v)}" for k, v in value.items()) or "none"
    return str(value)


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise InputError("notebook parameters", "mode", f"unknown mode {mode!r}",
                         allowed=", ".join(MODES))


def check_run_options(run_options: dict[str, Any] | None) -> dict[str, Any]:
    """A notebook's ``run_options``: those of ``iolab notebook`` only."""
    run_options = dict(run_options or {})
    options.check(run_options, "notebook", "notebook parameters", "run_options")
    return run_options


def run(experiment: str, environment: str, *, data_dir: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        run_options: dict[str, Any] | None = None) -> CampaignResult:
    """The first step of a chapter in mode "run": make the campaign's runs still to do (every
    failure recorded, the campaign going on), and print what happened, for the executed
    notebook a batch job keeps (the cell is not on the book's page). A campaign that a signal
    stopped at once stops the notebook too (:class:`Interrupted`)."""
    run_options = check_run_options(run_options)
    result = Campaign(experiment, environment, data_dir=data_dir,
                      overrides=overrides).run(keep_going=True, **run_options)
    for line in result.messages + [f"completed {result.completed} runs, "
                                   f"{len(result.failed)} failed"]:
        print(printable(line))  # a failure's reason may quote a tool's stderr
    if result.interrupted:  # a signal asked to stop now: the notebook too
        raise Interrupted(result.signal or signal.SIGINT)
    return result


class Chapter:
    """One campaign opened for its chapter: its spec, its runs as tidy rows (and the
    imported ones apart), its plan, and the texts and figures the notebook glues. It never
    runs the campaign (:func:`run` does, first); ``mode`` "replay" describes the stored runs'
    host, "plan" and "run" this one."""

    def __init__(self, experiment: str, environment: str, *, mode: str = "replay",
                 data_dir: str | Path | None = None, overrides: dict[str, Any] | None = None):
        check_mode(mode)
        self.campaign = Campaign(experiment, environment, data_dir=data_dir, overrides=overrides)
        self.experiment = self.campaign.experiment
        self.spec = self.campaign.spec
        self.environment = environment
        self.data_dir = self.campaign.data_dir
        # A replayed chapter describes the campaign's host, not the one that builds the book.
        self.plan = self.campaign.plan(as_recorded=mode == "replay")
        rows = self.campaign.tidy()
        # only with 'iolab book --skip-corrupt'; otherwise a corrupt run fails the chapter
        self.corrupt_skipped = rows.attrs.get("corrupt_skipped", 0)
        if rows.empty:
            self.df, self.others, self.imported = rows, rows, rows
        else:
            # runs imported from another project's archive are kept apart, never pooled with
            # this package's own (the chapter says which it shows)
            imported = (rows["run.source"].fillna("").str.startswith(IMPORTED_SOURCE)
                        if "run.source" in rows else pd.Series(False, index=rows.index))
            self.imported = rows[imported].reset_index(drop=True)
            rows = rows[~imported]
            # the runs this params file plans, by identity; any other stored run is listed
            self.df, self.others = Campaign.split(rows, self.plan)
        # confirmation runs (iolab.core.confirm) measure again what the search chose: kept
        # apart, so that no search statistic pools them with the search's runs
        confirm = (self.df["run.confirm"].notna() if "run.confirm" in self.df
                   else pd.Series(False, index=self.df.index))
        self.confirmed = self.df[confirm].reset_index(drop=True)
        self.df = self.df[~confirm].reset_index(drop=True)
        self.host = self.campaign.store.read_host() or {}
        self.text: dict[str, str] = {}
        self.figures: dict[str, Any] = {}
        theme(self.spec.analysis["palette"])

    @property
    def have(self) -> bool:
        return not self.df.empty

    @property
    def confidence(self) -> float:
        """The level of the chapter's intervals: the params' ``confidence``, or the family's
        per-comparison level in a copy made by :meth:`at_family_level`."""
        return getattr(self, "_family_confidence", None) or self.spec.analysis["confidence"]

    def at_family_level(self, family: int) -> "Chapter":
        """This chapter with its intervals at ``1 - (1 - confidence) / family`` (Bonferroni,
        the interval form of Holm's first step), so that the ``family`` comparisons judged
        together keep the chapter's family-wise error rate; the copy's texts and figures are
        its own, so nothing it computes is glued."""
        other = copy.copy(self)
        other.text, other.figures = {}, {}
        other._family_confidence = 1 - (1 - self.confidence) / family
        return other

    def label(self, variable: str):
        """A function giving readable values of a variable, for ticks and legends."""
        return lambda value: self.experiment.describe(variable, value)

    def axis_label(self, variable: str) -> str:
        return self.experiment.variable_labels.get(variable, variable)

    def metric_label(self, metric: str) -> str:
        m = self.experiment.metrics[metric]
        return f"{m.label} ({m.unit})" if m.unit else m.label

    def summarize(self, rows: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
        """n, mean, sd and each metric's own interval (``Metric.interval``) per group (no
        rows, with the same columns, for no rows: a campaign stopped part way)."""
        if rows.empty:
            return stats.summarize(pd.DataFrame(columns=[*by, *metrics]), by, metrics)
        one_configuration(rows, f"summary of {', '.join(metrics)} by {', '.join(by)}")
        methods = {m: self.experiment.metrics[m].interval for m in metrics
                   if m in self.experiment.metrics}
        return stats.summarize(rows, by, metrics, self.confidence, methods)

    # -- provenance ------------------------------------------------------------------------

    def what_ran(self) -> pd.DataFrame:
        """What the shown runs are, from their manifests and the host record."""
        df = self.df
        items: list[tuple[str, str]] = [("environment", self.environment)]
        if df.empty:
            items.append(("stored runs", f"none for the configuration of {self.spec.params_file.name}"))
        else:
            points = df.groupby(list(self.spec.base), dropna=False).size()
            reps = (f"{points.min()}" if points.min() == points.max()
                    else f"{points.min()} to {points.max()}")
            items += [
                ("runs shown", f"{len(df)}: {len(points)} points, {reps} repetitions each"),
                ("tool", ", ".join(sorted(df["run.tool_version"].dropna().astype(str).unique()))
                 + f" (iolab driver script version {', '.join(sorted(df['run.driver_version'].dropna().astype(str).unique()))})"),
            ]
            for column in sorted(c for c in df.columns if c.startswith("config.")):
                name = column.removeprefix("config.")
                field = self.experiment.settings.get(name)
                what = f"{name} ({field.help})" if field is not None and field.help else name
                words = sorted({setting_words(v) for v in df[column] if not missing(v)})
                items.append((what, ", ".join(words) or "not set"))
            started = pd.to_datetime(df["run.started_at"], utc=True)
            items.append(("made", f"{started.min():%Y-%m-%d %H:%M} to {started.max():%Y-%m-%d %H:%M} UTC"))
            metric = self.order_metric()
            if metric is not None:
                items.append((f"order of the runs ({metric})",
                              order.check(df, list(self.spec.base), metric).text()))
        cpu = self.host.get("cpu") or {}
        if self.host:
            items.append(("host", f"{self.host.get('hostname')}: {cpu.get('model_name')}, "
                                  f"{cpu.get('logical_cpus')} logical CPUs, kernel "
                                  f"{self.host.get('kernel_release')} (fingerprint "
                                  f"{self.host.get('fingerprint')})"))
        if self.corrupt_skipped:
            items.append(("left out", f"{self.corrupt_skipped} stored runs whose raw files do "
                                      "not match their manifests (corrupt; 'iolab verify' "
                                      "names them)"))
        if not self.imported.empty:
            archives = ", ".join(sorted(self.imported["run.source"].unique()))
            items.append(("imported", f"{len(self.imported)} runs from {archives}, "
                                      "re-derived from its raw files and shown apart"))
        if not self.others.empty:
            items.append(("not shown", f"{len(self.others)} stored runs that this params file "
                                       "does not plan (other settings or points)"))
        return pd.DataFrame(items, columns=["", "what ran"])

    def order_metric(self) -> str | None:
        """The metric whose drift :meth:`what_ran` states: the plan's ranking metric, else
        the experiment's first metric the runs have (None: no such metric)."""
        for name in (self.spec.ranking_metric, *self.experiment.metrics):
            if name and name in self.df.columns:
                return name
        return None

    def plan_text(self) -> str:
        return self.plan.summary()

    # -- repetitions -----------------------------------------------------------------------

    def decisions(self) -> pd.DataFrame:
        """One row per planned point: its variables, n, failures, the mean of the rule's
        metric, the interval's half-width in % of the mean, the decision's reason, the runs
        still to do (``iolab.core.repetitions``) and whether this host is blocked from it."""
        return pd.DataFrame(self.plan.decision_rows())

    def repetitions(self, figure: str = "fig_repetitions") -> pd.DataFrame:
        """The rule and its outcome for the prose (keys ``rule``, ``rule_order`` and
        ``rule_outcome``) and, under a rule, the figure of each point's interval width
        against the target; returns the decisions of the points with runs, to show."""
        rule, T = self.spec.rule, self.text
        metric = self.experiment.metrics.get(rule.metric) if rule.metric else None
        T["rule"] = rule.text(metric.label if metric else None)
        T["rule_order"] = ("The runs were made in rounds of one run per open point, each round "
                           "in a shuffled order whose seed the campaign log records."
                           if self.spec.order == "interleaved" else
                           "The runs of a point were made back to back, point after point.")
        d = self.decisions()
        ran = d[d["n"] > 0] if not d.empty else d
        low, high = (int(ran["n"].min()), int(ran["n"].max())) if not ran.empty else (0, 0)
        spread = str(low) if low == high else f"{low} to {high}"
        counts = self.plan.settled()
        if d.empty:
            T["rule_outcome"] = "No point of the params file is planned here."
        elif rule.fixed:
            done = sum(1 for p in self.plan.decisions() if p.decision.settled)
            T["rule_outcome"] = (f"{done} of the {len(d)} planned points have all their runs "
                                 f"stored; the points with runs have {spread} each.")
        else:
            T["rule_outcome"] = (
                f"Of the {len(d)} planned points, {counts.get('target', 0)} met the target, "
                f"{counts.get('max', 0)} stopped at the maximum without meeting it, "
                f"{counts.get('failed', 0)} failed, {counts.get('open', 0)} are still open and "
                f"{counts.get('blocked', 0)} cannot run on the campaign's host; the points with "
                f"runs have {spread} runs each.")
        if rule.fixed or ran.empty:
            self.figures[figure] = Sentence(
                "The campaign runs a fixed number of repetitions per point: there is no "
                "stopping rule to show." if rule.fixed else
                f"No run is stored for environment {self.environment}.")
        else:
            fig = half_widths(ran, rule.target_ci_pct, min(rule.min, low), rule.max,
                              self.spec.analysis["figure_width"], self.spec.analysis["palette"],
                              f"{self.environment}: {rule.metric}, "
                              f"{rule.confidence * 100:g} % interval of the mean")
            self.figures[figure] = fig
            plt.close(fig)
        return ran if ran.empty else self._decision_table(ran, metric)

    def _decision_table(self, ran: pd.DataFrame, metric: Any) -> pd.DataFrame:
        """The decisions of the points with runs, labelled for the page: the variables that
        tell them apart, the runs, and (under a stopping rule) the mean, interval and reason."""
        rule = self.spec.rule
        # the variables that tell the shown points apart, not those the same everywhere
        variables = [v for v in self.spec.variables if ran[v].nunique() > 1]
        if rule.fixed:  # no metric to decide on: the runs of each point
            return ran[variables + ["n"]].rename(
                columns={v: self.axis_label(v) for v in variables})
        # a confirmation point has the variables of a search point: its label tells them apart
        step = ["confirm"] if "confirm" in ran else []
        table = ran[variables + step + ["n", "mean", "rel_half_pct", "reason"]].copy()
        for v in variables:
            table[v] = [self.experiment.describe(v, x) for x in table[v]]
        if step:
            table["confirm"] = ["search" if pd.isna(x) else f"confirmation {x}"
                                for x in table["confirm"]]
        table["rel_half_pct"] = [fmt_num(v, 1) for v in table["rel_half_pct"]]
        table["reason"] = table["reason"].map(lambda r: REASON_TEXT.get(r, r))
        return table.rename(columns={
            **{v: self.axis_label(v) for v in variables}, "confirm": "runs",
            "mean": f"mean {metric.label}", "rel_half_pct": f"± % ({rule.confidence * 100:g} % CI)", "reason": "decision"})

    def best_set_table(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The points of a best set (``rows`` with the variables, ``n``, ``mean``, the interval
        and ``best``, as ``best_points`` of an analysis gives them), for the reader: the
        variables that tell them apart, in words, with n, mean and interval."""
        members = rows[rows["best"]] if not rows.empty else rows
        variables = [v for v in self.spec.variables if v in members and members[v].nunique() > 1]
        ci = f"{self.confidence * 100:g} % CI"
        keys = [v for v in self.spec.variables if v in members and v in self.df]
        counts = self.outlier_counts(self.df, keys) if keys and not self.df.empty else None
        return pd.DataFrame({
            **{self.axis_label(v): [self.experiment.describe(v, x) for x in members[v]]
               for v in variables},
            "n": members["n"].to_numpy(),
            "mean": [fmt_num(x, 0) for x in members["mean"]],
            ci: [f"{fmt_num(a, 0)} – {fmt_num(b, 0)}"
                 for a, b in zip(members["ci_low"], members["ci_high"])],
            **({"outlier runs": [int(counts.get(k if len(keys) > 1 else k[0], 0))
                                 for k in members[keys].itertuples(index=False)]}
               if counts is not None else {})})

    def host_words(self) -> str:
        """The campaign's recorded host in a few words: CPU model, logical CPUs, kernel."""
        cpu = self.host.get("cpu") or {}
        if not self.host:
            return "no host recorded"
        return (f"{cpu.get('model_name')}, {cpu.get('logical_cpus')} logical CPUs, kernel "
                f"{self.host.get('kernel_release')}")

    def blocked_by_grid(self) -> dict[str, str]:
        """Per grid of the params file, why the campaign's host could not make its blocked
        runs (every reason the plan gives, once)."""
        reasons: dict[str, set[str]] = {}
        for r in self.plan.by_status("blocked"):
            for grid in r.point.grids:
                reasons.setdefault(grid, set()).update(r.reasons)
        return {grid: "; ".join(sorted(why)) for grid, why in reasons.items()}

    def lab_plan(self, needs: str) -> pd.DataFrame:
        """What the params' campaign measures, for a chapter whose runs need a lab: each grid
        with its values and its size in points and runs, the repetitions, and the whole
        campaign's runs and time, from its design (:meth:`Campaign.design`: the same whatever
        is stored and whichever host builds the book); then, with no run of this package
        stored, why not: its runs need ``needs`` (the hardware, in words), which no machine
        available to this project had. The planner's view of the building host is not the
        chapter's business: that host was never meant to run these."""
        design = self.campaign.design()
        points = design.decisions()
        settings, exp = self.spec.settings, self.experiment

        def values(variable: str, vals: list[Any]) -> str:
            shown = [exp.describe(variable, v) for v in vals]
            listed = ", ".join(shown if len(shown) <= 3 else [shown[0], shown[1], "…", shown[-1]])
            return f"{self.axis_label(variable)} {listed}" + (
                f" ({len(shown)} values)" if len(shown) > 3 else "")

        items: list[tuple[str, str]] = []
        for name, grid in self.spec.grids.items():
            mine = [p for p in points if name in p.grids]
            held = (f", with {exp.describe_point(grid['set'])}" if grid.get("set") else "")
            items.append((f"grid {name}", " × ".join(values(v, vals) for v, vals
                                                     in grid["vary"].items()) + held
                          + f": {_count(len(mine), 'point')}, "
                            f"{_count(sum(p.decision.to_run_max for p in mine), 'run')}"))
        rule = self.spec.rule
        items.append(("repetitions", rule.text(exp.metrics[rule.metric].label
                                               if rule.metric else None)))
        runs = sum(p.decision.to_run_max for p in points) + design.confirm_waiting_max
        seconds = (sum(p.decision.to_run_max * exp.seconds_per_run(settings, p.params)
                       for p in points) + design.confirm_waiting_max * design.seconds_per_run)
        shared = (" (a point that several grids hold is run once)"
                  if sum(len(p.grids) for p in points) > len(points) else "")
        items.append(("the whole campaign",
                      f"{_count(len(points), 'point')}{shared}, {_count(runs, 'run')}, about "
                      f"{format_duration(seconds)} of running by the plan's estimate of each "
                      "run (its configured runtime and the tool's start-up)"))
        items.append(("runs stored", f"{_count(len(self.df), 'run')} of this package")
                     if self.have else
                     ("not run here", f"No run of this package is stored for {self.environment}: "
                                      f"its runs need {needs}, and no machine available to this "
                                      "project had them."))
        return pd.DataFrame(items, columns=["", "the lab campaign"])

    def claims_rows(self, found: list[Finding], robust: list[Finding] | None = None,
                    family: int = 1) -> pd.DataFrame:
        """The source study's claims (``claims.yaml`` beside the experiment's module), each
        with its verdict from ``found`` and from ``robust``, the same findings without the
        outlier runs (:meth:`without_outliers`; None when there are none) (see
        :mod:`iolab.report.claims`, with the bare verdict in ``_verdict``); the verdict
        counts and the family they were judged in go to the glue key ``claims``."""
        module = sys.modules[type(self.experiment).__module__].__file__
        rows = claims.confront(claims.path_of(module), found, self.experiment.name, robust,
                               self.references())
        judged = ~rows["_verdict"].isin([claims.UNTESTABLE, claims.OUTSIDE,
                                         claims.NOT_COMPARABLE])
        self.text["claims"] = claims.summary(rows) + (
            " A claimed change is judged by its own interval, a claim of no change by whether "
            "its interval lies inside the margin the claim declares (two one-sided tests). "
            + claims.family_words(family, self.spec.analysis["confidence"])
            if judged.any() else "")
        return rows

    def references(self) -> dict[str, Any]:
        """The reference registry of the chapter's data folder (empty where it has none)."""
        return reference.registry(self.data_dir, missing_ok=True)

    def claims_table(self, make=None, why: str = "") -> pd.DataFrame:
        """:meth:`claims_rows` as the chapter shows them, from ``make(chapter)``, the
        experiment's findings. The claims judged here form one confirmatory family: counted
        from the verdicts at the chapter's level, they are judged again with every interval
        at the family's level (:meth:`at_family_level`), the sensitivity column too. Without
        ``make`` or runs (a campaign with no runs), every claim is not testable here, for the
        reason ``why``."""
        module = sys.modules[type(self.experiment).__module__].__file__
        path = claims.path_of(module)
        found = make(self) if make is not None and self.have else []
        if not found:
            return claims.shown(self.claims_rows(claims.unmeasured(path, why, self.confidence)))
        family = claims.family_size(claims.load(path), found, self.references())
        judged = self.at_family_level(family) if family > 1 else self
        if judged is not self:
            found = make(judged)
        others = judged.without_outliers()
        robust = make(others) if others is not None else None
        return claims.shown(self.claims_rows(found, robust, family))

    def without_outliers(self) -> "Chapter | None":
        """This chapter with the runs that are outliers of their point left out
        (:mod:`iolab.analysis.outliers`, by the repetition rule's metric, else the
        experiment's first), for the sensitivity of its verdicts; None when no run is one.
        The copy's texts and figures are its own, so nothing it computes is glued."""
        metric = self.spec.rule.metric or next(iter(self.experiment.metrics))
        if self.df.empty or metric not in self.df:
            return None
        rows = self.df.dropna(subset=[metric])
        far = outliers.flag(rows, [v for v in self.spec.variables if v in rows], metric)
        far = far.reindex(self.df.index, fill_value=False)
        if not far.any():
            return None
        other = copy.copy(self)
        other.df = self.df[~far].reset_index(drop=True)
        other.text, other.figures = {}, {}
        return other

    def confirmed_table(self, table: pd.DataFrame) -> pd.DataFrame:
        """The confirmed points (``iolab.analysis.confirmation.confirmed_points``) for the
        reader: the variables that tell them apart, in words, the search's n and mean, the
        confirmation's n, mean and interval, and the change between the two."""
        variables = [v for v in self.spec.variables if v in table and table[v].nunique() > 1]
        ci = f"{self.confidence * 100:g} % CI"
        return pd.DataFrame({
            **{self.axis_label(v): [self.experiment.describe(v, x) for x in table[v]]
               for v in variables},
            "search mean (n)": [f"{fmt_num(x, 0)} ({n})"
                                for x, n in zip(table["mean_search"], table["n_search"])],
            f"confirmation mean (n), {ci}": [
                f"{fmt_num(x, 0)} ({n}), {fmt_num(a, 0)} – {fmt_num(b, 0)}"
                for x, n, a, b in zip(table["mean"], table["n"], table["ci_low"],
                                      table["ci_high"])],
            f"change from the search ({ci})": [
                f"{p:+.1f} % ({lo:+.1f} to {hi:+.1f})" if not why else f"undefined: {why}"
                for p, lo, hi, why in zip(table["pct"], table["pct_low"], table["pct_high"],
                                          table["undefined"])]})

    def aa_text(self, metric: str | None = None) -> str:
        """The confirmation step's A/A pair (``iolab.analysis.confirmation.aa_pair``) in
        words, set against the campaign's noise floor; a sentence saying why where there is
        no pair."""
        metric = metric or self.spec.rule.metric or next(iter(self.experiment.metrics))
        keys = [v for v in self.spec.variables if v in self.confirmed]
        pair = confirmation.aa_pair(self.confirmed, keys, metric, self.confidence)
        if not pair.defined:
            return f"This campaign has no A/A pair: {pair.why_undefined}."
        ci = f"{self.confidence * 100:g} % CI"
        n = min(pair.n_a, pair.n_b)  # the search's floor for two points of the pair's runs
        search = noise.floor(self.df.dropna(subset=[metric]) if metric in self.df else self.df,
                             [v for v in self.spec.variables if v in self.df], metric,
                             self.confidence, n)
        verdict = ("its interval contains zero, as it should" if pair.contains_zero else
                   "its interval excludes zero: the two labels differ by more than chance "
                   "allows, so something moved the runs of one label together")
        against = ""
        if search.defined:
            against = (f" The search's noise floor for two points of {n} runs is "
                       f"{search.floor * 100:.1f} %: the "
                       "A/A difference is " + ("inside it, so the floor holds here."
                                               if pair.inside(search.floor) else
                                               "larger, so the search's floor is too low "
                                               "for this machine and its verdicts of "
                                               "'not distinguishable' are the safe ones."))
        own = (f" From the pair's own runs the floor is {pair.floor.floor * 100:.1f} %."
               if pair.floor.defined else "")
        return (f"The A/A pair, the point measured under labels A ({pair.n_a} runs) and B "
                f"({pair.n_b} runs), interleaved: B differs from A by {pair.pct:+.1f} % "
                f"({ci} {pair.pct_low:+.1f} % to {pair.pct_high:+.1f} %, a ratio of means "
                f"on the log scale); {verdict}.{against}{own}")

    def outlier_counts(self, rows: pd.DataFrame, by: list[str],
                       metric: str | None = None) -> pd.Series:
        """Per point of ``rows`` (grouped ``by``): how many of its runs are outliers of it
        (:mod:`iolab.analysis.outliers`, by ``metric`` as :meth:`outliers_text` takes it)."""
        metric = metric or self.spec.rule.metric or next(iter(self.experiment.metrics))
        rows = rows.dropna(subset=[metric])
        return outliers.flag(rows, by, metric).groupby(
            [rows[v] for v in by], dropna=False).sum().astype(int)

    def outliers_text(self, metric: str | None = None) -> str:
        """How many shown runs are outliers of their point (:mod:`iolab.analysis.outliers`),
        by ``metric`` (the repetition rule's, else the experiment's first), and the points
        whose median and mean disagree by more than the interval's half-width, with both."""
        metric = metric or self.spec.rule.metric or next(iter(self.experiment.metrics))
        if self.df.empty or metric not in self.df:
            return "No run is shown here, so none is an outlier."
        rows = self.df.dropna(subset=[metric])
        by = [v for v in self.spec.variables if v in rows]
        far = outliers.flag(rows, by, metric)
        label = self.experiment.metrics[metric].label
        judged = rows.groupby(by, dropna=False)[metric].transform("size") >= outliers.MIN_RUNS
        if not judged.any():
            text = (f"No point here has the {outliers.MIN_RUNS} runs that the outlier rule "
                    f"({outliers.METHOD}) needs, so no run is called an outlier.")
        else:
            text = (f"By the rule {outliers.METHOD}, applied to the points with at least "
                    f"{outliers.MIN_RUNS} runs, {int(far.sum())} of their {int(judged.sum())} "
                    f"runs {'is an outlier' if far.sum() == 1 else 'are outliers'} of their "
                    f"point's {label}")
            text += (" (drawn as red crosses in the figures); they stay in every statistic."
                     if far.any() else ".")
        summary = self.summarize(rows, by, [metric])
        medians = rows.groupby(by, dropna=False)[metric].median()
        apart = []
        for r in summary.itertuples(index=False):
            key = tuple(getattr(r, v) for v in by)
            med = medians.get(key if len(by) > 1 else key[0])
            if med is not None and r.ci_half == r.ci_half and abs(med - r.mean) > r.ci_half:
                point = self.experiment.describe_point({v: getattr(r, v) for v in by
                                                        if rows[v].nunique() > 1})
                apart.append(f"{point} (mean {fmt_num(r.mean, 0)}, median {fmt_num(med, 0)})")
        if apart:
            text += (f" At {len(apart)} point{'s' if len(apart) > 1 else ''} the median lies "
                     "outside the interval of the mean, so both are given: "
                     + "; ".join(apart) + ".")
        return text

    def noise_floor(self, metric: str | None = None) -> noise.Floor:
        """The noise floor (:mod:`iolab.analysis.noise`) of ``metric`` (the repetition rule's,
        else the experiment's first) over the points shown."""
        metric = metric or self.spec.rule.metric or next(iter(self.experiment.metrics))
        if self.df.empty or metric not in self.df:
            return noise.floor(pd.DataFrame(), [], metric, self.confidence)
        by = [v for v in self.spec.variables if v in self.df]
        return noise.floor(self.df, by, metric, self.confidence)

    def noise_text(self, metric: str | None = None) -> str:
        """The noise floor for the prose: the spread, the floor, the detectable difference,
        and what the floor rests on."""
        metric = metric or self.spec.rule.metric or next(iter(self.experiment.metrics))
        found = self.noise_floor(metric)
        label = self.experiment.metrics[metric].label if metric in self.experiment.metrics \
            else metric
        if not found.defined:
            return f"This chapter has no noise floor: {found.why_undefined}."
        order = ("interleaved, so slow drift of the machine is in the spread" if
                 self.spec.order == "interleaved" else "in sequence, so drift that moves a "
                 "point's runs together is not in the spread and the floor may be too low")
        rows = self.df.dropna(subset=[metric])
        by = [v for v in self.spec.variables if v in rows]
        far = outliers.flag(rows, by, metric)
        clean = noise.floor(rows[~far], by, metric, self.confidence, found.n) if far.any() \
            else None
        without = (f" Without the {int(far.sum())} outlier run{'s' if far.sum() > 1 else ''} "
                   f"(above) the floor would be {clean.floor * 100:.1f} %"
                   + (", so much of it comes from them." if clean.floor < 0.75 * found.floor
                      else ".") if clean is not None and clean.defined else "")
        counts = rows.groupby(by, dropna=False).size() if by else pd.Series([len(rows)])
        fewest = int(counts[counts >= 2].min()) if (counts >= 2).any() else found.n
        narrow = noise.floor(rows, by, metric, self.confidence, fewest) if fewest < found.n \
            else None
        fewer = (f" Points with only {fewest} runs have a wider floor, "
                 f"{narrow.floor * 100:.1f} %." if narrow is not None and narrow.defined else "")
        rule = (" Under the repetition rule a point stops early when its runs agree, which "
                "makes this spread, and so the floor, a lower estimate."
                if not self.spec.rule.fixed else "")
        return (f"On this machine the runs of one point vary by {found.sd_log * 100:.1f} % "
                f"(the pooled standard deviation of ln {label} over {found.points} points, "
                f"{found.df} degrees of freedom; the runs were made {order}). Two points of "
                f"{found.n} runs measured alike differ by more than "
                f"{found.floor * 100:.1f} % only {(1 - self.confidence) * 100:g} % of the time: "
                "that is this campaign's noise floor. A smaller difference may still be "
                "significant on its own points' runs; a claim of no change is judged by the "
                "margin it declares, not by this floor. A difference of "
                f"{found.detectable * 100:.1f} % would be detected with "
                f"{noise.POWER * 100:g} % power." + fewer + without + rule)

    # -- glue ------------------------------------------------------------------------------

    def glue_all(self) -> None:
        """Glue every key the notebook's prose refers to; 'n/a' for a missing text, and a
        figure's :class:`Sentence` (one saying no measurement is stored, for a missing
        figure) as its text."""
        from myst_nb import glue

        text_keys, figure_keys = referenced_keys(self.experiment.notebook)
        if "outliers" in text_keys and "outliers" not in self.text:
            self.text["outliers"] = self.outliers_text()
        if "noise_floor" in text_keys and "noise_floor" not in self.text:
            self.text["noise_floor"] = self.noise_text()
        for key in text_keys:
            glue(key, str(self.text.get(key, "n/a")), display=False)
        for key in figure_keys:
            fig = self.figures.get(key) or Sentence(
                f"No measurement is stored for environment {self.environment}.")
            glue(key, fig, display=False)
            if not isinstance(fig, Sentence):
                plt.close(fig)
