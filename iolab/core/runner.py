"""Plan a campaign against the store and this host, and execute it: knobs, collectors, the
driver, and an atomic commit per run.

Before anything changes, every program the selected runs need (the tool, GNU time, stress-ng,
...) is checked, and a missing one is named with how to install it. Then, for each selected
run: set the point's knobs through a journaled session (the state before, the value asked
for and what the kernel reports after), write the run's input files, start the collectors,
execute the driver with an argv list inside the run folder, stop the collectors, parse the
raw output with the tool's adapter, and commit the run with its manifest. A failing run is
kept under ``failed/``; without ``keep_going`` the campaign then stops. Ctrl-C or SIGTERM
stops the driver, discards the unfinished run and restores every knob; a journal left by a
process that was killed outright is restored before the next campaign starts. A stop request
(``iolab.core.stop``, or SIGUSR1, Slurm's warning before a job's time limit) stops the campaign
after its current run instead, with every knob restored.

Inside a Slurm job, every run records the allocation (``iolab.host.slurm``), and a campaign
that would change a system setting on a node the job does not have to itself is refused
unless ``allow_shared_node``: another job's measurements would see the setting.

Responsible for: the host-aware plan, orchestration, and filling in the run manifest.
Not responsible for: what a point executes (the experiment and its tool adapter), parsing
(adapters and parsers), the store layout (``iolab.core.store``) or the manifest's format
(``iolab.core.manifest``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from iolab import __version__
from iolab.core.identity import config_id
from iolab.core.manifest import RunManifest
from iolab.core import datadir, disturbance, locks, procs, stop
from iolab.core.signals import Interrupted, Signals, kill_group
from iolab.core.planner import (ASIS, MAX_RUNS, Plan, PlannedRun, check_size, expand,
                                 knob_needs, make_plan, matches)
from iolab.core.spec import Spec
from iolab.core.rows import WINDOW_FILE
from iolab.core.rounds import Schedule, new_seed
from iolab.core.store import StoredRun, corrupt_message, open_store
from iolab.errors import IolabError, ParseError, ToolError
from iolab.host import scratch, slurm
from iolab.host.inventory import collect_inventory, fingerprint, fingerprint_diff, topology
from iolab.host.journal import KnobSession, restore_from_journal
from iolab.host.knobset import make_knobs
from iolab.host.scratch import ScratchFile
from iolab.paths import shown
from iolab.tools import registry
from iolab.tools.base import Program, cpu_mask

CPUS_FILE = "cpus.json"             # the resolved CPU set of a pinned run
TIMEOUT_MARGIN_S = 180.0            # beyond runtime and ramp, before a driver is killed


class RunnableExperiment(Protocol):
    """What the runner needs of an experiment (see ``iolab.experiments.base.Experiment``)."""

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


@dataclass
class CampaignResult:
    completed: int = 0
    failed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    interrupted: bool = False
    signal: int | None = None  # the stop-now signal that interrupted it
    stopped: str = ""  # why the campaign stopped on request before its last run


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def default_journal(data_dir: Path) -> Path:
    return Path(data_dir) / ".knob-journal.json"


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
        topo = recorded_host.get("topology") or []
        refused = recorded_host.get("knobs_not_controllable") or {}
        available = {name: (name not in refused, refused.get(name, ""))
                     for name in set(experiment.knob_variables.values())}
    else:
        knobs = make_knobs() if knobs is None else knobs
        topo = topology() if topo is None else topo
        available = {name: (knobs[name].available() if name in knobs
                            else (False, "no such knob on this host"))
                     for name in set(experiment.knob_variables.values())}

    who = "this host cannot" if recorded_host is None else "the campaign's host could not"

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

    values: dict[str, float | None] = {}
    failures: dict[str, int] = {}
    if spec.ranking_metric:  # what a rule decides, and a confirmation step chooses, from
        values = {r.run_id: metric_value(experiment, r, spec.ranking_metric) for r in stored}
    if not spec.rule.fixed:
        for folder in store.failed_runs():
            rid = folder.name.split("@", 1)[0]
            failures[rid] = failures.get(rid, 0) + 1
    plan = make_plan(spec, identity=lambda p: experiment.identity(spec.environment, settings, p),
                     seconds_per_run=experiment.seconds_per_run(settings, spec.base),
                     stored_ids={r.run_id for r in stored}, blockers=blockers, where=where,
                     limit=limit, max_runs=max_runs, values=values, failures=failures)
    # once runs of this very design are stored, their measured durations are the estimate
    planned = {r.run_id for r in plan.by_status("stored")}
    durations = [r.manifest.duration_s for r in stored
                 if r.run_id in planned and r.manifest.duration_s]
    if durations:
        plan.seconds_per_run = sum(durations) / len(durations)
    # the programs of every run this host can make, stored ones included: the benchmark tools
    # among them are part of the host's fingerprint, which must not depend on what is left
    runnable = [r for r in plan.runs if r.status in ("stored", "to run")]
    plan.programs = program_status(experiment, settings, runnable, topo,
                                   plan.left_out_points, plan.may_run(),
                                   recorded=None if recorded_host is None
                                   else recorded_host.get("tools") or {})
    # what the runs that may come will create, rewrite or reuse
    may_run = list({id(r.point): r.point.params for r in plan.may_run()}.values())
    plan.scratch_files = (experiment.scratch_files(settings, may_run)
                          if may_run and recorded_host is None else [])
    plan.scratch = scratch.describe(plan.scratch_files, scratch.Registry(), data_dir)
    plan.scratch_refusals = unwritable
    plan.corrupt = corrupt
    return plan


def metric_value(experiment: RunnableExperiment, run: StoredRun, metric: str,
                 parsed: dict[str, Any] | None = None) -> float | None:
    """A stored run's value of a tidy column (None where its raw files give none). Most
    metrics come from the tool's own output (``parsed``, when the caller has parsed it
    already), so that is read first; the whole row, with every collector's files, only for a
    metric it does not give."""
    try:
        m = run.manifest
        if parsed is None:
            parsed = registry.adapter(m.tool).parse(run.path)
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


def program_status(experiment: RunnableExperiment, settings: dict, runs: list[PlannedRun],
                   topo: list[dict], left_out: list[Any] = (), now: list[PlannedRun] = (),
                   recorded: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """Each program the runs (and the points a filter ``left_out``) need, once (by name and
    executable), found or with how to install it; ``needed_now`` marks those the runs ``run``
    may make now (``now``) need. Collectors' programs are asked of those runs only: they can
    run here, so their CPU sets resolve.

    With ``recorded`` (the ``tools`` of a campaign's ``host.json``), each program is described
    as that host recorded it, and nothing is looked up here: a replayed chapter must not say
    that a tool the campaign ran is missing on the machine that builds the book."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    points = {id(r.point): r.point for r in runs}
    points.update({id(p): p for p in left_out})
    selected = {id(r.point) for r in now}
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
            "version": (record or {}).get("version"), "build": program.build,
            "version_argv": [program.executable, *program.version_args], "install": None,
            "found": record is not None and not record.get("error"),
            "recorded": "recorded" if record is not None else "not recorded"}


