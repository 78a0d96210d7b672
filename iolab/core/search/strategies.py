"""The search strategies: which configurations of a grid to measure, in what order, and when
to stop.

Every strategy works on a :class:`Space` (the grid's points this host can run, by key) through
a :class:`Context` that holds the runs made so far, charges each against the budget and never
lets it be exceeded: a configuration is measured *under the repetition rule* (its runs until
the rule settles it) only when the budget still holds the rule's ``max`` runs for it.

* ``grid``: every configuration, in the grid's order (the sweep, for comparison).
* ``random``: configurations in an order shuffled with the seed, until the budget.
* ``tpe``: Optuna's default sampler (TPE, seeded) proposes configurations; each proposed one
  is measured under the rule and its mean told back.
* ``adaptive`` (this package's strategy): successive halving with structure. (1) *Screening*: a share of the budget goes to one run each (the rule's first
  repetition, which a later sweep reuses) of configurations proposed by Optuna's multivariate
  TPE sampler, told the single run's value; the first proposals are the corners of the
  space's numeric variables at their largest values, where IOPS saturates. (2) *Halving*: the
  screened configurations are ranked, and the best are measured under the rule, best first,
  while the budget allows; then (3) *ties*: for the best set so far, the neighbours with fewer
  of the tie-break variables (fewer cores, fewer devices) that were screened within reach
  are measured too, so that the tie-break has the cheaper configurations to choose from.

Every strategy but ``grid`` goes on while the budget holds a configuration's rule ``max`` and
an unmeasured configuration is left (a sampler that keeps proposing known ones is handed the
next unknown one in a seeded order), so a search makes at least ``min(budget - max + 1,
configurations)`` runs: the certain part of a plan's ETA.

Each strategy is deterministic given its seed and the values it is told, on any host: re-run
over the same stored runs it asks for the same runs, which is what makes a resumed search and
a replay equal to an uninterrupted one. Its decisions compare Python floats (means summed in
order, stable sorts) and its proposals come from a sampler made host-independent
(``iolab.core.search.sampler``). Every decision is logged (:attr:`Context.log`) with why.

``VERSIONS`` (``iolab.core.search.params``) numbers each strategy; a number is raised
whenever the strategy would ask for other runs. A search made with version 1 of ``tpe`` or ``adaptive`` (whose sampler
depended on the host) is re-run with its recorded proposals (``Context.record``) in place of
the sampler's.

Responsible for: the strategies and the budget. Not responsible for: where values come from
(``iolab.core.search.oracle``), where proposals come from (``iolab.core.search.sampler``) or
the answer's statistics (``iolab.core.search.answer``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from iolab.core.identity import canonical_json
from iolab.core.repetitions import Rule, decide
from iolab.core.search.answer import Answer, answer
from iolab.core.search.oracle import Oracle, Pending
from iolab.core.search.params import VERSIONS, Objective
from iolab.core.search.sampler import Recorded, RecordEnded, Sampler
SCREEN_SHARE = 0.5     # of the budget, for screening runs
DUPLICATES = 40        # proposals in a row of known configurations before the sampler stops


@dataclass
class Space:
    """The searched grid's configurations: ``variables`` (varied, with their values in the
    grid's order) and ``points`` (key -> full params) of those this host can run."""

    variables: dict[str, list[Any]]
    points: dict[str, dict[str, Any]]

    def __post_init__(self) -> None:
        self._by_coords = {self.coords_key(p): k for k, p in self.points.items()}

    def coords_key(self, params: dict[str, Any]) -> str:
        return canonical_json({v: params[v] for v in self.variables})

    def key_of(self, coords: dict[str, Any]) -> str | None:
        """The key of the configuration with these varied values (None: not runnable)."""
        return self._by_coords.get(canonical_json(coords))

    @staticmethod
    def key(params: dict[str, Any]) -> str:
        return canonical_json(params)


class BudgetSpent(Exception):
    """A strategy asked for a run beyond its budget (a bug: strategies check first)."""


