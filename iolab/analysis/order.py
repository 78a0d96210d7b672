"""The order a campaign's runs were made in, as its stored runs show it: whether its points
ran interleaved or in blocks, and how far its metric drifted while it ran.

A campaign that makes all the runs of one point, then all the runs of the next, confounds
the difference between two points with whatever changed on the machine between their blocks
(the page cache, the temperature, a neighbour on the host). Rounds of one run per point,
shuffled, spread that change over every point instead (``iolab.execution.rounds``). This
check reads only the runs' start times and their points, so it holds for any stored
campaign, whatever its params say:

* **the design**: the share of consecutive runs, in the order they started, that belong to
  the same point. Shuffled rounds give about ``1 / points``; a point's repetitions made back
  to back give ``(runs - points) / (runs - 1)``. Above :data:`BLOCKED_SHARE` the campaign ran
  *in blocks*.
* **the drift**: the slope of the metric against the run's place in that order, within
  points, fitted by least squares after centring both on each point's own means (so a
  difference between points is never taken for a trend), stated as the change in percent of
  a point's mean from the campaign's first run to its last, with its 95 % Student-t interval
  on ``runs - points - 1`` degrees of freedom. The place in the order, not the clock: a
  campaign resumed days later has not drifted by the days in between. A campaign in blocks
  spans few places within each point, so its drift is poorly estimated, and the drift
  *between* its blocks cannot be told from the differences between its points at all: the
  reason to interleave.

Responsible for: the design and the drift of one campaign's runs. Not responsible for:
reading the runs (``iolab.core.tidy``) or showing the result (``iolab.report.chapter``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

BLOCKED_SHARE = 0.5   # of consecutive runs on one point, above which the runs ran in blocks


@dataclass(frozen=True)
class OrderCheck:
    runs: int
    points: int
    same_point_share: float       # of consecutive runs that belong to one point
    design: str                   # "interleaved", "in blocks" or "one point"
    drift_pct: float              # first run to last, in % of a point's mean; NaN: unknown
    drift_low: float
    drift_high: float
    df: int                       # degrees of freedom of the drift's interval

    def text(self) -> str:
        """The check in words, for a chapter's table of what ran."""
        if self.design == "one point":
            return f"{self.runs} runs of one point: no order to compare"
        share = f"{self.same_point_share:.0%} of consecutive runs repeat a point"
        design = ("interleaved" if self.design == "interleaved" else
                  "in blocks (each point's runs back to back), so a difference between points "
                  "is confounded with any drift between their blocks")
        if math.isnan(self.drift_pct):
            drift = "the drift within points cannot be estimated"
        else:
            drift = (f"drift within points from the first run to the last "
                     f"{self.drift_pct:+.1f} % (95 % CI {self.drift_low:+.1f} to "
                     f"{self.drift_high:+.1f} %, least squares on {self.df} degrees of "
                     "freedom)")
        return f"{design}: {share}; {drift}"


def check(rows: pd.DataFrame, point_columns: list[str], metric: str,
          started: str = "run.started_at", confidence: float = 0.95) -> OrderCheck:
    """The order check of one campaign's ``rows`` (one per run): ``point_columns`` say which
    point a run is of, ``metric`` is the value whose drift is fitted, ``started`` the runs'
    start times (ISO 8601)."""
    from scipy import stats as sps

    data = pd.DataFrame({"t": pd.to_datetime(rows[started], utc=True),
                         "y": pd.to_numeric(rows[metric], errors="coerce")})
    data["point"] = rows[point_columns].astype(str).agg("|".join, axis=1).to_numpy()
    data = data.dropna().sort_values("t", kind="stable")
    runs, points = len(data), data["point"].nunique()
    if points < 2:
        return OrderCheck(runs, points, math.nan, "one point", math.nan, math.nan, math.nan, 0)
    same = float((data["point"].to_numpy()[1:] == data["point"].to_numpy()[:-1]).mean())
    design = "in blocks" if same > BLOCKED_SHARE else "interleaved"
    place = pd.Series(range(runs), index=data.index, dtype=float)
    mean_y = data.groupby("point")["y"].transform("mean")
    x = place - place.groupby(data["point"]).transform("mean")
    y = data["y"] / mean_y - 1
    dof = runs - points - 1
    sxx = float((x * x).sum())
    if dof < 1 or sxx == 0 or (mean_y == 0).any():
        return OrderCheck(runs, points, same, design, math.nan, math.nan, math.nan, max(dof, 0))
    slope = float((x * y).sum()) / sxx
    resid = y - slope * x
    se = math.sqrt(float((resid * resid).sum()) / dof / sxx)
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se
    span = 100 * (runs - 1)   # percent, over the campaign's runs
    return OrderCheck(runs, points, same, design, span * slope, span * (slope - half),
                      span * (slope + half), dof)
