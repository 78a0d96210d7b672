"""Execute a plan: knobs, collectors, the driver, and an atomic commit per run.

For each run still to do: set the point's knobs through a journaled session (recording the
state before, the value requested and what the kernel reports after), start the collectors,
execute the driver with an argv list, stop the collectors, parse the raw output, and commit
the run atomically. A failing run is kept under ``failed/``; without ``keep_going`` the
campaign then stops. Ctrl-C or SIGTERM stops the driver, discards the unfinished run and
restores every knob.

Responsible for: orchestration and the run manifest. Not responsible for: what a point
means to a tool (experiment modules), parsing (parsers), or the store layout (``store``).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__, experiments
from .errors import IolabError, ParseError, ToolError
from .inventory import collect_inventory, fingerprint, fingerprint_diff, topology
from .journal import KnobSession, restore_from_journal
from .knobs import make_knobs
from .paths import DRIVERS_DIR, REPO_ROOT
from .planner import ASIS, Plan, make_plan
from .spec import Spec
from .store import Store

TOOL_HINTS = {
    "fio": "install it with 'apt-get install fio' (Debian/Ubuntu) or 'conda install -c conda-forge fio'",
    "bpftrace": "install it with 'apt-get install bpftrace'",
    "stress-ng": "install it with 'apt-get install stress-ng'",
}


@dataclass
class CampaignResult:
    completed: int = 0
    failed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    interrupted: bool = False


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def driver_version(driver: Path) -> str:
    if not driver.exists():
        raise ToolError(f"{driver}: driver script not found")
    match = re.search(r"^# iolab-driver-version:\s*(\S+)", driver.read_text(), re.M)
    if not match:
        raise ToolError(f"{driver}: no '# iolab-driver-version: N' line")
    return match.group(1)


def require_tool(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolError(f"{tool} not found on PATH; {TOOL_HINTS.get(tool, 'install it first')}. "
                        "Nothing was run and no system setting was touched.")
    return path


def default_journal(data_dir: Path) -> Path:
    return Path(data_dir) / ".knob-journal.json"


def knob_availability(knobs: dict, needed: set[str]) -> dict[str, tuple[bool, str]]:
    out = {}
    for name in needed:
        if name not in knobs:
            out[name] = (False, "no such knob on this host")
        else:
            out[name] = knobs[name].available()
    return out


def plan_for(spec: Spec, data_dir: Path, knobs: dict | None = None) -> Plan:
    """The plan for a spec against the store, with this host's knob availability."""
    exp = experiments.get(spec.experiment)
    store = Store(data_dir, spec.experiment, spec.environment)
    knobs = make_knobs() if knobs is None else knobs
    stored = store.complete_runs()
    durations = [r.manifest.get("duration_s") for r in stored if r.manifest.get("duration_s")]
    per_run = sum(durations) / len(durations) if durations else None
    return make_plan(spec, driver_version=driver_version(DRIVERS_DIR / exp.DRIVER),
                     stored_ids={r.run_id for r in stored}, knob_variables=exp.KNOB_VARIABLES,
                     knob_availability=knob_availability(knobs, set(exp.KNOB_VARIABLES.values())),
                     seconds_per_run=per_run)


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


