"""One finding pooled across machines: a random-effects estimate, how much the effect varies
from machine to machine, and what to expect on the next machine.

Each environment (machine) estimates a finding (:class:`~iolab.analysis.findings.Finding`)
with its own interval. Pooled, they are read as a random-effects meta-analysis: each machine
has its own true effect, drawn from a distribution whose mean is the pooled estimate and
whose variance, tau², is the between-machine heterogeneity.

- The scale: a change (+x %) is read as the factor 1 + x/100 and a ratio as itself, both on
  the log scale; a difference on the linear scale. A machine's standard error is the half
  width of its interval on that scale over the normal quantile of its level (the findings'
  own intervals are t intervals of a few runs: reading them as normal ones is the
  approximation every meta-analysis of summary statistics makes).
- The estimate: statsmodels' ``combine_effects`` (``statsmodels.stats.meta_analysis``), with
  the Paule–Mandel estimate of tau² (``method_re="iterated"``), and its confidence interval
  from the Hartung–Knapp–Sidik–Jonkman variance (statsmodels' ``var_hksj_re``), never below
  the plain random-effects variance, with Student's t of k − 1 degrees of freedom: it keeps
  its coverage with few studies where the normal interval is too narrow (IntHout, Ioannidis
  and Borm 2014).
- Heterogeneity: tau² and I² (the share of the spread of the estimates beyond what their own
  intervals explain, from Cochran's Q), and Q's p value.
- The prediction interval for a new machine (Higgins, Thompson and Spiegelhalter 2009):
  estimate ± t(k − 2) · sqrt(tau² + se²); it needs three machines or more.
- A machine counts once (:func:`one_per_machine`): two environments measured on one machine
  (a campaign and a replication pack of the same host, say) are a repeat on that machine,
  not two machines, so only the first of them enters a pooled estimate.
- Whether a finding holds across machines (:func:`generality`), from each machine's own
  interval and Cochran's Q: it *holds on every machine* when each machine's interval lies on
  the same side of "no effect" (by different amounts when Q rejects homogeneity); it is
  *machine-specific* when machines find it in opposite directions, or when some find it and
  others do not and Q says their estimates differ; *no effect is detected on any machine*
  when every interval contains "no effect"; otherwise (found on some machines only, without
  a detected difference between them) it is *not settled*. Every such reading is exploratory,
  at the chapter's level for each finding, outside its confirmatory family of claims.

Responsible for: the pooling of one finding's per-machine estimates and its summary.
Not responsible for: computing each machine's finding (each experiment's analysis), the
forest plot (``iolab.report.forest``) or the words a chapter uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import numpy as np
from scipy import stats as sps
from statsmodels.stats.meta_analysis import combine_effects

from iolab.analysis.findings import Finding

METHOD = ("random effects, Paule–Mandel tau², Hartung–Knapp–Sidik–Jonkman interval with "
          "t(k − 1) (statsmodels combine_effects); prediction interval of Higgins et al. "
          "(2009) with t(k − 2)")
PREDICTION_LEAST = 3  # machines a prediction interval needs (t with k - 2 degrees of freedom)


@dataclass(frozen=True)
class Pooled:
    """A finding pooled over ``k`` machines, on the finding's own scale (a change in %, a
    ratio or a difference); ``prediction`` is (nan, nan) with fewer than
    :data:`PREDICTION_LEAST` machines."""

    id: str
    kind: str
    k: int
    estimate: float
    ci_low: float
    ci_high: float
    tau2: float          # on the pooling scale (log for a change or a ratio)
    i2: float            # 0 to 1
    q_p: float           # p value of Cochran's Q (homogeneity)
    prediction: tuple[float, float]
    confidence: float
    method: str = METHOD

    @property
    def predicts(self) -> bool:
        return not math.isnan(self.prediction[0])


def on_scale(f: Finding, z: float) -> tuple[float, float]:
    """(the finding on the pooling scale, its standard error from its interval, read as a
    normal interval of quantile ``z``); (nan, nan) where a factor's bound is 0 or below."""
    if f.kind == "difference":
        return f.estimate, (f.ci_high - f.ci_low) / (2 * z)
    to = (lambda x: 1 + x / 100) if f.kind == "change" else (lambda x: x)
    est, lo, hi = to(f.estimate), to(f.ci_low), to(f.ci_high)
    if min(est, lo, hi) <= 0:
        return math.nan, math.nan
    return math.log(est), (math.log(hi) - math.log(lo)) / (2 * z)