def wait_watched(proc: subprocess.Popen, timeout: float, watch: disturbance.Watch) -> int:
    """Wait for the driver's exit (at most ``timeout`` s), looking at it every
    ``disturbance.WATCH_S`` in between."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return wait_exit(proc, max(0.0, min(disturbance.WATCH_S, left)))
        except subprocess.TimeoutExpired:
            if left <= disturbance.WATCH_S:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None
            watch.look(proc.pid)


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """``proc.wait(timeout)`` without its polling: Popen.wait with a timeout sleeps in steps
    of up to 50 ms, which a short run pays on top of what it measures. A pidfd (Linux 5.3)
    wakes this the moment the process exits; where there is none, Popen.wait is used."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        # poll is restarted after a signal handler returns (PEP 475), with the time left
        if not poller.poll(min(timeout * 1000, 2**31 - 1)):  # poll takes a C int of ms
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


class _Campaign:
    """State shared by the runs of one campaign."""

    def __init__(self, experiment: RunnableExperiment, spec: Spec, data_dir: Path, knobs: dict,
                 topo: list[dict], started_at: float, signals: Signals):
        self.exp = experiment
        self.spec = spec
        self.settings = spec.settings
        self.store = open_store(experiment, spec.environment, data_dir)
        self.knobs = knobs
        self.topo = topo
        self.config_id = config_id(experiment.name, spec.environment,
                                   experiment.config_settings(spec.settings))
        self.fingerprint = ""
        # the Slurm job the campaign runs in (None outside one), recorded with every run
        self.allocation = slurm.allocation()
        self.versions: dict[str, str | None] = {}
        self.originals: dict[str, Any] = {}
        self.proc: subprocess.Popen | None = None
        self.tmp: Path | None = None
        self.signals = signals
        self.discarded = False  # a run in progress was discarded on the way out
        self.measured_s = 0.0  # the mean duration of the design's stored runs, if any
        self.started_at = started_at  # a stop request made from then on is this campaign's

    def stop_requested(self) -> tuple[str, str]:
        """(why the campaign must stop before its next run, or ""; a message to pass on)."""
        if self.signals.after_run:
            return self.signals.after_run_reason(), ""
        doc, message = stop.pending(self.store.data_dir, self.started_at)
        if doc is None:
            return "", message
        stop.clear(self.store.data_dir)
        who = f" by Slurm job {doc['job']}" if doc.get("job") else ""
        return f"{doc.get('reason') or 'a stop request'}{who}", message

    def set_knobs(self, session: KnobSession, params: dict) -> tuple[dict, str]:
        record: dict[str, Any] = {}
        problem = ""
        for var, knob in self.exp.knob_variables.items():
            value = params.get(var, ASIS)
            if value == ASIS:
                # "asis" means the host's state at campaign start, even after other points changed it
                if knob in self.originals and not self.knobs[knob].same_state(self.originals[knob],
                                                                               self.knobs[knob].read()):
                    self.knobs[knob].restore(self.originals[knob])
                record[knob] = {"requested": ASIS,
                                "after": self.knobs[knob].read() if knob in self.originals else None}
                continue
            rec = session.set(knob, self.exp.knob_value(var, value))
            record[knob] = rec
            if not rec.get("matches", False):
                problem = f"knob {knob}: requested {value!r}, the kernel reports {rec.get('after')!r}"
        return record, problem

    def run_one(self, session: KnobSession, planned: PlannedRun) -> tuple[bool, str, dict]:
        """Run one repetition; returns (ok, failure reason, the tool's metrics); the metrics
        of a stored run under a repetition rule carry the rule's metric as ``rule_value``."""
        params = planned.point.params
        knob_record, reason = self.set_knobs(session, params)
        self.tmp = tmp = self.store.begin(planned.run_id)
        launch, collectors, adapter = self.exp.launch(self.settings, params, self.topo)
        for name, text in launch.inputs.items():
            (tmp / name).write_text(text)
        if launch.cpus is not None:
            (tmp / CPUS_FILE).write_text(json.dumps({"cpus": launch.cpus,
                                                     "mask": cpu_mask(launch.cpus)}) + "\n")
        driver_rel, driver_version = adapter.driver_record()
        driver = str(adapter.driver_path) if adapter.driver is not None else None
        manifest = RunManifest(
            run_id=planned.run_id, identity=planned.identity, experiment=self.exp.name,
            environment=self.spec.environment, rep=planned.rep, point=params,
            grids=planned.point.grids, settings=self.settings, config_id=self.config_id,
            tool=adapter.name, tool_version=self.versions.get(adapter.name),
            driver=driver_rel, driver_version=driver_version,
            # the driver is recorded repository-relative; it may follow a wrapper (GNU time)
            argv=[driver_rel if a == driver else a for a in launch.argv], cpus=launch.cpus,
            knobs=knob_record, collectors=[c.name for c in collectors],
            host_fingerprint=self.fingerprint, iolab_version=__version__,
            spec_sources=self.spec.sources, overrides=self.spec.overrides,
            extra={"slurm": self.allocation} if self.allocation else {})
        started = now_iso()
        t0 = time.monotonic()
        if not reason:
            expected = (max(self.exp.seconds_per_run(self.settings, params), self.measured_s)
                        if self.exp.timed else None)
            manifest.exit_code, reason = self._execute(launch.argv, collectors, tmp, expected)
        if not reason:  # a knob changed by hand (or a daemon) while the run measured
            changed = disturbance.changed_knobs(self.knobs, knob_record)
            reason = disturbance.reason(changed) if changed else ""
        manifest.started_at, manifest.ended_at = started, now_iso()
        manifest.duration_s = round(time.monotonic() - t0, 3)
        if not reason and manifest.exit_code != 0:
            reason = f"{adapter.name} exited with status {manifest.exit_code}: {_tail(tmp / 'stderr')}"
        metrics: dict = {}
        if not reason:
            try:
                metrics = adapter.parse(tmp)
                reason = metrics.get("problem") or ""
            except ParseError as exc:
                reason = f"output could not be parsed: {exc}"
        if reason:
            manifest.failure = reason
            dest = self.store.commit_failed(tmp, manifest)
            self.tmp = None
            return False, f"{reason}; kept in {dest}", metrics
        final = self.store.commit(tmp, manifest)
        self.tmp = None
        if not self.spec.rule.fixed:
            metrics["rule_value"] = metric_value(self.exp, StoredRun(final, manifest),
                                                 self.spec.rule.metric, parsed=metrics)
        return True, "", metrics

    def _execute(self, argv: list[str], collectors: list, tmp: Path,
                 expected_s: float | None) -> tuple[int, str]:
        """Run the driver with its collectors around it, watched for disturbances
        (``iolab.core.disturbance``); (exit code, why the run failed or "")."""
        self.signals.check()
        for c in collectors:
            c.start(tmp)
        reason = ""
        timeout = self.exp.run_seconds(self.settings) + TIMEOUT_MARGIN_S
        start_ns = time.time_ns()
        try:
            with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
                # IOLAB_RUN names the run in every process of its tree, setsid'd fio workers
                # included, so that a timeout or an abort finds them all
                self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                             cwd=tmp, start_new_session=True,
                                             env={**os.environ, procs.RUN_VAR: str(tmp)})
                watch = disturbance.Watch(expected_s)
                self.signals.driver_started(self.proc.pid)
                for c in collectors:
                    c.attach(self.proc.pid)
                try:
                    exit_code = wait_watched(self.proc, timeout, watch)
                except subprocess.TimeoutExpired:
                    self.end_driver(tmp)
                    exit_code = self.proc.wait()
                    reason = f"timed out after {timeout:.0f} s"
                except BaseException:
                    self.end_driver(tmp)  # before the collectors stop: nothing may run on
                    raise
                finally:
                    self.signals.group = None
                if self.signals.now is not None:  # the handler killed the driver's group
                    self.end_driver(tmp)
                    self.signals.check()
                disturbed = watch.finish()
                if disturbed and not reason:
                    reason = disturbance.reason(disturbed)
            self.proc = None
        finally:
            end_ns = time.time_ns()
            for c in collectors:
                c.stop(tmp)
        (tmp / WINDOW_FILE).write_text(json.dumps({"start_ns": start_ns, "end_ns": end_ns}) + "\n")
        return exit_code, reason

    def end_driver(self, tmp: Path) -> None:
        """Kill the driver's whole tree (its process group and every process naming its run)
        and wait for it."""
        if self.proc is None:
            return
        kill_group(self.proc.pid)
        self.proc.wait()
        left = procs.end(procs.find(run=str(tmp)))
        if left:
            raise IolabError(f"processes of run {tmp.name} could not be ended: "
                             + ", ".join(p.describe() for p in left))

    def abort(self, owner: procs.Owned) -> None:
        """End every process this campaign started and discard the unfinished run."""
        if self.proc is not None and self.tmp is not None:
            self.end_driver(self.tmp)
        procs.end(owner.children())
        if self.tmp is not None:
            self.store.discard(self.tmp)
            self.tmp = None
            self.discarded = True


