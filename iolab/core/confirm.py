"""The confirmation step: the points a search chose, measured again after it in fresh runs.

The best of many noisy means is biased upwards (the winner's curse), so the value a chapter
quotes for its chosen configuration comes from runs that did not take part in choosing it.
A params file asks for them with::

    confirm: {top: 2, groups: [{}, {ndevs: [1]}], aa: true}

(``metric`` names what the points are ranked by; it defaults to the repetition rule's, and a
params file with a fixed count of repetitions must give it.) Once every point of the design
this host can run is settled, the step takes, in each group (a filter on the variables, ``{}``
for every point), the ``top`` points of that group's best set
(:func:`iolab.analysis.selection.best_set` over the stored values of every point that is not
excluded, whatever this host can run, so that a plan replayed anywhere chooses alike), highest
mean first; a point chosen by two groups is measured once. Each chosen point is measured
again under the label ``A``, under the same repetition rule and interleaved with the others.
With ``aa`` the first chosen point is also measured under a second label, ``B``: the same
configuration under two names, interleaved, whose difference is this host's A/A calibration
(``iolab.analysis.confirmation``).

A confirmation run's identity is its point's identity plus ``"confirm": label``, so it has run
ids of its own, is planned, resumed and counted like any other, and never mixes with the search
runs of the same point (its manifest's grids say ``confirm``; the tidy table's column
``run.confirm`` holds the label). The choice is a pure function of the stored runs: a plan made
again from the same store chooses the same points.

Responsible for: the ``confirm`` key's validation, whether the step waits, and the choice.
Not responsible for: planning the chosen points' runs (``iolab.core.planner``), making them
(the runner) or analysing them (``iolab.analysis.confirmation``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from iolab.core.schema import Field, Flag, Int, Number, type_name
from iolab.errors import InputError, excerpt

KEY = "confirm"
GRID = "confirm"       # the name a confirmation run's manifest gives as its grid
LABELS = ("A", "B")    # every chosen point; the A/A pair's second label
FIELDS = ("top", "groups", "aa", "confidence", "metric")
TOP = Int(1, 100, help="how many points of each group's best set are confirmed")
CONFIDENCE = Number(0.5, 0.999, help="the best set's confidence")
AA = Flag(help="also measure the first chosen point under a second label (an A/A pair)")


@dataclass(frozen=True)
class Step:
    """A validated ``confirm`` key."""

    top: int = 1
    groups: tuple[tuple[tuple[str, tuple[Any, ...]], ...], ...] = ((),)
    aa: bool = False
    confidence: float = 0.95
    metric: str | None = None   # what the points are ranked by (None: the rule's metric)

    def group_filters(self) -> list[dict[str, list[Any]]]:
        return [{var: list(values) for var, values in group} for group in self.groups]

    def most_points(self) -> int:
        """The most points the step can choose (before duplicates between groups merge)."""
        return self.top * len(self.groups) + (1 if self.aa else 0)

    def to_dict(self) -> dict[str, Any]:
        return {"top": self.top, "groups": self.group_filters(), "aa": self.aa,
                "confidence": self.confidence, **({"metric": self.metric} if self.metric else {})}

    def text(self) -> str:
        """The step in words, for plans and chapters."""
        def group(f: dict[str, list[Any]]) -> str:
            return ("all points" if not f else "the points with " + ", ".join(
                f"{var} {' or '.join(map(str, vals))}" for var, vals in f.items()))
        chosen = " and ".join(f"the top {self.top} of the best set of {group(f)}"
                              for f in self.group_filters())
        return (f"after the search, {chosen} ({self.confidence * 100:g} % confidence), "
                f"measured again in fresh interleaved runs"
                + (", the first of them also under a second label (an A/A pair)"
                   if self.aa else ""))


@dataclass
class Choice:
    """What the step chose, or why it waits."""

    points: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (params, label)
    reasons: list[str] = field(default_factory=list)  # why each of them was chosen
    waiting: str = ""      # why nothing is chosen yet ("" once chosen)
    open: int = 0          # the points waited for, not settled yet


def parse(value: Any, label, variables: dict[str, Field],
          metrics: Sequence[str] | None = None) -> Step:
    """The ``confirm`` key of a params file, or a clear error naming the file and key;
    ``metrics``: the experiment's metrics a ``metric`` may name (None: not checked)."""
    allowed = ("a mapping such as {top: 2, groups: [{}, {ndevs: [1]}], aa: true}")
    if not isinstance(value, dict):
        raise InputError(label, KEY, f"must be a mapping, got {type_name(value)}", allowed=allowed)
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise InputError(label, f"{KEY}.{unknown[0]}", "unknown field of the confirmation step",
                         allowed=", ".join(FIELDS))
    top = TOP.check(value["top"], label, f"{KEY}.top") if "top" in value else 1
    conf = (CONFIDENCE.check(value["confidence"], label, f"{KEY}.confidence")
            if "confidence" in value else 0.95)
    aa = AA.check(value["aa"], label, f"{KEY}.aa") if "aa" in value else False
    metric = value.get("metric")
    if metric is not None and (not isinstance(metric, str)
                               or (metrics is not None and metric not in metrics)):
        raise InputError(label, f"{KEY}.metric", f"{excerpt(metric)} is not a metric this "
                         "experiment produces", allowed=", ".join(metrics or []) or "a metric name")
    raw_groups = value.get("groups", [{}])
    if not isinstance(raw_groups, list) or not raw_groups:
        raise InputError(label, f"{KEY}.groups",
                         f"must be a non-empty list, got {excerpt(raw_groups)}",
                         allowed="a list of filters such as [{}, {ndevs: [1]}] ({} for all points)")
    groups = []
    for i, group in enumerate(raw_groups):
        key = f"{KEY}.groups[{i}]"
        if not isinstance(group, dict):
            raise InputError(label, key, f"must be a mapping of variables to values, got "
                             f"{type_name(group)}", allowed="{} or {VARIABLE: [VALUE, ...]}")
        checked = []
        for var, want in group.items():
            if var not in variables:
                raise InputError(label, f"{key}.{var}", "names an unknown variable",
                                 allowed=", ".join(variables))
            items = want if isinstance(want, list) else [want]
            if not items:
                raise InputError(label, f"{key}.{var}", "lists no value",
                                 allowed="one value or a non-empty list")
            checked.append((var, tuple(variables[var].check(v, label, f"{key}.{var}")
                                       for v in items)))
        groups.append(tuple(checked))
    return Step(top=top, groups=tuple(groups), aa=aa, confidence=conf, metric=metric)


