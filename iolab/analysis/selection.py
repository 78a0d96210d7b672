"""The best of several configurations as a set: those that cannot be told apart from the best.

The largest of many noisy means is biased upwards (the winner's curse), and naming it "the
optimum" hides the configurations whose intervals overlap it. So a maximised metric is
answered by a *best set*, by subset selection in the manner of Gupta (1965) for unequal
variances and unequal numbers of repetitions:

    configuration i is in the set unless some j beats it: ``mean_j - mean_i`` exceeds
    ``t(1 - alpha / (k - 1), nu_ij) * sqrt(s_i**2 / n_i + s_j**2 / n_j)``,

a one-sided Welch comparison (Welch–Satterthwaite degrees of freedom ``nu_ij``) at level
``alpha / (k - 1)``. The truly best configuration is compared with the k - 1 others, so by
Bonferroni's inequality it is left out with probability at most ``alpha``: the set holds it
with probability at least ``1 - alpha`` (the confidence). This is conservative, like Hsu's
multiple comparisons with the best with a Bonferroni constant; the set is small when the
best stands out and large when the data cannot separate the configurations.

A configuration with fewer than two repetitions has no variance to compare with: it is
neither in the set nor excluded, and is reported as undecided.

Responsible for: the set, and for each configuration its mean, n and the one that beats it.
Not responsible for: which configurations are compared (the experiment's analysis) or
tie-breaks among the set's members (the objective of the search).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

METHOD = ("subset selection (Gupta) with one-sided Welch comparisons at a Bonferroni-adjusted "
          "level: a configuration is left out only when another is significantly better")


@dataclass
class BestSet:
    """The outcome: members, each configuration's standing, and how it was decided."""

    members: list[str]
    confidence: float
    method: str = METHOD
    means: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)
    beaten_by: dict[str, str] = field(default_factory=dict)   # left out: by which one
    undecided: dict[str, str] = field(default_factory=dict)   # with the reason
    top: str | None = None                                    # the largest mean

    def status(self, name: str) -> str:
        if name in self.undecided:
            return "undecided"
        return "in the best set" if name in self.members else f"below {self.beaten_by[name]}"


def best_set(samples: dict[str, list[float]], confidence: float = 0.95) -> BestSet:
    """The configurations (by name, each with its repetitions) that cannot be told apart
    from the best of them at ``confidence`` (see the module docstring)."""
    clean = {k: np.asarray([v for v in vals if not math.isnan(v)], dtype=float)
             for k, vals in samples.items()}
    out = BestSet(members=[], confidence=confidence)
    out.means = {k: float(x.mean()) for k, x in clean.items() if x.size}
    out.n = {k: int(x.size) for k, x in clean.items()}
    for k, x in clean.items():
        if x.size < 2:
            out.undecided[k] = f"{x.size} repetition{'s' if x.size != 1 else ''}, at least 2 needed"
    ranked = {k: x for k, x in clean.items() if k not in out.undecided}
    if not ranked:
        return out
    names = list(ranked)
    mean = np.array([ranked[k].mean() for k in names])
    v = np.array([ranked[k].var(ddof=1) / ranked[k].size for k in names])  # s²/n
    dof = np.array([ranked[k].size - 1 for k in names], dtype=float)
    out.top = names[int(np.argmax(mean))]
    level = (1 - confidence) / max(1, len(names) - 1)
    # row i, column j: is j significantly better than i (one-sided Welch)?
    gap = mean[None, :] - mean[:, None]
    var = v[:, None] + v[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = var**2 / (v[:, None] ** 2 / dof[:, None] + v[None, :] ** 2 / dof[None, :])
    nu = np.where(np.isfinite(nu), nu, dof[:, None] + dof[None, :])
    q = sps.t.ppf(1 - level, nu)
    better = np.where(var > 0, gap > q * np.sqrt(var), gap > 0)
    np.fill_diagonal(better, False)
    for i, name in enumerate(names):
        if better[i].any():
            winners = np.flatnonzero(better[i])
            out.beaten_by[name] = names[int(winners[np.argmax(mean[winners])])]
        else:
            out.members.append(name)
    out.members.sort(key=lambda k: -out.means[k])
    return out