@dataclass
class Context:
    space: Space
    rule: Rule
    budget: int | None
    oracle: Oracle
    values: dict[str, list[float | None]] = field(default_factory=dict)
    used: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    record: list[str] | None = None   # a version-1 search's recorded proposals, in order

    def sampler(self, seed: int, multivariate: bool, startup: int | None = None
                ) -> Sampler | Recorded:
        """Where the strategy's proposals come from: the sampler, or the record."""
        if self.record is not None:
            return Recorded(self.record)
        return Sampler(self.space.variables, self.space.key_of, seed, multivariate, startup)

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.used

    def note(self, step: str, key: str, why: str) -> None:
        self.log.append({"step": step, "point": self.space.points[key], "why": why,
                         "runs_used": self.used})

    def run(self, key: str) -> float | None:
        """One more run of the point: its next repetition."""
        if self.left() < 1:
            raise BudgetSpent(f"budget of {self.budget} runs spent")
        have = self.values.setdefault(key, [])
        value = self.oracle.value(key, len(have))   # may raise Pending: nothing charged
        have.append(value)
        self.used += 1
        return value

    def settled(self, key: str) -> bool:
        vals = self.values.get(key, [])
        return bool(vals) and (vals[-1] is None or decide(self.rule, vals).settled)

    def can_settle(self, key: str) -> bool:
        return self.settled(key) or self.left() >= self.rule.max - len(self.values.get(key, []))

    def settle(self, key: str, why: str) -> list[float | None]:
        """Runs of the point until the rule settles it (the caller checked the budget)."""
        if not self.settled(key):
            self.note("measure", key, why)
        while not self.settled(key):
            self.run(key)
        return self.values[key]

    def mean(self, key: str) -> float:
        good = [v for v in self.values.get(key, []) if v is not None]
        return sum(good) / len(good) if good else -math.inf


@dataclass
class Outcome:
    strategy: str
    version: int
    seed: int
    budget: int | None
    values: dict[str, list[float | None]]
    used: int
    log: list[dict[str, Any]]
    pending: Pending | None = None
    answer: Answer | None = None

    @property
    def done(self) -> bool:
        return self.pending is None


def search(strategy: str, space: Space, rule: Rule, budget: int | None, oracle: Oracle,
           objective: Objective, seed: int, record: list[str] | None = None) -> Outcome:
    """Run ``strategy`` to its end, or until the oracle has not got a run (``pending``).
    ``record``: the proposals of a search made with version 1, in the sampler's place (the
    outcome's version is then 1)."""
    ctx = Context(space, rule, budget, oracle, record=record)
    pending = None
    try:
        STRATEGIES[strategy](ctx, objective, seed)
    except Pending as exc:
        pending = exc
    version = 1 if record is not None else VERSIONS[strategy]
    out = Outcome(strategy, version, seed, budget, ctx.values, ctx.used, ctx.log, pending)
    if pending is None:
        out.answer = answer(ctx.values, space.points, objective)
    return out


def _grid(ctx: Context, objective: Objective, seed: int) -> None:
    for key in ctx.space.points:
        if not ctx.can_settle(key):
            return
        ctx.settle(key, "the next configuration of the grid")


def certain_runs(configurations: int, rule: Rule, budget: int | None) -> int:
    """The fewest runs a strategy other than ``grid`` makes in a space of so many
    configurations (see the module docstring)."""
    if budget is None:
        return configurations * rule.min
    return max(0, min(budget - rule.max + 1, configurations))


def _random(ctx: Context, objective: Objective, seed: int) -> None:
    keys = list(ctx.space.points)
    random.Random(seed).shuffle(keys)
    for key in keys:
        if not ctx.can_settle(key):
            return
        ctx.settle(key, "the next configuration in the seeded random order")


