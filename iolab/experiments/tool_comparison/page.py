"""The tool comparison chapter's page: what each of its sections glues, draws and shows.

Each function serves one section of ``notebooks/tool_comparison.ipynb``: it takes the
:class:`~iolab.report.chapter.Chapter`, fills ``ch.text`` (the glued texts) and
``ch.figures``, and returns what the section displays.

Responsible for: the chapter's wording, number formats and tables, and which figure goes
under which key.
Not responsible for: statistics (``analysis``, and :mod:`iolab.shared.tool_ratios`, which
the CPU-initiated chapter shares), drawing (``figures``; the bars are
:func:`iolab.shared.tool_bars.tools_bars`), loading runs and the
shared chapter steps (``iolab.report.chapter``), or which keys the prose glues (the
notebook's Markdown).
"""

from __future__ import annotations

import pandas as pd
from IPython.display import Markdown

from iolab.core.planner import format_duration
from iolab.execution.campaign import Campaign
from iolab.experiments.tool_comparison import analysis as ta
from iolab.experiments.tool_comparison.figures import qdepth_bands
from iolab.report import compare
from iolab.report import escape
from iolab.report import reference
from iolab.report.chapter import Chapter, Sentence
from iolab.report.tables import design_table, fmt_int, fmt_num, fmt_range
from iolab.shared import tool_ratios as tr
from iolab.shared.tool_bars import tools_bars

TOOLS = list(tr.TOOLS)
POLLING = ("bdevperf", "xnvmeperf")
# the lab server whose plan the design section shows
LAB = "hpc-server"


def _numbers(table: pd.DataFrame, fmt: str, caption: str, na_rep: str | None = None):
    """A table of numbers, right-aligned with room between the columns, under a caption."""
    return (escape.table(table, index=True, formats=fmt, na_rep=na_rep, caption=caption)
            .set_properties(**{"padding": "0 0.8em", "text-align": "right"}))


def design(ch: Chapter):
    """The params file's design, and the run length and repetitions for the prose."""
    T = ch.text
    T["ci"] = f"{ch.confidence * 100:g} %"
    T["env_name"] = ch.environment
    T["runtime"] = str(ch.spec.settings["runtime_s"])
    T["reps"] = ch.spec.repetitions_text
    return escape.table(design_table(ch.spec, ch.experiment))


def lab_plan(ch: Chapter) -> Markdown:
    """The lab server's plan as iolab prints it, less the params file's path on the machine
    that built this, and its size for the prose."""
    plan = Campaign(ch.experiment.name, LAB, data_dir=ch.data_dir).design()
    ch.text["hpc_points"] = str(len(plan.points()))
    ch.text["hpc_runs"] = str(len(plan.runs))
    ch.text["hpc_eta"] = format_duration(plan.eta_s)
    summary = "\n".join(line for line in plan.summary().splitlines()
                        if not line.lstrip().startswith("params:"))
    return Markdown(escape.markdown_block(summary))


def what_ran(ch: Chapter):
    """What ran, and each tool's runs and versions for the prose."""
    T, df = ch.text, ch.df
    T["n_runs"] = str(len(df))
    if ch.have:
        versions = (df.groupby("tool")["run.tool_version"]
                    .agg(lambda v: ", ".join(sorted(set(map(str, v))))).reindex(TOOLS).dropna())
        for tool, version in versions.items():
            T[f"version_{tool}"] = version
        counts = df.groupby("tool").size()
        for tool in TOOLS:
            T[f"n_{tool}"] = str(int(counts.get(tool, 0)))
    return escape.table(ch.what_ran())


def tools(ch: Chapter) -> list:
    """The three tools at the base point's queue depth and I/O size: the figure, the tables
    of mean IOPS and CPU (to display; none without runs), and the rates, ratios to fio and
    CPU the prose quotes."""
    T = ch.text
    base = {k: ch.spec.base[k] for k in ("qdepth", "iosize")}
    T["qd"], T["bs"] = str(base["qdepth"]), str(base["iosize"])
    rows = tr.comparison_rows(ch.df, base) if ch.have else ch.df
    if not ch.have or rows.empty:
        return []
    summary = ch.summarize(rows, ["setup", "tool"], ["iops"])
    ch.figures["fig_tools"] = tools_bars(summary, rows, ch.spec.analysis["figure_width"])
    # every tool a column, empty where it has no runs yet (a campaign stopped part way)
    iops = summary.pivot(index="setup", columns="tool", values="mean").reindex(
        index=tr.setups(rows), columns=TOOLS)
    cpu = ta.cpu_means(rows)
    _cpu_texts(ch, rows, cpu)
    _ratio_texts(ch, rows)
    return [_numbers(iops.rename(columns=tr.TOOL_NAMES), "{:,.0f}", "mean IOPS", "not measured"),
            _numbers(cpu.rename(columns=tr.TOOL_NAMES), "{:.0f} %",
                     "mean CPU over the tool's lifetime (GNU time), % of one CPU",
                     "not measured")]


