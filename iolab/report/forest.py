"""The forest plot of a chapter's findings across machines: per finding, each environment's
estimate with its interval and, with three machines or more, the random-effects pooled
estimate as a diamond with the prediction interval for a new machine as a line through it.
An environment measured on a machine an earlier one in the panel already stands for is drawn
hollow and named as that machine's repeat: it is not pooled (``pooling.one_per_machine``).

Responsible for: drawing. Not responsible for: the per-machine findings (each experiment's
analysis), the pooling (:mod:`iolab.analysis.pooling`) or where the figure goes.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.patches import Polygon

from iolab.analysis.findings import NULL, Finding, by_id
from iolab.analysis.pooling import PREDICTION_LEAST, Pooled, one_per_machine, pool
from iolab.report import figures  # noqa: F401  (texts drawn as their characters, never math)

AXIS = {"change": "change (%)", "ratio": "ratio", "difference": "difference"}
ROW_IN = 0.32  # inches per row of a panel
WRAP = 60  # characters of a finding's statement per line of a panel's title


def shared(found: dict[str, list[Finding]]) -> list[tuple[str, dict[str, Finding]]]:
    """(finding id, environment -> its estimate) of every finding that two or more
    environments estimate, in the first environment's order."""
    by_env = {env: by_id(fs) for env, fs in found.items()}
    ids = list(dict.fromkeys(f.id for fs in found.values() for f in fs))
    out = []
    for id_ in ids:
        per = {env: fs[id_] for env, fs in by_env.items() if id_ in fs and fs[id_].defined}
        if len(per) >= 2:
            out.append((id_, per))
    return out


def figure(found: dict[str, list[Finding]], confidence: float = 0.95,
           machine_of: dict[str, str] | None = None):
    """One panel per finding two or more environments estimate; None where there is none.
    ``machine_of`` (environment -> its machine) tells repeats on one machine apart."""
    panels = shared(found)
    if not panels:
        return None
    rows = [len(per) + 1 for _, per in panels]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(8, sum(r * ROW_IN + 0.9 for r in rows)),
                             gridspec_kw={"height_ratios": [r + 1.5 for r in rows]})
    for ax, (id_, per) in zip(axes[:, 0], panels):
        # two machines give a between-machine variance of one degree of freedom: not pooled
        machines = one_per_machine(per, machine_of)
        _panel(ax, per, machines,
               pool(machines, confidence) if len(machines) >= PREDICTION_LEAST else None)
    fig.tight_layout()
    return fig


def _panel(ax, per: dict[str, Finding], machines: dict[str, Finding],
           pooled: Pooled | None) -> None:
    """A finding's environments, top down (a repeat on a machine hollow), then its pooled
    diamond."""
    first = next(iter(per.values()))
    names = list(per)
    labels = []
    for y, env in enumerate(names):
        f = per[env]
        repeat = env not in machines
        ax.errorbar(f.estimate, -y, xerr=[[f.estimate - f.ci_low], [f.ci_high - f.estimate]],
                    fmt="s", color="tab:blue", capsize=3, markersize=5,
                    markerfacecolor="white" if repeat else "tab:blue")
        labels.append(f"{env} (a repeat, not pooled)" if repeat else env)
    if pooled is not None:
        y = -len(names)
        if pooled.predicts:
            ax.plot(pooled.prediction, [y, y], color="0.45", linewidth=1,
                    label="prediction for a new machine")
        ax.add_patch(Polygon([(pooled.ci_low, y), (pooled.estimate, y + 0.3),
                              (pooled.ci_high, y), (pooled.estimate, y - 0.3)],
                             closed=True, color="tab:orange"))
        ax.plot([pooled.ci_low, pooled.ci_high], [y, y], alpha=0)  # for the axis limits
        labels.append(f"pooled (I² {pooled.i2 * 100:.0f} %)")
        if pooled.predicts:
            ax.legend(loc="lower right", fontsize="x-small")
    ax.axvline(NULL[first.kind], color="0.3", linestyle="--", linewidth=0.8)
    ax.set_yticks([-i for i in range(len(labels))], labels)
    ax.set_ylim(-len(labels) + 0.5, 0.5)
    ax.set_xlabel(AXIS[first.kind])
    ax.set_title(textwrap.fill(first.statement, WRAP), fontsize="small", loc="left")

