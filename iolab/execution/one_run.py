"""One run made: the target files it reads checked to be the ones laid out (before and after
it: ``iolab.host.scratch``), its knobs set through the journaled session, its input files
written, its collectors started around the driver (an argv list run in the run's folder, in a
session of its own so that its whole tree can be ended), watched for disturbances, its output
parsed by the tool's adapter and its metrics checked to be a sample
(``Experiment.sample_problem``), and the run committed with its manifest, or kept under
``failed/`` with why (a tool that wrote no output too).

Responsible for: everything between "this planned run is next" and "it is stored", and
ending what it started. Not responsible for: the order of runs, the locks, the stop requests
or the campaign log (``iolab.execution.runner``), the plan (``iolab.execution.host_plan``), or
the manifest's format (``iolab.core.manifest``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

from iolab import __version__
from iolab import procs
from iolab.core import disturbance
from iolab.core.identity import config_id
from iolab.core.manifest import RunManifest
from iolab.core.planner import ASIS, PlannedRun
from iolab.core.spec import Spec
from iolab.core.store import StoredRun, open_store
from iolab.errors import IolabError, ParseError, shortened
from iolab.execution.host_plan import RunnableExperiment, metric_value
from iolab.execution.signals import Signals, kill_group
from iolab.host import scratch, slurm
from iolab.host.journal import KnobSession
from iolab.host.scratch import ScratchFile
from iolab.safefiles import what_is
from iolab.tools.base import CPUS_FILE, WINDOW_FILE, cpu_mask


TIMEOUT_MARGIN_S = 180.0            # beyond runtime and ramp, before a driver is killed


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


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


def _in_run(exc: OSError, tmp: Path) -> str:
    """The file an OSError names, relative to the run's folder."""
    name = exc.filename
    if name is None:
        return "a file"
    return os.path.relpath(name, tmp) if Path(name).is_relative_to(tmp) else str(name)


TAIL_BYTES = 64 * 1024  # of a tool's stderr read for its last lines: it may be gigabytes


# the most bytes one output file of a run may hold before it is read: the committed runs'
# largest is 22 KB, a 110 MB report parses in seconds; a file of gigabytes is no report
OUTPUT_MOST = 1 << 30


def _not_regular_output(tmp: Path) -> str:
    """Why the run folder's files cannot be read as the tool's output ("" when they can):
    one is a link (to /dev/zero, read without end), a FIFO or a device, or holds more than
    :data:`OUTPUT_MOST` bytes. Such a file is never opened."""
    with os.scandir(tmp) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                target = f" to {os.readlink(entry.path)}" if stat.S_ISLNK(st.st_mode) else ""
                return (f"the run left {entry.name!r} as {what_is(st)}{target}, not a regular "
                        "file; it is never read")
            if st.st_size > OUTPUT_MOST:
                return (f"the run left {entry.name!r} of {st.st_size:,} bytes, more than the "
                        f"{OUTPUT_MOST:,} an output may hold; it is not read")
    return ""


def _tail(path: Path, n: int = 5) -> str:
    """The last ``n`` lines of a tool's stderr, each cut to a bounded length: they become the
    failed run's recorded reason, which a whole 900 MB line made gigabytes."""
    try:
        with open(path, "rb") as err:
            err.seek(max(0, os.fstat(err.fileno()).st_size - TAIL_BYTES))
            text = err.read(TAIL_BYTES).decode(errors="replace")
    except OSError:
        return ""
    return " | ".join(shortened(line) for line in text.strip().splitlines()[-n:])


