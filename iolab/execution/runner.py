"""Execute a campaign: plan it under its locks, record the host, set the campaign's knobs,
then make its runs in their order, logging the campaign as it goes.

Before anything changes, every program the selected runs need (the tool, GNU time, stress-ng,
...) is checked, and a missing one is named with how to install it. A host record that lacks a
field of its fingerprint (a tool's version that its probe could not read) is refused before
the first run, and not stored. Each run is made by
:class:`~iolab.execution.one_run.RunMaker`. A failing run is kept under ``failed/``; without
``keep_going`` the campaign then stops. Ctrl-C, SIGTERM or any other signal that would end
the process (``iolab.execution.signals``) stops the driver, discards the unfinished run and
restores every knob; a knob that cannot be restored is named, with what it reads and the
command that restores it, on standard error and in the campaign log. A journal left by a
process that was killed outright is restored before the next campaign starts. Each knob the
campaign changes is locked (``iolab.core.locks``) before it is touched, so a campaign given
another lock folder cannot change it too. A stop request (``iolab.execution.stop``, or
SIGUSR1, Slurm's warning before a job's time limit) stops the campaign after its current run
instead, with every knob restored.

Inside a Slurm job, every run records the allocation (``iolab.host.slurm``), and a campaign
that would change a system setting on a node the job does not have to itself is refused
unless ``allow_shared_node``: another job's measurements would see the setting.

Responsible for: the order of a campaign's steps, its locks, its log and its outcome.
Not responsible for: the plan against the host (``iolab.execution.host_plan``), making one
run (``iolab.execution.one_run``), what a point executes (the experiment and its tool
adapter), or the store layout (``iolab.core.store``).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from iolab import __version__, procs
from iolab.core import datadir, locks
from iolab.core.planner import Plan, PlannedRun, Point, check_size, knob_needs
from iolab.core.spec import Spec
from iolab.core.store import corrupt_message
from iolab.errors import IolabError, ToolError, listed_error, printable
from iolab.execution import stop
from iolab.execution.host_plan import RunnableExperiment, plan_for
from iolab.execution.one_run import RunMaker, now_iso
from iolab.execution.options import RunOptions
from iolab.execution.rounds import Schedule, new_seed
from iolab.execution.signals import Interrupted, Signals, signal_name
from iolab.host import scratch
from iolab.host.inventory import (collect_inventory, fingerprint, fingerprint_diff,
                                  fingerprint_gaps, topology)
from iolab.host.journal import KnobSession, restore_from_journal, unrestored_message
from iolab.host.knobset import make_knobs
from iolab.host.scratch import ScratchFile
from iolab.paths import shown


@dataclass
class CampaignResult:
    completed: int = 0
    failed: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    interrupted: bool = False
    signal: int | None = None  # the stop-now signal that interrupted it
    stopped: str = ""  # why the campaign stopped on request before its last run
    # the knobs left changed, what each reads now and how to put it back ("" when none is)
    unrestored: str = ""
    # why the campaign was not started at all ("" when it was): 'iolab replicate' names a
    # pack whose programs this host lacks and goes on to the next
    skipped: str = ""


def default_journal(data_dir: Path) -> Path:
    return Path(data_dir) / ".knob-journal.json"


def restore_command(data_dir: Path, journal: Path) -> str:
    """The ``iolab restore`` that finishes what a campaign on ``data_dir`` could not."""
    command = f"iolab restore --data {shlex.quote(str(data_dir))}"
    if Path(journal) != default_journal(data_dir):
        command += f" --journal {shlex.quote(str(journal))}"
    return command


def restore_left(data_dir: Path, journal: Path | None = None) -> list[str]:
    """What a killed campaign on ``data_dir`` left, undone under the data, host and knob
    locks: its leftover processes ended and the knobs of its journal (``journal``, else the
    data directory's) restored; one line for each thing done. ``iolab restore`` does this,
    and ``iolab notebook`` when the kernel that ran the campaign died with its knobs
    changed."""
    journal = journal or default_journal(data_dir)
    with locks.data_lock(data_dir) as dlock, locks.host_lock(data_dir) as hlock, \
            locks.KnobLocks(data_dir) as knob_locks:
        lines = dlock.messages + hlock.messages + procs.end_leftovers(data_dir)
        lines += restore_from_journal(journal, make_knobs(), claim=knob_locks.claim)
        return lines + knob_locks.messages


def missing_program(p: dict[str, Any]) -> str:
    """What a program of a plan (``Plan.programs``' entry) lacks here, and how to get it."""
    if p.get("missing_needs"):
        what = (f"{p['name']} cannot run here without {', '.join(p['missing_needs'])} "
                f"(needed as {p['role']})")
    else:
        exe = p["version_argv"][0]
        what = (f"{p['name']} not found {'at ' + exe if '/' in exe else 'on PATH'} "
                f"(needed as {p['role']})")
    return f"{what}: {p['install']}"


def _missing_programs(plan: Plan) -> None:
    missing = [p for p in plan.missing_programs() if p["needed_now"]]
    if missing:
        raise ToolError("; ".join(missing_program(p) for p in missing)
                        + ". Nothing was run and no system setting was touched.")


def run_campaign(experiment: RunnableExperiment, spec: Spec, data_dir: Path,
                 options: RunOptions = RunOptions()) -> CampaignResult:
    """Run every selected run of the plan (all runs still to do, or ``options.limit`` of them).

    Holds the data directory's lock and the host lock throughout; before anything else it
    ends what a killed campaign on the same data left running and restores its knobs.
    """
    data_dir = datadir.check(Path(data_dir))
    check_size(spec, options.max_runs)
    result = CampaignResult()
    try:
        # the handlers first: a signal at any moment of the campaign is answered alike
        with Signals() as signals, locks.data_lock(data_dir) as dlock, \
                locks.host_lock(data_dir) as hlock, locks.KnobLocks(data_dir) as knob_locks, \
                procs.Owned(data_dir) as owner:
            result.messages += dlock.messages + hlock.messages
            _Execution(experiment, spec, data_dir, options, result, owner, signals,
                       knob_locks).run()
            result.messages += knob_locks.messages
    except Interrupted as exc:  # before the runs began: nothing was set up yet
        _interrupted(result, exc)
    except OSError as exc:
        # e.g. a full disk: the unfinished run was discarded and the knobs restored on the
        # way out; what is stored is complete
        raise datadir.from_os_error(exc, "while running the campaign") from exc
    return result


def _interrupted(result: CampaignResult, exc: Interrupted, discarded: bool = False,
                 unrestored: bool = False) -> None:
    result.interrupted, result.signal = True, exc.signum
    what = ("the run in progress was discarded and its processes ended" if discarded else
            "no run was in progress")
    knobs = ("NOT every knob could be put back (the error says which, and how)" if unrestored
             else "every knob is as it was before")
    result.messages.append(f"interrupted by {exc.name}: {what}; {knobs}; run the same "
                           "command again to resume")


def _changed_knobs(experiment: RunnableExperiment, spec: Spec, todo: list[Point]
                   ) -> list[str]:
    """The knobs the runs of these points, and the campaign around them, change."""
    return sorted({knob for point in todo
                   for knob in knob_needs(point.params, experiment.knob_variables)}
                  | set(experiment.campaign_knobs(spec.settings)))


def _shared_node_problem(experiment: RunnableExperiment, spec: Spec, todo: list[Point],
                         allocation: dict[str, Any] | None) -> str | None:
    """Why these runs may not change system settings in this Slurm allocation, or None."""
    if allocation is None or allocation.get("exclusive") is True:
        return None
    changes = _changed_knobs(experiment, spec, todo)
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


class _Execution:
    """One execution of a campaign under its locks, step by step: the plan and its checks,
    the host's record, the campaign log, the campaign's knobs and the loop over the runs."""

    def __init__(self, experiment: RunnableExperiment, spec: Spec, data_dir: Path,
                 options: RunOptions, result: CampaignResult, owner: procs.Owned,
                 signals: Signals, knob_locks: locks.KnobLocks):
        self.exp, self.spec, self.data_dir, self.opts = experiment, spec, data_dir, options
        self.result, self.owner, self.signals = result, owner, signals
        self.knob_locks = knob_locks
        self.knobs: dict = {}
        self.session: KnobSession | None = None
        self.topo: list[dict] = []
        self.maker: RunMaker | None = None
        self.started_at = 0.0  # a stop request made from then on is this campaign's
        self.seed: int | None = None
        self.logged = 0  # the search's decisions already in the campaign log

    def run(self) -> None:
        plan, journal = self._prepare(time.time())
        self._record_host(plan)
        self.result.messages += self.maker.store.quarantine()
        todo = plan.selected()
        self.seed = self.spec.seed if self.spec.seed is not None else new_seed()
        steps = _Steps(self._schedule(plan), self._schedule, self._replan)
        most = plan.most_runs()
        of = str(most) if self.spec.rule.fixed else f"at most {most}"  # a rule may end sooner
        self._log_start(len(todo), most)
        self._log_search(plan)
        why, message = self._stop_requested()
        self._tell(message)
        if why and todo:  # asked before the first run: set nothing up only to undo it
            _stopped(self.result, why, 0, of)
            todo = []
        # under a rule, the bar's total is the most runs it may ask for; it ends when the rule
        # does
        bar = _progress_bar(total=most if todo else 0, disable=not self.opts.progress,
                            desc=f"{self.spec.experiment}/{self.spec.environment}")
        self.session = KnobSession(self.knobs, journal,
                                   restore=restore_command(self.data_dir, journal),
                                   claim=self.knob_locks.claim)
        try:
            if todo:
                self._set_up(plan, steps)
            with self.session as session:
                self._set_campaign_knobs(session, bool(todo))
                self._loop(session, steps if todo else (), bar, of)
        except Interrupted as exc:
            _interrupted(self.result, exc, self.maker.discarded, bool(self.session.unrestored))
        finally:
            if self.session.unrestored:  # said on standard error and in the campaign log
                self.result.unrestored = unrestored_message(
                    self.session.unrestored, journal, self.session.restore)
            bar.close()
            self._log_end()

    def _tell(self, message: str) -> None:
        """Pass ``message`` on once: a request that is ignored is seen before every run."""
        if message and message not in self.result.messages:
            self.result.messages.append(message)

    def _stop_requested(self) -> tuple[str, str]:
        """(why the campaign must stop before its next run, or ""; a message to pass on)."""
        if self.signals.after_run:
            return self.signals.after_run_reason(), ""
        doc, message = stop.pending(self.data_dir, self.started_at)
        if doc is None:
            return "", message
        stop.clear(self.data_dir)
        who = f" by Slurm job {doc['job']}" if doc.get("job") else ""
        return f"{doc.get('reason') or 'a stop request'}{who}", message

    def _plan(self, limit: int | None) -> Plan:
        return plan_for(self.exp, self.spec, self.data_dir, where=self.opts.where, limit=limit,
                        knobs=self.knobs, topo=self.topo, max_runs=self.opts.max_runs)

    def _prepare(self, started_at: float) -> tuple[Plan, Path]:
        """The plan, refused before any change to the host if the store, the scratch files,
        the programs or a shared Slurm node forbid it; then a killed campaign's knobs restored.
        (The plan, the knob journal.)"""
        # a killed campaign's fio would still be measuring beside this one's
        self.result.messages += procs.end_leftovers(self.data_dir)
        self.knobs = make_knobs() if self.opts.knobs is None else self.opts.knobs
        self.topo = topology()
        plan = self._plan(self.opts.limit)
        if self.opts.show_plan is not None:
            self.opts.show_plan(plan)
        self.signals.check()
        if plan.corrupt:
            raise listed_error(corrupt_message(plan.corrupt, "this campaign") + ". Nothing was "
                               "run.")
        if plan.scratch_refusals:
            raise IolabError("; ".join(plan.scratch_refusals) + ". Nothing was run.")
        _missing_programs(plan)
        self.started_at = started_at
        self.maker = RunMaker(self.exp, self.spec, self.data_dir, self.knobs, self.topo,
                              self.signals)
        self.maker.measured_s = plan.seconds_per_run
        shared = None if self.opts.allow_shared_node else _shared_node_problem(
            self.exp, self.spec, plan.may_run_points(), self.maker.allocation)
        if shared:
            raise IolabError(shared)
        # the knobs the runs change, each refused now if another live campaign has it changed
        # (whatever its lock folder), before anything is touched; a knob a later plan asks
        # for is claimed when it is first set
        changes = _changed_knobs(self.exp, self.spec, plan.may_run_points()) \
            if plan.selected() else []
        for name in changes:
            if name in self.knobs:
                self.knob_locks.claim(self.knobs[name])
        datadir.check(self.data_dir, write=True)  # only now: a refused campaign leaves no folder
        journal = self.opts.journal_path or default_journal(self.data_dir)
        if journal.exists():
            # A campaign killed with SIGKILL could not restore its knobs; do it before
            # resuming, and before the inventory, whose fingerprint depends on knob-driven
            # state like SMT.
            self.result.messages += restore_from_journal(journal, self.knobs,
                                                         claim=self.knob_locks.claim)
        self.signals.check()
        return plan, journal

    def _record_host(self, plan: Plan) -> None:
        """The host's inventory and fingerprint, checked against (or recorded as) the store's;
        refused, before anything is stored, when it lacks a field of the fingerprint."""
        maker = self.maker
        # Only the benchmark tools enter the host's fingerprint; collectors' versions do not
        # change what a run measures.
        benchmarks = [p for p in plan.programs if p["role"] == "benchmark"]
        inventory = collect_inventory({p["name"]: p["version_argv"] for p in benchmarks},
                                      knobs=self.knobs)
        for program in benchmarks:
            # a version printed inside a longer text (xnvmeperf's usage, which names its own
            # path) is recorded as the part the program's pattern names, so the fingerprint
            # holds the version and not where the checkout lies; a program 'make tools' built
            # carries its build key, so a rebuild with other patches or libraries is another
            # tool
            entry = (inventory.get("tools") or {}).get(program["name"]) or {}
            if program["version"] and ("\n" in (entry.get("version") or "")
                                       or program.get("build")):
                entry["version"] = program["version"]
        gaps = fingerprint_gaps(inventory, [p["name"] for p in benchmarks
                                            if p["reports_version"]])
        if gaps:
            raise IolabError(
                "this host's record lacks what its fingerprint is made of: "
                + "; ".join(gaps) + ". The same host gives another fingerprint once these can "
                "be read, so every later run would be refused as another host's: the record "
                "is not stored, and nothing was run. Run again once they "
                "can be read (what each command said is quoted; a tool that cannot be built, "
                "or a limit on processes or memory, 'ulimit -u' or 'ulimit -v', stops them)")
        maker.fingerprint = fingerprint(inventory)
        stored_host = maker.store.read_host()
        diff = fingerprint_diff(stored_host, inventory) if stored_host else []
        maker.store.check_or_record_host(inventory, maker.fingerprint, diff,
                                         allow_change=self.opts.allow_host_change)
        maker.versions = {name: (tool or {}).get("version")
                          for name, tool in (inventory.get("tools") or {}).items()}

    def _schedule(self, plan: Plan) -> Schedule:
        return Schedule(plan, self.seed, on_round=lambda n, ids: self.maker.store.log(
            {"event": "round", "at": now_iso(), "round": n, "seed": self.seed, "runs": ids}))

    def _log_search(self, plan: Plan) -> None:
        """The search's decisions since the last entry, its seed and version, what it waits
        for or its answer."""
        state = plan.search
        if state is None:
            return
        self.maker.store.log({"event": "search", "at": now_iso(), **state.to_dict(),
                              "decisions": state.outcome.log[self.logged:]})
        self.logged = len(state.outcome.log)

    def _replan(self, made: int) -> Plan:
        """The plan again from the store: the search's next run, or once it has ended the
        grids around its answer, or once they have settled the confirmation points."""
        limit = self.opts.limit
        again = self._plan(None if limit is None else max(0, limit - made))
        self._log_search(again)
        if self.spec.confirm is not None and not (again.search and again.search.waiting):
            choice = again.confirm_dict()
            self.maker.store.log({"event": "confirm", "at": now_iso(),
                                  "waiting": choice["waiting"], "points": choice["points"]})
        if again.selected():
            self.exp.prepare_points(self.spec.settings, self._schedule(again).points())
        return again

    def _log_start(self, selected: int, most: int) -> None:
        spec = self.spec
        self.maker.store.log({
            "event": "start", "at": now_iso(), "pid": os.getpid(), "owner": self.owner.owner,
            "params": spec.sources, "overrides": spec.overrides, "where": self.opts.where or {},
            "limit": self.opts.limit, "selected": selected, "most": most,
            "repetitions": spec.rule.to_dict(), "order": spec.order, "seed": self.seed,
            "iolab_version": __version__})

    def _log_end(self) -> None:
        result = self.result
        try:
            self.maker.store.log({"event": "end", "at": now_iso(), "pid": os.getpid(),
                                  "completed": result.completed, "failed": len(result.failed),
                                  "interrupted": result.interrupted, "stopped": result.stopped,
                                  **({"knobs_not_restored": self.session.unrestored,
                                      "restore": self.session.restore}
                                     if self.session is not None and self.session.unrestored
                                     else {}),
                                  **({"signal": signal_name(result.signal)}
                                     if result.signal else {})})
        except OSError:
            pass  # a full disk must not hide why the campaign stopped

    def _set_up(self, plan: Plan, steps: _Steps) -> None:
        """The host's and the points' preparation, and the scratch files the runs read."""
        self.signals.check()
        self.exp.prepare_host(self.spec.settings)
        self.result.messages += _lay_out(plan.scratch_files, self.spec, self.signals)
        self.exp.prepare_points(self.spec.settings, steps.points())

    def _set_campaign_knobs(self, session: KnobSession, todo: bool) -> None:
        """The knobs' states before any run ("asis" points go back to them), then the knobs
        the whole campaign needs (binding the devices to a user-space driver, ...): set once,
        restored at the end."""
        knobs = self.knobs
        self.maker.originals = {k: knobs[k].read()
                                for k in set(self.exp.knob_variables.values())
                                if k in knobs and knobs[k].available()[0]}
        for name, value in (self.exp.campaign_knobs(self.spec.settings).items() if todo
                            else ()):
            self.signals.check()
            rec = session.set(name, value)
            if not rec.get("matches", False):
                raise IolabError(f"knob {name}: requested {value!r}, the kernel reports "
                                 f"{rec.get('after')!r}")
            self.result.messages.append(f"{name}: set to {value!r} for this campaign")

    def _loop(self, session: KnobSession, steps, bar, of: str) -> None:
        """Each run in its turn, until the plan is done or a stop request comes."""
        for done, planned in enumerate(steps):
            self.signals.check()
            why, message = self._stop_requested()
            self._tell(message)
            if why:
                _stopped(self.result, why, done, of)
                return
            try:
                ok, reason, metrics = self.maker.run_one(session, planned)
            except BaseException:
                self.maker.abort(self.owner)
                raise
            steps.record(planned, ok, metrics.get("rule_value"))
            self._count(planned, ok, reason, metrics, bar)
            bar.update(1)
        if bar.n < bar.total:  # the rule settled every point before its most runs
            bar.total = bar.n
            bar.refresh()

    def _count(self, planned: PlannedRun, ok: bool, reason: str, metrics: dict, bar) -> None:
        """A run's outcome into the result and the bar; a failure ends the campaign unless
        ``keep_going``."""
        note = metrics.get("note")
        if note and note not in self.result.messages:
            self.result.messages.append(note)  # said once per campaign, not per run
        if ok:
            self.result.completed += 1
            if metrics.get("iops") is not None:
                bar.set_postfix_str(f"last {metrics['iops']:,.0f} IOPS")
            return
        self.result.failed.append(planned.run_id)
        message = f"run {planned.run_id} ({planned.point.label()}) failed: {reason}"
        self.result.messages.append(message)
        if not self.opts.keep_going:
            raise IolabError(message + ". Use --keep-going to record failures and continue.")
        bar.write(printable(message))  # the reason may quote a tool's stderr: no ESC


def _progress_bar(**options: Any):
    if "IPython" in sys.modules:  # in a notebook's kernel: its widget bar
        from tqdm.auto import tqdm
    else:  # tqdm.auto would import IPython only to find out, a third of a second
        from tqdm import tqdm
    return tqdm(unit="run", **options)


class _Steps:
    """The campaign's schedule, then, while part of the design waits for runs still to come
    (a searched grid's next run, ``iolab.core.search``; a confirmation step waiting for the
    search, ``iolab.core.confirm``), the schedules of plans made again from the store, until
    one has nothing to run. Each schedule makes at least one run, and a design has at most so
    many, so this ends. Iterate, and :meth:`record` each outcome, as with a
    :class:`~iolab.execution.rounds.Schedule`."""

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


# what laying a scratch file out did, by its layout
_LAID_OUT = {"written": "written with data",
             "fallocated": "laid out with fallocate(2), never written"}


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
                     + (_LAID_OUT.get(f.layout, f"laid out {f.layout}") if wrote
                        else "reused"))
    return lines
