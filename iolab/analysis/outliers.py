"""Runs far from their point's other runs, by a named robust rule.

A single run at 12k IOPS among neighbours at 60k moves a mean and widens an interval; it
is not dropped (it may be the truth), but it is flagged, marked in figures and tables and
counted in the text, and where it makes a point's mean and median disagree both are given.

The rule is the modified z-score of Iglewicz and Hoaglin (1993): with the point's median m
and its median absolute deviation MAD,

    M_i = 0.6745 (x_i − m) / MAD,

and a run is an outlier when |M_i| > 3.5. When more than half of the values are equal the
MAD is 0; the mean absolute deviation around the median then takes its place, scaled by
1.2533 (Iglewicz and Hoaglin's fallback). A point with fewer than five runs has no outliers
by this rule: with three or four, the MAD rests on one or two deviations, and a run a little
off two close ones would be called an outlier. Nor has a point whose runs are all equal.

Responsible for: the flags and their method. Not responsible for: what a chapter does with
flagged runs (they stay in every statistic unless it says otherwise).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

THRESHOLD = 3.5
MIN_RUNS = 5
METHOD = (f"|0.6745 (x − median) / MAD| > {THRESHOLD:g} among a point's runs, the modified "
          "z-score of Iglewicz and Hoaglin")


def modified_z(values) -> np.ndarray:
    """The modified z-score of each value (NaN for fewer than ``MIN_RUNS`` values or no
    spread)."""
    x = np.asarray(values, dtype=float)
    if x.size < MIN_RUNS:
        return np.full(x.size, np.nan)
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad > 0:
        return 0.6745 * (x - med) / mad
    mean_ad = np.mean(np.abs(x - med))
    if mean_ad == 0:
        return np.full(x.size, np.nan)
    return (x - med) / (1.253314 * mean_ad)


def flag(df: pd.DataFrame, by: list[str], metric: str) -> pd.Series:
    """True for each row that is an outlier of ``metric`` within its group ``by``."""
    if df.empty:
        return pd.Series([], dtype=bool, index=df.index)
    z = df.groupby(by, sort=False, dropna=False)[metric].transform(
        lambda s: pd.Series(modified_z(s.to_numpy()), index=s.index))
    return (z.abs() > THRESHOLD).fillna(False)
