"""A campaign's noise floor: the smallest relative difference between two of its points that
its repetitions can tell from noise.

Repeatability is pooled over the campaign's points on the log scale, so that a difference is
relative and points of very different size count alike: with s_i the sample standard deviation
(ddof=1) of ln(x) over the n_i runs of point i,

    s_p^2 = sum_i (n_i - 1) s_i^2 / sum_i (n_i - 1),      df = sum_i (n_i - 1).

Two points of n runs each then differ in ln x by a quantity whose standard error is
s_p sqrt(2 / n). The *floor* is the critical difference

    exp(t_{1 - alpha/2, df} s_p sqrt(2 / n)) - 1,

which two points measured alike (an A/A pair) exceed with probability alpha only: a smaller
difference is not distinguishable on this machine. The difference the campaign would detect
with probability 1 - beta (its power) is exp((t_{1 - alpha/2, df} + t_{1 - beta, df})
s_p sqrt(2 / n)) - 1.

The floor is for two points of n runs; a point with fewer runs has a wider one, so a chapter
names n and the floor at its fewest runs too. Under an adaptive repetition rule a point stops
early when its runs agree, which biases s_p down a little: the floor is then a lower
estimate.

What it leaves out: the repetitions of one point stand in for an A/A pair, so a disturbance
that moves every run of one point together (and none of another) is not in s_p. Interleaved
order (:mod:`iolab.execution.rounds`) spreads slow drift over all points, which is what makes the
stand-in fair; for a sequential campaign the floor may be too low, and the text says which
order the runs were made in.

Responsible for: the pooled spread, the floor and the detectable difference. Not responsible
for: which points and metric a chapter uses, or its words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sst

METHOD = ("the critical difference of two points of n runs, from the runs' spread within "
          "their points pooled on the log scale")
POWER = 0.8


@dataclass(frozen=True)
class Floor:
    """The noise floor of one metric over a set of points, or why there is none."""

    sd_log: float            # s_p, the pooled sd of ln(x)
    df: int                  # its degrees of freedom
    points: int              # the points that contributed (n_i >= 2, all values positive)
    n: int                   # the runs per point the floor is for
    floor: float             # relative: 0.05 is 5 %
    detectable: float        # relative, at POWER
    why_undefined: str = ""

    @property
    def defined(self) -> bool:
        return not self.why_undefined


def _undefined(why: str, n: int = 0) -> Floor:
    nan = math.nan
    return Floor(nan, 0, 0, n, nan, nan, why)


def pooled_log_sd(rows: pd.DataFrame, by: list[str], metric: str) -> tuple[float, int, int]:
    """(s_p, df, points) over the groups ``by`` of ``rows`` with at least two positive values
    of ``metric``; groups with a non-positive value are left out (no logarithm)."""
    ss, df, points = 0.0, 0, 0
    groups = rows.groupby(by, dropna=False)[metric] if by else [((), rows[metric])]
    for _, values in groups:
        x = values.dropna().to_numpy(dtype=float)
        if x.size < 2 or (x <= 0).any():
            continue
        y = np.log(x)
        ss += float(np.sum((y - y.mean()) ** 2))
        df += x.size - 1
        points += 1
    return (math.sqrt(ss / df) if df else math.nan), df, points


def floor(rows: pd.DataFrame, by: list[str], metric: str, confidence: float,
          n: int | None = None) -> Floor:
    """The noise floor of ``metric`` for two points of ``n`` runs (default: the median number
    of runs of the points in ``rows``), at two-sided level 1 - ``confidence``."""
    if rows.empty or metric not in rows:
        return _undefined("no runs")
    counts = rows.dropna(subset=[metric]).groupby(by, dropna=False).size() if by else \
        pd.Series([rows[metric].notna().sum()])
    n = int(n if n is not None else counts.median()) if len(counts) else 0
    if n < 2:
        return _undefined(f"{n} run(s) per point: a floor needs at least two", n)
    sd, df, points = pooled_log_sd(rows, by, metric)
    if not df:
        return _undefined("no point has two positive values", n)
    if sd == 0:
        return Floor(0.0, df, points, n, 0.0, 0.0)
    se = sd * math.sqrt(2 / n)
    t_crit = float(sst.t.ppf(1 - (1 - confidence) / 2, df))
    t_power = float(sst.t.ppf(POWER, df))
    return Floor(sd, df, points, n, math.expm1(t_crit * se), math.expm1((t_crit + t_power) * se))


def within(change: float, found: Floor) -> bool:
    """Whether a relative change (0.05 for +5 %) is inside the floor (:func:`inside`)."""
    return found.defined and inside(change, found.floor)


def inside(change: float, floor_value: float) -> bool:
    """Whether a relative change is smaller than a relative floor, on the log scale (a fall
    of f is as large as a rise of 1/(1 - f) - 1); False for a change or floor undefined."""
    if change != change or change <= -1 or floor_value != floor_value:
        return False
    return abs(math.log1p(change)) < math.log1p(floor_value)
