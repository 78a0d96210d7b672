"""The CPU-initiated search's chapter page, one function per section of its notebook.

Each function takes the chapter (:class:`iolab.report.chapter.Chapter`), puts the section's
glued texts into ``ch.text`` and its figures into ``ch.figures``, and returns what the
section shows (a table, a list of displays, or None where it shows nothing), so the notebook
only renders. :func:`tools` sets the tool comparison beside the search: it opens that
experiment's own chapter by name and shows its runs through :mod:`iolab.shared.tool_ratios`
(no experiment imports another).

Responsible for: the chapter's texts, tables and figures from the analysis' results, and
which of them a campaign without runs (or without a reference, a replication or a tool
comparison) can still give.
Not responsible for: statistics (``analysis``, and the tool comparison's ratios in
:mod:`iolab.shared.tool_ratios`), drawing (``figures``), or gluing (``Chapter.glue_all``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from IPython.display import Markdown
from pandas.io.formats.style import Styler

from iolab.core.planner import format_duration
from iolab.errors import InputError
from iolab.execution.campaign import Campaign
from iolab.experiments.cpu_search import adaptive, figures, uses_files
from iolab.experiments.cpu_search import analysis as ca
from iolab.host.inventory import fingerprint_diff
from iolab.report import compare
from iolab.report import escape
from iolab.report import reference
from iolab.report.chapter import Chapter
from iolab.report.tables import estimate_texts, fmt_int, fmt_num, fmt_range
from iolab.shared import tool_ratios as tr
from iolab.shared.tool_bars import tools_bars



def _df(ch: Chapter) -> pd.DataFrame:
    return ca.normalize(ch.df) if ch.have else ch.df


def _ci(ch: Chapter) -> str:
    return f"{ch.confidence * 100:g} %"


def _published(ch: Chapter) -> reference.Reference | None:
    return reference.load(ch.data_dir, ch.spec.analysis["reference"])


def _ratio_texts(ratio: dict[str, float]) -> tuple[str, str]:
    return (f"{ratio['ratio']:.2f}",
            fmt_range(ratio["ci_low"], ratio["ci_high"], lambda x: f"{x:.2f}"))


def design(ch: Chapter) -> Styler:
    """The lab server's plan: the full grid's sizes and cost for the prose (its search
    strategy set to sweep), its grids in words, and its plan under the search strategy its
    params choose (``adaptive.lab``)."""
    T = ch.text
    hpc = Campaign(ch.experiment.name, "hpc-server", data_dir=ch.data_dir,
                   overrides={"search.strategy": "grid"})
    plan = hpc.design()
    size = ca.design_summary(plan.points(), hpc.spec.repetitions)
    for key in ("search_points", "search_runnable", "search_excluded", "expansion_points",
                "runs"):
        T[f"hpc_{key}"] = f"{size[key]:,}"
    T["hpc_reps"] = hpc.spec.repetitions_text
    T["hpc_eta"] = format_duration(plan.eta_s)
    T["hpc_runtime"] = str(hpc.spec.settings["runtime_s"])
    start_up = plan.seconds_per_run - hpc.experiment.run_seconds(hpc.spec.settings)
    T["hpc_per_run"] = f"{start_up:.0f}"
    adaptive.lab(ch, size["runs"], plan.eta_s)
    return escape.table(ca.grid_table(hpc.spec.grids, plan.points(), ch.experiment.describe,
                                      ch.axis_label))


def results(ch: Chapter) -> list[Any]:
    """What the stored runs are, and the runs this host cannot make with the planner's reason."""
    T, df = ch.text, ch.df
    T["ci"] = _ci(ch)
    T["env_name"] = ch.environment
    T["n_runs"] = str(len(df))
    if ch.have:
        T["tool_used"] = ", ".join(sorted(df["run.tool"].unique()))
        T["tool_version"] = ", ".join(sorted(df["run.tool_version"].unique()))
        T["runtime"] = ", ".join(map(str, sorted(df["config.runtime_s"].unique())))
        sizes = df.groupby(ch.spec.variables).size()
        T["reps"] = (str(sizes.min()) if sizes.min() == sizes.max()
                     else f"{sizes.min()} to {sizes.max()}")
    T["n_blocked"] = str(ch.plan.counts()["blocked"])
    blockers = "\n".join(f"- {escape.markdown_text(why)} ({n} runs)"
                         for why, n in ch.plan.blockers().items())
    return [escape.table(ch.what_ran()),
            Markdown("Runs this host cannot make, with the reason the planner gives:\n\n"
                     + (blockers or "- none"))]