def _propose(ctx: Context, sampler: Sampler | Recorded, measure: Callable[[str], float],
             stop: Callable[[], bool], why: str, seed: int) -> None:
    """Ask the sampler for configurations until ``stop()`` or every one is known: one it
    cannot run is told failed (no run); a known one gets its known mean (no run); a new one is
    ``measure``d. After :data:`DUPLICATES` known ones in a row, the next unknown one in a
    seeded random order is put to the sampler instead, so that a sampler stuck on what it
    knows never ends a search with budget left. A record that ends ends the proposals."""
    fallback = list(ctx.space.points)
    random.Random(f"{seed}:fallback").shuffle(fallback)
    known_in_a_row = 0
    while not stop():
        if known_in_a_row >= DUPLICATES:
            fresh = next((k for k in fallback if k not in ctx.values), None)
            if fresh is None:
                return  # every configuration is known
            sampler.insist(ctx.space.points[fresh])
            known_in_a_row = 0
        try:
            key = sampler.propose()
        except RecordEnded:
            return
        if key is None:
            known_in_a_row += 1
            sampler.tell(None)
            continue
        if key in ctx.values:
            known_in_a_row += 1
            sampler.tell(ctx.mean(key))
            continue
        known_in_a_row = 0
        ctx.note("propose", key, why)
        sampler.tell(measure(key))


def _tpe(ctx: Context, objective: Objective, seed: int) -> None:
    sampler = ctx.sampler(seed, multivariate=False)

    def measure(key: str) -> float:
        ctx.settle(key, "proposed by the sampler")
        return ctx.mean(key)
    _propose(ctx, sampler, measure, lambda: ctx.left() < ctx.rule.max,
             "Optuna's default sampler (TPE)", seed)


def _corners(space: Space) -> list[dict[str, int]]:
    """First proposals: every numeric variable at its largest value, each categorical value
    once (indices)."""
    numeric = {v: len(vals) - 1 for v, vals in space.variables.items()
               if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals)}
    other = [v for v in space.variables if v not in numeric]
    out = []
    for combo in _product([range(len(space.variables[v])) for v in other]):
        out.append({**numeric, **dict(zip(other, combo))})
    return out


def _product(ranges: list[range]) -> list[tuple[int, ...]]:
    import itertools
    return list(itertools.product(*ranges))


def _adaptive(ctx: Context, objective: Objective, seed: int) -> None:
    space, rule = ctx.space, ctx.rule
    sampler = ctx.sampler(seed, multivariate=True, startup=10)
    for corner in _corners(space):
        sampler.insist_indices(corner)
    screen_until = math.floor(ctx.left() * SCREEN_SHARE) if ctx.budget is not None else \
        len(space.points)
    screened: list[str] = []

    def screen(key: str) -> float:
        screened.append(key)
        value = ctx.run(key)
        return -math.inf if value is None else value
    _propose(ctx, sampler, screen, lambda: ctx.used >= screen_until or ctx.left() < 1,
             "screening: one run of a configuration the sampler proposes", seed)
    # halving: the best screened configurations under the rule, best first
    ranked = sorted(screened, key=lambda k: -ctx.mean(k))
    for key in ranked:
        if not ctx.can_settle(key):
            break
        ctx.settle(key, f"screened at {ctx.mean(key):,.0f}, ranked "
                        f"{ranked.index(key) + 1} of {len(ranked)}")
    # ties: cheaper neighbours of the best set's members
    for key in _cheaper_neighbours(ctx, objective):
        if not ctx.can_settle(key):
            break
        ctx.settle(key, "a cheaper neighbour of the best set (the tie-break)")
    # budget left (few configurations screened): go on as the sampler proposes

    def measure(key: str) -> float:
        ctx.settle(key, "proposed by the sampler after the screening")
        return ctx.mean(key)
    _propose(ctx, sampler, measure, lambda: ctx.left() < rule.max,
             "the sampler, with budget left after the screening", seed)


def _cheaper_neighbours(ctx: Context, objective: Objective) -> list[str]:
    found = answer(ctx.values, ctx.space.points, objective)
    out: list[str] = []
    for member in found.members:
        params = ctx.space.points[member]
        for var in objective.ties:
            values = ctx.space.variables[var]
            i = values.index(params[var])
            if i == 0:
                continue
            key = ctx.space.key_of({**{v: params[v] for v in ctx.space.variables},
                                    var: values[i - 1]})
            if key is not None and key not in out and not ctx.settled(key):
                out.append(key)
    return out


STRATEGIES: dict[str, Callable[[Context, Objective, int], None]] = {
    "grid": _grid, "random": _random, "tpe": _tpe, "adaptive": _adaptive}
