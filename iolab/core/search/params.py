"""The ``search`` key of a params file: which grid is searched, how, with what budget and to
what end::

    search:
      grid: search             # the grid whose points are searched instead of swept
      strategy: adaptive       # grid | adaptive | random | tpe
      budget: 90               # the most runs the search makes (confirmation runs aside)
      seed: 1                  # the strategy's random choices
      objective: {maximize: iops, ties: [ncores, ndevs]}
      version: 2               # optional: the strategy's version (default: the current one)

``objective.maximize`` names the metric (the repetition rule's); ``ties`` lists variables
whose smaller values are preferred, in order, among the configurations the data cannot tell
apart from the best (the best set). ``strategy: grid`` sweeps the grid as if the key were not
there. Under any other strategy the other grids (the one-at-a-time expansions) pivot on the
search's answer instead of ``base``.

``version`` defaults to the strategy's current one (:data:`VERSIONS`). Version 1 of ``tpe``
and ``adaptive`` proposed configurations through Optuna's sampler as it is, whose choices
depend on the host's numpy (``iolab.core.search.sampler``); it can only be named to re-plan
a search made with it, which then follows the proposals its campaign log recorded.

Responsible for: validating the key into a :class:`SearchSpec`.
Not responsible for: running the strategies (``iolab.core.search.strategies``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from iolab.core.schema import Choice, Int, type_name
from iolab.errors import InputError, excerpt

KEY = "search"
FIELDS = ("grid", "strategy", "budget", "seed", "objective", "version")
# each strategy's current version, raised whenever it would ask for other runs; tpe and
# adaptive 2: the sampler made host-independent (1: Optuna's own)
VERSIONS = {"grid": 1, "random": 1, "tpe": 2, "adaptive": 2}
RECORDED = 1   # the version a search can only be re-planned from its record in
STRATEGIES = ("grid", "adaptive", "random", "tpe")
STRATEGY = Choice(*STRATEGIES, help="grid: sweep every point; adaptive: this package's "
                  "strategy; random: points in a random order; tpe: Optuna's default sampler")
BUDGET = Int(1, 10**7, help="the most runs the search makes")
SEED = Int(0, 2**32 - 1, help="the seed of the strategy's random choices")
ALLOWED = ("a mapping such as {grid: search, strategy: adaptive, budget: 90, seed: 1, "
           "objective: {maximize: iops, ties: [ncores, ndevs]}}")


@dataclass(frozen=True)
class Objective:
    """What the search maximizes, and the preferred (smaller) values among its best set."""

    metric: str
    ties: tuple[str, ...] = ()
    confidence: float = 0.95

    def text(self, labels: dict[str, str] | None = None) -> str:
        labels = labels or {}
        fewest = "".join(f", then the fewest {labels.get(v, v)}" for v in self.ties)
        return f"the highest {self.metric}{fewest}"

    def to_dict(self) -> dict[str, Any]:
        return {"maximize": self.metric, "ties": list(self.ties)}


@dataclass(frozen=True)
class SearchSpec:
    grid: str
    strategy: str
    budget: int | None
    seed: int
    objective: Objective
    version: int = 0   # 0: the strategy's current version

    def __post_init__(self) -> None:
        if not self.version:
            object.__setattr__(self, "version", VERSIONS[self.strategy])

    @property
    def adaptive(self) -> bool:
        """Whether the grid is searched (any strategy but ``grid``)."""
        return self.strategy != "grid"

    @property
    def recorded(self) -> bool:
        """Whether the search follows its record instead of its sampler (an old version)."""
        return self.version < VERSIONS[self.strategy]

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid, "strategy": self.strategy, "budget": self.budget,
                "seed": self.seed, "objective": self.objective.to_dict()}


def parse(value: Any, label, grids: dict[str, dict[str, Any]], variables: dict[str, Any],
          rule_metric: str | None, metrics: Sequence[str] | None,
          confidence: float = 0.95) -> SearchSpec:
    """The ``search`` key, checked against the spec's grids, variables and metrics; every
    problem names the file, the key and what is allowed."""
    if not isinstance(value, dict):
        raise InputError(label, KEY, f"must be a mapping, got {type_name(value)}",
                         allowed=ALLOWED)
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise InputError(label, f"{KEY}.{unknown[0]}", "unknown field of the search",
                         allowed=", ".join(FIELDS))
    grid = value.get("grid")
    if not isinstance(grid, str) or grid not in grids:  # a list or a mapping is no name
        raise InputError(label, f"{KEY}.grid", f"{excerpt(grid)} is not a grid of this file",
                         allowed=", ".join(grids))
    strategy = STRATEGY.check(value.get("strategy", "grid"), label, f"{KEY}.strategy")
    budget = BUDGET.check(value["budget"], label, f"{KEY}.budget") \
        if value.get("budget") is not None else None
    if strategy != "grid" and budget is None:
        raise InputError(label, f"{KEY}.budget", f"missing: a {strategy} search needs the most "
                         "runs it may make", allowed=BUDGET.allowed())
    seed = SEED.check(value.get("seed", 0), label, f"{KEY}.seed")
    objective = _objective(value.get("objective"), label, grids[grid], variables,
                           rule_metric, metrics, confidence)
    return SearchSpec(grid, strategy, budget, seed, objective,
                      _version(value.get("version"), strategy, label))


def _version(value: Any, strategy: str, label) -> int:
    current = VERSIONS[strategy]
    allowed = sorted({current, RECORDED} if strategy in ("tpe", "adaptive") else {current})
    if value is None:
        return current
    if isinstance(value, bool) or value not in allowed:
        raise InputError(label, f"{KEY}.version", f"{excerpt(value)} is not a version of the "
                         f"{strategy} strategy", allowed=" or ".join(map(str, allowed)) + (
                             f" ({RECORDED}: only to re-plan a search made with it, from its "
                             "record in the campaign log)" if len(allowed) > 1 else ""))
    return value


def _objective(value: Any, label, grid: dict[str, Any], variables: dict[str, Any],
               rule_metric: str | None, metrics: Sequence[str] | None,
               confidence: float) -> Objective:
    key = f"{KEY}.objective"
    if not isinstance(value, dict) or "maximize" not in value:
        raise InputError(label, key, "must say what is maximized",
                         allowed="{maximize: METRIC, ties: [VARIABLE, ...]}")
    unknown = sorted(set(value) - {"maximize", "ties"})
    if unknown:
        raise InputError(label, f"{key}.{unknown[0]}", "unknown field of the objective",
                         allowed="maximize, ties")
    metric = value["maximize"]
    if not isinstance(metric, str) or (metrics is not None and metric not in metrics):
        raise InputError(label, f"{key}.maximize", f"{excerpt(metric)} is not a metric this "
                         "experiment produces", allowed=", ".join(metrics) if metrics is not None
                         else "the name of a metric")
    if rule_metric is not None and metric != rule_metric:
        # each configuration runs under the rule, which stops on its own metric
        raise InputError(label, f"{key}.maximize", f"{excerpt(metric)} differs from the "
                         "repetition rule's metric", allowed=rule_metric)
    ties = value.get("ties", [])
    if not isinstance(ties, list):
        raise InputError(label, f"{key}.ties", f"must be a list, got {type_name(ties)}",
                         allowed="variables the grid varies, such as [ncores, ndevs]")
    for var in ties:
        if not isinstance(var, str) or var not in variables:  # a list or a mapping is no name
            raise InputError(label, f"{key}.ties", f"{excerpt(var)} is not a variable",
                             allowed=", ".join(variables))
        if var not in grid["vary"]:
            raise InputError(label, f"{key}.ties", f"{excerpt(var)} is not varied by the searched "
                             "grid, so it cannot break a tie", allowed=", ".join(grid["vary"]))
        if any(not isinstance(v, (int, float)) or isinstance(v, bool)
               for v in grid["vary"][var]):
            raise InputError(label, f"{key}.ties", f"{excerpt(var)} does not take numbers, so its "
                             "smaller value means nothing", allowed="a numeric variable")
    if len(set(ties)) != len(ties):
        raise InputError(label, f"{key}.ties", "names a variable twice", allowed="each once")
    return Objective(metric, tuple(ties), confidence)