def _missing_programs(plan: Plan) -> None:
    missing = [p for p in plan.missing_programs() if p["needed_now"]]
    if missing:
        def what(p: dict) -> str:
            if p.get("missing_needs"):
                return (f"{p['name']} cannot run here without {', '.join(p['missing_needs'])} "
                        f"(needed as {p['role']})")
            exe = p["version_argv"][0]
            return f"{p['name']} not found {'at ' + exe if '/' in exe else 'on PATH'} " \
                   f"(needed as {p['role']})"

        raise ToolError("; ".join(f"{what(p)}: {p['install']}" for p in missing)
                        + ". Nothing was run and no system setting was touched.")


def run_campaign(experiment: RunnableExperiment, spec: Spec, data_dir: Path, *,
                 where: dict[str, list[Any]] | None = None, limit: int | None = None,
                 keep_going: bool = False, progress: bool = True, allow_host_change: bool = False,
                 knobs: dict | None = None, journal_path: Path | None = None,
                 max_runs: int = MAX_RUNS, allow_shared_node: bool = False,
                 show_plan: Callable[[Plan], None] | None = None) -> CampaignResult:
    """Run every selected run of the plan (all runs still to do, or ``limit`` of them).

    Holds the data directory's lock and the host lock throughout; before anything else it
    ends what a killed campaign on the same data left running and restores its knobs.
    ``show_plan`` is given the plan, made once under the locks, before anything runs.
    """
    data_dir = datadir.check(Path(data_dir))
    check_size(spec, max_runs)
    result = CampaignResult()
    try:
        # the handlers first: a signal at any moment of the campaign is answered alike
        with Signals() as signals, locks.data_lock(data_dir) as dlock, \
                locks.host_lock(data_dir) as hlock, procs.Owned(data_dir) as owner:
            result.messages += dlock.messages + hlock.messages
            _run_locked(experiment, spec, data_dir, result, owner, signals, where=where,
                        limit=limit, keep_going=keep_going, progress=progress,
                        allow_host_change=allow_host_change, knobs=knobs,
                        journal_path=journal_path, max_runs=max_runs, show_plan=show_plan,
                        allow_shared_node=allow_shared_node)
    except Interrupted as exc:  # before the runs began: nothing was set up yet
        _interrupted(result, exc)
    except OSError as exc:
        # e.g. a full disk: the unfinished run was discarded and the knobs restored on the
        # way out; what is stored is complete
        raise datadir.from_os_error(exc, "while running the campaign") from exc
    return result