def _from_scale(kind: str, value: float) -> float:
    if kind == "difference":
        return value
    factor = math.exp(value)
    return (factor - 1) * 100 if kind == "change" else factor


def pool(found: Mapping[str, Finding], confidence: float = 0.95) -> Pooled | None:
    """``found`` (machine -> its estimate of one finding) pooled; None where fewer than two
    machines estimate it, their statements or kinds differ (not one quantity), or an
    interval has no width or reaches a factor of 0."""
    usable = [f for f in found.values() if f.defined]
    if len(usable) < 2 or len({(f.statement, f.kind, f.id) for f in usable}) != 1:
        return None
    z = float(sps.norm.ppf(0.5 + confidence / 2))
    y, se = (np.array(v) for v in zip(*(on_scale(f, z) for f in usable)))
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(se)) and np.all(se > 0)):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):  # Q = 0: estimates that agree
        result = combine_effects(y, se ** 2, method_re="iterated", use_t=True)
    mean = float(result.mean_effect_re)
    k, kind = len(usable), usable[0].kind
    # HKSJ's variance, never below the plain random-effects one: estimates that agree better
    # than their intervals expect (Q below its df) would shrink it to nothing
    # (the ad hoc correction of Röver, Knapp and Friede 2015)
    var = max(float(result.var_hksj_re), float(result.sd_eff_w_re) ** 2)
    half = float(sps.t.ppf(0.5 + confidence / 2, k - 1)) * math.sqrt(var)
    low, high = mean - half, mean + half
    prediction = (math.nan, math.nan)
    if k >= PREDICTION_LEAST:
        t = float(sps.t.ppf(0.5 + confidence / 2, k - 2))
        spread = t * math.sqrt(result.tau2 + var)
        prediction = (_from_scale(kind, mean - spread), _from_scale(kind, mean + spread))
    q_p = float(result.test_homogeneity().pvalue)
    # I² = (Q - df) / Q, truncated at 0 (Higgins and Thompson 2002): estimates that agree
    # better than their intervals expect (Q at or below its df) show no heterogeneity
    i2 = float(result.i2) if math.isfinite(result.i2) and result.i2 > 0 else 0.0
    return Pooled(usable[0].id, kind, k, _from_scale(kind, mean), _from_scale(kind, low),
                  _from_scale(kind, high), float(result.tau2), i2, q_p,
                  prediction, confidence)


def why_not_pooled(found: Mapping[str, Finding], least: int = PREDICTION_LEAST) -> str:
    """Why :func:`pool` gives no estimate over ``found`` (machine -> its estimate) worth
    showing: too few machines estimate it (``least``), they state it against different
    references, or an interval cannot be put on the pooling scale."""
    usable = [f for f in found.values() if f.defined]
    if len(usable) < least:
        return (f"{len(usable)} machine{'s' if len(usable) != 1 else ''} estimate it, and "
                f"pooling needs {least}")
    if len({(f.statement, f.kind, f.id) for f in usable}) != 1:
        return "the machines state it against different references, so it is not one quantity"
    return "an interval has no width or reaches a factor of 0"


