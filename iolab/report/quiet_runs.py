"""How quiet the machine was during a chapter's runs, and the runs measured under foreign
load, shown apart.

Every run since the quiet collector (:mod:`iolab.collectors.quiet`) records, as tidy columns,
the CPU that processes outside iolab's own tree used around it (``quiet.foreign_cpu_pct``),
the hypervisor's steal (``quiet.steal_pct``) and whether either was above its stated share
(``quiet.foreign_load``). A chapter says what they were over its runs and lists the runs
measured under foreign load with their point; those runs stay in its tables and findings
(dropping them would be a choice made after seeing the data), so the list is what lets a
reader judge whether one of them pulls a mean. Runs made before the collector existed record
nothing, and the text says so rather than calling them quiet.

Responsible for: that sentence and that list. Not responsible for: the readings (the
collector), refusing a busy machine (``iolab.execution.replicate``) or where a notebook shows
them.
"""

from __future__ import annotations

import pandas as pd

from iolab.collectors.quiet import FOREIGN_CPU_PCT, STEAL_PCT
from iolab.report.chapter import setting_words
from iolab.report.tables import fmt_num

FOREIGN, STEAL, LOADED = "quiet.foreign_cpu_pct", "quiet.steal_pct", "quiet.foreign_load"


def recorded(rows: pd.DataFrame) -> pd.DataFrame:
    """The runs that recorded the machine's quiet."""
    if rows.empty or FOREIGN not in rows:
        return rows.iloc[0:0]
    return rows[rows[FOREIGN].notna()]


def loaded(rows: pd.DataFrame) -> pd.DataFrame:
    """The runs measured under foreign load."""
    known = recorded(rows)
    if known.empty or LOADED not in known:
        return known
    return known[known[LOADED].fillna(False).astype(bool)]


def text(rows: pd.DataFrame) -> str:
    """The chapter's sentence on its runs' quiet (see the module docstring)."""
    if rows.empty:
        return "No run is stored, so there is no machine's quiet to report."
    known = recorded(rows)
    if known.empty:
        return ("These runs were made before iolab recorded the machine's quiet with each run "
                "(the CPU of processes outside its own and the hypervisor's steal), so whether "
                "anything else used the machine during them is not known.")
    under = loaded(rows)
    share = (f"{len(known)} of {len(rows)} runs record" if len(known) < len(rows)
             else f"All {len(rows)} runs record")
    said = (f"{share} the machine's quiet: around a run, processes outside iolab used a median "
            f"of {fmt_num(known[FOREIGN].median(), 1)} % of its CPU (at most "
            f"{fmt_num(known[FOREIGN].max(), 1)} %), and the hypervisor stole at most "
            f"{fmt_num(known[STEAL].max(), 1)} %. ")
    limits = f"above {FOREIGN_CPU_PCT:g} % foreign CPU or {STEAL_PCT:g} % steal"
    if under.empty:
        return said + f"No run was measured under foreign load ({limits})."
    if len(under) == 1:
        return said + (f"1 run was measured under foreign load ({limits}), listed below with "
                       "its point; it stays in the tables and findings, so the list lets a "
                       "reader judge whether it pulls its point's mean.")
    return said + (f"{len(under)} runs were measured under foreign load ({limits}), listed "
                   "below with their points; they stay in the tables and findings, so the "
                   "list lets a reader judge whether one pulls its point's mean.")


def table(rows: pd.DataFrame, variables: list[str]) -> pd.DataFrame | None:
    """The runs measured under foreign load: run, point, foreign CPU and steal; None when
    there is none."""
    under = loaded(rows)
    if under.empty:
        return None
    shown = [v for v in variables if v in under]
    return pd.DataFrame({
        "run": under["run.id"].astype(str) if "run.id" in under else under.index.astype(str),
        "point": [", ".join(f"{v} {setting_words(row[v])}" for v in shown)
                  for _, row in under.iterrows()],
        "foreign CPU (%)": [fmt_num(x, 1) for x in under[FOREIGN]],
        "steal (%)": [fmt_num(x, 1) for x in under[STEAL]],
    }).reset_index(drop=True)