def repetitions(ch: Chapter) -> Styler | None:
    table = ch.repetitions()
    if table.empty:
        return None
    return escape.table(table, formats={c: "{:,.0f}" for c in table.columns
                                        if c.startswith("mean")})


def optimum(ch: Chapter) -> list[Styler]:
    """Device capacity, optimum and best set, and the confirmation's estimates for the
    prose; shows the optimum's settings and the best set."""
    T, df, C = ch.text, _df(ch), ch.confidence
    T["roofline_note"] = ""
    if not ch.have:
        return []
    describe = ch.experiment.describe_point
    cap = ca.device_capacity(df, C)
    opt = ca.optimum(df)
    if cap["point"]:  # else no single-device point was measured: cap_text says so
        T["cap_iops"] = fmt_int(cap["iops"])
        T["cap_ci"] = fmt_range(cap["ci_low"], cap["ci_high"])
        T["cap_single"] = fmt_int(cap["max_single_run"])
        T["cap_point"] = describe(cap["point"])
    _capacity_texts(ch, cap)
    est = ca.point_estimate(df, opt, C)
    T["opt_iops"] = fmt_int(est["mean"])
    T["opt_ci"] = fmt_range(est["ci_low"], est["ci_high"])
    T["opt_point"] = describe(opt)
    T["roofline_note"] = ("; the 'devices' here are files on one disk, so that product bounds "
                          "nothing and the share says only how far from independent devices "
                          "the files are" if uses_files(ch.spec.settings) else "")
    best, best_rows = ca.best_points(df, C)
    cap_best, _ = ca.best_points(df[df["ndevs"] == 1], C)
    T["best_n"], T["best_of"] = str(len(best.members)), str(len(best.means))
    note = ("the capacity is the highest of estimates the data cannot separate, not a point "
            "that stands out" if len(cap_best.members) > 1 else
            "the capacity's point stands out from the others")
    T["cap_best_text"] = (f"Among the single-device points, {len(cap_best.members)} of "
                          f"{len(cap_best.means)} are in the best set of their own: {note}."
                          if len(cap_best.means) else
                          "No single-device point was measured, so none has a best set.")
    # the quoted optimum and capacity: the confirmation's fresh runs where the campaign has them
    conf = ca.confirmed_estimates(df, ca.normalize(ch.confirmed), C)
    for key in ("optimum", "capacity"):
        T.update(estimate_texts(conf[key], key[:3], describe, ca.VARIABLES, C))
    roof, share = ca.roofline_share(conf["quoted"])
    T["opt_roofline"], T["opt_of_roofline"] = fmt_int(roof), fmt_num(share, 0)
    T["confirm_step"] = ch.spec.confirm.text() if ch.spec.confirm else "no confirmation step"
    _confirmation_texts(ch, conf["optimum"] is not None, conf["capacity"] is not None)
    T["aa"] = ch.aa_text()
    settings = pd.DataFrame([{"variable": ch.axis_label(k),
                              "optimum": ch.experiment.describe(k, v)} for k, v in opt.items()])
    return [escape.table(settings), escape.table(ch.best_set_table(best_rows))]


def _capacity_texts(ch: Chapter, cap: dict) -> None:
    """``cap_text``: the search's device capacity, or why this campaign has none (a design
    without single-device points, such as a replication pack's)."""
    T = ch.text
    if not cap["point"]:
        T["cap_text"] = ("This campaign measured no single-device point, so it has no device "
                         "capacity of its own to quote.")
        return
    T["cap_text"] = (
        f"In the search, the highest mean IOPS of any single-device point is {T['cap_iops']} "
        f"IOPS ({_ci(ch)} CI {T['cap_ci']}; at {T['cap_point']}). The highest single run of "
        f"any single-device point, which AiSIO calls the device capacity, reached "
        f"{T['cap_single']} IOPS: one run, not a mean, so this chapter gives it no name of its "
        "own; what it calls the device capacity is the mean of the confirmed single-device "
        "point below.")


