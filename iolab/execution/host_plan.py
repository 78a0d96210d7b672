"""The plan of a campaign against the store and this host: which runs are stored, which
programs and scratch files the runs need and whether they are there, which points this host
cannot run and why; and the design's plan, made with no host at all. Also what the runner
needs of an experiment (:class:`RunnableExperiment`) and a stored run's value of a metric
(:func:`metric_value`), which the plan and the repetition rule read.

Responsible for: turning a spec into the plan this host would execute (``iolab plan``, the
chapters' lab plans, the runner's first step). Not responsible for: expanding the spec into
runs (``iolab.core.planner``) or making them (``iolab.execution.runner``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Protocol

from iolab.core import tool_registry
from iolab.core.manifest import RunManifest
from iolab.core.planner import (MAX_RUNS, Plan, Point, Stored, check_size, expand, knob_needs,
                                 make_plan, matches)
from iolab.core.spec import Spec
from iolab.core.store import Store, StoredRun, open_store
from iolab.errors import ParseError
from iolab.host import scratch
from iolab.host.inventory import topology
from iolab.host.knobset import make_knobs
from iolab.host.scratch import ScratchFile
from iolab.paths import shown
from iolab.tools.base import Program


class RunnableExperiment(Protocol):
    """What the runner needs of an experiment (see ``iolab.core.experiment.Experiment``)."""

    name: str
    knob_variables: dict[str, str]
    timed: bool

    def identity(self, environment: str, settings: dict, point: dict) -> dict: ...
    def launch(self, settings: dict, point: dict, topology: list[dict]) -> tuple: ...
    def programs(self, settings: dict, point: dict,
                 topology: list[dict] | None) -> list[Program]: ...
    def invocation(self, settings: dict, point: dict) -> Any: ...
    def adapter(self, invocation: Any) -> Any: ...
    def seconds_per_run(self, settings: dict, point: dict) -> float: ...
    def run_seconds(self, settings: dict) -> float: ...
    def host_block(self, settings: dict, point: dict, topology: list[dict]) -> str | None: ...
    def campaign_knobs(self, settings: dict) -> dict: ...
    def knob_value(self, variable: str, value: Any) -> Any: ...
    def scratch_files(self, settings: dict, points: list[dict]) -> list[ScratchFile]: ...
    def prepare_host(self, settings: dict) -> None: ...
    def prepare_points(self, settings: dict, points: list[dict]) -> None: ...
    def config_settings(self, settings: dict) -> dict: ...
    def upgrade_v1(self, doc: dict, path: Path, host: dict | None) -> RunManifest: ...
    def tidy_row(self, run: StoredRun) -> dict: ...
    def derive(self, row: dict) -> dict: ...
    def sample_problem(self, row: dict) -> str: ...


def design_plan(experiment: RunnableExperiment, spec: Spec, max_runs: int = MAX_RUNS) -> Plan:
    """The whole design's cost, as if nothing were stored and the host could run everything."""
    settings = spec.settings
    return make_plan(spec, identity=lambda p: experiment.identity(spec.environment, settings, p),
                     seconds_per_run=experiment.seconds_per_run(settings, spec.base),
                     max_runs=max_runs)


def plan_for(experiment: RunnableExperiment, spec: Spec, data_dir: Path, *,
             where: dict[str, list[Any]] | None = None, limit: int | None = None,
             knobs: dict | None = None, topo: list[dict] | None = None,
             recorded_host: dict | None = None, max_runs: int = MAX_RUNS) -> Plan:
    """The plan against the store, with this host's knobs and topology, and the programs
    the selected runs need.

    ``recorded_host`` (a campaign's ``host.json``) plans against the host that made the runs
    instead: its topology and the knobs it could not control. A book replayed anywhere then
    says the same about the campaign.
    """
    settings = spec.settings
    check_size(spec, max_runs)  # before reading the store: a design too large is refused at once
    store = open_store(experiment, spec.environment, data_dir)
    stored, corrupt = store.scan()
    # a replayed chapter says nothing about this machine's files
    files = [] if recorded_host is not None else scratch_files(experiment, spec, where)
    unwritable = scratch_problems(spec, files, data_dir)
    if recorded_host is not None:
        topo, available = _recorded_host(experiment, recorded_host)
    else:
        topo, available = _this_host(experiment, knobs, topo)
    who = "this host cannot" if recorded_host is None else "the campaign's host could not"
    blockers = _blockers(experiment, settings, topo, available, who, unwritable)
    held = _store_state(experiment, spec, store, stored)
    plan = make_plan(spec, identity=lambda p: experiment.identity(spec.environment, settings, p),
                     seconds_per_run=experiment.seconds_per_run(settings, spec.base),
                     stored=held, blockers=blockers, where=where, limit=limit,
                     max_runs=max_runs)
    _measured_seconds(plan, stored)
    _host_needs(plan, experiment, settings, topo, recorded_host, data_dir)
    plan.scratch_refusals = unwritable
    plan.corrupt = corrupt
    return plan


