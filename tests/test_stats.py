"""Statistics: n, mean, sample sd (ddof=1) and Student-t intervals, checked by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

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