def _cpu_texts(ch: Chapter, rows: pd.DataFrame, cpu: pd.DataFrame) -> None:
    """The polling tools' CPU as multiples of fio's, and each tool's range per core."""
    T = ch.text
    low, high = ta.cpu_ratio_range(cpu, POLLING, "fio")
    T["cpu_times_lo"], T["cpu_times_hi"] = fmt_num(low, 1), fmt_num(high, 1)
    for tool, r in ta.cpu_per_core(rows).iterrows():
        T[f"cpu_lo_{tool}"], T[f"cpu_hi_{tool}"] = f"{r['min']:.0f}", f"{r['max']:.0f}"


def _ratio_texts(ch: Chapter, rows: pd.DataFrame) -> None:
    """Each polling tool's ratio to fio per set-up, how far the ratios spread, and each
    tool's mean IOPS per set-up."""
    T = ch.text
    found = tr.ratios_to(rows, "fio", POLLING, ch.confidence)
    for r in found.itertuples():
        key = f"ratio_{r.tool}_{r.engine}_{r.ncores}"
        T[key] = f"{r.ratio:.2f}"
        T[f"{key}_ci"] = fmt_range(r.ci_low, r.ci_high, lambda x: f"{x:.2f}")
    T["n_setups"] = str(len(tr.setups(rows)))
    T["n_ratios"] = str(len(found))
    # the ratios as one family: each interval at 1 - alpha / m (Bonferroni), so that the
    # count of ratios apart from 1 keeps a 5 % family-wise error rate
    level = 1 - (1 - ch.confidence) / max(1, len(found))
    T["apart_level"] = f"{level * 100:.2f} %"
    T["n_apart"] = str(ta.apart(tr.ratios_to(rows, "fio", POLLING, level)))
    if not found.empty:
        T["max_apart_pct"] = f"{100 * ta.largest_difference(found):.0f}"
    for tool, r in ta.ratio_ranges(found).iterrows():
        T[f"ratio_lo_{tool}"], T[f"ratio_hi_{tool}"] = f"{r['min']:.2f}", f"{r['max']:.2f}"
    for (tool, engine, n), mean in ta.mean_iops(rows).items():
        T[f"{tool}_{engine}_{n}"] = fmt_int(mean)
    T["ratios_text"] = ratios_sentence(T, ch.text.get("ci") or f"{ch.confidence * 100:g} %")


# the set-ups the prose walks through, in its order
SETUPS = (("io_uring", 1), ("libaio", 1), ("io_uring", 2), ("libaio", 2))
SETUP_WORDS = {("io_uring", 1): "io_uring on one core", ("libaio", 1): "libaio on one core",
               ("io_uring", 2): "io_uring on two cores", ("libaio", 2): "libaio on two cores"}


def ratios_sentence(T: dict, ci: str) -> str:
    """The paragraph's sentences on each polling tool's ratio to fio, set-up by set-up, from
    the texts :func:`_ratio_texts` made; a set-up this campaign did not measure with all
    three tools is named as such, never quoted as "n/a"."""
    def has(engine: str, n: int) -> bool:
        return all(f"ratio_{t}_{engine}_{n}" in T for t in POLLING)

    def r(tool: str, engine: str, n: int, ci_words: str = "") -> str:
        key = f"ratio_{tool}_{engine}_{n}"
        return f"{T[key]} ({ci_words}{T[key + '_ci']})"

    said = []
    if has("io_uring", 1) and "fio_io_uring_1" in T:
        said.append(f"Through io_uring on one core, bdevperf completes "
                    f"{T['bdevperf_io_uring_1']} reads per second and xnvmeperf "
                    f"{T['xnvmeperf_io_uring_1']}, against fio's {T['fio_io_uring_1']}: ratios "
                    f"to fio of {r('bdevperf', 'io_uring', 1, ci + ' CI ')} and "
                    f"{r('xnvmeperf', 'io_uring', 1)}.")
    if has("libaio", 1):
        said.append(f"Through libaio the same comparison gives {r('bdevperf', 'libaio', 1)} and "
                    f"{r('xnvmeperf', 'libaio', 1)}.")
    two = [f"{T[f'ratio_bdevperf_{e}_2']} and {T[f'ratio_xnvmeperf_{e}_2']} with {e}"
           for e in ("io_uring", "libaio") if has(e, 2)]
    if two:
        said.append(f"On two cores (two files) the ratios are {', '.join(two)}.")
    missing = [SETUP_WORDS[s] for s in SETUPS if not has(*s)]
    if missing:
        listed = (missing[0] if len(missing) == 1
                  else ", ".join(missing[:-1]) + " and " + missing[-1])
        said.append(f"This campaign did not measure {listed} with all three tools, so "
                    f"{'that set-up has' if len(missing) == 1 else 'those set-ups have'} no "
                    "ratio to fio here.")
    return " ".join(said)


