"""The IRQ affinity chapter's page: its glued texts, tables and figures, section by section.

Each function takes the chapter (:class:`iolab.report.chapter.Chapter`), fills ``ch.text``
and ``ch.figures`` for one section of ``notebooks/irq_affinity.ipynb`` and returns what that
section displays, if anything. A campaign with no stored run (or only polled runs) gives the
texts their "not measured here" forms and no figure.

Responsible for: wording numbers for the page and drawing its figures. Not responsible for:
the numbers themselves (``analysis``), loading runs (the chapter), or the prose around them
(the notebook).
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from iolab.analysis import stats
from iolab.analysis.findings import by_id
from iolab.experiments.irq_affinity import analysis as an
from iolab.report import figures as fg
from iolab.report.tables import pct_with_interval, summary_table
from iolab.report import compare

PERFORMANCE = ["iops", "clat_mean_us", "clat_p99_us"]
# the per-CPU counts drawn, each a panel: (tidy column, title)
COUNTS = [("irqtrace.irqs", "device interrupts"), ("irqtrace.call_ipis", "function-call IPIs"),
          ("irqtrace.resched_ipis", "reschedule IPIs"), ("irqtrace.task_run", "task-work runs"),
          ("irqtrace.local_run", "deferred task-work runs")]


def rows(ch) -> pd.DataFrame:
    """The interrupt-driven runs the chapter's figures and effects are about."""
    return an.interrupt_driven(ch.df)


def _present(ch, variable: str, order) -> list:
    irq = rows(ch)
    return [v for v in order if ch.have and v in set(irq[variable])]


def _palette(ch) -> dict:
    return fg.colors(list(an.MODES), ch.spec.analysis["palette"])


def what_ran(ch) -> pd.DataFrame:
    """The provenance table, and the texts of the run settings and the interrupt layout."""
    df, T, irq = ch.df, ch.text, rows(ch)
    T["env_name"] = ch.environment
    T["n_runs"] = str(len(df))
    T["ci"] = f"{ch.confidence * 100:g} %"
    if ch.have:
        per_point = df.groupby(ch.spec.variables).size()
        T["runtime"] = ", ".join(map(str, sorted(df["config.runtime_s"].unique())))
        T["ramp"] = ", ".join(map(str, sorted(df["config.ramp_s"].unique())))
        T["reps"] = ", ".join(map(str, sorted(per_point.unique())))
        T["reader_version"] = ", ".join(sorted(df["run.tool_version"].unique()))
        T["bs"] = ", ".join(f"{b:,}" for b in sorted(irq["bs"].unique()))
        T["qdepth"] = ", ".join(map(str, sorted(irq["qdepth"].unique())))
        T["threads"] = ", ".join(map(str, sorted(df["config.cpus_per_side"].unique())))
        traced = df["irqtrace.traced"] == True  # noqa: E712 - booleans, NaN where absent
        T["traced"] = f"{int(traced.sum())} of {len(df)}"
        n = int(per_point.min())
        T["t_quantile"] = (f"{stats.t_quantile(ch.confidence, n - 1):.1f}" if n > 1
                           else "undefined")
        _layout(ch)
    return ch.what_ran()


def _layout(ch) -> None:
    df, T = ch.df, ch.text
    first = df.iloc[0]
    T["device"] = str(first["config.device"])
    T["vectors"] = "; ".join(
        f"IRQ {v['irq']} ({v['description'].split()[-1]}, "
        f"{'completions' if v['queue'] else 'no completions'}, to CPU "
        f"{','.join(map(str, v['cpus']))})" for v in json.loads(first["layout.vectors"]))
    T["irq_cpus"] = ", ".join(sorted(df["layout.irq_cpus"].astype(str).unique()))
    T["other_cpus"] = ", ".join(sorted(df["layout.other_cpus"].astype(str).unique()))
    node = first["layout.numa_node"]
    T["numa_node"] = ("none (the platform reports no NUMA node)" if node is None or node != node
                      else str(int(node)))


