"""Summary statistics that name their method.

Every summary reports n, the arithmetic mean, the sample standard deviation (ddof=1) and a
two-sided confidence interval (95 % unless asked otherwise) for the mean, by one of two
methods:

- ``t``: Student's t with n-1 degrees of freedom, mean ± t·sd/√n. Suits throughput.
- ``lognormal``: the modified Cox interval for the mean of a log-normal quantity: with y =
  ln x, exp(ȳ + s²/2 ± t·√(s²/n + s⁴/(2(n-1)))). For strictly positive, right-skewed
  quantities (latency percentiles) it never reaches below zero, as a t-interval of three
  noisy p99 values can. Values <= 0 make it undefined (NaN).

With n = 1 the sd and the interval are undefined (NaN), never zero.

Ratios of means and percent changes have their interval on the log scale
(:func:`ratio_interval`), so that it never leaves the range of the quantity.

Responsible for: per-group summaries and relative changes with intervals. Not responsible
for: loading data or plotting.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps


METHODS = {"t": "Student's t interval of the mean",
           "lognormal": "modified Cox interval of the mean (log-normal model)"}


def _values(values) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return x[~np.isnan(x)]


def t_quantile(confidence: float, df: int) -> float:
    """The two-sided Student's t quantile of a confidence level (0.95, 2 -> 4.30)."""
    return float(sps.t.ppf(0.5 + confidence / 2, df))


def t_interval(values, confidence: float = 0.95) -> dict[str, float]:
    x = _values(values)
    n = int(x.size)
    mean = float(x.mean()) if n else math.nan
    if n < 2:
        return {"n": n, "mean": mean, "sd": math.nan, "ci_low": math.nan, "ci_high": math.nan,
                "ci_half": math.nan}
    sd = float(x.std(ddof=1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "ci_low": mean - half, "ci_high": mean + half,
            "ci_half": half}


def lognormal_interval(values, confidence: float = 0.95) -> dict[str, float]:
    """n, mean, sd and the modified Cox interval of the mean (see the module docstring)."""
    out = t_interval(values, confidence)
    x = _values(values)
    if out["n"] < 2 or (x <= 0).any():
        return {**out, "ci_low": math.nan, "ci_high": math.nan, "ci_half": math.nan}
    y = np.log(x)
    n, var = x.size, float(y.var(ddof=1))
    centre = float(y.mean()) + var / 2
    half = t_quantile(confidence, n - 1) * math.sqrt(var / n + var**2 / (2 * (n - 1)))
    low, high = math.exp(centre - half), math.exp(centre + half)
    # asymmetric: ci_half is half the width, for "± about" texts only
    return {**out, "ci_low": low, "ci_high": high, "ci_half": (high - low) / 2}


INTERVALS = {"t": t_interval, "lognormal": lognormal_interval}


def interval(values, method: str = "t", confidence: float = 0.95) -> dict[str, float]:
    try:
        return INTERVALS[method](values, confidence)
    except KeyError:
        raise ValueError(f"unknown interval method {method!r} (allowed: "
                         f"{', '.join(INTERVALS)})") from None


def summarize(df: pd.DataFrame, by: list[str], metrics: list[str], confidence: float = 0.95,
              methods: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per group and metric: the grouping columns, ``metric``, n, mean, sd, the
    interval, and ``method`` (its name; ``t`` unless ``methods`` names another per metric);
    the same columns, no rows, for no rows."""
    methods = methods or {}
    rows = []
    for key, group in df.groupby(by, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            method = methods.get(metric, "t")
            rows.append({**dict(zip(by, key)), "metric": metric, "method": method,
                         **interval(group[metric], method, confidence)})
    return pd.DataFrame(rows, columns=[*by, "metric", "method", "n", "mean", "sd", "ci_low",
                                       "ci_high", "ci_half"])


RATIO_METHOD = ("ratio of means, delta method on the log scale with Welch–Satterthwaite "
                "degrees of freedom")


def _ratio_undefined(a: np.ndarray, b: np.ndarray) -> str:
    """Why the ratio of the means of ``a`` and ``b`` has no interval here, or ""."""
    for name, x in (("the first sample", a), ("the second sample", b)):
        if np.isnan(x).any():
            return f"{name} holds a missing value"
        if x.size < 2:
            return f"{name} has {x.size} value{'s' if x.size != 1 else ''} (at least 2 needed)"
        if x.mean() <= 0:
            return f"{name} has a mean of {x.mean():g}, and a ratio needs positive means"
    return ""


def ratio_interval(a, b, confidence: float = 0.95) -> dict[str, Any]:
    """mean(a) / mean(b) of two independent samples, with its interval (``RATIO_METHOD``).

    On the log scale, ln r has the standard error √(s_a²/(n_a·ā²) + s_b²/(n_b·b̄²)) (the delta
    method), and the interval exp(ln r ± q·se), q Student's t with Welch–Satterthwaite degrees
    of freedom, never leaves (0, ∞): a ratio of positive means cannot be negative, nor a
    percent change below −100 % (Kalibera and Jones, ISMM 2013, on ratios of means). It is
    asymmetric around r, as a ratio's uncertainty is. ``p`` is the two-sided p-value of the
    matching test of r = 1 (the interval excludes 1 exactly when p < 1 − confidence).

    Undefined (NaN bounds, ``undefined`` saying why; the ratio itself where both means exist)
    for a sample with fewer than two values, a missing value or a mean that is not positive.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    why = _ratio_undefined(a, b)
    ratio = (float(a.mean() / b.mean()) if a.size and b.size and b.mean() != 0
             and not (np.isnan(a).any() or np.isnan(b).any()) else math.nan)
    if why:
        return {"ratio": ratio, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan,
                "method": RATIO_METHOD, "undefined": why}
    ma, mb = a.mean(), b.mean()
    ra, rb = a.var(ddof=1) / (a.size * ma**2), b.var(ddof=1) / (b.size * mb**2)
    se = math.sqrt(ra + rb)
    den = ra**2 / (a.size - 1) + rb**2 / (b.size - 1)
    df = (ra + rb) ** 2 / den if den > 0 else a.size + b.size - 2
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    # the test that matches the interval: ln r against 0, two-sided
    p = float(2 * sps.t.sf(abs(math.log(ratio)) / se, df)) if se > 0 else float(ratio == 1)
    return {"ratio": ratio, "ci_low": ratio * math.exp(-q * se),
            "ci_high": ratio * math.exp(q * se), "p": p, "method": RATIO_METHOD,
            "undefined": ""}


def pct_change(new, base, confidence: float = 0.95) -> dict[str, Any]:
    """The change of the mean of ``new`` against ``base`` in percent, 100·(r − 1), with the
    interval of :func:`ratio_interval`, so that it never passes −100 %."""
    r = ratio_interval(new, base, confidence)
    return {"pct": 100 * (r["ratio"] - 1), "ci_low": 100 * (r["ci_low"] - 1),
            "ci_high": 100 * (r["ci_high"] - 1), "p": r["p"], "method": r["method"],
            "undefined": r["undefined"]}
