"""Expand a spec into points and repetitions, give each a stable run id, and report a plan.

A *point* is a full assignment of every variable. Each named grid contributes the Cartesian
product of its varied values, with every other variable at the base point (overridden by the
grid's ``set``). A grid that varies a single variable is a one-at-a-time expansion. Points that
several grids produce are run once. Exclusion rules (data in the spec) remove points.

Responsible for: points, run ids, and classifying each (point, repetition) as stored, to run,
excluded, or blocked by a knob this host cannot control. Not responsible for running or
storing anything.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .spec import Spec

ASIS = "asis"  # a knob-backed variable left as the host has it (read back and recorded)


@dataclass
class Point:
    params: dict[str, Any]
    grids: list[str] = field(default_factory=list)
    excluded_by: str | None = None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def config_hash(config: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:12]


def run_id(config: dict[str, Any], rep: int) -> str:
    """``<12-hex hash of the run config>-r<rep>``: same inputs give the same id."""
    return f"{config_hash(config)}-r{rep}"


def run_config(spec: Spec, point: Point, driver_version: str) -> dict[str, Any]:
    """Everything that can change a result: the point, every scalar setting, the driver version."""
    return {
        "experiment": spec.experiment,
        "params": dict(sorted(point.params.items())),
        "settings": spec.scalar_settings(),
        "driver_version": driver_version,
    }


def _matches(rule_when: dict[str, Any], params: dict[str, Any]) -> bool:
    for var, want in rule_when.items():
        allowed = want if isinstance(want, list) else [want]
        if params.get(var) not in allowed:
            return False
    return True


def expand(spec: Spec) -> list[Point]:
    """Every distinct point of every grid, in a stable order, with its exclusion (if any)."""
    points: dict[str, Point] = {}
    for name, grid in spec.grids.items():
        fixed = {**spec.base, **(grid.get("set") or {})}
        names = list(grid["vary"])
        for combo in itertools.product(*(grid["vary"][n] for n in names)):
            params = {**fixed, **dict(zip(names, combo))}
            params = {k: params[k] for k in spec.base}  # stable key order: the base's
            key = canonical_json(params)
            if key in points:
                points[key].grids.append(name)
                continue
            point = Point(params, [name])
            for rule in spec.exclusions:
                if _matches(rule["when"], params):
                    point.excluded_by = rule["why"]
                    break
            points[key] = point
    return list(points.values())


def knob_needs(point: Point, knob_variables: dict[str, str]) -> dict[str, Any]:
    """The knobs a point needs set: {knob name: value}, leaving out variables at ``asis``."""
    return {knob: point.params[var] for var, knob in knob_variables.items()
            if var in point.params and point.params[var] != ASIS}


@dataclass
class PlannedRun:
    point: Point
    rep: int
    run_id: str
    config: dict[str, Any]
    status: str  # stored | to run | excluded | blocked
    reason: str = ""


@dataclass
class Plan:
    spec: Spec
    runs: list[PlannedRun]
    seconds_per_run: float

    def by_status(self, status: str) -> list[PlannedRun]:
        return [r for r in self.runs if r.status == status]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in ("stored", "to run", "excluded", "blocked")}
        for r in self.runs:
            out[r.status] += 1
        return out

    @property
    def eta_s(self) -> float:
        return len(self.by_status("to run")) * self.seconds_per_run

    def points(self) -> list[Point]:
        seen: dict[int, Point] = {}
        for r in self.runs:
            seen.setdefault(id(r.point), r.point)
        return list(seen.values())

    def summary(self) -> str:
        c = self.counts()
        pts = self.points()
        excluded = sum(1 for p in pts if p.excluded_by)
        lines = [
            f"experiment {self.spec.experiment}, environment {self.spec.environment}: "
            f"{len(pts)} points ({excluded} excluded) x {self.spec.repetitions} repetitions",
            f"  stored {c['stored']}, to run {c['to run']}, excluded {c['excluded']}, "
            f"blocked {c['blocked']}",
            f"  estimated time for the runs still to do: {format_duration(self.eta_s)} "
            f"({self.seconds_per_run:.1f} s per run)",
        ]
        reasons: dict[str, int] = {}
        for r in self.runs:
            if r.status in ("excluded", "blocked"):
                reasons[f"{r.status}: {r.reason}"] = reasons.get(f"{r.status}: {r.reason}", 0) + 1
        lines += [f"  {n} runs {why}" for why, n in sorted(reasons.items())]
        return "\n".join(lines)

    def table(self) -> list[dict[str, Any]]:
        """One row per run: the point's variables, the repetition, id, status and reason."""
        return [{**r.point.params, "rep": r.rep, "run_id": r.run_id, "grids": ",".join(r.point.grids),
                 "status": r.status, "reason": r.reason} for r in self.runs]


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def make_plan(spec: Spec, *, driver_version: str, stored_ids: Iterable[str] = (),
              knob_variables: dict[str, str] | None = None,
              knob_availability: dict[str, tuple[bool, str]] | None = None,
              seconds_per_run: float | None = None,
              host_check: Callable[[dict[str, Any]], str | None] | None = None) -> Plan:
    """Classify every (point, repetition).

    ``knob_availability`` maps knob name to (controllable, reason); a point needing a knob
    that is not controllable is *blocked* (skipped), and the reason says which knob and why.
    ``host_check`` may block a point for other reasons of this host (e.g. too few cores).
    """
    stored = set(stored_ids)
    knob_variables = knob_variables or {}
    knob_availability = knob_availability or {}
    if seconds_per_run is None:
        seconds_per_run = float(spec.values["runtime_s"]) + float(spec.values.get("ramp_s", 0)) + 1.0
    runs: list[PlannedRun] = []
    for point in expand(spec):
        config = run_config(spec, point, driver_version)
        blocked = ""
        for knob, value in knob_needs(point, knob_variables).items():
            ok, why = knob_availability.get(knob, (True, ""))
            if not ok:
                blocked = f"needs knob {knob}={value}, which this host cannot control ({why})"
                break
        if not blocked and host_check is not None and not point.excluded_by:
            blocked = host_check(point.params) or ""
        for rep in range(spec.repetitions):
            rid = run_id(config, rep)
            if point.excluded_by:
                status, reason = "excluded", point.excluded_by
            elif rid in stored:
                status, reason = "stored", ""
            elif blocked:
                status, reason = "blocked", blocked
            else:
                status, reason = "to run", ""
            runs.append(PlannedRun(point, rep, rid, config, status, reason))
    return Plan(spec, runs, seconds_per_run)