def one_per_machine(found: Mapping[str, Finding],
                    machine_of: Mapping[str, str] | None = None) -> dict[str, Finding]:
    """``found`` (environment -> its estimate) with one environment per machine: the first,
    in ``found``'s order, of those ``machine_of`` (environment -> its machine) puts on one
    machine and that estimate the finding. An environment ``machine_of`` does not name is a
    machine of its own."""
    machine_of = machine_of or {}
    kept: dict[str, Finding] = {}
    seen: set[str] = set()
    for env, f in found.items():
        machine = machine_of.get(env, f"environment {env}")
        if f.defined and machine not in seen:
            seen.add(machine)
            kept[env] = f
    return kept


HOLDS = "holds on every machine"
SPECIFIC = "machine-specific"
ABSENT = "no effect detected on any machine"
UNSETTLED = "not settled"
GENERALITY = (HOLDS, SPECIFIC, UNSETTLED, ABSENT)  # the order a chapter lists them in
# each as a count of findings, one and many: "{} holds on every machine"
GENERALITY_WORDS = {HOLDS: ("{} holds on every machine", "{} hold on every machine"),
                    SPECIFIC: ("{} is machine-specific", "{} are machine-specific"),
                    UNSETTLED: ("{} is not settled", "{} are not settled"),
                    ABSENT: ("{} shows no effect on any machine",
                             "{} show no effect on any machine")}


def generality(found: Mapping[str, Finding], confidence: float = 0.95) -> tuple[str, str]:
    """(one of :data:`GENERALITY`, why) of a finding estimated by two machines or more
    (``found``: machine -> its estimate, one per machine; see the module docstring)."""
    usable = {m: f for m, f in found.items() if f.defined}
    if len(usable) < 2:
        raise ValueError("generality needs two machines' estimates or more")
    ways = {m: f.direction for m, f in usable.items()}
    pooled = pool(usable, confidence)
    differ = pooled is not None and pooled.q_p < 1 - confidence
    q = (f"Cochran's Q p = {pooled.q_p:.2g}" if pooled is not None else "no Q")

    def names(way: str) -> str:
        return ", ".join(m for m, w in ways.items() if w == way)

    found_ways = set(ways.values()) - {"none"}
    if found_ways == {"up", "down"}:
        return SPECIFIC, f"up on {names('up')}, down on {names('down')}"
    if not found_ways:
        return ABSENT, f"every machine's interval contains no effect ({len(ways)} machines)"
    way = next(iter(found_ways))
    if "none" not in ways.values():
        amounts = (f"by different amounts ({q})" if differ
                   else f"no difference in size detected ({q})")
        every = "both machines" if len(ways) == 2 else f"all {len(ways)} machines"
        return HOLDS, f"{way} on {every}, {amounts}"
    if differ:
        return SPECIFIC, f"{way} on {names(way)}, not detected on {names('none')} ({q})"
    return UNSETTLED, (f"{way} on {names(way)}, not detected on {names('none')}, with no "
                       f"difference between the machines detected ({q})")


def text(p: Pooled) -> str:
    """'+5.1 % (95 % CI -2.0 to +12.7) over 3 machines; tau² 0.0012, I² 41 %; a new machine:
    -8.0 to +20.0' (a ratio as 0.93, a difference as +0.012)."""
    fmt = {"change": "{:+.1f} %", "ratio": "{:.2f}", "difference": "{:+.3g}"}[p.kind]
    bare = fmt.replace(" %", "")
    words = (f"{fmt.format(p.estimate)} ({p.confidence * 100:g} % CI {bare.format(p.ci_low)} "
             f"to {bare.format(p.ci_high)}) over {p.k} machines; tau² {p.tau2:.2g}, "
             f"I² {p.i2 * 100:.0f} %")
    if p.predicts:
        return (words + f"; on a new machine, {p.confidence * 100:g} % of its effects within "
                f"{bare.format(p.prediction[0])} to {bare.format(p.prediction[1])}")
    return words + f"; a prediction for a new machine needs {PREDICTION_LEAST} machines"
