"""The order a campaign's runs are made in, and when a point has had enough of them.

``sequential`` order runs a point's repetitions back to back, point after point, as the
plan lists them. ``interleaved`` order works in rounds: each round makes one run of every
point still open, in an order shuffled with ``random.Random(f"{seed}:{round}")``, so that
slow drift of the machine (page cache, temperature, background load) spreads over all points
instead of landing on a few. Under a repetition rule a point stays open until its
:class:`~iolab.core.repetitions.Decision` settles it, re-made after each of its runs from its
stored values and the new ones; a failed run is retried at the same repetition index until
the rule's ``max`` failures. A fixed count makes each planned run once, as it always has.

A point's runs are always the lowest repetition indices it has not stored, and whether it
needs another depends on its own values only: a campaign killed and resumed therefore ends
with the same runs as one left alone, whatever the order.

Responsible for: the order, the rounds, the seed and the per-point bookkeeping.
Not responsible for: making a run (``iolab.execution.one_run``) or deciding
(``iolab.core.repetitions``).
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from iolab.core.planner import Plan, PlannedRun, Point
from iolab.core.repetitions import Decision, Rule, decide


def new_seed() -> int:
    """A seed for a campaign whose params give none (it is recorded in the campaign log)."""
    return secrets.randbits(63)


def shuffled(items: list[Any], seed: int, round_no: int) -> list[Any]:
    """``items`` in the order of round ``round_no`` of a campaign with ``seed``."""
    out = list(items)
    random.Random(f"{seed}:{round_no}").shuffle(out)
    return out


@dataclass
class _PointState:
    point: Point
    identity: dict[str, Any]
    ids: list[str]
    values: dict[int, float | None]        # stored repetitions and their metric
    failures: int
    # a fixed count's (or the search's) planned runs, made one by one as they are asked for
    queue: Iterator[PlannedRun] = field(default_factory=lambda: iter(()))

    def decision(self, rule: Rule) -> Decision:
        return decide(rule, [self.values[rep] for rep in sorted(self.values)], self.failures)

    def next_run(self, rule: Rule) -> PlannedRun | None:
        if rule.fixed or self.point.searched:  # a search asks for its runs one plan at a time
            return next(self.queue, None)
        if self.decision(rule).settled:  # settled, too, once every index is taken
            return None
        rep = min(r for r in range(len(self.ids)) if r not in self.values)
        return PlannedRun(self.point, rep, self.ids[rep], self.identity, "to run", selected=True)


class Schedule:
    """The runs of a campaign, one at a time: iterate, and :meth:`record` each outcome
    before asking for the next."""

    def __init__(self, plan: Plan, seed: int | None = None,
                 on_round: Callable[[int, list[str]], None] | None = None):
        self.plan = plan
        self.on_round = on_round  # told each round's number and run ids before it starts
        self.rule = plan.spec.rule
        self.order = plan.spec.order
        self.seed = new_seed() if seed is None else seed
        self.limit = plan.limit
        self.rounds: list[list[str]] = []  # the run ids of each round, in their order
        self.made = 0
        self._states: dict[int, _PointState] = {}
        for entry in plan.to_run_entries():
            # a copy of what the plan decided from, to add to
            self._states[id(entry.point)] = _PointState(
                entry.point, entry.identity, entry.point.ids, dict(entry.point.samples),
                entry.point.failures,
                (r for r in entry.runs(plan.limit) if r.status == "to run"))

    def points(self) -> list[dict[str, Any]]:
        """The params of every point this schedule may run."""
        return [p.params for p in self.plan.may_run_points()]

    def record(self, run: PlannedRun, ok: bool, value: float | None = None) -> None:
        """The outcome of ``run``: stored with the metric's ``value``, or failed."""
        state = self._states[id(run.point)]
        if ok:
            state.values[run.rep] = value
        else:
            state.failures += 1

    def __iter__(self) -> Iterator[PlannedRun]:
        if self.rule.fixed and self.order == "sequential":
            runs: Iterator[PlannedRun] = iter(self.plan.selected())  # today's order, exactly
        elif self.order == "sequential":
            runs = self._point_by_point()
        else:
            runs = self._rounds()
        for run in runs:
            if self.limit is not None and self.made >= self.limit:
                return
            self.made += 1
            yield run

    def _point_by_point(self) -> Iterator[PlannedRun]:
        for state in self._states.values():
            while (run := state.next_run(self.rule)) is not None:
                yield run

    def _rounds(self) -> Iterator[PlannedRun]:
        round_no = 0
        while True:
            batch = [run for state in self._states.values()
                     if (run := state.next_run(self.rule)) is not None]
            if not batch:
                return
            batch = shuffled(batch, self.seed, round_no)
            self.rounds.append([r.run_id for r in batch])
            if self.on_round is not None:
                self.on_round(round_no, self.rounds[-1])
            yield from batch
            round_no += 1

