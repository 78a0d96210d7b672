"""Expand a spec into points and repetitions, give each run its id, and report a plan.

A *point* is a full assignment of every variable. Each named grid contributes the Cartesian
product of its varied values, with every other variable at the base point (overridden by the
grid's ``set``). A grid that varies a single variable is a one-at-a-time expansion. Points that
several grids produce are run once. Exclusion rules (data in the spec) remove points;
``--where`` filters keep only the points that match.

Each (point, repetition) is *stored* (its run id is in the store), *to run*, *excluded* (by
which rule) or *blocked* (by every reason this host gives: a knob it cannot control, too few
cores, ...). ``--limit N`` selects the first N runs still to do.

How many repetitions a point gets is its :class:`~iolab.core.repetitions.Decision` under the
spec's rule, made from its stored runs' values of the rule's metric. The plan lists the runs
a point certainly still needs (its ``to run`` runs, at the lowest repetition indices not
stored); a rule may ask for more, up to ``to_run_max``, as the measurements come in.

A plan holds its points, and of each point's runs only counts (:class:`PointRuns`): the runs
themselves (:class:`PlannedRun`, their ids) are made when they are asked for, so a plan's
memory grows with its points and the runs stored, not with its repetitions. A design of
more than :data:`MAX_POINTS` points is refused before it is expanded, and one of more than
:data:`MAX_RUNS` runs too (``--max-runs`` moves that limit).

Responsible for: points, statuses, counts, ETAs and the plan's text and JSON forms.
Not responsible for: what a point executes (the experiment supplies the identity of each
point) or running anything.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from iolab.core import confirm as confirm_step
from iolab.core.identity import RunIds, canonical_json, run_ids, split_run_id
from iolab.core.repetitions import REASON_TEXT, Decision, decide
from iolab.core.search import plan as search_plan
from iolab.core.search import record as search_record
from iolab.core.spec import Spec
from iolab.errors import InputError, printable
from iolab.paths import shown

ASIS = "asis"  # a knob-backed variable left as the host has it (read back and recorded)
MAX_RUNS = 1_000_000  # a design beyond this is refused before it is expanded (--max-runs)
# a plan holds every point of its design (its params, its identity: a few KB each) but not
# their runs, so the points are what memory bounds; 25 times the lab server's CPU search
MAX_POINTS = 100_000
STATUSES = ("stored", "to run", "excluded", "blocked")


@dataclass
class Point:
    params: dict[str, Any]
    grids: list[str] = field(default_factory=list)
    excluded_by: str | None = None
    decision: Decision | None = None   # under the spec's rule (None when excluded)
    blocked: bool = False              # this host cannot run it
    # what the decision is made from: the run ids the rule allows (repetitions 0 .. max-1,
    # made when asked), the stored repetitions with their value of the rule's metric, and
    # the failed attempts
    ids: Sequence[str] = field(default_factory=list)
    samples: dict[int, float | None] = field(default_factory=dict)
    failures: int = 0
    confirm: str | None = None         # a confirmation point's label (iolab.core.confirm)
    searched: bool = False             # run as the search asks, not as the rule would
    chosen_because: str = ""           # and why the step chose it

    def label(self) -> str:
        text = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{text} (confirmation {self.confirm})" if self.confirm else text


def matches(rule: dict[str, list[Any]], params: dict[str, Any]) -> bool:
    return all(params.get(var) in values for var, values in rule.items())


class Exclusions:
    """The exclusions of a spec, indexed by the variables each names, so that finding a
    point's exclusion costs a dictionary look-up per set of variables named, not a match
    against every rule: a grid of 100,000 points with thousands of exclusions would
    otherwise take points x rules comparisons. :meth:`why` is what the first rule (in the
    file's order) that :func:`matches` the point says.

    Rules naming the same variables share one table from each combination of their values
    to the first rule holding it (``spec`` bounds the combinations,
    ``spec.EXCLUSION_COMBOS_MOST``); a rule with a value no table can hold (one not
    hashable) is matched as before, one by one."""

    def __init__(self, rules: Sequence[dict[str, Any]]):
        self.rules = list(rules)
        self.tables: dict[tuple[str, ...], dict[tuple, int]] = {}
        self.one_by_one: list[int] = []
        for index, rule in enumerate(self.rules):
            names = tuple(sorted(rule["when"]))
            combos = itertools.product(*(rule["when"][name] for name in names))
            table = self.tables.setdefault(names, {})
            try:
                for combo in combos:
                    table.setdefault(combo, index)  # the first rule holding it says why
            except TypeError:  # a value that cannot be a key: matched by matches()
                self.one_by_one.append(index)

    def why(self, params: dict[str, Any]) -> str | None:
        """The exclusion of the point ``params``, or None."""
        first: int | None = None
        for names, table in self.tables.items():
            try:
                index = table.get(tuple(params.get(name) for name in names))
            except TypeError:  # an unhashable value equals no hashable one
                index = None
            if index is not None and (first is None or index < first):
                first = index
        for index in self.one_by_one:
            if first is not None and index > first:
                break
            if matches(self.rules[index]["when"], params):
                first = index
                break
        return None if first is None else self.rules[first]["why"]


def design_points(spec: Spec) -> int:
    """Points of the design before duplicates between grids are merged (an upper bound),
    counted without expanding anything."""
    return sum(math.prod(len(values) for values in grid["vary"].values())
               for grid in spec.grids.values())


def design_size(spec: Spec) -> int:
    """Runs of the design before duplicates between grids are merged (an upper bound),
    counted without expanding anything."""
    return design_points(spec) * spec.repetitions


def check_size(spec: Spec, max_runs: int = MAX_RUNS) -> None:
    """Refuse a design too large to plan, with its size, before it takes any memory: more
    points than :data:`MAX_POINTS` (what a plan's memory grows with), or more runs than
    ``max_runs``."""
    per_grid = ", ".join(f"{name}: {math.prod(len(v) for v in g['vary'].values()):,} points"
                         for name, g in spec.grids.items())
    points = design_points(spec)
    if points > MAX_POINTS:
        raise InputError(spec.params_file, "grids", f"the design has up to {points:,} points "
                         f"({per_grid}), more than a plan holds (each point is kept in memory); "
                         "split it into several params files or shrink the grids",
                         allowed=f"at most {MAX_POINTS:,} points")
    size = design_size(spec)
    if size > max_runs:
        raise InputError(spec.params_file, "grids", f"the design has up to {size:,} runs "
                         f"({per_grid}; x {'' if spec.rule.fixed else 'at most '}"
                         f"{spec.repetitions} repetitions), more than the limit "
                         f"of {max_runs:,}; shrink the grids or raise the limit with --max-runs",
                         allowed=f"at most {max_runs:,} runs")


def expand(spec: Spec, pivot: dict[str, Any] | None = None,
           skip: Iterable[str] = ()) -> list[Point]:
    """Every distinct point of every grid but those in ``skip``, in a stable order, with its
    exclusion (if any). ``pivot``: the searched grid's answer, which the other grids vary
    around instead of the base point (``iolab.core.search``)."""
    points: dict[str, Point] = {}
    exclusions = Exclusions(spec.exclusions)
    searched = spec.searched.grid if spec.searched is not None else None
    for name, grid in spec.grids.items():
        if name in skip:
            continue
        around = pivot if pivot is not None and name != searched else {}
        fixed = {**spec.base, **around, **grid["set"]}
        names = list(grid["vary"])
        for combo in itertools.product(*(grid["vary"][n] for n in names)):
            params = {**fixed, **dict(zip(names, combo))}
            params = {k: params[k] for k in spec.base}  # stable key order: the base's
            key = canonical_json(params)
            if key in points:
                points[key].grids.append(name)
                continue
            point = Point(params, [name])
            point.excluded_by = exclusions.why(params)
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
class PointRuns:
    """One point's runs as the plan lists them, kept as counts: the runs themselves are made
    when asked (:meth:`runs`), so that a point's thousand repetitions take no memory."""

    point: Point
    identity: dict[str, Any]
    ids: RunIds           # the run ids of its repetitions
    status: str           # of its runs not stored: "to run", "blocked" or "excluded"
    reasons: list[str]    # why: its blockers, or its exclusion
    stored: list[int]     # the stored repetitions it lists, in order
    todo: int             # the runs it lists that are not stored
    first: int = 0        # the plan's "to run" runs before this point's (--limit selects)

    @property
    def count(self) -> int:
        return len(self.stored) + self.todo

    def has(self, status: str) -> bool:
        """Whether any of its runs has ``status``."""
        if self.status == "excluded":  # stored ones too: the exclusion is what they show
            return status == "excluded" and self.count > 0
        if status == "stored":
            return bool(self.stored)
        return status == self.status and self.todo > 0

    def _reps(self) -> Iterator[tuple[int, bool]]:
        """(repetition, stored) of each run it lists, in order: the stored ones and the
        lowest ``todo`` not stored (of an excluded point, those below the rule's min)."""
        stored, left = set(self.stored), self.todo
        last = self.stored[-1] if self.stored else -1
        rep = 0
        while (left or rep <= last) and rep < len(self.ids):
            if rep in stored:
                yield rep, True
            elif left:
                left -= 1
                yield rep, False
            rep += 1

    def runs(self, limit: int | None) -> Iterator[PlannedRun]:
        """Its runs in order; of a point to run, the first ``limit`` of the plan are
        selected."""
        point, ids = self.point, self.ids
        todo = 0  # its runs not stored so far
        for rep, stored in self._reps():
            if stored and self.status != "excluded":
                yield PlannedRun(point, rep, ids[rep], self.identity, "stored", [])
                continue
            selected = (self.status == "to run"
                        and (limit is None or self.first + todo < limit))
            todo += 1
            yield PlannedRun(point, rep, ids[rep], self.identity, self.status, self.reasons,
                             selected)


class RunList(Sequence[PlannedRun]):
    """Runs of a plan, made one by one each time they are iterated; it has their number, and
    equals a list of the same runs. Indexing walks the runs (they are listed, not looked up)."""

    def __init__(self, make: Callable[[], Iterator[PlannedRun]], length: int):
        self._make, self._length = make, length

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[PlannedRun]:
        return self._make()

    def __getitem__(self, index):  # an int gives a run, a slice a list of them
        if isinstance(index, slice):
            start, stop, step = index.indices(self._length)
            if step < 0:
                return list(self)[index]
            return list(itertools.islice(self, start, stop, step))
        rep = index + self._length if index < 0 else index
        if not 0 <= rep < self._length:
            raise IndexError(index)
        return next(itertools.islice(self, rep, None))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RunList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"RunList({list(self)!r})"


@dataclass
class Plan:
    spec: Spec
    listed: list[PointRuns]            # every point's runs, as counts
    seconds_per_run: float
    where: dict[str, list[Any]] = field(default_factory=dict)
    filtered_out: int = 0              # points --where left out
    limit: int | None = None
    stored_outside: list[str] = field(default_factory=list)  # stored ids this plan does not have
    programs: list[dict[str, Any]] = field(default_factory=list)  # tools and collectors needed
    scratch: list[str] = field(default_factory=list)             # files runs create and leave
    # the scratch files the runs that may come read (iolab.host.scratch.ScratchFile), and
    # why any of the design's may not be written (every run is then blocked)
    scratch_files: list[Any] = field(default_factory=list)
    scratch_refusals: list[str] = field(default_factory=list)
    corrupt: list[Any] = field(default_factory=list)   # stored runs failing verification
                                                       # (iolab.core.store.CorruptRun)
    # points --where left out that this host could run: their tools still enter the host's
    # fingerprint, which must not depend on the filter
    left_out_points: list[Any] = field(default_factory=list)
    all_points: list[Point] = field(default_factory=list)  # within --where, with runs or not
    confirm: confirm_step.Choice | None = None  # the confirmation step's choice, if params ask for one
    search: search_plan.SearchState | None = None  # a searched grid's state, if params name one

    def _runs(self, entries: list[PointRuns]) -> Iterator[PlannedRun]:
        return itertools.chain.from_iterable(e.runs(self.limit) for e in entries)

    @property
    def runs(self) -> RunList:
        """Every run the plan lists, point by point, made as they are iterated."""
        return RunList(lambda: self._runs(self.listed), sum(e.count for e in self.listed))

    def by_status(self, status: str) -> RunList:
        entries = [e for e in self.listed if e.has(status)]
        return RunList(lambda: (r for r in self._runs(entries) if r.status == status),
                       self.counts()[status])

    def selected(self) -> RunList:
        """The runs to do that ``run`` makes now: the first ``limit`` of them."""
        entries = [e for e in self.listed if e.has("to run")
                   and (self.limit is None or e.first < self.limit)]
        to_run = self.counts()["to run"]
        return RunList(lambda: (r for r in self._runs(entries) if r.selected),
                       to_run if self.limit is None else min(self.limit, to_run))

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in STATUSES}
        for e in self.listed:
            if e.status == "excluded":
                out["excluded"] += e.count
            else:
                out["stored"] += len(e.stored)
                out[e.status] += e.todo
        return out

    @property
    def to_run_max(self) -> int:
        """The most runs the rule can still ask for of the points this host can run (equal
        to the runs to do for a fixed count)."""
        return (sum(p.decision.to_run_max for p in self.points()
                    if p.decision is not None and not p.blocked) + self.confirm_waiting_max
                + self.search_waiting_max)

    @property
    def waiting(self) -> str:
        """Why part of the design waits for runs still to come: the search, else the
        confirmation step ("" when nothing waits)."""
        return (self.search.waiting if self.search is not None else "") or self.confirm_waiting

    @property
    def search_waiting_max(self) -> int:
        """The most runs the search and the grids after it may still ask for, beyond the one
        it waits for."""
        if self.search is None or self.search.done:
            return 0
        pending = sum(p.decision.to_run_max for p in self.points()
                      if p.decision is not None and p.decision.reason == "open"
                      and p.grids == [self.search.spec.grid])
        return max(0, self.search.left - pending) + \
            sum(self.search.after.values()) * self.spec.rule.max

    @property
    def confirm_waiting(self) -> str:
        """Why the confirmation step has not chosen its points yet ("" if it has, or there is
        no step)."""
        return self.confirm.waiting if self.confirm is not None else ""

    @property
    def confirm_waiting_max(self) -> int:
        """The most runs a confirmation step still waiting for the search may ask for."""
        if not self.confirm_waiting or self.spec.confirm is None or not self.confirm.open:
            return 0  # chosen, or nothing open that could let it choose on this host
        answer = 1 if self.search is not None else 0  # a search's answer comes first
        return (self.spec.confirm.most_points() + answer) * self.spec.rule.max

    @property
    def search_certain(self) -> int:
        """Runs a search still waiting certainly makes beyond the one it waits for."""
        if self.search is None or not any(e.has("to run") and e.point.searched
                                          for e in self.listed):
            return 0  # no search, or its next run is blocked here
        return self.search.certain_more

    @property
    def eta_s(self) -> float:
        """Time for what ``run`` with the same options would do now (at least)."""
        return (len(self.selected()) + self.search_certain) * self.seconds_per_run

    def most_runs(self) -> int:
        """The most runs ``run`` with the same options may make."""
        most = self.to_run_max if self.limit is None else min(self.limit, self.to_run_max)
        return max(most, len(self.selected()))

    @property
    def eta_max_s(self) -> float:
        """Time for the most runs ``run`` with the same options may make."""
        return self.most_runs() * self.seconds_per_run

    @property
    def eta_all_s(self) -> float:
        """Time for every run not stored, blocked ones included (the design's full cost; under
        a rule, the most it can cost)."""
        return ((sum(p.decision.to_run_max for p in self.decisions()) + self.confirm_waiting_max
                 + self.search_waiting_max) * self.seconds_per_run)

    def points(self) -> list[Point]:
        """Every point of the plan (within --where), with runs or not: a point settled
        before it stored a run (all its runs failed) has none."""
        return list(self.all_points)

    def may_run(self) -> Sequence[PlannedRun]:
        """The runs ``run`` may make now, for what must be checked before it starts (programs,
        knobs on a shared node). A fixed count in sequential order makes exactly the selected
        runs; otherwise the order (and a rule) picks them as the campaign goes, so any run
        still to do may come, within --limit."""
        if self.spec.rule.fixed and self.spec.order == "sequential":
            return self.selected()
        return self.by_status("to run") if self.selected() else []

    def may_run_points(self) -> list[Point]:
        """The points of :meth:`may_run`'s runs, once each, in the plan's order."""
        if not self.selected():
            return []
        sequential = self.spec.rule.fixed and self.spec.order == "sequential"
        return [e.point for e in self.listed if e.has("to run")
                and (not sequential or self.limit is None or e.first < self.limit)]

    def points_with(self, *statuses: str) -> list[Point]:
        """The points with a run of one of ``statuses``, once each, in the plan's order."""
        return [e.point for e in self.listed if any(e.has(s) for s in statuses)]

    def to_run_entries(self) -> list[PointRuns]:
        """The points with runs to do, with their runs (for the schedule)."""
        return [e for e in self.listed if e.has("to run")]

    def blockers(self) -> dict[str, int]:
        """Every blocking reason with the number of runs it blocks (a run may have several)."""
        out: dict[str, int] = {}
        for e in self.listed:
            if e.has("blocked"):
                for why in e.reasons:
                    out[why] = out.get(why, 0) + e.todo
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))

    def decisions(self) -> list[Point]:
        """The points with a decision (those not excluded), in the plan's order."""
        return [p for p in self.points() if p.decision is not None]

    def settled(self) -> dict[str, int]:
        """Points by the reason of their decision: ``open`` (not settled yet, and this host
        can run it) or ``blocked`` (not settled, and this host cannot)."""
        out: dict[str, int] = {}
        for p in self.decisions():
            reason = "blocked" if p.blocked and not p.decision.settled else p.decision.reason
            out[reason] = out.get(reason, 0) + 1
        return out

    def missing_programs(self) -> list[dict[str, Any]]:
        return [p for p in self.programs if not p["found"]]

    def to_dict(self) -> dict[str, Any]:
        c = self.counts()
        excluded: dict[str, int] = {}
        for e in self.listed:
            if e.has("excluded"):
                why = "; ".join(e.reasons)
                excluded[why] = excluded.get(why, 0) + e.count
        return {
            "experiment": self.spec.experiment, "environment": self.spec.environment,
            "params": self.spec.sources, "overrides": self.spec.overrides,
            "where": self.where, "limit": self.limit,
            "points": len(self.points()), "points_filtered_out": self.filtered_out,
            "repetitions": self.spec.rule.to_dict(), "order": self.spec.order,
            "runs": sum(e.count for e in self.listed),
            "stored": c["stored"], "to_run": c["to run"] + self.search_certain,
            "to_run_max": self.to_run_max,
            "excluded": c["excluded"], "blocked": c["blocked"], "selected": len(self.selected()),
            "stored_outside_plan": len(self.stored_outside),
            "eta_s": round(self.eta_s, 1), "eta_max_s": round(self.eta_max_s, 1),
            "eta_all_s": round(self.eta_all_s, 1),
            "seconds_per_run": round(self.seconds_per_run, 2),
            "blockers": self.blockers(), "exclusions": excluded,
            **({"confirm": self.confirm_dict()} if self.spec.confirm is not None else {}),
            **({"search": self.search_dict()} if self.search is not None else {}),
            "programs": self.programs, "scratch": self.scratch, "corrupt": [c.describe() for c in self.corrupt],
            # a fixed count's decisions are its runs' statuses (--format table)
            **({} if self.spec.rule.fixed else {"settled": self.settled(),
                                                 "decisions": self.decision_rows()}),
        }

    def confirm_dict(self) -> dict[str, Any]:
        """The confirmation step: as params ask for it, and what it chose or why it waits."""
        choice = self.confirm or confirm_step.Choice()
        return {"step": self.spec.confirm.to_dict(), "waiting": choice.waiting,
                "most_runs_waiting": self.confirm_waiting_max,
                "points": [{**params, "label": label, "why": why} for (params, label), why
                           in zip(choice.points, choice.reasons)]}

    def search_range(self) -> tuple[int, int]:
        """(certain, most) runs the search, the grids after it and the confirmation step
        still make, wherever they are blocked: the campaign's cost on a host that runs it."""
        confirm = self.confirm_waiting_max if self.spec.confirm is not None else 0
        return self.search.runs_range(self.spec.rule.max, confirm)

    def search_dict(self) -> dict[str, Any]:
        certain, most = self.search_range()
        return {**self.search.to_dict(), "runs_left_certain": certain, "runs_left_most": most,
                "eta_s": [round(certain * self.seconds_per_run, 1),
                          round(most * self.seconds_per_run, 1)]}

    def decision_rows(self) -> list[dict[str, Any]]:
        """One row per point with a decision: its variables, the decision's fields and
        whether this host is blocked from running it."""
        return [{**p.params, **({"confirm": p.confirm} if p.confirm else {}),
                 **p.decision.to_dict(), "blocked": p.blocked} for p in self.decisions()]

    def summary(self) -> str:
        """The plan in a few lines of at most ~90 characters. Each line quotes the params
        (a grid's values, an exclusion's why, a path), so it is escaped on its own, a line
        break in a params string too: the params cannot make a line of the plan's."""
        lines = self._design_lines()
        if self.search is not None:
            lines += self._search_lines()
        if self.spec.confirm is not None:
            lines += self._confirm_lines()
        return "\n".join(printable(line) for line in lines + self._count_lines()
                         + self._time_lines() + self._reason_lines() + self._needs_lines())

    def _design_lines(self) -> list[str]:
        """The points and repetitions, the rule and its points' state, and each grid."""
        pts = self.points()
        n_excl = sum(1 for p in pts if p.excluded_by)
        spec = self.spec
        rule = spec.rule
        so_far = " so far (the search asks for its points one by one)" \
            if self.search is not None and not self.search.done else ""
        lines = [f"{spec.experiment} / {spec.environment}: {len(pts)} points{so_far} "
                 f"({n_excl} excluded) "
                 + (f"x {rule.max} repetitions" if rule.fixed else
                    f"x {rule.min} to {rule.max} repetitions")]
        if not rule.fixed:
            lines.append(f"  rule: stop when the {rule.confidence * 100:g} % CI of {rule.metric} is "
                         f"within ±{rule.target_ci_pct:g} % of its mean; {spec.order} order")
            settled = self.settled()
            lines.append("  points: " + ", ".join(f"{settled[r]} {REASON_TEXT[r]}"
                                                  for r in REASON_TEXT if settled.get(r)))
        for name, grid in spec.grids.items():
            varied = " x ".join(f"{var} {', '.join(map(str, values))}"
                                for var, values in grid["vary"].items())
            fixed = ", ".join(f"{var} {value}" for var, value in grid.get("set", {}).items())
            lines.append(f"  grid {name}: {varied}" + (f" (with {fixed})" if fixed else ""))
        return lines

    def _search_lines(self) -> list[str]:
        lines = self.search.lines(self.spec.rule.max)
        certain, most = self.search_range()
        if most:
            lines.append(f"    the search, the grids after it and the confirmation: "
                         f"{certain} to {most} runs, {format_duration(certain * self.seconds_per_run)}"
                         f" to {format_duration(most * self.seconds_per_run)} on a host that "
                         f"runs them")
        return lines

    def _confirm_lines(self) -> list[str]:
        choice = self.confirm or confirm_step.Choice()
        lines = [*_wrapped(f"confirm: {self.spec.confirm.text()}", 2),
                 f"    {choice.waiting} (up to {self.confirm_waiting_max} runs)"
                 if choice.waiting else
                 f"    chose {len(choice.points)} points, run under the rule above:"]
        for (params, label), why in zip(choice.points, choice.reasons):
            lines += _wrapped(f"{label}: {_where_text({k: [v] for k, v in params.items()})} "
                              f"({why})", 4)
        return lines

    def _count_lines(self) -> list[str]:
        """The --where filter, the runs by status, stored runs outside the plan or corrupt,
        and --limit."""
        c = self.counts()
        lines = []
        if self.where:
            lines.append(f"  only points with {_where_text(self.where)} "
                         f"({self.filtered_out} points left out)")
        to_run = c["to run"] + self.search_certain
        more = (f" (up to {self.to_run_max} as the {'search and the ' if self.search else ''}"
                f"rule decide{'' if self.search else 's'})" if self.to_run_max > to_run else "")
        lines.append(f"  stored {c['stored']}, to run {to_run}{more}, excluded "
                     f"{c['excluded']}, blocked {c['blocked']}")
        if self.stored_outside:
            lines.append(f"  {len(self.stored_outside)} further stored runs are not part of this "
                         f"plan (other settings or points, or repetitions beyond its count)")
        if self.corrupt:
            lines.append(f"  CORRUPT: {len(self.corrupt)} stored runs fail verification and "
                         f"count as not stored; 'iolab verify' names them")
        if self.limit is not None:
            lines.append(f"  --limit {self.limit}: {len(self.selected())} runs would run now")
        lines.append("  order: " + (
            "interleaved, rounds of one run per open point, shuffled from the campaign's seed"
            if self.spec.order == "interleaved" else
            "sequential, each point's runs back to back (its chapter shows the campaign as "
            "run in blocks; 'order: interleaved' in the params interleaves them)"))
        return lines

    def _time_lines(self) -> list[str]:
        span = (f" to {format_duration(self.eta_max_s)}" if self.eta_max_s > self.eta_s else "")
        lines = [f"  time for the runs to do: {format_duration(self.eta_s)}{span} "
                 f"({self.seconds_per_run:.1f} s per run)"]
        if self.counts()["blocked"]:
            lines.append(f"  with the blocked runs, the runs left would take "
                         f"{'' if self.spec.rule.fixed else 'up to '}"
                         f"{format_duration(self.eta_all_s)}")
        return lines

    def _reason_lines(self) -> list[str]:
        """Why runs are blocked or excluded, with how many each reason takes."""
        return ([f"  blocked ({n} runs): {why}" for why, n in self.blockers().items()]
                + [f"  excluded ({n} runs): {why}"
                   for why, n in self.to_dict()["exclusions"].items()])

    def _needs_lines(self) -> list[str]:
        """The programs and scratch files the runs need, and the params files."""
        lines = [f"  {p['role']} {p['name']}: {_program_state(p)}" for p in self.programs]
        lines += [f"  scratch: {item}" for item in self.scratch]
        lines.append(f"  params: {' + '.join(shown(s) for s in self.spec.sources)}")
        return lines

    def table(self) -> Iterator[dict[str, Any]]:
        """One row per run, made as it is read: the point's variables, the repetition, id,
        status and reasons."""
        return ({**r.point.params, **({"confirm": r.point.confirm} if r.point.confirm else {}),
                 "rep": r.rep, "run_id": r.run_id,
                 "grids": ",".join(r.point.grids), "status": r.status, "reason": r.reason}
                for r in self.runs)


