"""A chapter's findings as data: each a quantity with its estimate, interval, n and method.

A *finding* is what a chapter's prose and its claims table rest on: a relative change
(``change``, in percent, no change at 0), a ratio of means (``ratio``, no difference at 1; also
one mean against a value the source states, ``level``), a difference of means for counts that may be zero (``difference``, none at 0), or why the
campaign could not measure it here (``undefined``). Changes and ratios use the
log-scale interval of a ratio of means (:func:`iolab.analysis.stats.ratio_interval`), so an
interval never leaves the quantity's range. An experiment's ``analysis`` module builds its
findings from the tidy table and the spec; tests pin them on the committed data.

Responsible for: the record, its direction against "no effect", and building one from two
samples. Not responsible for: which findings a chapter has (the experiments' analysis), or
the claims they are set against (``iolab.report.claims``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

from iolab.analysis import stats

KINDS = ("change", "ratio", "difference")
NULL = {"change": 0.0, "ratio": 1.0, "difference": 0.0}
INTERACTION_METHOD = ("ratio of two ratios of means, delta method on the log scale with "
                      "Welch–Satterthwaite degrees of freedom")
DIFFERENCE_METHOD = "difference of means, Welch's t interval"
LEVEL_METHOD = "mean over a stated value, Student's t interval of the mean"
# below it, a ratio's text has two significant digits rather than two decimals
SMALL_RATIO = 0.1


@dataclass(frozen=True)
class Finding:
    """One quantity a chapter reports (see the module docstring)."""

    id: str
    statement: str          # the quantity in words: "io_uring / psync IOPS at concurrency 64"
    kind: str               # one of KINDS
    estimate: float
    ci_low: float
    ci_high: float
    n: str                  # the runs behind each side, "5 / 5"
    confidence: float
    method: str
    undefined: str = ""     # why there is no estimate here ("" when there is one)

    @property
    def defined(self) -> bool:
        return not self.undefined and not math.isnan(self.ci_low)

    @property
    def direction(self) -> str | None:
        """``up`` or ``down`` when the interval lies wholly above or below "no effect",
        ``none`` when it contains it, None without an interval."""
        if not self.defined:
            return None
        null = NULL[self.kind]
        return "up" if self.ci_low > null else "down" if self.ci_high < null else "none"

    @property
    def relative(self) -> float:
        """The estimate as a relative change (0.05 for +5 %), for a noise floor (NaN for a
        difference, which has no scale to be relative to)."""
        if self.kind == "difference":
            return math.nan
        return self.estimate / 100 if self.kind == "change" else self.estimate - 1

    @property
    def relative_bounds(self) -> tuple[float, float]:
        """The interval's bounds as relative changes (see :attr:`relative`)."""
        if self.kind == "difference":
            return math.nan, math.nan
        if self.kind == "change":
            return self.ci_low / 100, self.ci_high / 100
        return self.ci_low - 1, self.ci_high - 1

    def text(self) -> str:
        """'+16.3 % (95 % CI +1.4 to +31.3; n = 5 / 5)', '0.95 (95 % CI 0.90 to 1.01; n = 3 / 3)'
        ('0.0015 (95 % CI 0.0012 to 0.002; ...)' below :data:`SMALL_RATIO`), or why it is
        undefined."""
        if not self.defined:
            return f"not measured here: {self.undefined or 'no interval'}"
        ci = f"{self.confidence * 100:g} % CI"
        if self.kind == "change" and self.estimate >= 100:  # a multiple reads better
            return (f"{1 + self.estimate / 100:.2f} times as much ({ci} "
                    f"{1 + self.ci_low / 100:.2f} to {1 + self.ci_high / 100:.2f}; n = {self.n})")
        if self.kind == "change":
            return (f"{self.estimate:+.1f} % ({ci} {self.ci_low:+.1f} to {self.ci_high:+.1f}; "
                    f"n = {self.n})")
        if self.kind == "difference":
            return (f"{self.estimate:+.3g} ({ci} {self.ci_low:+.3g} to {self.ci_high:+.3g}; "
                    f"n = {self.n})")
        # a ratio far below 1 (a latency a hundred times shorter) would read 0.00: two
        # significant digits instead
        form = ".2f" if self.estimate >= SMALL_RATIO else ".2g"
        return (f"{self.estimate:{form}} ({ci} {self.ci_low:{form}} to {self.ci_high:{form}}; "
                f"n = {self.n})")


