"""The repetition rule: its validation, the t quantile, and the decisions on scripted samples."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from iolab.core import repetitions as reps
from iolab.errors import InputError

RULE = reps.Rule(3, 8, "iops", 5.0, 0.95)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 7, 10, 29, 100, 999])
@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 0.999])
def test_t_quantiles_agree_with_scipy(df, confidence):
    expected = stats.t.ppf(0.5 + confidence / 2, df)
    assert reps.t_quantile(confidence, df) == pytest.approx(expected, rel=1e-10)


def test_incomplete_beta_at_its_ends_and_symmetry():
    assert reps.incomplete_beta(2, 3, 0) == 0 and reps.incomplete_beta(2, 3, 1) == 1
    assert reps.incomplete_beta(2.5, 2.5, 0.5) == pytest.approx(0.5, abs=1e-14)
    assert reps.incomplete_beta(2, 3, 0.3) == pytest.approx(stats.beta.cdf(0.3, 2, 3), rel=1e-12)


def test_constant_values_settle_at_min():
    d = reps.decide(RULE, [1000.0] * 3)
    assert (d.n, d.reason, d.rel_half_pct, d.to_run, d.to_run_max) == (3, "target", 0, 0, 0)


def test_fewer_than_min_runs_stay_open_even_when_they_agree():
    d = reps.decide(RULE, [1000.0, 1000.0])
    assert d.reason == "open" and (d.to_run, d.to_run_max) == (1, 6)
    assert reps.decide(RULE, []).to_run == 3


def test_widely_spread_values_reach_max():
    values = [100.0, 300.0] * 4
    for n in range(3, 8):
        d = reps.decide(RULE, values[:n])
        assert d.reason == "open" and d.to_run == 1 and d.to_run_max == 8 - n
    d = reps.decide(RULE, values)
    assert d.reason == "max" and d.n == 8 and d.rel_half_pct > 5


def test_the_half_width_is_students_t_over_the_mean():
    values = [100.0, 104.0, 98.0, 101.0]
    mean, rel = reps.relative_half_width(values, 0.95)
    sd = stats.tstd(values)
    assert mean == pytest.approx(100.75)
    assert rel == pytest.approx(100 * stats.t.ppf(0.975, 3) * sd / 2 / 100.75, rel=1e-10)
    # the target is a bound on that width, reached or not
    assert reps.decide(reps.Rule(3, 8, "iops", rel * 0.999), values).reason == "open"
    assert reps.decide(reps.Rule(3, 8, "iops", rel * 1.001), values).reason == "target"


def test_failures_are_no_samples_and_max_failures_settle_a_point():
    d = reps.decide(RULE, [1000.0, None, math.nan], failures=1)
    assert d.n == 1 and d.failures == 3 and d.reason == "open"
    d = reps.decide(RULE, [], failures=8)
    assert d.reason == "failed" and d.to_run == 0 and math.isnan(d.mean)


def test_a_fixed_count_counts_runs_as_before():
    rule = reps.fixed(3)
    assert rule.fixed and rule.to_dict() == 3
    assert reps.decide(rule, [None, None]).to_run == 1
    d = reps.decide(rule, [None] * 3)
    assert d.reason == "fixed" and d.settled and d.to_run == d.to_run_max == 0


def test_the_rule_in_words():
    assert reps.fixed(5).text() == "a fixed 5 repetitions of every point"
    assert RULE.text("IOPS") == ("at least 3 and at most 8 repetitions of every point, stopping "
                                 "once the 95 % confidence interval of the mean IOPS is within "
                                 "±5 % of the mean")


def test_parse_reads_counts_and_rules_with_the_default_confidence():
    assert reps.parse(4, "f.yaml") == reps.fixed(4)
    rule = reps.parse({"min": 3, "max": 8, "metric": "iops", "target_ci_pct": 5}, "f.yaml",
                      ["iops"])
    assert rule == RULE and not rule.fixed


@pytest.mark.parametrize("value, key, says", [
    ({"min": 5, "max": 3, "metric": "iops", "target_ci_pct": 5}, "repetitions.min",
     "min 5 is larger than max 3"),
    ({"min": 1, "max": 3, "metric": "iops", "target_ci_pct": 5}, "repetitions.min",
     "1 is out of range"),
    ({"min": 2, "max": 3, "metric": "iops", "target_ci_pct": 0}, "repetitions.target_ci_pct",
     "0 is out of range"),
    ({"min": 2, "max": 3, "metric": "iops", "target_ci_pct": -1}, "repetitions.target_ci_pct",
     "-1 is out of range"),
    ({"min": 2, "max": 3, "metric": "iops", "target_ci_pct": 5, "confidence": 1},
     "repetitions.confidence", "1 is out of range"),
    ({"min": 2, "max": 3, "metric": "iops", "target_ci_pct": 5, "confidence": 0},
     "repetitions.confidence", "0 is out of range"),
    ({"min": 2, "max": 3, "metric": "latency", "target_ci_pct": 5}, "repetitions.metric",
     "'latency' is not a metric this experiment produces"),
    ({"min": 2, "max": "abc", "metric": "iops", "target_ci_pct": 5}, "repetitions.max",
     "'abc' is a string"),
    ({"min": 2, "max": 3, "metric": "iops"}, "repetitions.target_ci_pct", "missing"),
    ({"min": 2, "max": 3, "metric": "iops", "target_ci_pct": 5, "maxx": 4},
     "repetitions.maxx", "unknown key"),
    ("three", "repetitions", "neither a count nor a rule"),
    (0, "repetitions", "0 is out of range"),
    (True, "repetitions", "neither a count nor a rule"),
])
def test_bad_rules_name_the_file_the_key_and_what_is_allowed(value, key, says):
    with pytest.raises(InputError) as info:
        reps.parse(value, "params/x.yaml", ["iops", "clat_p99_us"])
    err = info.value
    assert err.path == "params/x.yaml" and err.key == key and says in err.problem
    assert err.allowed, "every refusal says what is allowed"