def _interrupted(result: CampaignResult, exc: Interrupted, discarded: bool = False) -> None:
    result.interrupted, result.signal = True, exc.signum
    what = ("the run in progress was discarded and its processes ended" if discarded else
            "no run was in progress")
    result.messages.append(f"interrupted by {exc.name}: {what}; every knob is as it was "
                           "before; run the same command again to resume")


def _shared_node_problem(experiment: RunnableExperiment, spec: Spec, todo: list[PlannedRun],
                         allocation: dict[str, Any] | None) -> str | None:
    """Why these runs may not change system settings in this Slurm allocation, or None."""
    if allocation is None or allocation.get("exclusive") is True:
        return None
    changes = sorted({knob for r in todo
                      for knob in knob_needs(r.point.params, experiment.knob_variables)}
                     | set(experiment.campaign_knobs(spec.settings)))
    if not changes:
        return None
    how = ("is shared with other jobs" if allocation.get("exclusive") is False
           else "may be shared with other jobs (scontrol could not tell)")
    return (f"Slurm job {allocation['job_id']} on node {allocation.get('node')} {how}, and "
            f"this campaign changes system settings ({', '.join(changes)}) that other jobs "
            "would measure under: submit it with --exclusive ('iolab submit --mode run' does), "
            "or pass --allow-shared-node (in a notebook, run_options allow_shared_node) if "
            "you own the node. Nothing was run and no system setting was touched.")


