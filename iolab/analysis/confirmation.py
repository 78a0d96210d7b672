"""What a campaign's confirmation step shows: the chosen points' fresh runs beside the search
runs that chose them, and the A/A pair that calibrates the noise floor.

The search's estimate of a chosen point is biased upwards, because the point was chosen for
being high (the winner's curse); its confirmation runs were not part of the choice, so their
mean is not. :func:`confirmed_points` sets the two side by side, with the change from the
search's mean to the confirmation's as a ratio of means on the log scale
(:func:`iolab.analysis.stats.pct_change`); a fall there is the curse made visible.

The A/A pair is one configuration measured under two labels, interleaved with each other and
with the other confirmation points (see ``iolab.core.confirm``). :func:`aa_pair` gives the
difference between the labels with its interval, which should contain zero, and sets it
against the noise floor (:mod:`iolab.analysis.noise`): the floor from the search's pooled
spread, and the floor from the pair's own runs. A pair whose difference exceeds the search's
floor says that floor is too low for this machine.

Responsible for: these comparisons. Not responsible for: choosing the points
(``iolab.core.confirm``), loading runs, or words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from iolab.analysis import noise, stats

LABEL = "run.confirm"
A, B = "A", "B"


def confirmed_points(search: pd.DataFrame, confirmed: pd.DataFrame, keys: list[str],
                     metric: str, confidence: float = 0.95) -> pd.DataFrame:
    """One row per point confirmed under label A: its variables, the search's n and mean, the
    confirmation's n, mean, sd and interval (Student's t), and the change from the search's
    mean to the confirmation's (``pct``, ``pct_low``, ``pct_high``: log-scale interval of a
    ratio of means; ``undefined`` says why where there is none). Sorted by the search's mean,
    highest first."""
    cols = [*keys, "n_search", "mean_search", "n", "mean", "sd", "ci_low", "ci_high",
            "pct", "pct_low", "pct_high", "undefined"]
    if confirmed.empty or LABEL not in confirmed:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, group in confirmed[confirmed[LABEL] == A].groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        point = dict(zip(keys, key))
        mask = pd.Series(True, index=search.index)
        for k, v in point.items():
            mask &= search[k] == v
        before = search.loc[mask, metric].dropna()
        now = group[metric].dropna()
        change = stats.pct_change(now, before, confidence)
        rows.append({**point, "n_search": len(before),
                     "mean_search": float(before.mean()) if len(before) else math.nan,
                     **{k: v for k, v in stats.t_interval(now, confidence).items()
                        if k in ("n", "mean", "sd", "ci_low", "ci_high")},
                     "pct": change["pct"], "pct_low": change["ci_low"],
                     "pct_high": change["ci_high"], "undefined": change["undefined"]})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values("mean_search", ascending=False, ignore_index=True)


@dataclass(frozen=True)
class AAPair:
    """The A/A pair of a confirmation step, or why there is none."""

    point: dict
    n_a: int
    n_b: int
    pct: float               # B against A, percent
    pct_low: float
    pct_high: float
    floor: noise.Floor       # from the pair's own runs, for two points of its runs
    why_undefined: str = ""

    @property
    def defined(self) -> bool:
        return not self.why_undefined

    @property
    def contains_zero(self) -> bool:
        return self.defined and self.pct_low <= 0 <= self.pct_high

    def inside(self, floor_value: float) -> bool:
        """Whether the pair's difference is inside a relative floor (0.05 for 5 %)."""
        return self.defined and noise.inside(self.pct / 100, floor_value)


def aa_pair(confirmed: pd.DataFrame, keys: list[str], metric: str,
            confidence: float = 0.95) -> AAPair:
    """The point measured under both labels, B against A (see the module docstring)."""
    nan = math.nan
    empty = noise.floor(pd.DataFrame(), [], metric, confidence)
    if confirmed.empty or LABEL not in confirmed or metric not in confirmed:
        return AAPair({}, 0, 0, nan, nan, nan, empty, "no confirmation runs")
    b_rows = confirmed[confirmed[LABEL] == B]
    if b_rows.empty:
        return AAPair({}, 0, 0, nan, nan, nan, empty, "no run under the second label (B)")
    point = {k: b_rows.iloc[0][k] for k in keys}
    mask = pd.Series(True, index=confirmed.index)
    for k, v in point.items():
        mask &= confirmed[k] == v
    pair = confirmed[mask & confirmed[LABEL].isin([A, B])].dropna(subset=[metric])
    a = pair.loc[pair[LABEL] == A, metric]
    b = pair.loc[pair[LABEL] == B, metric]
    change = stats.pct_change(b, a, confidence)
    n = min(len(a), len(b))
    own = noise.floor(pair, [LABEL], metric, confidence, n=n) if n >= 2 else empty
    return AAPair(point, len(a), len(b), change["pct"], change["ci_low"], change["ci_high"],
                  own, change["undefined"])
