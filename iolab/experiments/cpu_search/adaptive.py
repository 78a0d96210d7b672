"""The CPU chapter's section on the adaptive search: the lab server's plan with it, the full
grid measured here as its proof, the strategies replayed against that grid, and a live search
of the same space.

The proof grid and the live search are campaigns of their own environments on the chapter's
host (``analysis.search_proof`` and ``analysis.search_live`` of the chapter's params; each of
them says ``part_of`` the chapter's environment, so neither gets a page of its own). The
replays are read from the file ``iolab search-replay`` derives (``iolab.core.search.replay``),
refused when the grid's stored runs are not those it was derived from.

Responsible for: the section's texts, table and figure. Not responsible for: the strategies,
the replays or the statistics (``iolab.core.search``), or gluing (``Chapter.glue_all``).
"""

from __future__ import annotations

import functools
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from pandas.io.formats.style import Styler

from iolab.core.planner import format_duration
from iolab.core.search import replay
from iolab.errors import InputError
from iolab.execution.campaign import Campaign
from iolab.report import escape
from iolab.report.chapter import Chapter, Sentence
from iolab.report.tables import fmt_int

NAMES = {"grid": "full grid", "random": "random search", "tpe": "Optuna's default sampler",
         "adaptive": "adaptive strategy"}
TARGET_FOUND, TARGET_SHARE = 0.95, 0.10   # 95 % of replays with at most 10 % of the runs
SHOWN = 12   # rows of the best set's table


def _pct(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f} %"


def _point(ch: Chapter, params: dict[str, Any], varied: list[str]) -> str:
    return ch.experiment.describe_point({v: params[v] for v in varied})


def lab(ch: Chapter, grid_runs: int, grid_eta_s: float) -> None:
    """The lab server's plan under its search strategy (budget, runs and time as a range),
    set against the full grid's runs and time."""
    T = ch.text
    hpc = Campaign(ch.experiment.name, "hpc-server", data_dir=ch.data_dir)
    search = hpc.spec.search
    if search is None or not search.adaptive:
        T["hpc_adaptive"] = "The lab server's params sweep the whole grid."
        return
    plan = hpc.design()
    certain, most = plan.search_range()
    low, high = certain * plan.seconds_per_run, most * plan.seconds_per_run
    T["hpc_adaptive"] = (
        f"The lab server's params do not sweep this grid any more: they search it with the "
        f"{search.strategy} strategy, with at most {search.budget:,} runs "
        f"({_pct(search.budget / grid_runs, 1)} of the full sweep's {grid_runs:,}), seed "
        f"{search.seed}. With the one-at-a-time grids pivoting on the search's answer and the "
        f"confirmation runs, its plan is {certain:,} to {most:,} runs, "
        f"{format_duration(low)} to {format_duration(high)}: at most "
        f"{_pct(high / grid_eta_s, 1)} of the full sweep's time.")


def _proof(ch: Chapter) -> tuple[Campaign, replay.Grid] | None:
    """The proof grid's campaign and samples (read once per chapter: three sections use it)."""
    env = ch.spec.analysis.get("search_proof")
    return _grid(ch.experiment.name, env, str(ch.data_dir)) if env else None


@functools.lru_cache(maxsize=4)
def _grid(experiment: str, environment: str, data_dir: str
          ) -> tuple[Campaign, replay.Grid] | None:
    camp = Campaign(experiment, environment, data_dir=data_dir)
    try:
        return camp, replay.grid_of(camp.plan(as_recorded=True))
    except InputError:
        return None