def choose(step: Step, candidates: Sequence[tuple[dict[str, Any], list[float]]],
           open_points: int, answer: dict[str, Any] | None = None) -> Choice:
    """The points to confirm, from every point of the design that is not excluded (its params
    and its stored values of the ranking metric): a function of the stored runs alone.
    ``open_points``: how many points this host can run are not settled yet. ``answer``: a
    searched grid's answer (``iolab.core.search``), confirmed first."""
    if open_points:
        return Choice(waiting=f"waits for the search: {open_points} point"
                              f"{'s are' if open_points != 1 else ' is'} not settled yet",
                      open=open_points)
    from iolab.analysis.selection import best_set  # SciPy's import only where a step chooses

    chosen: list[dict[str, Any]] = [answer] if answer is not None else []
    reasons: list[str] = ["the search's answer"] if answer is not None else []
    for filt in step.group_filters():
        members = [(params, vals) for params, vals in candidates
                   if all(params.get(var) in values for var, values in filt.items())]
        found = best_set({str(i): [v for v in vals if v is not None and not math.isnan(v)]
                          for i, (_, vals) in enumerate(members)}, step.confidence)
        group = "all points" if not filt else ", ".join(f"{k} {'/'.join(map(str, v))}"
                                                         for k, v in filt.items())
        for rank, name in enumerate(found.members[:step.top], start=1):
            params = members[int(name)][0]
            if params not in chosen:
                chosen.append(params)
                reasons.append(f"number {rank} of the best set of {group} "
                               f"({len(found.members)} of {len(found.means)} points)")
    if not chosen:
        return Choice(waiting="has nothing to confirm: no point has two stored runs")
    points = [(params, LABELS[0]) for params in chosen]
    if step.aa:
        points.append((chosen[0], LABELS[1]))
        reasons.append("the A/A pair: the first point under a second label")
    return Choice(points=points, reasons=reasons)
