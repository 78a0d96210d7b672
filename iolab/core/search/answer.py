"""A search's answer: the configurations that cannot be told apart from the best, and the one
the objective's tie-break prefers among them.

The set is :func:`iolab.analysis.selection.best_set` over the configurations the search
measured under the repetition rule (at least two runs; a configuration screened with one run
has no variance and stays out). Among its members the answer is the one with the smallest
values of the objective's ``ties`` variables, in order, then the highest mean.

Responsible for: the set and the answer. Not responsible for: which configurations were
measured (``iolab.core.search.strategies``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from iolab.core.search.params import Objective


@dataclass
class Answer:
    key: str | None                  # the answer's point key (None: nothing to answer from)
    params: dict[str, Any] | None
    members: list[str] = field(default_factory=list)   # the best set, highest mean first
    means: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)
    top: str | None = None           # the largest mean


def preference(objective: Objective, params: dict[str, Any], mean: float) -> tuple:
    """Sort key: smaller ties first, then the higher mean."""
    return (*(params[v] for v in objective.ties), -mean)


def answer(values: dict[str, list[float | None]], params: dict[str, dict[str, Any]],
           objective: Objective) -> Answer:
    """The best set of the points with at least two values, and the preferred member."""
    from iolab.analysis.selection import best_set  # SciPy's import only where one answers

    samples = {k: [v for v in vals if v is not None and not math.isnan(v)]
               for k, vals in values.items()}
    samples = {k: v for k, v in samples.items() if len(v) >= 2}
    if not samples:
        return Answer(None, None)
    found = best_set(samples, objective.confidence)
    chosen = min(found.members, key=lambda k: preference(objective, params[k], found.means[k]))
    return Answer(chosen, params[chosen], list(found.members), dict(found.means),
                  dict(found.n), found.top)