def _confirmation_texts(ch: Chapter, optimum: bool, capacity: bool) -> None:
    """``conf_text`` (the paragraph on what the confirmation measured) and ``answer_conf``
    (its sentence in the answer); a campaign without confirmation runs quotes the search's
    own estimates and says so."""
    T, ci = ch.text, _ci(ch)
    T["confirm_lead"] = (
        "The values this chapter quotes for the optimum and the device capacity therefore do "
        "not come from the runs that chose them. The params file asks for a confirmation step: "
        f"{T['confirm_step']}; its {len(ch.confirmed)} runs are shown below." if optimum else
        "This campaign's params have no confirmation step, so the values quoted for the optimum "
        "and the device capacity are the search's own, biased upwards.")
    if optimum:
        said = (f"The optimum, measured again, gives {T['opt_conf']} IOPS ({ci} CI "
                f"{T['opt_conf_ci']}, {T['opt_conf_n']} runs), a change of "
                f"{T['opt_conf_change']} from the search's mean of the same point (a ratio of "
                "means, interval on the log scale).")
        T["answer_conf"] = (f"Measured again in fresh runs, the point the search ranked first "
                            f"gives {T['opt_conf']} IOPS ({ci} CI {T['opt_conf_ci']})")
    else:
        said = (f"This campaign made no confirmation runs ({T['confirm_step']}), so the optimum "
                f"quoted is the search's own estimate, {T['opt_iops']} IOPS, the largest of "
                "many noisy means and so biased upwards.")
        T["answer_conf"] = (f"This campaign made no confirmation runs, so the point the search "
                            f"ranked first is quoted with the search's own estimate, "
                            f"{T['opt_iops']} IOPS, biased upwards")
    if capacity:
        said += (f" The device capacity this chapter quotes is the confirmation mean of the "
                 f"single-device point the search ranked highest, {T['cap_conf_point']}: "
                 f"{T['cap_conf']} IOPS ({ci} CI {T['cap_conf_ci']}, {T['cap_conf_n']} runs), "
                 f"a change of {T['cap_conf_change']} from the search's estimate.")
        T["answer_conf"] += (f", and the device capacity, the confirmed single-device point, "
                             f"{T['cap_conf']} IOPS.")
    elif "cap_point" not in T:
        said += " No single-device point was measured, so no device capacity is quoted."
        T["answer_conf"] += "; no single-device point was measured, so no device capacity."
    else:
        said += (f" The device capacity quoted is the search's highest single-device mean, "
                 f"{T['cap_iops']} IOPS.")
        T["answer_conf"] += f", and the device capacity {T['cap_iops']} IOPS."
    which = "confirmed" if optimum and capacity else "quoted"
    if "cap_point" in T:  # a roofline needs a capacity
        said += (f" The {which} optimum is {T['opt_of_roofline']} % of the roofline for its "
                 f"device count ({T['opt_roofline']} IOPS = {which} capacity × "
                 f"devices{T['roofline_note']}).")
    T["conf_text"] = said


def confirmed(ch: Chapter) -> Styler | None:
    if not ch.have:
        return None
    table = ca.confirmed_estimates(_df(ch), ca.normalize(ch.confirmed), ch.confidence)["table"]
    return escape.table(ch.confirmed_table(table)) if len(table) else None


