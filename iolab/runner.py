"""Execute a plan: knobs, collectors, the driver, and an atomic commit per run.

For each run still to do: set the point's knobs through a journaled session (recording the
state before, the value requested and what the kernel reports after), write the run's input
files, start the collectors, execute the driver with an argv list inside the run folder, stop
the collectors, parse the raw output, and commit the run atomically. A failing run is kept
under ``failed/``; without ``keep_going`` the campaign then stops. Ctrl-C or SIGTERM stops the
driver, discards the unfinished run and restores every knob; a journal left by a process that
was killed outright is restored before the next campaign starts.

Responsible for: orchestration and the run manifest. Not responsible for: what a point
means to a tool (experiment modules), parsing (parsers), or the store layout (``store``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, experiments
from .errors import IolabError, ParseError
from .inventory import collect_inventory, fingerprint, fingerprint_diff, topology
from .journal import KnobSession, restore_from_journal
from .knobs import make_knobs
from .paths import REPO_ROOT
from .planner import ASIS, Plan, PlannedRun, make_plan
from .spec import Spec
from .store import Store
from .tools import driver_version

WINDOW_FILE = "driver-window.json"  # wall-clock start/end of the driver, for collector parsers


@dataclass
class CampaignResult:
    completed: int = 0
    failed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    interrupted: bool = False


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def default_journal(data_dir: Path) -> Path:
    return Path(data_dir) / ".knob-journal.json"


def knob_availability(knobs: dict, needed: set[str]) -> dict[str, tuple[bool, str]]:
    return {name: knobs[name].available() if name in knobs else (False, "no such knob on this host")
            for name in needed}


def plan_for(spec: Spec, data_dir: Path, knobs: dict | None = None,
             topo: list[dict] | None = None) -> Plan:
    """The plan for a spec against the store, with this host's knobs and topology."""
    exp = experiments.get(spec.experiment)
    settings = spec.scalar_settings()
    tool = exp.tool(settings)
    store = Store(data_dir, spec.experiment, spec.environment)
    knobs = make_knobs() if knobs is None else knobs
    topo = topology() if topo is None else topo
    stored = store.complete_runs()
    durations = [r.manifest["duration_s"] for r in stored if r.manifest.get("duration_s")]
    host_block = getattr(exp, "host_block", None)
    return make_plan(
        spec, driver_version=driver_version(tool.driver_path),
        stored_ids={r.run_id for r in stored}, knob_variables=exp.KNOB_VARIABLES,
        knob_availability=knob_availability(knobs, set(exp.KNOB_VARIABLES.values())),
        seconds_per_run=sum(durations) / len(durations) if durations else None,
        host_check=(lambda params: host_block(settings, params, topo)) if host_block else None)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that knobs are restored on the way out."""


def _raise_terminated(signum, frame):
    raise _Terminated()


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])


class _Campaign:
    """State shared by the runs of one campaign."""

    def __init__(self, spec: Spec, data_dir: Path, knobs: dict, keep_going: bool):
        self.spec = spec
        self.exp = experiments.get(spec.experiment)
        self.settings = spec.scalar_settings()
        self.tool = self.exp.tool(self.settings)
        self.store = Store(data_dir, spec.experiment, spec.environment)
        self.knobs = knobs
        self.keep_going = keep_going
        self.topo = topology()
        self.driver_version = driver_version(self.tool.driver_path)
        self.driver_rel = str(self.tool.driver_path.relative_to(REPO_ROOT))
        self.fingerprint = ""
        self.tool_version = None
        self.originals: dict[str, Any] = {}
        self.proc: subprocess.Popen | None = None
        self.tmp: Path | None = None

    def set_knobs(self, session: KnobSession, params: dict) -> tuple[dict, str]:
        record: dict[str, Any] = {}
        problem = ""
        to_value = getattr(self.exp, "knob_value", lambda var, value: value)
        for var, knob in self.exp.KNOB_VARIABLES.items():
            value = params.get(var, ASIS)
            if value == ASIS:
                # "asis" means the host's state at campaign start, even after other points changed it
                if knob in self.originals and not self.knobs[knob].same_state(self.originals[knob],
                                                                               self.knobs[knob].read()):
                    self.knobs[knob].restore(self.originals[knob])
                record[knob] = {"requested": ASIS,
                                "after": self.knobs[knob].read() if knob in self.originals else None}
                continue
            rec = session.set(knob, to_value(var, value))
            record[knob] = rec
            if not rec.get("matches", False):
                problem = f"knob {knob}: requested {value!r}, the kernel reports {rec.get('after')!r}"
        return record, problem

    def run_one(self, session: KnobSession, planned: PlannedRun) -> tuple[bool, str, dict]:
        """Run one repetition; returns (ok, failure reason, metrics)."""
        exp, settings, params = self.exp, self.settings, planned.point.params
        knob_record, reason = self.set_knobs(session, params)
        self.tmp = tmp = self.store.begin(planned.run_id)
        prepare = getattr(exp, "prepare", None)
        if prepare:
            prepare(tmp, settings, params, self.topo)
        argv = exp.build_argv(settings, params, self.topo)
        collectors = exp.collectors(settings, params, self.topo)
        manifest: dict[str, Any] = {
            "run_id": planned.run_id, "experiment": self.spec.experiment,
            "environment": self.spec.environment, "rep": planned.rep,
            "params": params, "config": planned.config, "grids": planned.point.grids,
            # the driver is recorded repository-relative; it may follow a wrapper such as GNU time
            "argv": [self.driver_rel if a == str(self.tool.driver_path) else a for a in argv],
            "cwd": "the run folder",
            "driver": self.driver_rel, "driver_version": self.driver_version,
            "tool": self.tool.name, "tool_version": self.tool_version,
            "knobs": knob_record, "host_fingerprint": self.fingerprint, "iolab_version": __version__,
            "collectors": [c.name for c in collectors], "spec_sources": self.spec.sources,
        }
        exit_code = None
        started = now_iso()
        t0 = time.monotonic()
        if not reason:
            exit_code, reason = self._execute(argv, collectors, tmp)
        manifest.update(started_at=started, ended_at=now_iso(),
                        duration_s=round(time.monotonic() - t0, 3), exit_code=exit_code)
        if not reason and exit_code != 0:
            reason = f"{self.tool.name} exited with status {exit_code}: {_tail(tmp / 'stderr')}"
        metrics: dict = {}
        if not reason:
            try:
                metrics = exp.parse_run(tmp)
                reason = metrics.get("run_problem") or ""
            except ParseError as exc:
                reason = f"output could not be parsed: {exc}"
        if reason:
            dest = self.store.commit_failed(tmp, {**manifest, "failure": reason})
            self.tmp = None
            return False, f"{reason}; kept in {dest}", metrics
        self.store.commit(tmp, manifest)
        self.tmp = None
        return True, "", metrics

    def _execute(self, argv: list[str], collectors: list, tmp: Path) -> tuple[int, str]:
        for c in collectors:
            c.start(tmp)
        reason = ""
        timeout = float(self.settings.get("runtime_s", 0)) + float(self.settings.get("ramp_s", 0)) + 180
        start_ns = time.time_ns()
        try:
            with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
                self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                             cwd=tmp, start_new_session=True)
                for c in collectors:
                    if hasattr(c, "attach"):  # samplers of the driver's own processes
                        c.attach(self.proc.pid)
                try:
                    exit_code = self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    exit_code = self.proc.wait()
                    reason = f"timed out after {timeout:.0f} s"
            self.proc = None
        finally:
            end_ns = time.time_ns()
            for c in collectors:
                c.stop(tmp)
        (tmp / WINDOW_FILE).write_text(json.dumps({"start_ns": start_ns, "end_ns": end_ns}) + "\n")
        return exit_code, reason

    def abort(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.tmp is not None:
            self.store.discard(self.tmp)


def run_campaign(spec: Spec, data_dir: Path, *, keep_going: bool = False, progress: bool = True,
                 allow_host_change: bool = False, knobs: dict | None = None,
                 journal_path: Path | None = None, max_runs: int | None = None) -> CampaignResult:
    """Run every point of the plan that is not stored yet."""
    from tqdm.auto import tqdm

    knobs = make_knobs() if knobs is None else knobs
    camp = _Campaign(spec, data_dir, knobs, keep_going)
    camp.tool.require()
    result = CampaignResult()

    journal = journal_path or default_journal(data_dir)
    if journal.exists():
        # A campaign killed with SIGKILL could not restore its knobs; do it before resuming,
        # and before the inventory, whose fingerprint depends on knob-driven state like SMT.
        # restore_from_journal refuses while the process that wrote the journal still runs.
        result.messages += restore_from_journal(journal, knobs)

    inventory = collect_inventory({camp.tool.name: list(camp.tool.version_argv)}, knobs=knobs)
    camp.fingerprint = fingerprint(inventory)
    stored_host = camp.store.read_host()
    diff = fingerprint_diff(stored_host, inventory) if stored_host else []
    camp.store.check_or_record_host(inventory, camp.fingerprint, diff, allow_change=allow_host_change)
    camp.tool_version = (inventory.get("tools", {}).get(camp.tool.name) or {}).get("version")

    result.messages += camp.store.quarantine()
    todo = plan_for(spec, data_dir, knobs, camp.topo).by_status("to run")
    if max_runs is not None:
        todo = todo[:max_runs]

    old_term = signal.signal(signal.SIGTERM, _raise_terminated)
    bar = tqdm(total=len(todo), desc=f"{spec.experiment}/{spec.environment}", unit="run",
               disable=not progress)
    try:
        with KnobSession(knobs, journal) as session:
            camp.originals = {k: knobs[k].read() for k in set(camp.exp.KNOB_VARIABLES.values())
                              if k in knobs and knobs[k].available()[0]}
            campaign_knobs = getattr(camp.exp, "campaign_knobs", lambda settings: {})(camp.settings)
            for name, value in campaign_knobs.items():
                # e.g. binding the devices to a user-space driver: once, restored at the end
                rec = session.set(name, value)
                if not rec.get("matches", False):
                    raise IolabError(f"knob {name}: requested {value!r}, the kernel reports {rec.get('after')!r}")
                result.messages.append(f"{name}: set to {value!r} for this campaign")
            for planned in todo:
                ok, reason, metrics = camp.run_one(session, planned)
                note = metrics.get("note")
                if note and note not in result.messages:
                    result.messages.append(note)  # said once per campaign, not per run
                if ok:
                    result.completed += 1
                    if "iops" in metrics:
                        bar.set_postfix_str(f"last {metrics['iops']:,.0f} IOPS")
                else:
                    result.failed.append(planned.run_id)
                    message = f"run {planned.run_id} ({planned.point.label()}) failed: {reason}"
                    result.messages.append(message)
                    if not keep_going:
                        raise IolabError(message + ". Use --keep-going to record failures and continue.")
                    bar.write(message)
                bar.update(1)
    except KeyboardInterrupt:
        result.interrupted = True
        camp.abort()
        result.messages.append("interrupted: the unfinished run was discarded and knobs restored; "
                               "run the same command again to resume")
    finally:
        bar.close()
        signal.signal(signal.SIGTERM, old_term)
    return result
