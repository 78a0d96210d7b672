"""Statistics: n, mean, sample sd (ddof=1) and Student-t intervals, checked by hand."""

from __future__ import annotations

import math

import numpy as np

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iolab.analysis import stats


def test_t_interval_by_hand():
    s = stats.t_interval([1.0, 2.0, 3.0])
    assert s["n"] == 3 and s["mean"] == 2.0 and s["sd"] == pytest.approx(1.0)
    # t(0.975, df=2) = 4.302653 ; half width = t * sd / sqrt(n)
    assert s["ci_half"] == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert s["ci_low"] == pytest.approx(2.0 - s["ci_half"])


def test_single_value_has_no_spread():
    s = stats.t_interval([5.0])
    assert s["n"] == 1 and s["mean"] == 5.0
    assert math.isnan(s["sd"]) and math.isnan(s["ci_low"])


def test_summarize_groups():
    df = pd.DataFrame({"engine": ["a", "a", "b", "b"], "iops": [10.0, 14.0, 1.0, 1.0]})
    out = stats.summarize(df, ["engine"], ["iops"]).set_index("engine")
    assert out.loc["a", "mean"] == 12.0 and out.loc["a", "sd"] == pytest.approx(math.sqrt(8))
    assert out.loc["b", "sd"] == 0.0 and out.loc["b", "n"] == 2


def test_ratio_and_pct_change():
    r = stats.ratio_interval([20.0, 22.0, 18.0], [10.0, 11.0, 9.0])
    assert r["ratio"] == pytest.approx(2.0)
    assert r["ci_low"] < 2.0 < r["ci_high"]
    p = stats.pct_change([20.0, 22.0, 18.0], [10.0, 11.0, 9.0])
    assert p["pct"] == pytest.approx(100.0)
    exact = stats.ratio_interval([2.0, 2.0], [1.0, 1.0])
    assert exact["ci_low"] == pytest.approx(2.0) and exact["ci_high"] == pytest.approx(2.0)


def test_lognormal_interval_by_hand_and_never_below_zero():
    x = [100.0, 150.0, 900.0]
    s = stats.lognormal_interval(x)
    y = [math.log(v) for v in x]
    ybar = sum(y) / 3
    var = sum((v - ybar) ** 2 for v in y) / 2
    half = 4.302653 * math.sqrt(var / 3 + var**2 / 4)
    assert s["ci_low"] == pytest.approx(math.exp(ybar + var / 2 - half), rel=1e-6)
    assert s["ci_high"] == pytest.approx(math.exp(ybar + var / 2 + half), rel=1e-6)
    assert s["mean"] == pytest.approx(383.333, rel=1e-5) and s["ci_low"] > 0
    assert stats.t_interval(x)["ci_low"] < 0, "the t-interval of the same values reaches below zero"


def test_lognormal_interval_is_undefined_for_values_not_above_zero():
    assert math.isnan(stats.lognormal_interval([0.0, 1.0, 2.0])["ci_low"])


def test_summarize_names_the_method_per_metric():
    df = pd.DataFrame({"g": ["a"] * 3, "iops": [1.0, 2.0, 3.0], "p99": [1.0, 2.0, 4.0]})
    out = stats.summarize(df, ["g"], ["iops", "p99"], methods={"p99": "lognormal"})
    assert list(out["method"]) == ["t", "lognormal"]
    with pytest.raises(ValueError, match="unknown interval method"):
        stats.interval([1.0, 2.0], "bootstrap")


def test_the_ratio_interval_by_hand_on_the_log_scale():
    """ln r ± t(df)·√(s_a²/(n_a ā²) + s_b²/(n_b b̄²)), df by Welch–Satterthwaite."""
    from scipy import stats as sps

    a, b = [100.0, 120.0, 110.0, 95.0], [50.0, 48.0, 55.0]
    ma, mb = sum(a) / 4, sum(b) / 3
    va = sum((x - ma) ** 2 for x in a) / 3 / (4 * ma**2)
    vb = sum((x - mb) ** 2 for x in b) / 2 / (3 * mb**2)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    q = sps.t.ppf(0.975, df)
    r = stats.ratio_interval(a, b)
    assert r["ratio"] == pytest.approx(ma / mb)
    assert r["ci_low"] == pytest.approx(ma / mb * math.exp(-q * math.sqrt(va + vb)))
    assert r["ci_high"] == pytest.approx(ma / mb * math.exp(q * math.sqrt(va + vb)))
    assert r["undefined"] == "" and "log scale" in r["method"]


def test_a_large_drop_stays_above_minus_100_percent():
    """What the delta method on the linear scale printed as -101.0 % to -97.9 %."""
    p = stats.pct_change([900.0, 1500.0, 400.0], [60000.0, 61000.0, 59000.0])
    assert -100 < p["ci_low"] < p["pct"] < p["ci_high"] < 0


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.floats(1e-6, 1e9), min_size=2, max_size=12),
       st.lists(st.floats(1e-6, 1e9), min_size=2, max_size=12))
def test_a_ratio_interval_of_positive_samples_stays_positive(a, b):
    r = stats.ratio_interval(a, b)
    assert r["undefined"] == ""
    assert 0 < r["ci_low"] <= r["ratio"] * (1 + 1e-9) and r["ratio"] <= r["ci_high"] * (1 + 1e-9)
    # 100·(r − 1) of a ratio below 1e-14 rounds to −100 in floating point; never below it
    assert stats.pct_change(a, b)["ci_low"] >= -100


def test_the_ratio_interval_covers_the_true_ratio_about_as_often_as_it_says():
    """By simulation with a fixed seed: normal samples (CV 20 %) of a known ratio 2."""
    rng = np.random.default_rng(20261126)
    hits = sum(lo <= 2 <= hi for lo, hi in (
        (r["ci_low"], r["ci_high"]) for r in (
            stats.ratio_interval(rng.normal(100, 20, 5), rng.normal(50, 10, 5))
            for _ in range(2000))))
    assert 0.93 <= hits / 2000 <= 0.98


@pytest.mark.parametrize("a,b,why", [
    ([5.0], [1.0, 2.0], "the first sample has 1 value (at least 2 needed)"),
    ([], [1.0, 2.0], "the first sample has 0 values"),
    ([0.0, 0.0], [1.0, 2.0], "the first sample has a mean of 0"),
    ([1.0, 2.0], [-1.0, -2.0], "the second sample has a mean of -1.5"),
    ([1.0, math.nan], [1.0, 2.0], "the first sample holds a missing value"),
])
def test_a_degenerate_ratio_is_undefined_with_its_reason(a, b, why):
    r = stats.ratio_interval(a, b)
    assert r["undefined"].startswith(why)
    assert math.isnan(r["ci_low"]) and math.isnan(r["ci_high"])