def qdepth(ch: Chapter) -> None:
    """The queue-depth sweep at the base point's interface, cores and I/O size: the figure,
    each tool's rate at the lowest depth and its highest mean."""
    if not ch.have:
        return
    base = ch.spec.base
    rows = tr.at(ch.df, engine=base["engine"], ncores=base["ncores"], iosize=base["iosize"])
    if rows["qdepth"].nunique() < 2:
        depths = ", ".join(str(int(q)) for q in sorted(rows["qdepth"].unique())) or "none"
        ch.figures["fig_qdepth"] = Sentence(
            f"No figure here: this campaign measured one queue depth at the base point's "
            f"interface, cores and I/O size (queue depth {depths}), so there is no sweep of "
            "rate against depth.")
        ch.text["qd_text"] = ("Without a sweep of queue depth, neither the rate one read at a "
                              "time nor the highest rate along the depths is measured here.")
        return
    summary = ch.summarize(rows, ["qdepth", "tool"], ["iops"])
    ch.figures["fig_qdepth"] = qdepth_bands(summary, rows, ch.spec.analysis["figure_width"])
    for tool, r in ta.qdepth_sweep(summary).iterrows():
        ch.text[f"qd1_{tool}"] = fmt_int(r["lowest"])
        ch.text[f"qdmax_{tool}"] = fmt_int(r["best"])
        ch.text[f"qdbest_{tool}"] = str(int(r["best_at"]))
    T = ch.text
    T["qd_min"] = str(int(summary["qdepth"].min()))
    T["qd_max"] = str(int(summary["qdepth"].max()))
    T["qd_text"] = (
        f"At queue depth {T['qd_min']} the tools complete {T['qd1_fio']} (fio), "
        f"{T['qd1_bdevperf']} (bdevperf) and {T['qd1_xnvmeperf']} (xnvmeperf) reads per "
        "second: one read at a time, the rate is the inverse of the latency of the whole "
        f"path. The highest means along the sweep (up to queue depth {T['qd_max']}) are "
        f"{T['qdmax_fio']} at {T['qdbest_fio']}, {T['qdmax_bdevperf']} at "
        f"{T['qdbest_bdevperf']} and {T['qdmax_xnvmeperf']} at {T['qdbest_xnvmeperf']}.")


def published(ch: Chapter):
    """AiSIO's published means and the one-thread numbers the prose quotes; a note where the
    data folder lacks them."""
    name = ch.spec.analysis["reference"]
    ref = reference.load(ch.data_dir, name)
    if ref is None:
        return Markdown(f"The published reference {escape.markdown_code(name)} is not in "
                        f"{escape.markdown_code(ch.data_dir / 'reference')}, so no published "
                        "values are shown.")
    pub = tr.published(ref.table)
    one = pub["1 thread"]
    bdevperf, spdk, upcie = (one["SPDK bdevperf"], one["xnvmeperf, SPDK back end"],
                             one["xnvmeperf, uPCIe back end"])
    ch.text["pub_bdevperf_1"] = fmt_int(bdevperf)
    ch.text["pub_upcie_1"] = fmt_int(upcie)
    ch.text["pub_spdk_1"] = fmt_int(spdk)
    ch.text["pub_upcie_over_bdevperf"] = f"{upcie / bdevperf:.1f}"
    ch.text["pub_spdk_over_bdevperf"] = f"{spdk / bdevperf:.1f}"
    return _numbers(pub, "{:,.0f}", "AiSIO, published (mean IOPS of 5 repetitions; 16 SSDs, "
                    "512 B random reads, queue depth 128)")


def findings(ch: Chapter) -> list:
    return ta.findings(ch.df, ch.spec.base, ch.confidence)


def answer(ch: Chapter):
    """The findings the answer quotes, the host, and the claims table."""
    found = findings(ch)
    ch.text.update({f"f_{f.id}": f.text() for f in found})
    ch.text["host_words"] = ch.host_words()
    return escape.table(ch.claims_table(findings))


def across(ch) -> "pd.DataFrame | None":
    """This environment's findings beside the other environments' (iolab.report.compare)."""
    return compare.across(ch, findings)