def proof(ch: Chapter) -> Styler | None:
    """The full grid: its space, runs, best set and answer; the best set as a table."""
    T = ch.text
    found = _proof(ch)
    if found is None:
        T["proof_env"] = "none stored for this environment"
        T["proof_text"] = "No full grid of the search space is stored for this environment."
        T["proof_table_note"] = "There is no table to show."
        return None
    camp, grid = found
    truth, varied = grid.truth, list(grid.space.variables)
    space = " × ".join(f"{ch.experiment.variable_labels.get(k, k)} ({len(v)} values)"
                       for k, v in grid.space.variables.items())
    rule = camp.spec.rule
    T["proof_env"] = camp.environment
    T["proof_text"] = (
        f"The grid varies {space}: {len(grid.samples)} configurations this host can run "
        f"(stress needs a CPU the run leaves idle, so no stress with both cores). Each ran "
        f"under the rule of {rule.min} to {rule.max} runs of "
        f"{camp.spec.settings['runtime_s']} s, interleaved in rounds: {grid.runs:,} runs in all. "
        f"{len(truth.members)} configurations cannot be told apart from the best at "
        f"{_pct(grid.objective.confidence)} confidence (the best set, as in the search above); the "
        f"highest mean is {fmt_int(truth.means[truth.top])} IOPS at "
        f"{_point(ch, grid.space.points[truth.top], varied)}, and the objective's answer, "
        f"the member with the fewest cores and then the fewest devices, is "
        f"{_point(ch, truth.params, varied)} at {fmt_int(truth.means[truth.key])} IOPS.")
    shown = truth.members[:SHOWN]
    T["proof_table_note"] = (f"The table lists the best set's {len(shown)} highest means"
                             + (" and the answer." if truth.key not in shown else ".")
                             if len(truth.members) > len(shown) else
                             "The table lists the whole best set.")
    if truth.key not in shown:
        shown.append(truth.key)
    labels = ch.experiment.variable_labels
    rows = [{**{labels.get(v, v): ch.experiment.describe(v, grid.space.points[k][v])
                for v in varied},
             "runs": truth.n[k], "mean IOPS": fmt_int(truth.means[k]),
             "": "answer" if k == truth.key else ""}
            for k in shown]
    return escape.table(pd.DataFrame(rows))


def replays(ch: Chapter) -> Styler | None:
    """The strategies replayed against the grid: the summary table, the figure, the texts."""
    T = ch.text
    found = _proof(ch)
    if found is None:
        T["replay_seeds"] = "0"
        T["replay_text"] = T["replay_fail"] = "No replays: no full grid is stored."
        ch.figures["fig_search_replay"] = Sentence(
            f"Environment {ch.environment} stores no full grid, so no search was replayed "
            "against one.")
        return None
    camp, grid = found
    rows, info = replay.read(replay.derived_path(ch.data_dir, ch.experiment.name,
                                                 camp.environment), grid)
    table = replay.summary(rows, grid.runs)
    ch.figures["fig_search_replay"] = figure(table, ch.spec.analysis["figure_width"])
    seeds = rows["seed"].nunique()
    at = table[table["budget_share"] == TARGET_SHARE].set_index("strategy")
    mine = at.loc["adaptive"]
    met = mine["found"] >= TARGET_FOUND and mine["runs_share"] <= TARGET_SHARE
    T["replay_seeds"] = str(seeds)
    T["replay_text"] = (
        f"With a budget of {_pct(TARGET_SHARE)} of the grid's runs ({int(mine['budget'])} "
        f"runs; {mine['runs_mean']:.0f} used on average), the adaptive strategy's answer lies "
        f"in the grid's best set in {_pct(mine['found'])} of {seeds} replays "
        f"(95 % Wilson interval {_pct(mine['found_low'])} to {_pct(mine['found_high'])}), and "
        f"is the grid's own answer in {_pct(mine['grid_answer'])}; random search reaches "
        f"{_pct(at.loc['random', 'found'])} and Optuna's default sampler "
        f"{_pct(at.loc['tpe', 'found'])} with the same budget. "
        + ("The target, 95 % of the replays with at most 10 % of the runs, is met."
           if met else f"The target, 95 % of the replays with at most 10 % of the runs, is "
                       f"missed by {_pct(TARGET_FOUND - mine['found'])}."))
    T["replay_fail"] = _failures(ch, rows, grid)
    shown = table.assign(
        strategy=table["strategy"].map(NAMES),
        budget=table["budget"].map(lambda b: f"{b:,}"),
        **{"runs used (mean)": table["runs_mean"].map(lambda x: f"{x:.0f}"),
           "of the grid's runs": table["runs_share"].map(lambda x: _pct(x, 1)),
           "in the best set": [f"{_pct(f)} ({_pct(lo)}–{_pct(hi)})" for f, lo, hi in
                               zip(table["found"], table["found_low"], table["found_high"])],
           "the grid's answer": table["grid_answer"].map(_pct)})
    return escape.table(shown[["strategy", "budget", "runs used (mean)", "of the grid's runs",
                               "in the best set", "the grid's answer"]])


