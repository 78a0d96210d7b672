"""A searched grid inside a plan: the search re-run over the stored runs, and what it asks for.

The planner hands over every configuration of the searched grid (its key, run ids, stored
values by repetition, failed attempts and whether this host can run it). The strategy runs
from its seed against :class:`~iolab.core.search.oracle.StoredOracle`; where it asks for a run
that is not stored, that run is the plan's next one, and the search *waits* for it. Once the
strategy has ended, its answer is the *pivot*: the other grids vary around it instead of the
params' ``base``. Until then they are listed as *after the search*, with their size, and count
towards the plan's most runs.

Responsible for: the search's state in a plan, its decisions for the searched points, and its
text and JSON. Not responsible for: the other points' decisions (``iolab.core.planner``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iolab.core.repetitions import Decision, Rule, decide
from iolab.core.search.oracle import StoredOracle
from iolab.core.search.params import SearchSpec
from iolab.core.search.strategies import Outcome, Space, certain_runs, search


@dataclass
class Candidate:
    """One configuration of the searched grid, as the store and this host have it."""

    key: str
    params: dict[str, Any]
    values: dict[int, float | None]   # stored repetitions and their metric
    failures: int
    runnable: bool                    # not excluded, not blocked here
    excluded: bool = False            # by an exclusion of the params


@dataclass
class SearchState:
    spec: SearchSpec
    rule: Rule
    outcome: Outcome
    varied: list[str]
    configurations: int = 0                               # the space this host can run
    after: dict[str, int] = field(default_factory=dict)   # grid -> points, after the search

    @property
    def done(self) -> bool:
        return self.outcome.done

    @property
    def pivot(self) -> dict[str, Any] | None:
        """The answer's values of the searched grid's variables (None until it has one)."""
        found = self.outcome.answer
        if found is None or found.params is None:
            return None
        return {v: found.params[v] for v in self.varied}

    @property
    def left(self) -> int:
        budget = self.spec.budget or 0
        return max(0, budget - self.outcome.used)

    @property
    def waiting(self) -> str:
        """Why the rest of the design waits ("" once the search has ended)."""
        if self.done:
            return ""
        return (f"waits for the {self.spec.strategy} search: {self.outcome.used} of at most "
                f"{self.spec.budget} runs made")

    def decision(self, key: str, values: dict[int, float | None], failures: int) -> Decision:
        """A searched point's decision: open for the run the search waits for, else settled
        (by the rule, or screened by the search with fewer runs than the rule's)."""
        taken = [values[rep] for rep in sorted(values)]
        base = decide(self.rule, taken, failures)
        pending = self.outcome.pending
        if pending is not None and pending.key == key:
            most = min(self.rule.max - len(taken), self.left)
            return Decision(base.n, base.failures, base.mean, base.rel_half_pct, "open", 1,
                            max(1, most))
        if base.settled:
            return base
        return Decision(base.n, base.failures, base.mean, base.rel_half_pct, "screened", 0, 0)

    def asked(self) -> list[str]:
        """The keys of the configurations the search measured or waits for."""
        keys = list(self.outcome.values)
        if self.outcome.pending is not None and self.outcome.pending.key not in keys:
            keys.append(self.outcome.pending.key)
        return keys

    @property
    def certain_more(self) -> int:
        """Runs the search certainly makes beyond those made and the one it waits for
        (``iolab.core.search.strategies.certain_runs``)."""
        if self.done:
            return 0
        certain = certain_runs(self.configurations, self.rule, self.spec.budget)
        return max(0, certain - self.outcome.used - 1)

    def runs_range(self, rule_max: int, confirm_runs: int = 0) -> tuple[int, int]:
        """(certain, most) runs still to come from the search, the grids after it and the
        confirmation step, on a host that can run them all."""
        if self.done:
            return 0, 0
        certain = self.certain_more + 1
        return certain, self.left + sum(self.after.values()) * rule_max + confirm_runs

    def to_dict(self) -> dict[str, Any]:
        found = self.outcome.answer
        pending = self.outcome.pending
        return {**self.spec.to_dict(), "version": self.outcome.version,
                "runs_used": self.outcome.used, "configurations": len(self.outcome.values),
                "runs_certain_more": self.certain_more,
                "done": self.done, "waiting": self.waiting,
                "next": (None if pending is None else {"key": pending.key, "rep": pending.rep}),
                "answer": None if found is None else found.params,
                "best_set": [] if found is None else list(found.members),
                "after_the_search": dict(self.after)}

    def lines(self, rule_max: int) -> list[str]:
        """The search in the plan's text."""
        s = self.spec
        out = [f"  search of grid {s.grid}: {s.strategy} (version {self.outcome.version}, seed "
               f"{s.seed}), at most {s.budget} runs, for {s.objective.text()}"]
        if self.done:
            found = self.outcome.answer
            answer = ("no answer (no configuration measured twice)" if found is None or
                      found.params is None else
                      "answer " + ", ".join(f"{v}={found.params[v]}" for v in self.varied)
                      + f" (best set of {len(found.members)})")
            out.append(f"    ended after {self.outcome.used} runs of "
                       f"{len(self.outcome.values)} configurations: {answer}")
        else:
            out.append(f"    {self.outcome.used} runs made; {self.left} left in the budget, "
                       f"of which at least {self.certain_more + 1} will be made")
        for grid, points in self.after.items():
            out.append(f"    after the search: grid {grid} around its answer, {points} points "
                       f"(up to {points * rule_max} runs)")
        return out


def run(spec: SearchSpec, rule: Rule, varied: dict[str, list[Any]],
        candidates: list[Candidate], record: list[str] | None = None) -> SearchState:
    """The search over the stored runs of the searched grid's configurations; ``record``: the
    proposals of a search that ended, to follow instead of the sampler's
    (``iolab.core.search.record``)."""
    runnable = {c.key: c.params for c in candidates if c.runnable}
    if not runnable or record is not None:
        # a host that can run none of the grid (the lab's plan, read elsewhere): the search
        # as the lab would make it, its next run blocked here; a recorded search: as the
        # host that made it could run it, whatever this one can
        runnable = {c.key: c.params for c in candidates if not c.excluded}
    oracle = StoredOracle({c.key: dict(c.values) for c in candidates},
                          {c.key: c.failures for c in candidates}, give_up=rule.max)
    outcome = search(spec.strategy, Space(varied, runnable), rule, spec.budget, oracle,
                     spec.objective, spec.seed, record)
    return SearchState(spec, rule, outcome, list(varied), len(runnable))