def _recorded_host(experiment: RunnableExperiment, recorded_host: dict
                   ) -> tuple[list[dict], dict[str, tuple[bool, str]]]:
    """(topology, {knob: (available, why not)}) of the host that made the runs."""
    topo = recorded_host.get("topology") or []
    refused = recorded_host.get("knobs_not_controllable") or {}
    available = {name: (name not in refused, refused.get(name, ""))
                 for name in set(experiment.knob_variables.values())}
    return topo, available


def _this_host(experiment: RunnableExperiment, knobs: dict | None, topo: list[dict] | None
               ) -> tuple[list[dict], dict[str, tuple[bool, str]]]:
    """(topology, {knob: (available, why not)}) of this host (read where not given)."""
    knobs = make_knobs() if knobs is None else knobs
    topo = topology() if topo is None else topo
    available = {name: (knobs[name].available() if name in knobs
                        else (False, "no such knob on this host"))
                 for name in set(experiment.knob_variables.values())}
    return topo, available


def _blockers(experiment: RunnableExperiment, settings: dict, topo: list[dict],
              available: dict[str, tuple[bool, str]], who: str, unwritable: list[str]
              ) -> Callable[[dict[str, Any]], list[str]]:
    """The planner's ``blockers``: every reason the host (``who`` ... control) cannot run a
    point, the scratch files it may not write (``unwritable``) last."""
    def blockers(params: dict[str, Any]) -> list[str]:
        out = []
        for knob, value in knob_needs(params, experiment.knob_variables).items():
            ok, why = available[knob]
            if not ok:
                out.append(f"needs knob {knob}={value}, which {who} control ({why})")
        invocation = experiment.invocation(settings, params)
        if not experiment.adapter(invocation).runnable:
            out.append(f"{invocation.tool} has no driver in scripts/drivers/ yet (this package "
                       "only reads its output from archives so far)")
        host = experiment.host_block(settings, params, topo)
        return out + ([host] if host else []) + unwritable

    return blockers


def _store_state(experiment: RunnableExperiment, spec: Spec, store: Store,
                 stored: list[StoredRun]) -> Stored:
    """What the planner needs of the store: the stored runs' ids, and what a rule decides
    (and a confirmation step chooses) from."""
    values: dict[str, float | None] = {}
    failures: dict[str, int] = {}
    if spec.ranking_metric:
        values = {r.run_id: metric_value(experiment, r, spec.ranking_metric) for r in stored}
    if not spec.rule.fixed:
        for folder in store.failed_runs():
            rid = folder.name.split("@", 1)[0]
            failures[rid] = failures.get(rid, 0) + 1
    return Stored({r.run_id for r in stored}, values, failures,
                  store.log_lines("search") if spec.searched is not None else None)


def _measured_seconds(plan: Plan, stored: list[StoredRun]) -> None:
    """Once runs of this very design are stored, their measured durations are the
    estimate."""
    planned = {r.run_id for r in plan.by_status("stored")}
    durations = [r.manifest.duration_s for r in stored
                 if r.run_id in planned and r.manifest.duration_s]
    if durations:
        plan.seconds_per_run = sum(durations) / len(durations)