def _wrapped(text: str, indent: int) -> list[str]:
    """``text`` indented, in lines of at most 90 characters (a line break in it is a space)."""
    return textwrap.wrap(text, 90, initial_indent=" " * indent,
                         subsequent_indent=" " * (indent + 4), break_on_hyphens=False)


def _program_state(program: dict[str, Any]) -> str:
    """A program's line in the plan's text: where it is and its version, or how to install it."""
    if "recorded" in program:  # as the host that made the runs recorded it
        return (f"{program['version'] or 'version unknown'} (as recorded by the campaign's host)"
                if program["recorded"] == "recorded" else "not in the campaign's host record")
    return (f"{shown(program['path'])} ({program['version'] or 'version unknown'})"
            if program["found"] else f"MISSING: {program['install']}")


def _where_text(where: dict[str, list[Any]]) -> str:
    return ", ".join(f"{k} in {v}" if len(v) > 1 else f"{k}={v[0]}" for k, v in where.items())


def format_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s"


@dataclass
class Stored:
    """What the store holds of a campaign, as the planner reads it: the ids of its stored runs,
    the rule's metric of each (by run id) and the failed attempts of run ids (both only matter
    under a rule), and the campaign log's ``search`` lines (a search's record; None: no store
    was read). ``ids`` may be any iterable; it is kept as a set."""
    ids: Iterable[str] = ()
    values: dict[str, float | None] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    search_log: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        self.ids = set(self.ids)
        # the stored repetitions and failed attempts of each point, by its identity's hash:
        # a point is looked up in what is stored, not each of its repetitions
        self._reps: dict[str, list[int]] = {}
        self._failed: dict[str, list[tuple[int, int]]] = {}
        for rid in self.ids:
            parts = split_run_id(rid)
            if parts is not None:
                self._reps.setdefault(parts[0], []).append(parts[1])
        for rid, n in self.failures.items():
            parts = split_run_id(rid)
            if parts is not None:
                self._failed.setdefault(parts[0], []).append((parts[1], n))

    def samples(self, ids: RunIds) -> dict[int, float | None]:
        """The stored repetitions among ``ids``, in order, with their value of the metric."""
        return {rep: self.values.get(ids[rep])
                for rep in sorted(self._reps.get(ids.digest, ())) if rep < len(ids)}

    def failed(self, ids: RunIds) -> int:
        """The failed attempts of ``ids``."""
        return sum(n for rep, n in self._failed.get(ids.digest, ()) if rep < len(ids))

    def outside(self, known: dict[str, int]) -> list[str]:
        """The stored ids that are not among ``known`` (run ids' hashes, with the number of
        repetitions of each), sorted."""
        def planned(rid: str) -> bool:
            parts = split_run_id(rid)
            return parts is not None and parts[1] < known.get(parts[0], 0)

        return sorted(rid for rid in self.ids if not planned(rid))