def performance(ch) -> None:
    """The IOPS and latency bars per placement and task-run mode, and the effects on IOPS."""
    irq, T = rows(ch), ch.text
    if ch.have and not irq.empty:  # empty: only polled runs stored so far
        perf = ch.summarize(irq, ["placement", "taskrun"], PERFORMANCE)
        shown = irq if ch.spec.analysis["show_repetitions"] else None
        fig, axes = plt.subplots(1, 3, figsize=(ch.spec.analysis["figure_width"] + 2, 4.5))
        for ax, metric in zip(axes, PERFORMANCE):
            fg.bars(ax, perf, "placement", metric, order=_present(ch, "placement", an.PLACEMENTS),
                    hue="taskrun", hue_order=_present(ch, "taskrun", an.MODES),
                    colors_by=_palette(ch), rows=shown,
                    label=lambda v: ch.label("placement")(v).replace(" ", "\n", 1),
                    hue_label=ch.label("taskrun"))
            ax.set(xlabel=ch.axis_label("placement"), ylabel=ch.metric_label(metric))
        fg.thousands(axes[0])
        fg.legend_beside(fig, list(axes), ch.axis_label("taskrun"))
        fig.tight_layout()
        ch.figures["fig_performance"] = fig
        plt.close(fig)
    effects = an.placement_effects(irq, "iops", ch.confidence) if ch.have else pd.DataFrame()
    T["iops_family"] = an.family_text(an.iops_family(irq, ch.confidence), ch.noise_floor().floor)
    for mode in an.MODES:
        row = effects[effects["taskrun"] == mode] if not effects.empty else []
        if len(row):
            T[f"place_{mode}_pct"], T[f"place_{mode}_ci"] = pct_with_interval(row.iloc[0])
            T[f"place_{mode}_verdict"] = (
                "the interval includes no change" if row.iloc[0]["verdict"] == "no clear change"
                else f"{row.iloc[0]['verdict']} beside them")
        else:
            T[f"place_{mode}_pct"] = T[f"place_{mode}_ci"] = "n/a"
            T[f"place_{mode}_verdict"] = "not measured here"
    T["iops_standout"] = _standout(an.iops_family(irq, ch.confidence) if ch.have
                                   else pd.DataFrame())
    T["placement_reading"] = _placement_reading(effects)
    _mode_effect(ch, "iops", "coop_beside_iops")