def replication(ch: Chapter) -> None:
    """The same search on the host the params file names under ``replicate``."""
    T, name = ch.text, ch.spec.analysis["replicate"]
    T["rep_text"] = ("This environment's params name no search of another host to set beside "
                     "this one (the analysis key replicate); the section Across environments "
                     "below compares the findings of every environment with stored runs.")
    T["answer_rep"] = "No other host's search is named to set beside this one."
    if not ch.have or not name:
        return
    other = Chapter(ch.experiment.name, name, mode="replay", data_dir=ch.data_dir)
    if not other.have:
        return
    rep = ca.replication(_df(ch), ca.normalize(other.df), ch.confidence)
    T.update({f"rep_{k}": str(rep[k]) for k in ("ours", "theirs", "shared", "common_points")})
    T["rep_env"], T["rep_kernel"] = other.environment, str(other.host.get("kernel_release"))
    T["rep_runs"] = str(len(other.df))
    T["rep_top"], T["rep_their_top"] = ("is" if rep[k] else "is not"
                                        for k in ("top_in_theirs", "their_top_in_ours"))
    T["rep_their_top_point"] = ch.experiment.describe_point(rep["their_top"])
    T["rep_ratio"], T["rep_ratio_ci"] = _ratio_texts(rep["ratio"])
    T["rep_verdict"] = ("their top points agree (each host's top point is among the other's "
                        "best)" if rep["agree"] else
                        "their top points do not agree (at least one host's top is outside "
                        "the other's best set)")
    T["rep_text"] = (
        f"The search ran first on another host of this VM class (environment {T['rep_env']}, "
        f"kernel {T['rep_kernel']}, {T['rep_runs']} runs, the same params without the "
        f"confirmation step). Of the {T['rep_common_points']} points both hosts measured, this "
        f"host's best set holds {T['rep_ours']} and the other's {T['rep_theirs']}; "
        f"{T['rep_shared']} are in both. This host's top point {T['rep_top']} in the other "
        f"host's best set, and the other's top point ({T['rep_their_top_point']}) "
        f"{T['rep_their_top']} in this one's. The top means of the two hosts stand in a ratio "
        f"of {T['rep_ratio']} ({_ci(ch)} CI {T['rep_ratio_ci']}, this host over the other). "
        f"{T['rep_verdict'][0].upper()}{T['rep_verdict'][1:]}; whether the effects of the "
        "variables agree too is what the table Across environments at the end answers.")
    T["answer_rep"] = (f"The same search ran on another host of the class too: "
                       f"{T['rep_verdict']}, while the table Across environments says which "
                       "effects differ between the two.")


def ad(ch: Chapter) -> list[Any]:
    """Thread siblings and stress at the optimum (A–D), measured beside AiSIO's values."""
    T, df, C = ch.text, _df(ch), ch.confidence
    ref, shown = _published(ch), []
    pub_opt = None
    if ref:
        T["pub_capacity"] = fmt_int(ref.meta["device_capacity_iops"])
        T["pub_roofline"] = fmt_int(ref.meta["roofline_iops"])
        pub_opt = ref.table[ref.table["setting"] == "optimum"].set_index("id")["iops"]
        T["pub_d_vs_c"] = f"{ca.published_change(pub_opt):+.1f} %"
    else:
        shown.append(Markdown(
            f"The published reference {escape.markdown_code(ch.spec.analysis['reference'])} is "
            f"not in {escape.markdown_code(ch.data_dir / 'reference')}, so no published values "
            "are shown."))
    threads = (ch.host.get("cpu") or {}).get("threads_per_core")
    T["sibling_note"] = ("no host is recorded, so whether it can act here is not known."
                         if threads is None else
                         "the campaign's host shows one hardware thread per core, so stress "
                         "takes no sibling of bdevperf's core as far as the guest can see (a "
                         "virtual machine cannot see whether its vCPUs share a physical core); "
                         "a change measured here may have another cause, which this chapter "
                         "does not identify." if threads == 1 else
                         "this host has sibling threads, so it can act here.")
    if not ch.have:
        return shown
    opt = ca.optimum(df)
    table = ca.ad_comparison(df, opt, pub_opt, C)
    T["d_vs_c"] = _d_vs_c(ch, df, opt)
    describe = ch.experiment.describe
    columns = {
        "thread siblings": [describe("thr_sib", v) for v in table["thr_sib"]],
        "stress": [describe("stress", v) for v in table["stress"]],
        "n": table["n"], "mean IOPS (measured)": table["mean"], "sd": table["sd"],
        # a point without runs has no interval: None, shown as "not measured" like its mean
        f"{_ci(ch)} CI": [None if pd.isna(a) else fmt_range(a, b)
                          for a, b in zip(table["ci_low"], table["ci_high"])]}
    if "published" in table:
        columns.update({"AiSIO (published)": table["published"],
                        "measured / published": table["measured / published"]})
    shown.append(escape.table(
        pd.DataFrame(columns, index=table.index), index=True,
        formats={"mean IOPS (measured)": "{:,.0f}", "sd": "{:,.0f}",
                 "AiSIO (published)": "{:,.0f}", "measured / published": "{:.3f}"},
        na_rep="not measured"))
    return shown


