"""Run identity: a run id is a short hash of what is executed, plus the repetition index.

A run's *identity* is ``{"experiment", "environment", "point", "invocation"}``: the point's
variables and the tool invocation resolved from them (tool, driver and driver version, the
tool's options; see :meth:`iolab.tools.base.ToolAdapter.identity`). Nothing else enters it:
not the analysis keys, not figure settings, not the order of grids. The same identity always
gives the same id, and any change to what is executed gives a new one.

A run's *configuration* is the part of its spec that is not a variable: its execution
settings (runtime, target file, tool, ...). Runs of one configuration can be pooled; the tidy
table carries the configuration id so that mixing them is visible.

Responsible for: canonical JSON, run ids and configuration ids. Not responsible for:
deciding what the identity holds (the experiment and the tool adapter do).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def short_hash(obj: Any, length: int = 12) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:length]


def run_id(identity: dict[str, Any], rep: int) -> str:
    """``<12-hex hash of the identity>-r<rep>``: every repetition of a point shares the hash."""
    return run_ids(identity, rep + 1)[rep]


def run_ids(identity: dict[str, Any], repetitions: int) -> list[str]:
    """The run ids of repetitions 0 .. ``repetitions``-1 of a point, its identity hashed once."""
    digest = short_hash(identity)
    return [f"{digest}-r{rep}" for rep in range(repetitions)]


def config_id(experiment: str, environment: str, settings: dict[str, Any]) -> str:
    """A short hash of the execution settings: equal for runs that may be pooled."""
    return short_hash({"experiment": experiment, "environment": environment,
                       "settings": settings}, 8)
