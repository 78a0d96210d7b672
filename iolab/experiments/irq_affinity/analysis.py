"""Analysis of the IRQ affinity chapter: pure functions over its tidy table.

Definitions:

- the *placement effect* of a task-run mode is the % change of a metric's mean when the
  reader runs beside the interrupt CPUs (``other_cores``) instead of on them
  (``irq_cores``), with a log-scale interval (:func:`iolab.analysis.stats.pct_change`);
- the *mode effect* at a placement is the % change of a metric's mean with a task-run mode
  against ``default``;
- a *verdict* reads an interval against zero: ``higher``, ``lower`` or ``no clear change``;
- the *family* of the chapter's IOPS comparisons is judged together, with Holm's correction
  (:func:`iops_family`), since one in twenty equal pairs looks different at 95 % each;
- *per CPU* counts come from bpftrace's per-CPU maps (JSON columns such as
  ``irqtrace.call_ipis``), averaged over the repetitions of a point;
- the *interruptions of the reader's CPUs* in a run are the device interrupts handled on the
  CPUs the reader ran on plus the IPIs (function-call and reschedule) sent to them, per read
  (:func:`reader_interruptions`): what takes those CPUs away from the reader, whatever the
  task-run mode.

Responsible for: those numbers. Not responsible for: loading (``iolab.core.tidy``), wording
or figures (the notebook and ``iolab.report``).
"""

from __future__ import annotations

import json

import pandas as pd

from iolab.analysis import findings as fd
from iolab.analysis import multiple, stats
from iolab.analysis.findings import Finding

PLACEMENTS = ("irq_cores", "other_cores")
MODES = ("default", "coop", "defer")


def interrupt_driven(df: pd.DataFrame) -> pd.DataFrame:
    """The runs with interrupt completions (the polled ones, where stored, are apart)."""
    return df[df["completion"] == "interrupt"] if not df.empty else df


def _values(df: pd.DataFrame, metric: str, **where) -> pd.Series:
    mask = pd.Series(True, index=df.index)
    for key, value in where.items():
        mask &= df[key] == value
    return df.loc[mask, metric].dropna()


def verdict(change: dict[str, float]) -> str:
    if change["ci_low"] > 0:
        return "higher"
    if change["ci_high"] < 0:
        return "lower"
    return "no clear change"


def placement_effects(df: pd.DataFrame, metric: str, confidence: float) -> pd.DataFrame:
    """Per task-run mode: both placements' means and n, and the placement effect."""
    out = []
    for mode in [m for m in MODES if m in set(df["taskrun"])] if not df.empty else []:
        on = _values(df, metric, taskrun=mode, placement="irq_cores")
        beside = _values(df, metric, taskrun=mode, placement="other_cores")
        if len(on) >= 2 and len(beside) >= 2:
            change = stats.pct_change(beside, on, confidence)
            out.append({"taskrun": mode, "irq_cores": on.mean(), "other_cores": beside.mean(),
                        "n_irq_cores": len(on), "n_other_cores": len(beside), **change,
                        "verdict": verdict(change)})
    return pd.DataFrame(out)


def mode_effects(df: pd.DataFrame, metric: str, confidence: float) -> pd.DataFrame:
    """Per placement and non-default mode: the mode effect against ``default``."""
    out = []
    for placement in [p for p in PLACEMENTS if p in set(df["placement"])] if not df.empty else []:
        base = _values(df, metric, placement=placement, taskrun="default")
        for mode in [m for m in MODES[1:] if m in set(df["taskrun"])]:
            new = _values(df, metric, placement=placement, taskrun=mode)
            if len(base) >= 2 and len(new) >= 2:
                change = stats.pct_change(new, base, confidence)
                out.append({"placement": placement, "taskrun": mode, "default": base.mean(),
                            "mode": new.mean(), **change, "verdict": verdict(change)})
    return pd.DataFrame(out)