def change(id: str, statement: str, new: Sequence[float], base: Sequence[float],
           confidence: float = 0.95) -> Finding:
    """The change of the mean of ``new`` against ``base``, in percent."""
    c = stats.pct_change(list(new), list(base), confidence)
    return Finding(id, statement, "change", c["pct"], c["ci_low"], c["ci_high"],
                   f"{len(new)} / {len(base)}", confidence, c["method"], c["undefined"])


def ratio(id: str, statement: str, a: Sequence[float], b: Sequence[float],
          confidence: float = 0.95) -> Finding:
    """mean(a) / mean(b)."""
    r = stats.ratio_interval(list(a), list(b), confidence)
    return Finding(id, statement, "ratio", r["ratio"], r["ci_low"], r["ci_high"],
                   f"{len(a)} / {len(b)}", confidence, r["method"], r["undefined"])


def difference(id: str, statement: str, new: Sequence[float], base: Sequence[float],
               confidence: float = 0.95) -> Finding:
    """mean(new) - mean(base), with Welch's t interval (for counts, which may be zero)."""
    a, b = (np.asarray(list(x), dtype=float) for x in (new, base))
    n = f"{a.size} / {b.size}"
    if a.size < 2 or b.size < 2 or np.isnan(a).any() or np.isnan(b).any():
        return undefined(id, statement, "each side needs at least two values", "difference",
                         confidence)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    value = float(a.mean() - b.mean())
    se = math.sqrt(va + vb)
    den = va**2 / (a.size - 1) + vb**2 / (b.size - 1)
    df = (va + vb) ** 2 / den if den > 0 else a.size + b.size - 2
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    return Finding(id, statement, "difference", value, value - q * se, value + q * se, n,
                   confidence, DIFFERENCE_METHOD)


def level(id: str, statement: str, values: Sequence[float], stated: float,
          confidence: float = 0.95) -> Finding:
    """mean(values) / ``stated``: one mean against a value its source states (one reschedule
    IPI per read), with Student's t interval of the mean (the stated value has no error)."""
    x = np.asarray(list(values), dtype=float)
    if x.size < 2 or np.isnan(x).any() or not stated > 0:
        return undefined(id, statement, "needs at least two values and a positive stated "
                         "value", "ratio", confidence)
    q = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1))
    half = q * x.std(ddof=1) / math.sqrt(x.size)
    mean = float(x.mean())
    return Finding(id, statement, "ratio", mean / stated, (mean - half) / stated,
                   (mean + half) / stated, str(x.size), confidence, LEVEL_METHOD)


def interaction(id: str, statement: str, a_new: Sequence[float], a_base: Sequence[float],
                b_new: Sequence[float], b_base: Sequence[float],
                confidence: float = 0.95) -> Finding:
    """How much more ``a`` changes than ``b``: (mean a_new / mean a_base) / (mean b_new /
    mean b_base), a ratio of two ratios of means, with the delta-method interval on the log
    scale over the four independent samples (Welch–Satterthwaite degrees of freedom)."""
    samples = [np.asarray(list(x), dtype=float) for x in (a_new, a_base, b_new, b_base)]
    n = " / ".join(str(x.size) for x in samples)
    for x in samples:
        if x.size < 2 or np.isnan(x).any() or x.mean() <= 0:
            return undefined(id, statement, "each of the four samples needs at least two "
                             "values and a positive mean", "ratio", confidence)
    m = [x.mean() for x in samples]
    v = [x.var(ddof=1) / (x.size * mean**2) for x, mean in zip(samples, m)]
    value = (m[0] / m[1]) / (m[2] / m[3])
    se = math.sqrt(sum(v))
    den = sum(vi**2 / (x.size - 1) for vi, x in zip(v, samples))
    df = sum(v) ** 2 / den if den > 0 else sum(x.size - 1 for x in samples)
    q = float(sps.t.ppf(0.5 + confidence / 2, df))
    return Finding(id, statement, "ratio", value, value * math.exp(-q * se),
                   value * math.exp(q * se), n, confidence, INTERACTION_METHOD)


def undefined(id: str, statement: str, why: str, kind: str = "change",
              confidence: float = 0.95) -> Finding:
    """A finding this campaign could not measure, with the reason."""
    nan = math.nan
    return Finding(id, statement, kind, nan, nan, nan, "0", confidence, "", why)


def by_id(findings: Sequence[Finding]) -> dict[str, Finding]:
    """Each finding under its id; two of one id are an analysis's mistake, refused rather than
    one of them silently judged, pooled or drawn in place of the other."""
    out: dict[str, Finding] = {}
    for f in findings:
        if f.id in out:
            raise ValueError(f"two findings named {f.id!r}")
        out[f.id] = f
    return out