def _host_needs(plan: Plan, experiment: RunnableExperiment, settings: dict, topo: list[dict],
                recorded_host: dict | None, data_dir: Path) -> None:
    """The programs and the scratch files the plan's runs need, into the plan."""
    # the programs of every run this host can make, stored ones included: the benchmark tools
    # among them are part of the host's fingerprint, which must not depend on what is left
    now = plan.may_run_points()
    plan.programs = program_status(experiment, settings, plan.points_with("stored", "to run"),
                                   topo, plan.left_out_points, now,
                                   recorded=None if recorded_host is None
                                   else recorded_host.get("tools") or {})
    # what the runs that may come will create, rewrite or reuse
    may_run = [p.params for p in now]
    plan.scratch_files = (experiment.scratch_files(settings, may_run)
                          if may_run and recorded_host is None else [])
    plan.scratch = scratch.describe(plan.scratch_files, scratch.Registry(), data_dir)


def metric_value(experiment: RunnableExperiment, run: StoredRun, metric: str,
                 parsed: dict[str, Any] | None = None) -> float | None:
    """A stored run's value of a tidy column (None where its raw files give none). Most
    metrics come from the tool's own output (``parsed``, when the caller has parsed it
    already), so that is read first; the whole row, with every collector's files, only for a
    metric it does not give."""
    try:
        m = run.manifest
        if parsed is None:
            parsed = tool_registry.adapter(m.tool).parse(run.path)
        tool = {f"{m.tool}.{k}": v for k, v in parsed.items()}
        value = experiment.derive({**m.point, **tool}).get(metric)
        if value is None or math.isnan(value):
            value = experiment.tidy_row(run).get(metric)
    except (ParseError, OSError, ValueError, KeyError, TypeError):
        return None  # the tidy table names the problem; here the run is simply no sample
    return None if value is None or math.isnan(value) else float(value)


def scratch_files(experiment: RunnableExperiment, spec: Spec,
                  where: dict[str, list[Any]] | None = None) -> list[ScratchFile]:
    """The scratch files of the design's points that ``where`` keeps (excluded points
    left out): what the campaign may create or rewrite."""
    points = [p.params for p in expand(spec)
              if p.excluded_by is None and (not where or matches(where, p.params))]
    return experiment.scratch_files(spec.settings, points) if points else []


def scratch_problems(spec: Spec, files: list[ScratchFile], data_dir: Path) -> list[str]:
    """Every scratch file the campaign may not write, naming where its path was set."""
    return [(f"--set {f.key}" if f.key in spec.overrides else
             f"{shown(spec.params_file)}: key '{f.key}'") + f": {why}"
            for f, why in scratch.problems(files, scratch.Registry(), data_dir)]


def program_status(experiment: RunnableExperiment, settings: dict, points: list[Point],
                   topo: list[dict], left_out: list[Any] = (), now: list[Point] = (),
                   recorded: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """Each program the points' runs (and the points a filter ``left_out``) need, once (by
    name and executable), found or with how to install it; ``needed_now`` marks those the
    points of the runs ``run`` may make now (``now``) need. Collectors' programs are asked of
    those points only: they can run here, so their CPU sets resolve.

    With ``recorded`` (the ``tools`` of a campaign's ``host.json``), each program is described
    as that host recorded it, and nothing is looked up here: a replayed chapter must not say
    that a tool the campaign ran is missing on the machine that builds the book."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    points = {id(p): p for p in [*points, *left_out]}
    selected = {id(p) for p in now}
    for key, point in points.items():
        now = key in selected
        for program in experiment.programs(settings, point.params, topo if now else None):
            key = (program.name, program.executable)
            if key not in seen:  # asked once: a status looks the program up and runs it
                status = (program.status() if recorded is None
                          else recorded_status(program, recorded.get(program.name)))
                seen[key] = {**status, "needed_now": False}
            seen[key]["needed_now"] |= now
    return list(seen.values())


def recorded_status(program: Any, record: dict | None) -> dict[str, Any]:
    """A program's status as a host record gives it (``record``: its ``tools`` entry, None
    where the host recorded none, as for most collectors); the path is left out, being a path
    of that machine."""
    return {"name": program.name, "role": program.role, "path": None, "missing_needs": [],
            "version": (record or {}).get("version"),
            "reports_version": program.reports_version, "build": program.build,
            "version_argv": [program.executable, *program.version_args], "install": None,
            "found": record is not None and not record.get("error"),
            "recorded": "recorded" if record is not None else "not recorded"}
