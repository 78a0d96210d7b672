"""The noise floor (iolab.analysis.noise): the pooled spread against a one-way ANOVA's
within-group mean square, the floor's nominal false-alarm share for equal pairs by
simulation, and degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from iolab.analysis import noise


def lognormal_points(k: int, n: int, sd: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    levels = rng.uniform(1e4, 1e5, size=k)  # points of very different size count alike
    return pd.DataFrame([{"point": i, "iops": levels[i] * math.exp(rng.normal(0, sd))}
                         for i in range(k) for _ in range(n)])


def test_pooled_spread_is_the_anova_within_mean_square_of_the_logs():
    rows = lognormal_points(6, 4, 0.05, seed=1)
    rows = rows.drop(index=[0, 1])  # unequal n: 2 runs at the first point
    sd, df, points = noise.pooled_log_sd(rows, ["point"], "iops")
    groups = [np.log(g.to_numpy()) for _, g in rows.groupby("point")["iops"]]
    within = sum(((g - g.mean()) ** 2).sum() for g in groups)
    assert df == len(rows) - 6 and points == 6
    assert sd == pytest.approx(math.sqrt(within / df))


def test_floor_formula_and_detectable_difference():
    rows = lognormal_points(10, 5, 0.04, seed=2)
    found = noise.floor(rows, ["point"], "iops", 0.95)
    se = found.sd_log * math.sqrt(2 / 5)
    assert found.n == 5 and found.df == 40
    assert found.floor == pytest.approx(math.expm1(sst.t.ppf(0.975, 40) * se))
    assert found.detectable == pytest.approx(
        math.expm1((sst.t.ppf(0.975, 40) + sst.t.ppf(0.8, 40)) * se))
    assert noise.within(found.floor * 0.9, found) and not noise.within(found.floor * 1.1, found)
    # a fall counts as large as the rise it undoes
    fall = 1 / (1 + found.floor * 0.9) - 1
    assert noise.within(fall, found)
    assert not noise.within(-1.0, found) and not noise.within(math.nan, found)


def test_equal_pairs_exceed_the_floor_about_the_nominal_share():
    """An A/A check by simulation: two points measured alike differ by more than the floor in
    about 5 % of trials (fixed seed)."""
    sd, n = 0.06, 5
    found = noise.floor(lognormal_points(60, n, sd, seed=3), ["point"], "iops", 0.95)
    rng = np.random.default_rng(4)
    trials = 4000
    a = rng.normal(0, sd, size=(trials, n)).mean(axis=1)
    b = rng.normal(0, sd, size=(trials, n)).mean(axis=1)
    share = float(np.mean(np.abs(a - b) > math.log1p(found.floor)))
    assert 0.03 < share < 0.07


@pytest.mark.parametrize("rows, why", [
    (pd.DataFrame(), "no runs"),
    (pd.DataFrame({"point": [1, 2], "iops": [5.0, 6.0]}), "1 run(s) per point"),
    (pd.DataFrame({"point": [1, 1, 2, 2], "iops": [0.0, 5.0, -1.0, 6.0]}),
     "no point has two positive values"),
])
def test_degenerate_input_is_undefined_with_its_reason(rows, why):
    found = noise.floor(rows, ["point"], "iops", 0.95)
    assert not found.defined and why in found.why_undefined and math.isnan(found.floor)


def test_identical_runs_have_a_zero_floor_and_one_configuration_is_enough():
    same = noise.floor(pd.DataFrame({"point": [1, 1, 1], "iops": [7.0] * 3}), ["point"],
                       "iops", 0.95)
    assert same.defined and same.floor == 0 and same.detectable == 0
    one = noise.floor(pd.DataFrame({"iops": [9.0, 10.0, 11.0]}), [], "iops", 0.95)
    assert one.defined and one.points == 1 and one.df == 2 and one.floor > 0


def test_the_cpu_search_chapter_quotes_its_floor_with_and_without_its_outliers():
    """Pinned on the committed kvm-2vcpu runs: four outlier runs double the floor."""
    from iolab.report.chapter import Chapter

    ch = Chapter("cpu_search", "kvm-2vcpu", mode="replay")
    text = ch.noise_text()
    assert "the runs were made interleaved" in text
    assert "Two points of 8 runs measured alike differ by more than 25.6 % only 5 % of the time" \
        in text
    assert "Without the 4 outlier runs (above) the floor would be 12.7 %" in text
