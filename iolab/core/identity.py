"""Run identity: a run id is a short hash of what is executed, plus the repetition index.

A run's *identity* is ``{"experiment", "environment", "point", "invocation"}``: the point's
variables and the tool invocation resolved from them (tool, driver and driver version, the
tool's options; see :meth:`iolab.tools.base.ToolAdapter.identity`). Nothing else enters it:
not the analysis keys, not figure settings, not the order of grids. The same identity always
gives the same id, and any change to what is executed gives a new one.

A run's *configuration* is the part of its spec that is not a variable: its execution
settings (runtime, target file, tool, ...). Runs of one configuration can be pooled; the tidy
table carries the configuration id so that mixing them is visible.

Responsible for: canonical JSON, run ids (made when asked, :class:`RunIds`) and configuration
ids. Not responsible for:
deciding what the identity holds (the experiment and the tool adapter do).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import Any


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def short_hash(obj: Any, length: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def run_id(identity: dict[str, Any], rep: int) -> str:
    """``<12-hex hash of the identity>-r<rep>``: every repetition of a point shares the hash."""
    return run_ids(identity, rep + 1)[rep]


def run_ids(identity: dict[str, Any], repetitions: int) -> RunIds:
    """The run ids of repetitions 0 .. ``repetitions``-1 of a point, its identity hashed once."""
    return RunIds(short_hash(identity), repetitions)


def split_run_id(run_id: str) -> tuple[str, int] | None:
    """(the identity's hash, the repetition) of a run id, or None for another name."""
    digest, sep, rep = run_id.rpartition("-r")
    if not sep or not rep.isdigit() or str(int(rep)) != rep:
        return None
    return digest, int(rep)


class RunIds(Sequence[str]):
    """The run ids ``<hash>-r0`` .. ``<hash>-r<count-1>`` of a point, each made when asked: a
    point planned for a thousand repetitions holds one hash, not a thousand strings."""

    __slots__ = ("digest", "count")

    def __init__(self, digest: str, count: int):
        self.digest, self.count = digest, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index):  # an int gives an id, a slice a list of them
        if isinstance(index, slice):
            return [f"{self.digest}-r{rep}" for rep in range(*index.indices(self.count))]
        rep = index + self.count if index < 0 else index
        if not 0 <= rep < self.count:
            raise IndexError(f"repetition {index} of {self.count}")
        return f"{self.digest}-r{rep}"

    def __iter__(self) -> Iterator[str]:
        return (f"{self.digest}-r{rep}" for rep in range(self.count))

    def __contains__(self, run_id: object) -> bool:
        parts = split_run_id(run_id) if isinstance(run_id, str) else None
        return parts is not None and parts[0] == self.digest and parts[1] < self.count

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunIds):
            return (self.digest, self.count) == (other.digest, other.count)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # equal to a list of the same ids, as a list is

    def __repr__(self) -> str:
        return f"RunIds({self.digest!r}, {self.count})"


def config_id(experiment: str, environment: str, settings: dict[str, Any]) -> str:
    """A short hash of the execution settings: equal for runs that may be pooled."""
    return short_hash({"experiment": experiment, "environment": environment,
                       "settings": settings}, 8)
