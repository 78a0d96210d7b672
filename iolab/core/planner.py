"""Expand a spec into points and repetitions, give each run its id, and report a plan.

A *point* is a full assignment of every variable. Each named grid contributes the Cartesian
product of its varied values, with every other variable at the base point (overridden by the
grid's ``set``). A grid that varies a single variable is a one-at-a-time expansion. Points that
several grids produce are run once. Exclusion rules (data in the spec) remove points;
``--where`` filters keep only the points that match.

Each (point, repetition) is *stored* (its run id is in the store), *to run*, *excluded* (by
which rule) or *blocked* (by every reason this host gives: a knob it cannot control, too few
cores, ...). ``--limit N`` selects the first N runs still to do.

Responsible for: points, statuses, counts, ETAs and the plan's text and JSON forms.
Not responsible for: what a point executes (the experiment supplies the identity of each
point) or running anything.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from iolab.core.identity import canonical_json, run_ids
from iolab.core.spec import Spec
from iolab.errors import InputError

ASIS = "asis"  # a knob-backed variable left as the host has it (read back and recorded)
MAX_RUNS = 1_000_000  # a design beyond this is refused before it is expanded (--max-runs)
STATUSES = ("stored", "to run", "excluded", "blocked")


@dataclass
class Point:
    params: dict[str, Any]
    grids: list[str] = field(default_factory=list)
    excluded_by: str | None = None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params.items())


def _matches(rule: dict[str, list[Any]], params: dict[str, Any]) -> bool:
    return all(params.get(var) in values for var, values in rule.items())


def design_size(spec: Spec) -> int:
    """Runs of the design before duplicates between grids are merged (an upper bound),
    counted without expanding anything."""
    points = sum(math.prod(len(values) for values in grid["vary"].values())
                 for grid in spec.grids.values())
    return points * spec.repetitions


def check_size(spec: Spec, max_runs: int = MAX_RUNS) -> None:
    """Refuse a design too large to plan, with its size, before it takes any memory."""
    size = design_size(spec)
    if size > max_runs:
        per_grid = ", ".join(f"{name}: {math.prod(len(v) for v in g['vary'].values()):,} points"
                             for name, g in spec.grids.items())
        raise InputError(spec.params_file, "grids", f"the design has up to {size:,} runs "
                         f"({per_grid}; x {spec.repetitions} repetitions), more than the limit "
                         f"of {max_runs:,}; shrink the grids or raise the limit with --max-runs",
                         allowed=f"at most {max_runs:,} runs")


def expand(spec: Spec) -> list[Point]:
    """Every distinct point of every grid, in a stable order, with its exclusion (if any)."""
    points: dict[str, Point] = {}
    for name, grid in spec.grids.items():
        fixed = {**spec.base, **grid["set"]}
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


def knob_needs(params: dict[str, Any], knob_variables: dict[str, str]) -> dict[str, Any]:
    """The knobs a point needs set: {knob name: value}, leaving out variables at ``asis``."""
    return {knob: params[var] for var, knob in knob_variables.items()
            if var in params and params[var] != ASIS}


@dataclass
class PlannedRun:
    point: Point
    rep: int
    run_id: str
    identity: dict[str, Any]
    status: str                        # one of STATUSES
    reasons: list[str] = field(default_factory=list)
    selected: bool = False             # to run, and within --limit

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


@dataclass
class Plan:
    spec: Spec
    runs: list[PlannedRun]
    seconds_per_run: float
    where: dict[str, list[Any]] = field(default_factory=dict)
    filtered_out: int = 0              # points --where left out
    limit: int | None = None
    stored_outside: list[str] = field(default_factory=list)  # stored ids this plan does not have
    programs: list[dict[str, Any]] = field(default_factory=list)  # tools and collectors needed
    scratch: list[str] = field(default_factory=list)             # files runs create and leave
    corrupt: list[Any] = field(default_factory=list)   # stored runs failing verification
                                                       # (iolab.core.store.CorruptRun)
    # points --where left out that this host could run: their tools still enter the host's
    # fingerprint, which must not depend on the filter
    left_out_points: list[Any] = field(default_factory=list)

    def by_status(self, status: str) -> list[PlannedRun]:
        return [r for r in self.runs if r.status == status]

    def selected(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.selected]

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for r in self.runs:
            out[r.status] += 1
        return out

    @property
    def eta_s(self) -> float:
        """Time for what ``run`` with the same options would do now."""
        return len(self.selected()) * self.seconds_per_run

    @property
    def eta_all_s(self) -> float:
        """Time for every run not stored, blocked ones included (the design's full cost)."""
        c = self.counts()
        return (c["to run"] + c["blocked"]) * self.seconds_per_run

    def points(self) -> list[Point]:
        seen: dict[int, Point] = {}
        for r in self.runs:
            seen.setdefault(id(r.point), r.point)
        return list(seen.values())

    def blockers(self) -> dict[str, int]:
        """Every blocking reason with the number of runs it blocks (a run may have several)."""
        out: dict[str, int] = {}
        for r in self.by_status("blocked"):
            for why in r.reasons:
                out[why] = out.get(why, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def missing_programs(self) -> list[dict[str, Any]]:
        return [p for p in self.programs if not p["found"]]

    def to_dict(self) -> dict[str, Any]:
        c = self.counts()
        excluded: dict[str, int] = {}
        for r in self.by_status("excluded"):
            excluded[r.reason] = excluded.get(r.reason, 0) + 1
        return {
            "experiment": self.spec.experiment, "environment": self.spec.environment,
            "params": self.spec.sources, "overrides": self.spec.overrides,
            "where": self.where, "limit": self.limit,
            "points": len(self.points()), "points_filtered_out": self.filtered_out,
            "repetitions": self.spec.repetitions, "runs": len(self.runs),
            "stored": c["stored"], "to_run": c["to run"], "excluded": c["excluded"],
            "blocked": c["blocked"], "selected": len(self.selected()),
            "stored_outside_plan": len(self.stored_outside),
            "eta_s": round(self.eta_s, 1), "eta_all_s": round(self.eta_all_s, 1),
            "seconds_per_run": round(self.seconds_per_run, 2),
            "blockers": self.blockers(), "exclusions": excluded,
            "programs": self.programs, "scratch": self.scratch, "corrupt": [c.describe() for c in self.corrupt],
        }

    def summary(self) -> str:
        """The plan in a few lines of at most ~90 characters."""
        c = self.counts()
        pts = self.points()
        n_excl = sum(1 for p in pts if p.excluded_by)
        spec = self.spec
        lines = [f"{spec.experiment} / {spec.environment}: {len(pts)} points ({n_excl} excluded) "
                 f"x {spec.repetitions} repetitions"]
        for name, grid in spec.grids.items():
            varied = " x ".join(f"{var} {', '.join(map(str, values))}"
                                for var, values in grid["vary"].items())
            fixed = ", ".join(f"{var} {value}" for var, value in grid.get("set", {}).items())
            lines.append(f"  grid {name}: {varied}" + (f" (with {fixed})" if fixed else ""))
        if self.where:
            lines.append(f"  only points with {_where_text(self.where)} "
                         f"({self.filtered_out} points left out)")
        lines.append(f"  stored {c['stored']}, to run {c['to run']}, excluded {c['excluded']}, "
                     f"blocked {c['blocked']}")
        if self.stored_outside:
            lines.append(f"  {len(self.stored_outside)} further stored runs are not part of this "
                         f"plan (other settings or points, or repetitions beyond its count)")
        if self.corrupt:
            lines.append(f"  CORRUPT: {len(self.corrupt)} stored runs fail verification and "
                         f"count as not stored; 'iolab verify' names them")
        if self.limit is not None:
            lines.append(f"  --limit {self.limit}: {len(self.selected())} runs would run now")
        lines.append(f"  time for the runs to do: {format_duration(self.eta_s)} "
                     f"({self.seconds_per_run:.1f} s per run)")
        if c["blocked"]:
            lines.append(f"  with the blocked runs, the whole design takes "
                         f"{format_duration(self.eta_all_s)}")
        for why, n in self.blockers().items():
            lines.append(f"  blocked ({n} runs): {why}")
        for why, n in self.to_dict()["exclusions"].items():
            lines.append(f"  excluded ({n} runs): {why}")
        for p in self.programs:
            state = (f"{p['path']} ({p['version'] or 'version unknown'})" if p["found"]
                     else f"MISSING: {p['install']}")
            lines.append(f"  {p['role']} {p['name']}: {state}")
        for item in self.scratch:
            lines.append(f"  scratch: {item}")
        lines.append(f"  params: {' + '.join(spec.sources)}")
        return "\n".join(lines)

    def table(self) -> list[dict[str, Any]]:
        """One row per run: the point's variables, the repetition, id, status and reasons."""
        return [{**r.point.params, "rep": r.rep, "run_id": r.run_id,
                 "grids": ",".join(r.point.grids), "status": r.status, "reason": r.reason}
                for r in self.runs]


def _where_text(where: dict[str, list[Any]]) -> str:
    return ", ".join(f"{k} in {v}" if len(v) > 1 else f"{k}={v[0]}" for k, v in where.items())


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


def make_plan(spec: Spec, *, identity: Callable[[dict[str, Any]], dict[str, Any]],
              seconds_per_run: float, stored_ids: Iterable[str] = (),
              blockers: Callable[[dict[str, Any]], list[str]] | None = None,
              where: dict[str, list[Any]] | None = None, limit: int | None = None,
              max_runs: int = MAX_RUNS) -> Plan:
    """Classify every (point, repetition) of the spec (refused beyond ``max_runs``).

    ``identity(params)`` gives a point's identity (see :mod:`iolab.core.identity`);
    ``blockers(params)`` every reason this host cannot run the point (empty if it can).
    """
    check_size(spec, max_runs)
    stored = set(stored_ids)
    where = where or {}
    runs: list[PlannedRun] = []
    filtered = 0
    left_out = []  # points --where left out that this host could run
    known: set[str] = set()  # ids of every point of the design, filtered ones included
    for point in expand(spec):
        try:
            ident = identity(point.params)
        except InputError as exc:
            # a tool refuses the options a point gives (e.g. cuda-run's powers of two): say
            # which params and which point, not only which tool option
            raise InputError(" + ".join(spec.sources), exc.key, f"{exc.problem}, in the point "
                             f"{_where_text({k: [v] for k, v in point.params.items()})} of "
                             f"grid(s) {', '.join(point.grids)}", exc.allowed) from None
        ids = run_ids(ident, spec.repetitions)
        if where and not _matches(where, point.params):
            filtered += 1
            known.update(ids)
            if not point.excluded_by and not (blockers and blockers(point.params)):
                left_out.append(point)
            continue
        blocked = [] if point.excluded_by or blockers is None else blockers(point.params)
        for rep, rid in enumerate(ids):
            if point.excluded_by:
                status, reasons = "excluded", [point.excluded_by]
            elif rid in stored:
                status, reasons = "stored", []
            elif blocked:
                status, reasons = "blocked", blocked
            else:
                status, reasons = "to run", []
            runs.append(PlannedRun(point, rep, rid, ident, status, reasons))
    todo = [r for r in runs if r.status == "to run"]
    for r in todo[:limit] if limit is not None else todo:
        r.selected = True
    known.update(r.run_id for r in runs)
    return Plan(spec, runs, seconds_per_run, where, filtered, limit, sorted(stored - known),
                left_out_points=left_out)
