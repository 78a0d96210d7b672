"""Summary statistics that name their method.

Every summary reports n, the arithmetic mean, the sample standard deviation (ddof=1) and a
two-sided 95 % confidence interval for the mean from Student's t distribution with n-1
degrees of freedom. With n = 1 the sd and the interval are undefined (NaN), never zero.

Responsible for: per-group summaries and relative changes with intervals. Not responsible
for: loading data or plotting.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sps

def t_interval(values, confidence: float = 0.95) -> dict[str, float]:
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    mean = float(x.mean()) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "sd": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                "ci_half": math.nan}
    sd = float(x.std(ddof=1))
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n))
    return {"n": n, "mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half,
            "ci_half": half}


def summarize(df: pd.DataFrame, by: list[str], metrics: list[str],
              confidence: float = 0.95) -> pd.DataFrame:
    """One row per group and metric: the grouping columns, ``metric``, n, mean, sd, CI."""
    rows = []
    for key, group in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            rows.append({**dict(zip(by, key)), "metric": metric,
                         **t_interval(group[metric], confidence)})
    return pd.DataFrame(rows)


def ratio_interval(a, b, confidence: float = 0.95) -> dict[str, float]:
    """Ratio of means a/b with a 95 % interval by the delta method on independent samples.

    Used for "X is r times Y" claims; the interval widens with the spread of both samples.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ma, mb = a.mean(), b.mean()
    ratio = ma / mb
    if a.size < 2 or b.size < 2:
        return {"ratio": float(ratio), "ci_low": math.nan, "ci_high": math.nan}
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = abs(ratio) * math.sqrt(va / ma**2 + vb / mb**2)
    # Welch-Satterthwaite degrees of freedom for the two relative variances.
    num = (va / ma**2 + vb / mb**2) ** 2
    den = (va / ma**2) ** 2 / (a.size - 1) + (vb / mb**2) ** 2 / (b.size - 1)
    df = num / den if den > 0 else a.size + b.size - 2
    q = sps.t.ppf(0.5 + confidence / 2, df)
    return {"ratio": float(ratio), "ci_low": float(ratio - q * se), "ci_high": float(ratio + q * se)}


def pct_change(new, base, confidence: float = 0.95) -> dict[str, float]:
    """Relative change of the mean of ``new`` against ``base`` in percent, with its interval."""
    r = ratio_interval(new, base, confidence)
    return {"pct": 100 * (r["ratio"] - 1), "ci_low": 100 * (r["ci_low"] - 1),
            "ci_high": 100 * (r["ci_high"] - 1)}