def _and(words: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _standout(family: pd.DataFrame) -> str:
    """Which comparisons of mean IOPS survive Holm's correction, in a sentence."""
    if family.empty:
        return "No comparison of mean IOPS can be made from the runs stored here."
    kept = family[family["verdict"] == "significant"]
    if kept.empty:
        return (f"None of the {len(family)} comparisons of mean IOPS in this chapter stands out "
                "after the correction for testing them together.")
    return (f"Of the {len(family)} comparisons of mean IOPS in this chapter, {len(kept)} "
            f"stand{'s' if len(kept) == 1 else ''} out after the correction for testing them "
            f"together: {'; '.join(kept['comparison'])}.")


def _placement_reading(effects: pd.DataFrame) -> str:
    """Per task-run mode, which way mean IOPS move beside the interrupt CPUs, each read on its
    own interval."""
    if effects.empty:
        return "No placement effect on mean IOPS can be computed from the runs stored here."
    said = {w: [an.MODE_NAMES[m] for m, v in zip(effects["taskrun"], effects["verdict"])
                if v == w] for w in ("higher", "lower", "no clear change")}
    if said["no clear change"] and not said["higher"] and not said["lower"]:
        return ("In no task-run mode do mean IOPS beside the interrupt CPUs differ from those on "
                "them by more than this campaign can distinguish.")
    parts = [f"{w} with {_and(modes)}" for w, modes in
             (("higher", said["higher"]), ("lower", said["lower"])) if modes]
    if said["no clear change"]:
        parts.append(f"not distinguishable from no change with {_and(said['no clear change'])}")
    return ("Beside the interrupt CPUs, mean IOPS are " + "; ".join(parts)
            + " (each read on its own interval).")


def _mode_effect(ch, metric: str, key: str, placement: str = "other_cores",
                 mode: str = "coop") -> None:
    """Texts ``<key>_pct``, ``_ci`` and ``_verdict``: ``mode`` against the default mode."""
    T = ch.text
    table = an.mode_effects(rows(ch), metric, ch.confidence) if ch.have else pd.DataFrame()
    row = (table[(table["placement"] == placement) & (table["taskrun"] == mode)]
           if not table.empty else [])
    if not len(row):
        T[f"{key}_pct"] = T[f"{key}_ci"] = "n/a"
        T[f"{key}_verdict"] = "not measured here"
        return
    T[f"{key}_pct"], T[f"{key}_ci"] = pct_with_interval(row.iloc[0])
    # a count is "more" or "fewer", a throughput "higher" or "lower"
    words = ({} if metric == "iops" else {"higher": "more", "lower": "fewer"})
    verdict = row.iloc[0]["verdict"]
    T[f"{key}_verdict"] = ("the interval includes no change" if verdict == "no clear change"
                           else words.get(verdict, verdict))


def _mean_text(ch, metric: str, **where) -> str:
    """The mean of ``metric`` over the interrupt-driven runs at ``where``; a metric
    ``reader:<column>`` counts that column's events on the reader's own CPUs only."""
    if not ch.have:
        return "n/a"
    values = rows(ch)
    if metric.startswith("reader:"):
        values = values.assign(**{metric: an.reader_interruptions(
            values, (metric.removeprefix("reader:"),))})
    for key, value in where.items():
        values = values[values[key] == value]
    values = values[metric].dropna()
    return f"{values.mean():.4f}" if len(values) else "n/a"


def events(ch) -> None:
    """The per-CPU event counts per read, and the texts that quote them."""
    irq, T = rows(ch), ch.text
    traced = irq[irq["irqtrace.traced"] == True] if ch.have else irq  # noqa: E712
    if ch.have and not traced.empty:
        _events_figure(ch, traced)
        beside = irq[(irq["placement"] == "other_cores") & (irq["taskrun"] == "default")]
        ratio = (beside["irqtrace.call_ipis_total"] / beside["irqtrace.irqs_total"]).dropna()
        T["ipi_per_irq"] = f"{ratio.mean():.2f}" if len(ratio) else "n/a"
        T["irqs_per_io_on"] = _mean_text(ch, "irqs_per_io", placement="irq_cores",
                                         taskrun="default")
        T["irqs_per_io_beside"] = _mean_text(ch, "irqs_per_io", placement="other_cores",
                                             taskrun="default")
        # sent to the reader's own CPU: an IPI to another CPU does not interrupt the reader
        T["ipis_on"] = _mean_text(ch, "reader:irqtrace.call_ipis", placement="irq_cores",
                                  taskrun="default")
        T["ipis_on_all"] = _mean_text(ch, "call_ipis_per_io", placement="irq_cores",
                                      taskrun="default")
        T["ipis_beside"] = _mean_text(ch, "reader:irqtrace.call_ipis", placement="other_cores",
                                      taskrun="default")
        T["resched_beside"] = _mean_text(ch, "reader:irqtrace.resched_ipis",
                                         placement="other_cores", taskrun="default")
    _mode_effect(ch, "call_ipis_per_io", "coop_ipis")
    _mode_effect(ch, "resched_ipis_per_io", "coop_resched")


def _events_figure(ch, traced: pd.DataFrame) -> None:
    combos = [(p, m) for p in _present(ch, "placement", an.PLACEMENTS)
              for m in _present(ch, "taskrun", an.MODES)
              if ((traced["placement"] == p) & (traced["taskrun"] == m)).any()]
    counts = [(col, what) for col, what in COUNTS if traced[col].notna().any()]
    cpus = sorted({int(c) for col, _ in counts for v in traced[col].dropna()
                   for c in json.loads(v)})
    fig, axes = plt.subplots(1, len(counts), figsize=(ch.spec.analysis["figure_width"] + 4, 4.5),
                             sharey=True)
    width = 0.8 / len(combos)
    palette = _palette(ch)
    for ax, (column, what) in zip(axes, counts):
        long = an.per_cpu(traced, column)
        for i, (p, m) in enumerate(combos):
            part = long[(long["placement"] == p) & (long["taskrun"] == m)].set_index("cpu")
            ax.bar(np.arange(len(cpus)) + (i - (len(combos) - 1) / 2) * width,
                   [part["value"].get(c, 0.0) for c in cpus], width, color=palette[m],
                   hatch="" if p == "irq_cores" else "//", edgecolor="0.3",
                   label=f"{ch.experiment.describe('placement', p)}, "
                         f"{ch.experiment.describe('taskrun', m)}")
        ax.set_xticks(np.arange(len(cpus)), [f"CPU {c}" for c in cpus])
        ax.set(title=what)
    axes[0].set_ylabel("events per completed read")
    fg.legend_beside(fig, list(axes), "reader CPUs, task-run mode")
    fig.tight_layout()
    ch.figures["fig_events"] = fig
    plt.close(fig)


def deferred(ch, found: list) -> pd.DataFrame | None:
    """DEFER_TASKRUN's task work, and the interruptions of the reader's CPUs per placement and
    mode (the table), with the texts that explain the one IOPS effect that stands out."""
    T, irq = ch.text, rows(ch)
    by = by_id(found)
    T["defer_irqs_ratio"] = by["defer_irqs_on"].text()
    T["local_defer"] = _mean_text(ch, "local_run_per_io", taskrun="defer")
    T["task_run_defer"] = _mean_text(ch, "task_run_per_io", taskrun="defer")
    T["irqs_defer_on"] = _mean_text(ch, "irqs_per_io", placement="irq_cores", taskrun="defer")
    T["call_defer_beside"] = _mean_text(ch, "reader:irqtrace.call_ipis",
                                        placement="other_cores", taskrun="defer")
    _mode_effect(ch, "iops", "defer_on_iops", placement="irq_cores", mode="defer")
    for mode in an.MODES:
        T[f"reader_load_{mode}"] = by[f"reader_load_{mode}"].text()
    if not ch.have or irq.empty or not irq["irqtrace.traced"].eq(True).any():
        return None
    load = irq.assign(reader=an.reader_interruptions(irq))
    means = load.groupby(["taskrun", "placement"])["reader"].mean()
    table = pd.DataFrame([{
        ch.axis_label("taskrun"): ch.experiment.describe("taskrun", mode),
        **{f"interruptions per read, {ch.experiment.describe('placement', p)}":
           f"{means.get((mode, p), np.nan):.4f}" for p in an.PLACEMENTS},
        "their change, beside against on": by[f"reader_load_{mode}"].text(),
        "mean IOPS, beside against on": by[f"placement_{mode}_iops"].text()}
        for mode in _present(ch, "taskrun", an.MODES)])
    return table


def polled(ch) -> None:
    stored = len(ch.df[ch.df["completion"] == "polled"]) if ch.have else 0
    reasons = sorted({r.reason for r in ch.plan.by_status("blocked")
                      if r.point.params.get("completion") == "polled"})
    ch.text["polled_status"] = (f"{stored} polled runs stored" if stored else
                                "blocked here: " + "; ".join(reasons) if reasons
                                else "none planned")


def notes(ch) -> None:
    ch.text["seed_prediction"] = f"{an.seed_share_prediction(0.165) * 100:.1f} %"


def summary(ch) -> pd.DataFrame | None:
    """One row per point: n, mean, sd and interval of IOPS, p99 latency and call IPIs."""
    irq = rows(ch)
    if not ch.have or irq.empty:
        return None
    keys = [k for k in ch.spec.variables if irq[k].nunique() > 1] or ["placement"]
    return summary_table(
        ch.summarize(irq, keys, ["iops", "clat_p99_us", "call_ipis_per_io"]), keys,
        {"iops": "IOPS", "clat_p99_us": "p99 µs", "call_ipis_per_io": "call IPIs per read"},
        label=lambda k, v: ch.experiment.describe(k, v), digits={"call_ipis_per_io": 4},
        key_names={k: ch.axis_label(k) for k in keys}, confidence=ch.confidence,
        outliers=ch.outlier_counts(irq, keys, "iops"))


def findings(ch) -> list:
    return an.findings(ch.df, ch.confidence)


def answer(ch, found: list) -> pd.DataFrame:
    """The closing section's texts and the table of the notes' claims with their verdicts."""
    ch.text.update({f"f_{f.id}": f.text() for f in found})
    ch.text["host_words"] = ch.host_words()
    if ch.noise_floor().defined:  # none from a single run: the glue stays unset, not 'nan'
        ch.text["floor_pct"] = f"{100 * ch.noise_floor().floor:.1f}"
        # a campaign run point by point has the machine's slow drift outside its spread
        ch.text["floor_words"] = ch.text["floor_pct"] + " %" + (
            "" if ch.spec.order == "interleaved" else
            ", a lower estimate, as the runs were made in sequence")
    return ch.claims_table(findings)


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare)."""
    return compare.across(ch, findings)