def _d_vs_c(ch: Chapter, df: pd.DataFrame, opt: dict[str, Any]) -> str:
    """Stress on the idle CPUs at the optimum without thread siblings, or why it has no runs."""
    change = ca.effect(df, {**opt, "thr_sib": False, "stress": False}, {"stress": True},
                       ch.confidence)
    if change["n_ref"] and change["n_new"]:
        return (f"the mean IOPS changes by {change['pct']:+.1f} % ({_ci(ch)} CI "
                f"{change['ci_low']:+.1f} % to {change['ci_high']:+.1f} %)")
    target = {**opt, "thr_sib": False, "stress": True}
    why = sorted({reason for r in ch.plan.runs
                  if all(r.point.params.get(k) == v for k, v in target.items())
                  for reason in r.reasons})
    return ("not measurable here, as the optimum's stressed variant has no stored run ("
            + ("; ".join(why) or "not planned by these params") + ")")


def effects(ch: Chapter) -> Styler | None:
    """One knob at a time at the optimum's A–D variants, measured beside AiSIO's changes."""
    T = ch.text
    if ch.have:
        df, ref = _df(ch), _published(ch)
        eff = ca.effects(df, ca.optimum(df), ref.table if ref else None, ch.confidence)
    else:
        eff = pd.DataFrame()
    T["n_effects_measured"] = str(int((eff["n"] > 0).sum())) if not eff.empty else "0"
    T["n_effects"] = str(len(eff))
    if eff.empty:
        return None
    shown = pd.DataFrame({
        "change": eff["change"], "id": eff["id"], "n": eff["n"], "IOPS (measured)": eff["iops"],
        "change (measured)": [f"{p:+.1f} % ({lo:+.1f} to {hi:+.1f})" if pd.notna(p)
                              else "not measured"
                              for p, lo, hi in zip(eff["pct"], eff["ci_low"], eff["ci_high"])],
        "IOPS (AiSIO, published)": eff["published_iops"],
        "change (AiSIO, published)": [f"{p:+.1f} %" if pd.notna(p) else "—"
                                      for p in eff["published_pct"]]})
    return escape.table(shown, formats={"IOPS (measured)": "{:,.0f}",
                                        "IOPS (AiSIO, published)": "{:,.0f}"}, na_rep="—")


def sweeps(ch: Chapter) -> None:
    """The one-at-a-time sweeps around the base point: their figure and what the prose reads
    off them."""
    T = ch.text
    if not ch.have:
        return
    df, files = _df(ch), uses_files(ch.spec.settings)
    found = ca.sweeps(df, ch.spec.base, ch.confidence)
    capacity = ca.device_capacity(df, ch.confidence)["iops"]
    # a roofline bounds independent devices only, and needs a single-device capacity
    ch.figures["fig_cpu_sweeps"] = figures.sweeps(
        found, ch.experiment, ch.spec.analysis["figure_width"],
        f"{ch.environment}: one variable at a time around the reference point",
        None if files or np.isnan(capacity) else capacity)
    facts = ca.sweep_facts({v: s for v, (s, _) in found.items()})
    if "best_qdepth" in facts:
        T["best_qdepth"] = f"{facts['best_qdepth']}" + (
            ", the largest depth tested, so the peak may lie beyond it"
            if facts["qdepth_at_end"] else "")
    if "gibs_small" in facts:
        for end in ("small", "large"):
            T[f"gibs_{end}"] = f"{facts[f'gibs_{end}']:.2f}"
            T[f"io_{end}"] = str(facts[f"io_{end}"])
    if "dev_scaling" in facts:
        T["dev_scaling"], T["dev_n"] = f"{facts['dev_scaling']:.2f}", str(facts["dev_n"])
    T["device_note"] = ("Here the 'devices' are files on one file system and one (virtual) "
                        "disk, so adding files adds no device capacity, and no roofline is "
                        "drawn: capacity × devices bounds only independent devices." if files
                        else "The dashed line is the roofline, capacity × devices.")