MODE_NAMES = {"default": "the default mode", "coop": "COOP_TASKRUN", "defer": "DEFER_TASKRUN"}
PLACEMENT_NAMES = {"irq_cores": "on the interrupt CPUs", "other_cores": "beside them"}


def iops_family(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """Every comparison of mean IOPS the chapter makes (the placement effect of each mode, the
    effect of each mode against the default at each placement), with its p-value, the
    Holm-adjusted p-value over the whole family and the verdict after that correction
    (:func:`iolab.analysis.multiple.family`)."""
    rows = [{"comparison": f"beside vs on the interrupt CPUs, {MODE_NAMES[r.taskrun]}",
             "pct": r.pct, "p": r.p}
            for r in placement_effects(df, "iops", confidence).itertuples()]
    rows += [{"comparison": f"{MODE_NAMES[r.taskrun]} vs the default mode, "
                            f"{PLACEMENT_NAMES[r.placement].replace('them', 'the interrupt CPUs')}",
              "pct": r.pct, "p": r.p}
             for r in mode_effects(df, "iops", confidence).itertuples()]
    return multiple.family(rows, confidence)


def family_text(table: pd.DataFrame, floor: float | None = None) -> str:
    return multiple.family_text(table, "comparisons of mean IOPS", floor)


def per_cpu(df: pd.DataFrame, column: str, per_io: bool = True) -> pd.DataFrame:
    """Long table of (placement, taskrun, cpu, value): the JSON per-CPU counts of ``column``
    averaged over repetitions, per completed read when ``per_io``."""
    rows = []
    for _, r in df.iterrows():
        counts = r.get(column)
        if not isinstance(counts, str):
            continue
        ios = r["uring_reader.ios"]
        for cpu, n in json.loads(counts).items():
            rows.append({"placement": r["placement"], "taskrun": r["taskrun"], "cpu": int(cpu),
                         "run": r["run.id"], "value": n / ios if per_io and ios else n})
    long = pd.DataFrame(rows, columns=["placement", "taskrun", "cpu", "run", "value"])
    if long.empty:
        return long.drop(columns="run")
    # a CPU that counted nothing in a run is absent from its map: count it as 0
    runs = long[["placement", "taskrun", "run"]].drop_duplicates()
    cpus = pd.DataFrame({"cpu": sorted(long["cpu"].unique())})
    full = runs.merge(cpus, how="cross").merge(long, how="left",
                                               on=["placement", "taskrun", "run", "cpu"])
    full["value"] = full["value"].fillna(0.0)
    return full.groupby(["placement", "taskrun", "cpu"], as_index=False)["value"].mean()


INTERRUPTING = ("irqtrace.irqs", "irqtrace.call_ipis", "irqtrace.resched_ipis")


def reader_interruptions(df: pd.DataFrame,
                         columns: tuple[str, ...] = INTERRUPTING) -> pd.Series:
    """Per run: the events of ``columns`` (by default every interruption) on the reader's
    CPUs (``run.cpus``) per completed read, from the per-CPU counts; NaN for a run that was
    not traced."""
    def one(r: pd.Series) -> float:
        counts = [r.get(c) for c in columns]
        ios, cpus = r.get("uring_reader.ios"), r.get("run.cpus")
        if not all(isinstance(c, str) for c in counts) or not ios or not isinstance(cpus, str):
            return float("nan")
        mine = {c.strip() for c in cpus.split(",")}
        return sum(n for c in counts for cpu, n in json.loads(c).items() if cpu in mine) / ios

    return (df.apply(one, axis=1).astype(float) if not df.empty
            else pd.Series(dtype=float, index=df.index))


def seed_share_prediction(share: float) -> float:
    """The lab notes' arithmetic: freeing a share ``share`` of a CPU's time for the
    application predicts ``1/(1-share) - 1`` more throughput (as a fraction)."""
    return 1.0 / (1.0 - share) - 1.0


def _per_read_beside(values: list[float], confidence: float) -> Finding:
    """Reschedule IPIs per read beside the interrupt CPUs in the default mode against the one
    per read the notes state ("an IPI is sent for each IO")."""
    what = ("reschedule IPIs per read beside the interrupt CPUs, default mode, against one "
            "per read")
    if not values:
        return fd.undefined("resched_per_read_beside", what, "no stored runs of it", "ratio",
                            confidence)
    return fd.level("resched_per_read_beside", what, values, 1.0, confidence)


def findings(df: pd.DataFrame, confidence: float = 0.95) -> list[Finding]:
    """The chapter's findings (:mod:`iolab.analysis.findings`) over the interrupt-driven runs:
    the placement effect on IOPS in each task-run mode, and the reschedule
    IPIs per read beside the interrupt CPUs against on them, and with COOP_TASKRUN against the
    default (differences, as the counts may be zero), and against the one per read the notes
    state."""
    rows = interrupt_driven(df)
    if not rows.empty:
        rows = rows.assign(reader_interruptions=reader_interruptions(rows))

    def of(metric: str, **where) -> list[float]:
        return _values(rows, metric, **where).tolist() if not rows.empty else []

    def build(kind, fid: str, what: str, new: list[float], base: list[float]) -> Finding:
        if not new or not base:
            return fd.undefined(fid, what, "no stored runs of one side", "change", confidence)
        return kind(fid, what, new, base, confidence)

    return [
        build(fd.change, "placement_default_iops", "mean IOPS beside the interrupt CPUs "
              "against on them, default mode", of("iops", placement="other_cores",
                                                  taskrun="default"),
              of("iops", placement="irq_cores", taskrun="default")),
        build(fd.change, "placement_defer_iops", "mean IOPS beside the interrupt CPUs against "
              "on them, DEFER_TASKRUN", of("iops", placement="other_cores", taskrun="defer"),
              of("iops", placement="irq_cores", taskrun="defer")),
        build(fd.change, "placement_coop_iops", "mean IOPS beside the interrupt CPUs against on "
              "them, COOP_TASKRUN", of("iops", placement="other_cores", taskrun="coop"),
              of("iops", placement="irq_cores", taskrun="coop")),
        build(fd.difference, "resched_beside_default", "reschedule IPIs per read beside the "
              "interrupt CPUs minus on them, default mode",
              of("resched_ipis_per_io", placement="other_cores", taskrun="default"),
              of("resched_ipis_per_io", placement="irq_cores", taskrun="default")),
        _per_read_beside(of("resched_ipis_per_io", placement="other_cores", taskrun="default"),
                         confidence),
        # the notes read the handler's share from a perf profile, which no campaign here makes
        fd.undefined("handler_share_predicts_gain", "the placement gain against the gain the "
                     "interrupt handler's share of CPU time predicts", "no campaign here "
                     "profiles the interrupt CPUs, so the handler's share of their time is not "
                     "measured", "ratio", confidence),
        build(fd.difference, "resched_coop_beside", "reschedule IPIs per read with "
              "COOP_TASKRUN minus the default mode, beside the interrupt CPUs",
              of("resched_ipis_per_io", placement="other_cores", taskrun="coop"),
              of("resched_ipis_per_io", placement="other_cores", taskrun="default")),
        build(fd.ratio, "defer_irqs_on", "device interrupts per read with DEFER_TASKRUN "
              "against the default mode, on the interrupt CPUs",
              of("irqs_per_io", placement="irq_cores", taskrun="defer"),
              of("irqs_per_io", placement="irq_cores", taskrun="default")),
        *(build(fd.change, f"reader_load_{mode}", "interruptions of the reader's CPUs per "
                f"read beside the interrupt CPUs against on them, {MODE_NAMES[mode]}",
                of("reader_interruptions", placement="other_cores", taskrun=mode),
                of("reader_interruptions", placement="irq_cores", taskrun=mode))
          for mode in MODES),
    ]
