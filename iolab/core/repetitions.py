"""How many repetitions a point gets: a fixed count, or a bounded rule that stops on the data.

``repetitions`` in a params file is either a whole number (every point runs that many times)
or a rule::

    repetitions: {min: 3, max: 8, metric: iops, target_ci_pct: 5, confidence: 0.95}

Under a rule a point is *settled* once it has at least ``min`` successful runs and the
half-width of the Student-t confidence interval of its metric's mean, relative to the mean,
is at most ``target_ci_pct`` percent (reason ``target``), or once it has ``max`` successful
runs (reason ``max``), or once ``max`` of its runs have failed (reason ``failed``). A fixed
count settles a point at that many runs (reason ``fixed``). A point not settled is ``open``.

A point's :class:`Decision` is a pure function of its stored runs' values of the metric, its
failed attempts and the rule: it is never stored, so changing the rule re-decides every point
from the same runs, and the plan, the status, the tables and the chapters agree by
construction.

The t quantile is computed here (the regularized incomplete beta function, inverted by
bisection) rather than taken from SciPy, because the runner decides after every run and must
stay free of SciPy's import time; a test holds it to SciPy's values.

Responsible for: the rule's validation, its text, the t quantile and the decisions.
Not responsible for: which runs exist (``iolab.core.planner``), their order
(``iolab.execution.rounds``) or reading a run's metric (``iolab.execution.host_plan.metric_value``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass
from typing import Any, Sequence

from iolab.core.schema import Int, Number, type_name
from iolab.errors import InputError, excerpt

MAX_REPETITIONS = 1000
RULE_KEYS = ("min", "max", "metric", "target_ci_pct", "confidence")
REASONS = ("target", "max", "fixed", "failed", "screened", "open")
# the reasons in words, and "blocked", which a plan says of open points this host cannot run
# ("screened": a searched configuration the search measured fewer times than the rule would,
# iolab.core.search)
REASON_TEXT = {"target": "met the target", "max": "stopped at max", "failed": "failed",
               "fixed": "fixed count", "screened": "screened by the search", "open": "open",
               "blocked": "blocked here"}


@dataclass(frozen=True)
class Rule:
    """A fixed count (``metric`` None, ``min == max``) or a stopping rule."""

    min: int
    max: int
    metric: str | None = None
    target_ci_pct: float | None = None
    confidence: float = 0.95

    @property
    def fixed(self) -> bool:
        return self.metric is None

    def to_dict(self) -> dict[str, Any] | int:
        """The rule as a params file writes it."""
        if self.fixed:
            return self.max
        return {"min": self.min, "max": self.max, "metric": self.metric,
                "target_ci_pct": self.target_ci_pct, "confidence": self.confidence}

    def text(self, metric_label: str | None = None) -> str:
        """The rule in words, for plans and chapters."""
        if self.fixed:
            return f"a fixed {self.max} repetitions of every point"
        return (f"at least {self.min} and at most {self.max} repetitions of every point, "
                f"stopping once the {self.confidence * 100:g} % confidence interval of the mean "
                f"{metric_label or self.metric} is within ±{self.target_ci_pct:g} % of the mean")


def fixed(count: int) -> Rule:
    return Rule(count, count)


COUNT = Int(1, MAX_REPETITIONS, help="repetitions of every point")
FIELDS = {
    "min": Int(2, MAX_REPETITIONS, help="the fewest runs of a point; an interval needs 2"),
    "max": Int(2, MAX_REPETITIONS, help="the most runs of a point"),
    "target_ci_pct": Number(positive=True, help="the widest interval accepted, as its "
                            "half-width in percent of the mean"),
    "confidence": Number(0.5, 0.999, default=0.95, help="the interval's confidence level"),
}


def parse(value: Any, label, metrics: Sequence[str] | None = None) -> Rule:
    """The rule a params file's ``repetitions`` holds, or InputError naming ``label`` and the
    key. ``metrics``: the tidy columns the experiment produces (None: not checked)."""
    if not isinstance(value, dict):
        if isinstance(value, int) and not isinstance(value, bool):
            return fixed(COUNT.check(value, label, "repetitions"))
        raise InputError(label, "repetitions", f"{excerpt(value)} is a {type_name(value)}, "
                         "neither a count nor a rule",
                         allowed=f"{COUNT.allowed()}, or a mapping with {', '.join(RULE_KEYS)}")
    unknown = [k for k in value if k not in RULE_KEYS]
    if unknown:
        raise InputError(label, f"repetitions.{unknown[0]}", "unknown key of a repetition rule",
                         allowed=", ".join(RULE_KEYS))
    missing = [k for k in RULE_KEYS if k not in value and k != "confidence"]
    if missing:
        key = missing[0]
        raise InputError(label, f"repetitions.{key}", "missing: a rule names min, max, "
                         "metric and target_ci_pct (confidence defaults to 0.95)",
                         allowed=FIELDS[key].allowed() if key in FIELDS
                         else ", ".join(metrics or []) or "a metric name")
    got = {k: f.check(value.get(k, f.default), label, f"repetitions.{k}")
           for k, f in FIELDS.items()}
    if got["min"] > got["max"]:
        raise InputError(label, "repetitions.min", f"min {got['min']} is larger than max "
                         f"{got['max']}", allowed=f"2 to {got['max']}")
    metric = value["metric"]
    if not isinstance(metric, str) or (metrics is not None and metric not in metrics):
        raise InputError(label, "repetitions.metric", f"{excerpt(metric)} is not a metric this "
                         "experiment produces", allowed=", ".join(metrics or []) or "a metric name")
    return Rule(got["min"], got["max"], metric, float(got["target_ci_pct"]),
                float(got["confidence"]))


# -- Student's t quantile ------------------------------------------------------------------

def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < eps:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for 0 <= x <= 1."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):  # where the fraction converges quickly
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1 - math.exp(log_front) * _beta_fraction(b, a, 1 - x) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0 and Student's t with ``df`` degrees of freedom."""
    return 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t))


