"""The best set, Holm's correction and the outlier rule, each against a reference."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from iolab.analysis import multiple, outliers, stats
from iolab.analysis.selection import best_set


def test_a_configuration_is_left_out_exactly_when_a_one_sided_welch_test_rejects():
    """Against SciPy's Welch test (one-sided), at the Bonferroni level alpha / (k - 1)."""
    rng = np.random.default_rng(7)
    samples = {f"c{i}": list(rng.normal(100 + 3 * i, 4, 3 + i % 4)) for i in range(6)}
    result = best_set(samples, 0.95)
    level = 0.05 / 5
    for i, xi in samples.items():
        beaten = any(sps.ttest_ind(xj, xi, equal_var=False, alternative="greater").pvalue < level
                     for j, xj in samples.items() if j != i)
        assert (i not in result.members) == beaten, i


def test_a_clear_winner_is_alone_and_the_others_say_what_beats_them():
    samples = {"a": [100.0, 101, 99], "b": [80.0, 81, 79], "c": [60.0, 61, 59]}
    result = best_set(samples)
    assert result.members == ["a"] and result.top == "a"
    assert result.beaten_by == {"b": "a", "c": "a"} and result.status("c") == "below a"


def test_configurations_the_data_cannot_separate_all_stay():
    samples = {"a": [100.0, 110, 90], "b": [101.0, 91, 111], "c": [99.0, 89, 109]}
    assert sorted(best_set(samples).members) == ["a", "b", "c"]


def test_degenerate_input_is_undecided_not_a_crash():
    result = best_set({"a": [5.0], "b": [], "c": [math.nan, 3.0]})
    assert result.members == [] and result.top is None
    assert set(result.undecided) == {"a", "b", "c"}
    assert best_set({"only": [1.0, 2.0]}).members == ["only"]
    assert best_set({}).members == []


def test_by_simulation_the_set_holds_the_truly_best_at_least_as_often_as_stated():
    """30 configurations like the CPU search's: means within a few percent of each other,
    3 to 8 repetitions, CV 5 %; the best is one of them."""
    rng = np.random.default_rng(20261126)
    truth = 84_000 + 4_000 * rng.random(30)
    best = int(np.argmax(truth))
    trials, held, sizes = 400, 0, []
    for _ in range(trials):
        samples = {str(i): list(rng.normal(m, 0.05 * m, rng.integers(3, 9)))
                   for i, m in enumerate(truth)}
        result = best_set(samples, 0.95)
        held += str(best) in result.members
        sizes.append(len(result.members))
    assert held / trials >= 0.95
    assert np.mean(sizes) < 30, "the set does leave configurations out"


def test_holm_against_a_worked_example():
    """Four tests at 5 %: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, running maximum."""
    assert multiple.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert multiple.verdicts([0.01, 0.04, 0.03, 0.005]) == [
        "significant", "not significant", "not significant", "significant"]
    assert multiple.holm([0.5, math.nan]) == [0.5, pytest.approx(math.nan, nan_ok=True)]
    assert multiple.verdicts([math.nan]) == ["undefined"]


def test_by_simulation_holm_keeps_the_family_error_near_the_level():
    """Ten equal pairs per family: Holm calls any of them different in at most about 5 %
    of families; uncorrected, in far more."""
    rng = np.random.default_rng(3)
    families, any_holm, any_raw = 400, 0, 0
    for _ in range(families):
        ps = [stats.ratio_interval(rng.normal(100, 5, 5), rng.normal(100, 5, 5))["p"]
              for _ in range(10)]
        any_holm += "significant" in multiple.verdicts(ps)
        any_raw += any(p < 0.05 for p in ps)
    assert any_holm / families <= 0.08 and any_raw / families >= 0.25


def test_the_ratio_p_value_agrees_with_its_interval():
    rng = np.random.default_rng(11)
    for _ in range(200):
        r = stats.ratio_interval(rng.normal(100, 10, 4), rng.normal(95, 10, 5))
        assert (r["p"] < 0.05) == (not r["ci_low"] <= 1 <= r["ci_high"])


def test_the_outlier_rule_by_hand_and_its_fallback():
    x = [60_000.0, 61_000, 62_000, 60_500, 12_000]
    med = np.median(x)
    mad = np.median(np.abs(np.array(x) - med))
    assert outliers.modified_z(x) == pytest.approx(0.6745 * (np.array(x) - med) / mad)
    df = pd.DataFrame({"p": [1] * 5 + [2] * 3, "iops": x + [1.0, 1.0, 100.0]})
    assert outliers.flag(df, ["p"], "iops").tolist() == [False] * 4 + [True] + [False] * 3
    # more than half equal: MAD 0, the mean absolute deviation stands in
    z = outliers.modified_z([5.0, 5.0, 5.0, 5.0, 9.0])
    assert z[-1] == pytest.approx(4 / (1.253314 * 0.8)) and z[-1] > 3.5
    assert np.isnan(outliers.modified_z([100.0, 100.5, 130.0])).all()  # too few to say
    assert np.isnan(outliers.modified_z([5.0] * 6)).all()  # no spread