def make_plan(spec: Spec, *, identity: Callable[[dict[str, Any]], dict[str, Any]],
              seconds_per_run: float, stored: Stored | None = None,
              blockers: Callable[[dict[str, Any]], list[str]] | None = None,
              where: dict[str, list[Any]] | None = None, limit: int | None = None,
              max_runs: int = MAX_RUNS) -> Plan:
    """Classify every (point, repetition) of the spec (refused beyond ``max_runs``).

    ``identity(params)`` gives a point's identity (see :mod:`iolab.core.identity`);
    ``blockers(params)`` every reason this host cannot run the point (empty if it can);
    ``stored``: what the store holds (nothing if None).
    """
    check_size(spec, max_runs)
    stored = stored if stored is not None else Stored()
    where = where or {}
    sort = _Classifier(spec, identity, stored, blockers, where)
    searching = None if spec.searched is None else _search(spec, sort.identity_of, stored,
                                                           blockers)
    sort.design(searching)
    choice = sort.confirmation(searching)
    to_run = 0  # the runs to do before each point's: --limit selects the first ones
    for entry in sort.listed:
        entry.first = to_run
        to_run += entry.todo if entry.status == "to run" else 0
    return Plan(spec, sort.listed, seconds_per_run, where, sort.filtered, limit,
                stored.outside(sort.known), left_out_points=sort.left_out,
                all_points=sort.points, confirm=choice, search=searching)