def _failures(ch: Chapter, rows: pd.DataFrame, grid: replay.Grid) -> str:
    """Where the adaptive strategy fails: its answers outside the best set, by budget."""
    mine = rows[rows["strategy"] == "adaptive"]
    missed = mine[~mine["in_best_set"].astype(bool)]
    at = mine[mine["budget_share"] == TARGET_SHARE]
    wide = (f"The best set is wide on this host ({len(grid.truth.members)} of "
            f"{len(grid.samples)} configurations), because single 1 s runs here vary a lot, so "
            "landing in it is a lenient test; the stricter one is the grid's own answer, "
            f"which the adaptive strategy returns in {_pct(at['is_grid_answer'].mean())} of the "
            "replays at a tenth of the runs: with half the budget spent on single screening "
            "runs and the rest on the best of them, few of the cheaper configurations (fewer "
            "cores and devices) are measured under the rule, so the tie-break picks among "
            "fewer of them than the grid does.")
    if missed.empty:
        return ("In none of the replays does the adaptive strategy answer outside the grid's "
                f"best set. {wide}")
    worst = missed.groupby("budget_share").size()
    by = "; ".join(f"{n} of {int((mine['budget_share'] == share).sum())} at "
                   f"{_pct(share)} of the runs" for share, n in worst.items())
    varied = list(grid.space.variables)
    common = missed["answer"].value_counts()
    key = common.index[0]
    mean = grid.truth.means.get(key)
    beaten = grid.truth.means[grid.truth.top]
    return (f"It answers outside the best set in {by}. The most frequent wrong answer is "
            f"{_point(ch, grid.space.points[key], varied)} ({common.iloc[0]} "
            f"{'replay' if common.iloc[0] == 1 else 'replays'}), whose "
            f"grid mean, {fmt_int(mean)} IOPS, is {1 - mean / beaten:.0%} below the best: a "
            f"configuration whose few runs, drawn high, looked as good as the best. {wide}")


