"""Where a search's measurements come from: one protocol, three sources.

A strategy asks for repetition ``rep`` of a point (by its key, the canonical JSON of its
params) and gets the run's value of the objective's metric. The sources:

* :class:`StoredOracle`, inside a plan: the store's values; a repetition not stored raises
  :class:`Pending`, which is what the plan asks the runner to measure next. Because a search
  is re-run from its seed over the stored runs at every plan, a search killed and resumed
  asks for the same runs as one left alone, given the same measurements.
* :class:`ReplayOracle`, offline: each point's stored repetitions of a full grid, in an order
  drawn with a seed (without replacement); asking for a point the grid did not measure, or
  for more repetitions than it stored, is refused with the point named.
* any mapping in tests (:class:`ScriptedOracle`).

Responsible for: answering (or refusing) a request for one run's value.
Not responsible for: which runs are asked for (``iolab.core.search.strategies``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from iolab.errors import IolabError


class Pending(Exception):
    """The store has not got the run a search asks for: the plan's next run."""

    def __init__(self, key: str, rep: int):
        super().__init__(f"repetition {rep} of {key} is not stored yet")
        self.key, self.rep = key, rep


class ReplayRefused(IolabError):
    """A replay was asked for a run its grid cannot answer."""


class Oracle(Protocol):
    def value(self, key: str, rep: int) -> float | None:
        """Repetition ``rep`` of the point ``key``: its value, None when the point's runs
        fail for good, or :class:`Pending`."""


@dataclass
class StoredOracle:
    """The store as a plan sees it: per point key, the stored values by repetition and the
    failed attempts; ``give_up``: failed attempts after which a point's runs count as failed
    (the repetition rule's ``max``)."""

    values: dict[str, dict[int, float | None]]
    failures: dict[str, int] = field(default_factory=dict)
    give_up: int = 1

    def value(self, key: str, rep: int) -> float | None:
        stored = self.values.get(key, {})
        if rep in stored:
            return stored[rep]
        if self.failures.get(key, 0) >= self.give_up:
            return None
        raise Pending(key, rep)


@dataclass
class ReplayOracle:
    """A full grid's stored repetitions, each point's in an order drawn with ``seed``."""

    samples: dict[str, Sequence[float]]
    seed: int
    _orders: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def value(self, key: str, rep: int) -> float | None:
        if key not in self.samples:
            raise ReplayRefused(f"the replayed grid has no stored run of the point {key}; a "
                                "replay answers only from stored runs")
        order = self._orders.get(key)
        if order is None:
            order = list(self.samples[key])
            random.Random(f"{self.seed}:{key}").shuffle(order)
            self._orders[key] = order
        if rep >= len(order):
            raise ReplayRefused(f"the search asked for repetition {rep + 1} of the point {key}, "
                                f"but the replayed grid stored {len(order)}")
        return order[rep]


@dataclass
class ScriptedOracle:
    """Values from a function of the point key and repetition (tests' fake tool)."""

    fn: object

    def value(self, key: str, rep: int) -> float | None:
        return self.fn(key, rep)  # type: ignore[operator]