def run_campaign(spec: Spec, data_dir: Path, *, keep_going: bool = False, progress: bool = True,
                 allow_host_change: bool = False, knobs: dict | None = None,
                 journal_path: Path | None = None, max_runs: int | None = None) -> CampaignResult:
    """Run every point of the plan that is not stored yet."""
    from tqdm.auto import tqdm

    exp = experiments.get(spec.experiment)
    require_tool(exp.TOOL)
    driver = DRIVERS_DIR / exp.DRIVER
    drv_version = driver_version(driver)
    driver_rel = str(driver.relative_to(REPO_ROOT))
    store = Store(data_dir, spec.experiment, spec.environment)
    result = CampaignResult()

    knobs = make_knobs() if knobs is None else knobs
    journal = journal_path or default_journal(data_dir)
    if journal.exists():
        # A campaign killed with SIGKILL could not restore its knobs; do it before resuming,
        # and before the inventory, whose fingerprint depends on knob-driven state like SMT.
        # restore_from_journal refuses while the process that wrote the journal still runs.
        result.messages += restore_from_journal(journal, knobs)

    inventory = collect_inventory({exp.TOOL: exp.TOOL_VERSION_ARGV}, knobs=knobs)
    fp = fingerprint(inventory)
    stored_host = store.read_host()
    diff = fingerprint_diff(stored_host, inventory) if stored_host else []
    store.check_or_record_host(inventory, fp, diff, allow_change=allow_host_change)
    tool_version = (inventory.get("tools", {}).get(exp.TOOL) or {}).get("version")
    topo = topology()

    result.messages += store.quarantine()
    plan = plan_for(spec, data_dir, knobs)
    todo = plan.by_status("to run")
    if max_runs is not None:
        todo = todo[:max_runs]
    settings = spec.scalar_settings()
    if "target_path" in settings:
        Path(settings["target_path"]).parent.mkdir(parents=True, exist_ok=True)

    old_term = signal.signal(signal.SIGTERM, _raise_terminated)
    bar = tqdm(total=len(todo), desc=f"{spec.experiment}/{spec.environment}", unit="run",
               disable=not progress)
    tmp = None
    proc = None
    try:
        with KnobSession(knobs, journal) as session:
            originals = {k: knobs[k].read() for k in set(exp.KNOB_VARIABLES.values()) if k in knobs
                         and knobs[k].available()[0]}
            for planned in todo:
                params = planned.point.params
                knob_record: dict[str, Any] = {}
                knob_problem = ""
                for var, knob in exp.KNOB_VARIABLES.items():
                    value = params.get(var, ASIS)
                    if value == ASIS:
                        if knob in originals and not knobs[knob].same_state(originals[knob], knobs[knob].read()):
                            knobs[knob].restore(originals[knob])
                        knob_record[knob] = {"requested": ASIS,
                                             "after": knobs[knob].read() if knob in knobs else None}
                        continue
                    record = session.set(knob, value)
                    knob_record[knob] = record
                    if not record.get("matches", False):
                        knob_problem = (f"knob {knob}: requested {value!r}, the kernel reports "
                                        f"{record.get('after')!r}")

                tmp = store.begin(planned.run_id)
                argv = exp.build_argv(settings, params, topo)
                manifest: dict[str, Any] = {
                    "run_id": planned.run_id, "experiment": spec.experiment,
                    "environment": spec.environment, "rep": planned.rep,
                    "params": params, "config": planned.config, "grids": planned.point.grids,
                    "argv": [driver_rel] + argv[1:], "cwd": "the run folder",
                    "driver": driver_rel, "driver_version": drv_version,
                    "tool": exp.TOOL, "tool_version": tool_version,
                    "knobs": knob_record, "host_fingerprint": fp, "iolab_version": __version__,
                    "collectors": [c.name for c in exp.collectors()], "spec_sources": spec.sources,
                }
                reason = knob_problem
                exit_code = None
                collectors = exp.collectors()
                started = now_iso()
                t0 = time.monotonic()
                if not reason:
                    for c in collectors:
                        c.start(tmp)
                    timeout = float(settings.get("runtime_s", 0)) + float(settings.get("ramp_s", 0)) + 120
                    with open(tmp / "stdout", "wb") as out, open(tmp / "stderr", "wb") as err:
                        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                                cwd=tmp, start_new_session=True)
                        try:
                            exit_code = proc.wait(timeout=timeout)
                        except subprocess.TimeoutExpired:
                            os.killpg(proc.pid, signal.SIGKILL)
                            exit_code = proc.wait()
                            reason = f"timed out after {timeout:.0f} s"
                    proc = None
                    for c in collectors:
                        c.stop(tmp)
                manifest.update(started_at=started, ended_at=now_iso(),
                                duration_s=round(time.monotonic() - t0, 3), exit_code=exit_code)
                if not reason and exit_code != 0:
                    reason = f"{exp.TOOL} exited with status {exit_code}: {_tail(tmp / 'stderr')}"
                if not reason:
                    try:
                        metrics = exp.parse_run(tmp)
                        if metrics.get("fio_error"):
                            reason = f"fio reported error {metrics['fio_error']}: {_tail(tmp / 'stderr')}"
                    except ParseError as exc:
                        reason = f"output could not be parsed: {exc}"
                if reason:
                    dest = store.commit_failed(tmp, {**manifest, "failure": reason})
                    tmp = None
                    result.failed.append(planned.run_id)
                    message = f"run {planned.run_id} ({planned.point.label()}) failed: {reason}; kept in {dest}"
                    result.messages.append(message)
                    if not keep_going:
                        raise IolabError(message + ". Use --keep-going to record failures and continue.")
                    bar.write(message)
                else:
                    store.commit(tmp, manifest)
                    tmp = None
                    result.completed += 1
                    bar.set_postfix_str(f"last {metrics.get('iops', float('nan')):,.0f} IOPS")
                bar.update(1)
    except KeyboardInterrupt:
        result.interrupted = True
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if tmp is not None:
            store.discard(tmp)
        result.messages.append("interrupted: the unfinished run was discarded and knobs restored; "
                               "run the same command again to resume")
    finally:
        bar.close()
        signal.signal(signal.SIGTERM, old_term)
    return result