@lru_cache(maxsize=4096)
def t_quantile(confidence: float, df: float) -> float:
    """The two-sided quantile: P(|T| <= q) = confidence (0.95 and 2 degrees -> 4.303)."""
    tail = (1 - confidence) / 2
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > tail:
        high *= 2
    for _ in range(200):  # the bracket halves each time: far below double precision
        mid = (low + high) / 2
        if t_upper_tail(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * high:
            break
    return (low + high) / 2


# -- decisions ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """A point's state under a rule, from its stored runs (see the module docstring)."""

    n: int                  # successful runs with a value of the metric
    failures: int           # failed attempts
    mean: float             # of the metric (NaN without a rule's metric or a run)
    rel_half_pct: float     # the interval's half-width in percent of the mean (NaN below 2)
    reason: str             # one of REASONS
    to_run: int             # runs certainly still needed
    to_run_max: int         # the most runs the rule can still ask for (retries of failed
                            # runs aside)

    @property
    def settled(self) -> bool:
        return self.reason != "open"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6)
        return {"n": self.n, "failures": self.failures, "mean": num(self.mean),
                "rel_half_pct": num(self.rel_half_pct), "reason": self.reason,
                "to_run": self.to_run, "to_run_max": self.to_run_max}


def relative_half_width(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """(mean, Student-t half-width of the mean's interval in percent of the mean); the
    half-width is NaN below 2 values or for a mean of 0."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / n
    if n < 2 or mean == 0:
        return mean, math.nan
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    return mean, 100 * half / abs(mean)


def decide(rule: Rule, values: Sequence[float | None], failures: int = 0) -> Decision:
    """A point's decision from the metric's values of its stored runs, in repetition order,
    and its failed runs. A stored run without a value (None or NaN) is no sample and counts
    as a failed attempt, but it holds its repetition index: a point whose indices are all
    taken stops at ``max`` whatever they gave."""
    good = [float(v) for v in values if v is not None and not math.isnan(v)]
    n, taken = len(good), len(values)
    if rule.fixed:  # counts stored runs, as it always has, whatever their values
        left = max(rule.max - taken, 0)
        mean = math.fsum(good) / n if n else math.nan
        return Decision(taken, failures, mean, math.nan, "open" if left else "fixed",
                        left, left)
    failures += taken - n
    mean, rel = relative_half_width(good, rule.confidence)
    if n >= rule.min and not math.isnan(rel) and rel <= rule.target_ci_pct:
        reason = "target"
    elif taken >= rule.max:
        reason = "max"
    elif failures >= rule.max:
        reason = "failed"
    else:
        reason = "open"
    if reason != "open":
        return Decision(n, failures, mean, rel, reason, 0, 0)
    left = rule.max - taken  # indices not yet taken; retries of failed runs come on top
    certain = min(max(rule.min - n, 1), left, rule.max - failures)
    return Decision(n, failures, mean, rel, reason, certain, left)
