"""Pooling one finding across machines (iolab.analysis.pooling), on constructed inputs: each
expectation is computed here from the definitions (inverse-variance weights, Cochran's Q,
the Paule–Mandel equation), independently of statsmodels, which the module uses. None of
these numbers is a measurement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from iolab.analysis.findings import Finding
from iolab.analysis.pooling import (ABSENT, HOLDS, SPECIFIC, UNSETTLED, generality,
                                   one_per_machine, pool, text)

Z = float(sps.norm.ppf(0.975))


def change(estimate: float, low: float, high: float, statement: str = "THP on io_uring",
           undefined: str = "") -> Finding:
    return Finding("thp_io_uring", statement, "change", estimate, low, high, "5 / 5", 0.95,
                   "constructed", undefined)


def as_log(f: Finding) -> tuple[float, float]:
    lo, hi = math.log(1 + f.ci_low / 100), math.log(1 + f.ci_high / 100)
    return math.log(1 + f.estimate / 100), (hi - lo) / (2 * Z)


def test_machines_that_agree_pool_to_their_common_value_with_no_heterogeneity():
    same = change(5.0, 0.0, 10.25)
    p = pool({"a": same, "b": same, "c": same})
    y, se = as_log(same)
    assert p.k == 3 and p.tau2 == 0 and p.i2 == 0
    assert p.estimate == pytest.approx(5.0)
    # no heterogeneity: the interval is the inverse-variance mean's, with t of 2 df
    half = sps.t.ppf(0.975, 2) * se / math.sqrt(3)
    assert (p.ci_low, p.ci_high) == pytest.approx(((math.exp(y - half) - 1) * 100,
                                                   (math.exp(y + half) - 1) * 100))
    assert p.prediction[0] < p.ci_low and p.prediction[1] > p.ci_high


def test_machines_that_disagree_give_the_paule_mandel_tau2_and_cochrans_i2():
    found = {"a": change(16.3, 2.3, 32.3), "b": change(-0.3, -5.0, 4.6),
             "c": change(5.0, 0.0, 10.0), "d": change(30.0, 20.0, 41.0)}
    p = pool(found)
    y, se = (np.array(v) for v in zip(*(as_log(f) for f in found.values())))
    v = se ** 2
    # Paule–Mandel: the generalised Q at tau² equals its degrees of freedom
    w = 1 / (v + p.tau2)
    mu = np.sum(w * y) / np.sum(w)
    assert np.sum(w * (y - mu) ** 2) == pytest.approx(len(y) - 1, rel=1e-6)
    assert p.estimate == pytest.approx((math.exp(mu) - 1) * 100, rel=1e-6)
    # I² from Cochran's Q with fixed-effect weights
    w0 = 1 / v
    q = np.sum(w0 * (y - np.sum(w0 * y) / np.sum(w0)) ** 2)
    assert p.i2 == pytest.approx((q - 3) / q, rel=1e-6)
    assert p.q_p == pytest.approx(sps.chi2.sf(q, 3), rel=1e-6)
    # a new machine's effect: wider than the mean's interval, by tau²
    lo, hi = (math.log(1 + x / 100) for x in p.prediction)
    se_mean = (math.log(1 + p.ci_high / 100) - math.log(1 + p.ci_low / 100)) / 2 \
        / sps.t.ppf(0.975, 3)
    assert (hi - lo) / 2 == pytest.approx(sps.t.ppf(0.975, 2) * math.sqrt(p.tau2 + se_mean ** 2),
                                          rel=1e-6)


def test_two_machines_pool_but_predict_nothing_and_say_why():
    p = pool({"a": change(16.3, 2.3, 32.3), "b": change(-0.3, -5.0, 4.6)})
    assert p.k == 2 and not p.predicts
    assert text(p).endswith("a prediction for a new machine needs 3 machines")


def test_ratios_and_differences_pool_on_their_own_scales():
    ratio = Finding("r", "xnvmeperf / fio", "ratio", 0.86, 0.79, 0.93, "9 / 9", 0.95, "c")
    assert pool({"a": ratio, "b": ratio}).estimate == pytest.approx(0.86)
    diff = Finding("d", "IPIs per read", "difference", -0.5, -0.7, -0.3, "3 / 3", 0.95, "c")
    p = pool({"a": diff, "b": diff, "c": diff})
    assert p.estimate == pytest.approx(-0.5)
    assert text(p).startswith("-0.5 (95 % CI ")


@pytest.mark.parametrize("found", [
    {"a": change(5.0, 0.0, 10.0)},
    {"a": change(5.0, 0.0, 10.0), "b": change(math.nan, math.nan, math.nan, undefined="no runs")},
    {"a": change(5.0, 0.0, 10.0), "b": change(4.0, 1.0, 7.0, statement="against the best other")},
    {"a": change(5.0, 5.0, 5.0), "b": change(4.0, 1.0, 7.0)},
    {"a": change(5.0, -100.0, 10.0), "b": change(4.0, 1.0, 7.0)},
])
def test_what_is_not_one_quantity_on_two_machines_is_not_pooled(found):
    """One machine, a machine without an estimate, two statements (set against different
    references), an interval of no width or one reaching a factor of 0."""
    assert pool(found) is None


def test_a_machine_counts_once_by_its_first_environment():
    a, b, c = change(5.0, 0.0, 10.0), change(9.0, 4.0, 14.0), change(2.0, -1.0, 5.0)
    machine_of = {"xeon-campaign": "Intel, kernel v657", "xeon-pack": "Intel, kernel v657",
                  "epyc": "AMD, kernel v669"}
    kept = one_per_machine({"xeon-campaign": a, "xeon-pack": b, "epyc": c}, machine_of)
    assert kept == {"xeon-campaign": a, "epyc": c}
    # an undefined estimate does not stand for its machine; an unnamed environment is its own
    gone = change(math.nan, math.nan, math.nan, undefined="no runs")
    kept = one_per_machine({"xeon-campaign": gone, "xeon-pack": b, "other": c}, machine_of)
    assert kept == {"xeon-pack": b, "other": c}
    assert pool(one_per_machine({"x": a, "y": a}, {"x": "m", "y": "m"})) is None


@pytest.mark.parametrize("found, said, words", [
    ({"a": (5, 1, 9), "b": (6, 2, 10)}, HOLDS, "up on both machines, no difference in size"),
    ({"a": (5, 1, 9), "b": (60, 50, 70)}, HOLDS, "up on both machines, by different amounts"),
    ({"a": (5, 1, 9), "b": (-6, -10, -2)}, SPECIFIC, "up on a, down on b"),
    ({"a": (30, 25, 35), "b": (0, -3, 3)}, SPECIFIC, "up on a, not detected on b (Cochran"),
    ({"a": (5, 0.5, 9.5), "b": (3, -4, 10)}, UNSETTLED, "up on a, not detected on b, with no"),
    ({"a": (1, -3, 5), "b": (-1, -5, 3)}, ABSENT, "contains no effect (2 machines)"),
])
def test_a_finding_holds_on_every_machine_is_machine_specific_unsettled_or_absent(
        found, said, words):
    """Constructed intervals (not measurements), each set to one reading of the rule."""
    verdict, why = generality({m: change(*v) for m, v in found.items()})
    assert verdict == said and words in why
    with pytest.raises(ValueError):
        generality({"a": change(5, 1, 9)})
    three = {m: change(5, 1, 9) for m in "abc"}
    assert "up on all 3 machines" in generality(three)[1]