def figure(table: pd.DataFrame, width: float):
    """Against the share of the grid's runs used, one line per strategy with 95 % Wilson
    intervals: the share of replays whose answer lies in the grid's best set (left) and the
    share whose answer is the grid's own (right); the grid itself at 100 %."""
    fig, axes = plt.subplots(1, 2, figsize=(width, 4.5), sharex=True)
    panels = [("found", "answer in the grid's best set, % of replays"),
              ("grid_answer", "answer is the grid's own, % of replays")]
    for ax, (column, label) in zip(axes, panels):
        for i, (strategy, part) in enumerate(table.groupby("strategy", sort=False)):
            part = part.sort_values("runs_share")
            ax.errorbar(100 * part["runs_share"], 100 * part[column],
                        yerr=[100 * (part[column] - part[f"{column}_low"]),
                              100 * (part[f"{column}_high"] - part[column])],
                        marker="o", capsize=3, label=NAMES.get(strategy, strategy),
                        color=f"C{i}")
        ax.plot([100], [100], marker="s", color="k", linestyle="none", label=NAMES["grid"])
        ax.axvline(100 * TARGET_SHARE, color="grey", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ticks = [5, 10, 20, 40, 100]
        ax.set_xticks(ticks, [f"{t}" for t in ticks])
        ax.minorticks_off()
        ax.set(xlabel="runs used, % of the full grid's (log scale)", ylabel=label,
               ylim=(0, 103))
    axes[0].axhline(100 * TARGET_FOUND, color="grey", linestyle="--", linewidth=1)
    axes[0].legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    plt.close(fig)
    return fig


def live(ch: Chapter) -> None:
    """The live search: what it ran and answered, set against the full grid's best set."""
    T = ch.text
    T["answer_search"] = "No adaptive search of this space is stored for this environment."
    env = ch.spec.analysis.get("search_live")
    if not env:
        T["live_text"] = "No live search is stored for this environment."
        return
    camp = Campaign(ch.experiment.name, env, data_dir=ch.data_dir)
    # a search made by an older version is planned from its record: none without its campaign
    state = camp.plan(as_recorded=True).search if camp.store.root.exists() else None
    if state is None or not state.outcome.values:
        T["live_text"] = f"The live search of environment {env} has no stored runs yet."
        return
    out, varied = state.outcome, state.varied
    if not state.done:
        T["live_text"] = (f"The live search of environment {env} has made {out.used} of its "
                          f"at most {state.spec.budget} runs and not ended yet.")
        return
    found = out.answer
    text = (f"The live search (environment {env}; {state.spec.strategy}, seed "
            f"{state.spec.seed}, at most {state.spec.budget} runs) made {out.used} runs of "
            f"{len(out.values)} configurations and answered "
            f"{_point(ch, found.params, varied)}, at {fmt_int(found.means[found.key])} IOPS "
            f"over its {found.n[found.key]} runs, with a best set of {len(found.members)}.")
    proof = _proof(ch)
    if proof is not None:
        grid = proof[1]
        key = grid.space.key(found.params)
        inside = key in grid.truth.members
        text += (f" In the full grid that configuration averages "
                 f"{fmt_int(grid.truth.means[key])} IOPS and "
                 + ("lies in the grid's best set" if inside else "lies outside the grid's "
                    "best set") + (", and it is the grid's own answer." if key == grid.truth.key
                                   else f"; the grid's answer is "
                                        f"{_point(ch, grid.truth.params, varied)}."))
    T["live_text"] = text + _confirmed(ch, env, found.params, varied)
    if proof is not None:
        T["answer_search"] = (
            f"An adaptive search answers the question with {_pct(out.used / proof[1].runs)} of "
            f"the runs: its live run here ({out.used} runs; the full grid made "
            f"{proof[1].runs:,}) answered with a "
            f"configuration that {'lies' if inside else 'does not lie'} in the full grid's best "
            f"set ({_point(ch, found.params, varied)}).")


def _confirmed(ch: Chapter, env: str, params: dict[str, Any], varied: list[str]) -> str:
    """The answer's confirmation runs (fresh, after the search) as a sentence."""
    from iolab.analysis.stats import t_interval
    from iolab.experiments.cpu_search import analysis as ca

    rows = Chapter(ch.experiment.name, env, data_dir=ch.data_dir).confirmed
    if rows.empty:
        return " Its confirmation runs are not stored."
    rows = ca.normalize(rows)
    mine = rows[(rows["run.confirm"] == "A")
                & (rows[varied] == pd.Series({v: params[v] for v in varied})).all(axis=1)]
    if mine.empty:
        return " Its confirmation runs are not stored."
    ci = t_interval(mine["iops"], ch.confidence)
    return (f" Measured again after the search in {len(mine)} fresh runs (the confirmation "
            f"step), it reached {fmt_int(ci['mean'])} IOPS ({_pct(ch.confidence)} CI "
            f"{fmt_int(ci['ci_low'])} to {fmt_int(ci['ci_high'])}).")