def tools(ch: Chapter) -> Markdown | None:
    """The tool comparison (the experiment the params name, opened by name: no experiment
    imports another) of the environment the params name (else this one), set beside the
    search; a note where the params name none or that environment has no tool comparison."""
    T, C = ch.text, ch.confidence
    name = ch.spec.analysis["tool_comparison_experiment"]
    env = ch.spec.analysis["tool_comparison_env"] or ch.environment
    tc, note = None, None
    if name is None:
        note = Markdown("No tool comparison: the params name none (analysis: "
                        "tool_comparison_experiment)")
    else:
        try:
            tc = Chapter(name, env, mode="replay", data_dir=ch.data_dir)
        except InputError as exc:  # an environment without the tool comparison's params
            note = Markdown(f"No tool comparison for environment {escape.markdown_text(env)}: "
                            f"{escape.markdown_text(exc)}")
    # one environment name, two machines of its class: said, never hidden (the tools each
    # campaign ran differ, and are no difference of the machine)
    apart = ([d for d in fingerprint_diff(tc.host, ch.host) if not d.startswith("tools.")]
             if tc is not None and tc.host and ch.host else [])
    # (a glued text is never empty: the browser check takes an empty one for a missing value)
    T["tc_intro"] = f"Here is its result for environment {env}" + (
        " (measured on another host of this class than the runs above, which differs in "
        + "; ".join(apart) + "; compare the two only in their ratios):" if apart else ":")
    if tc is None or not tc.have:
        return note
    base = {k: tc.spec.base[k] for k in ("qdepth", "iosize")}
    rows = tr.comparison_rows(tc.df, base)
    if not rows.empty:  # none yet at the base point's queue depth and I/O size
        ch.figures["fig_cpu_tools"] = tools_bars(
            tc.summarize(rows, ["setup", "tool"], ["iops"]), rows,
            ch.spec.analysis["figure_width"])
    counts = tc.df.groupby("tool").size()
    for tool in tr.TOOLS:
        T[f"tc_n_{tool}"] = str(int(counts.get(tool, 0)))
        one = tr.at(rows, tool=tool, engine="io_uring", ncores=1)["iops"]
        T[f"tc_{tool}"] = fmt_int(one.mean()) if len(one) else "n/a"
    for tool in ("bdevperf", "xnvmeperf"):
        r = tr.ratio_to(rows, tool, "fio", C, engine="io_uring", ncores=1)
        if r:
            T[f"tc_ratio_{tool}"], T[f"tc_ratio_{tool}_ci"] = _ratio_texts(r)
    found = tr.ratios_to(rows, "fio", ("bdevperf", "xnvmeperf"), C)
    if not found.empty:
        T["tc_max_apart_pct"] = f"{ca.largest_departure_pct(found):.0f}"
    T["tc_qd"], T["tc_bs"] = str(base["qdepth"]), str(base["iosize"])
    ref = reference.load(ch.data_dir, tc.spec.analysis["reference"])
    if ref is not None:
        pub = tr.published(ref.table)
        T["tc_pub_bdevperf"] = fmt_int(pub.loc["SPDK bdevperf", "1 thread"])
        T["tc_pub_upcie"] = fmt_int(pub.loc["xnvmeperf, uPCIe back end", "1 thread"])
    return note


def findings(ch: Chapter) -> list:
    """The chapter's findings (none without runs: the optimum they pivot on is unknown)."""
    if not ch.have:
        return []
    df = _df(ch)
    return ca.findings(df, ch.spec.base, ca.optimum(df), ch.blocked_by_grid(), ch.confidence,
                       uses_files(ch.spec.settings))


def answer(ch: Chapter) -> Styler | None:
    """The host in words, and AiSIO's claims confronted with the findings."""
    ch.text["host_words"] = ch.host_words()
    return escape.table(ch.claims_table(findings)) if ch.have else None


# Bandwidth at 4096 against 512 bytes is the IOPS quotient times 8 in every environment, so
# between environments the two are one quotient: it is compared once.
SAME_QUOTIENT = {"iosize_4096_bandwidth": "iosize_4096_iops"}


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare),
    each quotient once (:data:`SAME_QUOTIENT`)."""
    return compare.across(ch, lambda c: [f for f in findings(c) if f.id not in SAME_QUOTIENT])