class _Classifier:
    """Sorts points into the plan's runs for :func:`make_plan`, gathering on the way what the
    plan and the confirmation step need."""

    def __init__(self, spec: Spec, identity: Callable[[dict[str, Any]], dict[str, Any]],
                 stored: Stored, blockers: Callable[[dict[str, Any]], list[str]] | None,
                 where: dict[str, list[Any]]):
        self.spec, self.identity, self.stored = spec, identity, stored
        self.blockers, self.where = blockers, where
        self.listed: list[PointRuns] = []
        self.points: list[Point] = []
        self.filtered = 0
        self.left_out: list[Point] = []  # points --where left out that this host could run
        # the ids of every point of the design, filtered ones included: {hash: repetitions}
        self.known: dict[str, int] = {}
        # what the confirmation step chooses from: every point of the design this host can
        # run, --where or not, with its stored values, and how many of them are still open
        self.candidates: list[tuple[dict[str, Any], list[float]]] = []
        self.open_points = 0

    def identity_of(self, point: Point) -> dict[str, Any]:
        """The point's identity; a tool's refusal names the point and its params."""
        try:
            return self.identity(point.params)
        except InputError as exc:
            # a tool refuses the options a point gives (e.g. cuda-run's powers of two): say
            # which params and which point, not only which tool option
            raise InputError(" + ".join(self.spec.sources), exc.key, f"{exc.problem}, in the "
                             f"point {_where_text({k: [v] for k, v in point.params.items()})} "
                             f"of grid(s) {', '.join(point.grids)}", exc.allowed) from None

    def design(self, searching: search_plan.SearchState | None) -> None:
        """Classify every point of the design; of the searched grid alone, only those the
        search asked for."""
        pivot = searching.pivot if searching is not None and searching.done else None
        skip = searching.after if searching is not None else {}
        asked = set(searching.asked()) if searching is not None else set()
        for point in expand(self.spec, pivot, skip):
            if searching is not None and point.grids == [searching.spec.grid]:
                # a configuration of the searched grid alone: planned only if the search asked
                if canonical_json(point.params) in asked:
                    self.classify(point, self.identity_of(point), searching)
                continue
            self.classify(point, self.identity_of(point))

    def confirmation(self, searching: search_plan.SearchState | None
                     ) -> confirm_step.Choice | None:
        """The confirmation step's choice (None without one), its points classified."""
        spec = self.spec
        if spec.confirm is None:
            return None
        if searching is not None and not searching.done:
            return confirm_step.Choice(waiting="waits for the search to end", open=1)
        found = searching.outcome.answer if searching is not None else None
        choice = confirm_step.choose(spec.confirm, self.candidates, self.open_points,
                                     found.params if found is not None else None)
        for (params, label), why in zip(choice.points, choice.reasons):
            point = Point(dict(params), [confirm_step.GRID], confirm=label, chosen_because=why)
            self.classify(point, {**self.identity_of(point), confirm_step.KEY: label})
        return choice

    def classify(self, point: Point, ident: dict[str, Any],
                 searched: search_plan.SearchState | None = None) -> None:
        """Decide the point and add its runs, or count it as left out by --where."""
        ids = run_ids(ident, self.spec.repetitions)
        self.known[ids.digest] = len(ids)
        blocked = ([] if point.excluded_by or self.blockers is None
                   else self.blockers(point.params))
        samples = self.stored.samples(ids)
        n_failed = self.stored.failed(ids)
        decision = (None if point.excluded_by else
                    searched.decision(canonical_json(point.params), samples, n_failed)
                    if searched is not None else
                    decide(self.spec.rule, list(samples.values()), n_failed))
        if point.confirm is None and decision is not None:
            # the choice reads the stored runs alone, whatever this host can run; only the
            # points it can run are waited for
            self.candidates.append((point.params,
                                    [v for v in samples.values() if v is not None]))
            self.open_points += not decision.settled and not blocked
        if self.where and not matches(self.where, point.params):
            self.filtered += 1
            if not point.excluded_by and not blocked:
                self.left_out.append(point)
            return
        point.blocked = bool(blocked)
        self.points.append(point)
        stored = list(samples)
        if point.excluded_by:
            # a rule's point would get at least min runs: those are what the exclusion saves
            # (and any stored before the exclusion was made)
            below = min(self.spec.rule.min, len(ids))
            self.listed.append(PointRuns(point, ident, ids, "excluded", [point.excluded_by],
                                         stored, below - sum(rep < below for rep in stored)))
            return
        point.ids, point.samples, point.failures, point.decision = ids, samples, n_failed, decision
        point.searched = searched is not None
        # its stored runs and those its decision still needs, at the lowest repetitions not
        # stored
        todo = min(point.decision.to_run, len(ids) - len(stored))
        self.listed.append(PointRuns(point, ident, ids, "blocked" if blocked else "to run",
                                     blocked, stored, todo))


def _search(spec: Spec, identity_of: Callable[[Point], dict[str, Any]], stored: Stored,
            blockers: Callable[[dict[str, Any]], list[str]] | None
            ) -> search_plan.SearchState:
    """The searched grid's search, re-run over the stored runs; until it ends, the other
    grids wait for its answer (their sizes are kept)."""
    searched = spec.searched
    others = [name for name in spec.grids if name != searched.grid]
    candidates = []
    for point in expand(spec, skip=others):
        ids = run_ids(identity_of(point), spec.repetitions)
        blocked = bool(point.excluded_by) or bool(blockers and blockers(point.params))
        candidates.append(search_plan.Candidate(
            canonical_json(point.params), point.params, stored.samples(ids), stored.failed(ids),
            not blocked, bool(point.excluded_by)))
    record = search_record.proposals(searched, stored.search_log, " + ".join(spec.sources))
    state = search_plan.run(searched, spec.rule, spec.grids[searched.grid]["vary"], candidates,
                            record)
    if not state.done:
        state.after = {name: math.prod(len(v) for v in spec.grids[name]["vary"].values())
                       for name in others}
    return state