def _stopped(result: CampaignResult, why: str, done: int, total: str) -> None:
    result.stopped = why
    result.messages.append(f"stopped on request ({why}) after {done} of {total} runs, with "
                           "every knob restored; run the same command again (a Slurm job: "
                           "'iolab submit --resume') to go on")


def _run_locked(experiment: RunnableExperiment, spec: Spec, data_dir: Path,
                result: CampaignResult, owner: procs.Owned, signals: Signals, *, where, limit,
                keep_going, progress, allow_host_change, knobs, journal_path, max_runs,
                show_plan, allow_shared_node) -> None:
    if "IPython" in sys.modules:  # in a notebook's kernel: its widget bar
        from tqdm.auto import tqdm
    else:  # tqdm.auto would import IPython only to find out, a third of a second
        from tqdm import tqdm

    started_at = time.time()
    # a killed campaign's fio would still be measuring beside this one's
    result.messages += procs.end_leftovers(data_dir)
    knobs = make_knobs() if knobs is None else knobs
    topo = topology()
    plan = plan_for(experiment, spec, data_dir, where=where, limit=limit, knobs=knobs, topo=topo,
                    max_runs=max_runs)
    if show_plan is not None:
        show_plan(plan)
    signals.check()
    if plan.corrupt:
        raise IolabError(corrupt_message(plan.corrupt, "this campaign") + ". Nothing was run.")
    if plan.scratch_refusals:
        raise IolabError("; ".join(plan.scratch_refusals) + ". Nothing was run.")
    _missing_programs(plan)
    camp = _Campaign(experiment, spec, data_dir, knobs, topo, started_at, signals)
    camp.measured_s = plan.seconds_per_run
    shared = None if allow_shared_node else _shared_node_problem(experiment, spec,
                                                                  plan.may_run(),
                                                                  camp.allocation)
    if shared:
        raise IolabError(shared)
    datadir.check(data_dir, write=True)  # only now: a refused campaign leaves no folder behind

    journal = journal_path or default_journal(data_dir)
    if journal.exists():
        # A campaign killed with SIGKILL could not restore its knobs; do it before resuming,
        # and before the inventory, whose fingerprint depends on knob-driven state like SMT.
        result.messages += restore_from_journal(journal, knobs)
    signals.check()

    # Only the benchmark tools enter the host's fingerprint; collectors' versions do not
    # change what a run measures.
    benchmarks = [p for p in plan.programs if p["role"] == "benchmark"]
    inventory = collect_inventory({p["name"]: p["version_argv"] for p in benchmarks},
                                  knobs=knobs)
    for program in benchmarks:
        # a version printed inside a longer text (xnvmeperf's usage, which names its own
        # path) is recorded as the part the program's pattern names, so the fingerprint
        # holds the version and not where the checkout lies; a program 'make tools' built
        # carries its build key, so a rebuild with other patches or libraries is another tool
        entry = (inventory.get("tools") or {}).get(program["name"]) or {}
        if program["version"] and ("\n" in (entry.get("version") or "")
                                   or program.get("build")):
            entry["version"] = program["version"]
    camp.fingerprint = fingerprint(inventory)
    stored_host = camp.store.read_host()
    diff = fingerprint_diff(stored_host, inventory) if stored_host else []
    camp.store.check_or_record_host(inventory, camp.fingerprint, diff, allow_change=allow_host_change)
    camp.versions = {name: (tool or {}).get("version")
                     for name, tool in (inventory.get("tools") or {}).items()}

    result.messages += camp.store.quarantine()
    todo = plan.selected()
    seed = spec.seed if spec.seed is not None else new_seed()
    def schedule_of(plan: Plan) -> Schedule:
        return Schedule(plan, seed, on_round=lambda n, ids: camp.store.log(
            {"event": "round", "at": now_iso(), "round": n, "seed": seed, "runs": ids}))

    logged = [0]  # the search's decisions already in the campaign log

    def log_search(plan: Plan) -> None:
        """The search's decisions since the last entry, its seed and version, what it waits
        for or its answer."""
        state = plan.search
        if state is None:
            return
        camp.store.log({"event": "search", "at": now_iso(), **state.to_dict(),
                        "decisions": state.outcome.log[logged[0]:]})
        logged[0] = len(state.outcome.log)

    def replan(made: int) -> Plan:
        """The plan again from the store: the search's next run, or once it has ended the
        grids around its answer, or once they have settled the confirmation points."""
        again = plan_for(experiment, spec, data_dir, where=where, knobs=knobs, topo=topo,
                         limit=None if limit is None else max(0, limit - made),
                         max_runs=max_runs)
        log_search(again)
        if spec.confirm is not None and not (again.search and again.search.waiting):
            choice = again.confirm_dict()
            camp.store.log({"event": "confirm", "at": now_iso(), "waiting": choice["waiting"],
                            "points": choice["points"]})
        if again.selected():
            experiment.prepare_points(spec.settings, schedule_of(again).points())
        return again

    schedule = _Steps(schedule_of(plan), schedule_of, replan)
    most = plan.most_runs()
    of = str(most) if spec.rule.fixed else f"at most {most}"  # a rule may settle points sooner
    camp.store.log({"event": "start", "at": now_iso(), "pid": os.getpid(), "owner": owner.owner,
                    "params": spec.sources, "overrides": spec.overrides, "where": where or {},
                    "limit": limit, "selected": len(todo), "most": most,
                    "repetitions": spec.rule.to_dict(), "order": spec.order, "seed": seed,
                    "iolab_version": __version__})
    log_search(plan)
    why, message = camp.stop_requested()
    result.messages += [message] if message else []
    if why and todo:  # asked before the first run: set nothing up only to undo it
        _stopped(result, why, 0, of)
        todo = []
    # under a rule, the bar's total is the most runs it may ask for; it ends when the rule does
    bar = tqdm(total=most if todo else 0, desc=f"{spec.experiment}/{spec.environment}",
               unit="run", disable=not progress)
    try:
        if todo:
            signals.check()
            experiment.prepare_host(spec.settings)
            result.messages += _lay_out(plan.scratch_files, spec, signals)
            experiment.prepare_points(spec.settings, schedule.points())
        with KnobSession(knobs, journal) as session:
            camp.originals = {k: knobs[k].read() for k in set(experiment.knob_variables.values())
                              if k in knobs and knobs[k].available()[0]}
            for name, value in (experiment.campaign_knobs(spec.settings).items() if todo
                                else ()):
                # e.g. binding the devices to a user-space driver: once, restored at the end
                signals.check()
                rec = session.set(name, value)
                if not rec.get("matches", False):
                    raise IolabError(f"knob {name}: requested {value!r}, the kernel reports {rec.get('after')!r}")
                result.messages.append(f"{name}: set to {value!r} for this campaign")
            for done, planned in enumerate(schedule if todo else ()):
                signals.check()
                why, message = camp.stop_requested()
                if message:
                    result.messages.append(message)
                if why:
                    _stopped(result, why, done, of)
                    break
                try:
                    ok, reason, metrics = camp.run_one(session, planned)
                except BaseException:
                    camp.abort(owner)
                    raise
                schedule.record(planned, ok, metrics.get("rule_value"))
                note = metrics.get("note")
                if note and note not in result.messages:
                    result.messages.append(note)  # said once per campaign, not per run
                if ok:
                    result.completed += 1
                    if metrics.get("iops") is not None:
                        bar.set_postfix_str(f"last {metrics['iops']:,.0f} IOPS")
                else:
                    result.failed.append(planned.run_id)
                    message = f"run {planned.run_id} ({planned.point.label()}) failed: {reason}"
                    result.messages.append(message)
                    if not keep_going:
                        raise IolabError(message + ". Use --keep-going to record failures and continue.")
                    bar.write(message)
                bar.update(1)
            else:
                if bar.n < bar.total:  # the rule settled every point before its most runs
                    bar.total = bar.n
                    bar.refresh()
    except Interrupted as exc:
        _interrupted(result, exc, camp.discarded)
    finally:
        bar.close()
        try:
            camp.store.log({"event": "end", "at": now_iso(), "pid": os.getpid(),
                            "completed": result.completed, "failed": len(result.failed),
                            "interrupted": result.interrupted, "stopped": result.stopped,
                            **({"signal": signal.Signals(result.signal).name}
                               if result.signal else {})})
        except OSError:
            pass  # a full disk must not hide why the campaign stopped