class RunMaker:
    """Makes the runs of one campaign, one at a time, with the state they share."""

    def __init__(self, experiment: RunnableExperiment, spec: Spec, data_dir: Path, knobs: dict,
                 topo: list[dict], signals: Signals):
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
        self.registry = scratch.Registry()
        # each scratch file's registry entry when a run of this campaign first read it
        self.targets: dict[Path, dict[str, Any]] = {}

    def set_knobs(self, session: KnobSession, params: dict) -> tuple[dict, str]:
        record: dict[str, Any] = {}
        problem = ""
        for var, knob in self.exp.knob_variables.items():
            value = params.get(var, ASIS)
            if value == ASIS:
                # "asis" means the host's state at campaign start, even after other points changed it
                if knob in self.originals and not self.knobs[knob].same_state(self.originals[knob],
                                                                               self.knobs[knob].read()):
                    session.guard(knob)
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
        targets = self.check_targets(params)
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
        if not reason:
            reason = self.targets_changed(targets)
        manifest.started_at, manifest.ended_at = started, now_iso()
        manifest.duration_s = round(time.monotonic() - t0, 3)
        if not reason and manifest.exit_code != 0:
            reason = f"{adapter.name} exited with status {manifest.exit_code}: {_tail(tmp / 'stderr')}"
        metrics: dict = {}
        if not reason:
            metrics, reason = self._read_output(adapter, tmp, manifest)
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

    def check_targets(self, params: dict[str, Any]) -> list[ScratchFile]:
        """The scratch files a run of ``params`` reads, each checked to be the file iolab laid
        out for this campaign (its inode, size and modification time as the registry has
        them); IolabError naming the key and what happened to one that is not, so that no run
        reads it."""
        files = self.exp.scratch_files(self.settings, [params])
        for f in files:
            known = self.targets.get(f.path)
            if known is None:
                entry = self.registry.entry(f.path)
                if entry is not None and "mtime_ns" in entry and entry.get("size") == f.size:
                    self.targets[f.path] = entry
                    continue
                what = "is not the file iolab laid out for this campaign"
            else:
                what = scratch.change(f, known)
                if what is None:
                    continue
                what = f"changed during the campaign: it {what}"
            kind, detail = scratch.state(f, self.registry)
            then = (detail if kind == "refuse" else
                    "run the same command again to lay it out anew and go on")
            raise IolabError(f"key '{f.key}': {f.path} {what}; no further run reads it. "
                             f"{then[0].upper()}{then[1:]}. The runs stored before are kept.")
        return files

    def targets_changed(self, files: list[ScratchFile]) -> str:
        """Why a run did not read the scratch files it was given (one changed while it ran),
        or ""."""
        for f in files:
            what = scratch.change(f, self.targets[f.path])
            if what:
                return (f"target {f.path} ({f.key}) changed during the run: it {what}; the "
                        "run did not read the file iolab laid out")
        return ""

    def _read_output(self, adapter: Any, tmp: Path, manifest: RunManifest) -> tuple[dict, str]:
        """The tool's metrics, and why the run is no sample ("" when it is one): its output
        is missing or unreadable, cannot be parsed, reports a problem, or gives a metric of
        the experiment that no measurement can have (``Experiment.sample_problem``). Only a
        run that passes is committed, so the tidy table never meets it."""
        odd = _not_regular_output(tmp)
        if odd:
            return {}, odd
        try:
            metrics = adapter.parse(tmp)
            if metrics.get("problem"):
                return metrics, metrics["problem"]
            foreign = adapter.foreign_report(tmp, manifest.argv)
            if foreign:
                return metrics, foreign
            row = self.exp.tidy_row(StoredRun(tmp, manifest))
            return metrics, self.exp.sample_problem(row, len(self.topo) or None)
        except FileNotFoundError as exc:  # a tool that exits without writing its report
            return {}, (f"no output: {_in_run(exc, tmp)} was not written ({adapter.name} "
                        f"exited with status {manifest.exit_code})")
        except OSError as exc:
            return {}, f"output could not be read: {_in_run(exc, tmp)}: {exc.strerror or exc}"
        except (ParseError, ValueError) as exc:  # a collector's files too (JSON, a window)
            return {}, f"output could not be parsed: {exc}"
        except OverflowError as exc:  # a number the parsers let through, too large for a sum
            return {}, f"output holds numbers too large to compute with: {exc}"

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
                # a process of the run's tree that outlived the tool (a detached child) would
                # write into the run folder after it is sealed: it is ended first
                procs.end(procs.find(run=str(tmp)))
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