class _Steps:
    """The campaign's schedule, then, while part of the design waits for runs still to come
    (a searched grid's next run, ``iolab.core.search``; a confirmation step waiting for the
    search, ``iolab.core.confirm``), the schedules of plans made again from the store, until
    one has nothing to run. Each schedule makes at least one run, and a design has at most so
    many, so this ends. Iterate, and :meth:`record` each outcome, as with a
    :class:`~iolab.core.rounds.Schedule`."""

    def __init__(self, schedule: Schedule, schedule_of: Callable[[Plan], Schedule],
                 replan: Callable[[int], Plan]):
        self.current, self.schedule_of, self.replan = schedule, schedule_of, replan
        self.made = 0

    def points(self) -> list[dict[str, Any]]:
        return self.current.points()

    def record(self, run: PlannedRun, ok: bool, value: float | None = None) -> None:
        self.current.record(run, ok, value)

    def __iter__(self) -> Iterator[PlannedRun]:
        for run in self.current:
            self.made += 1
            yield run
        while self.current.plan.waiting and not (self.current.limit is not None
                                                 and self.made >= self.current.limit):
            self.current = self.schedule_of(self.replan(self.made))
            plan = self.current.plan
            if plan.confirm_waiting and not plan.search:
                return  # the step still waits, for points this host cannot run
            before = self.made
            for run in self.current:
                self.made += 1
                yield run
            if self.made == before:
                return


def _lay_out(files: list[ScratchFile], spec: Spec, signals: Signals) -> list[str]:
    """Write the scratch files the runs read (``iolab.host.scratch``); one line each. A stop
    signal ends the writing at the next MiB."""
    registry = scratch.Registry()
    lines = []
    for f in files:
        try:
            wrote = scratch.lay_out(f, registry, by=f"{spec.experiment}/{spec.environment}",
                                    check=signals.check)
        except OSError as exc:  # its folder is not one that takes files, a full disk, ...
            raise IolabError(f"{shown(spec.params_file)}: key '{f.key}': {f.path} could not "
                             f"be written ({exc.strerror or exc}); nothing was run") from exc
        lines.append(f"scratch: {f.path} ({f.size:,} bytes): "
                     + ("written with data" if wrote else "reused"))
    return lines
