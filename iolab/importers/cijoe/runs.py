"""Storing one repetition of an AiSIO archive as a run: its identity, raw files and manifest,
derived and cross-checked on the way.

A run's id comes from its parameters (the command line's, and the settings only AiSIO's JSON
records) and its repetition number (AiSIO's, from the result file's name; else counted in the
archive's order). A run id already stored with the same raw output is skipped; with different
raw output it counts as failed, with a note; nothing stored is ever overwritten.

Responsible for: a repetition's identity, its raw files and manifest, committing it (as failed
when its benchmark failed or CIJOE never saw it finish (``is_done`` not true), its output cannot
be derived, is not its command's (the tool adapter's ``foreign_report``, as for a measured run)
or is no sample), and what the store already holds.
Not responsible for: turning a run folder into metrics (:mod:`iolab.importers.aisio`, shared
with ``iolab tidy``), the cross-checks themselves (:mod:`iolab.importers.cijoe.crosscheck`),
or the store's layout (:class:`~iolab.core.store.Store`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from iolab.collectors import dcgmi
from iolab.core import manifest as mf
from iolab.core import tool_registry
from iolab.core.identity import config_id, run_id
from iolab.core.manifest import RunManifest
from iolab.core.store import Store
from iolab.errors import InputError, ParseError
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Archive, Command
from iolab.importers.cijoe.crosscheck import check_log_clock, cross_check
from iolab.importers.cijoe.host_extras import SOURCE
from iolab.importers.cijoe.kinds import program_argv
from iolab.importers.cijoe.pairing import Repetition, parse_result_name
from iolab.importers.cijoe.params import (JSON_SETTINGS, aisio_setting, command_params,
                                          read_result)
from iolab.importers.cijoe.report import ImportReport

# The tool adapter that judges each benchmark kind's output (:func:`foreign_report`).
_ADAPTERS = {exp.XNVMEPERF_RUN: "xnvmeperf", exp.XNVMEPERF_CUDA_RUN: "xnvmeperf",
             exp.BDEVPERF: "bdevperf", exp.SPDK_NVME_PERF: "spdk_nvme_perf"}


@dataclass
class ImportBatch:
    """What storing each repetition of one archive needs from the import as a whole."""

    arc: Archive
    store: Store
    stored: dict[str, str | None]  # by run id, the sha256 of its stored stdout
    experiment: str
    environment: str
    fingerprint: str
    topology: dict[int, int]  # each CPU's core (lscpu), to check AiSIO's cpu_freqs against
    report: ImportReport
    # repetitions seen per identity: the number of a run whose result file name (AiSIO's
    # number) is missing
    ordinals: Counter = field(default_factory=Counter)


@dataclass
class _Run:
    """One repetition as it is read for storing, and the run id that gives it."""

    rep: Repetition
    label: str  # what notes name it by: AiSIO's result file, else the benchmark's output
    cmd_params: dict[str, Any]
    aisio: dict | None  # AiSIO's JSON; None without a readable one (then no cross-check)
    name_fields: dict[str, Any] | None
    params: dict[str, Any]
    settings: dict[str, Any]
    identity: dict[str, Any]
    number: int
    rid: str


def import_one(rep: Repetition, batch: ImportBatch) -> None:
    """Store one repetition as a run, or count it as skipped or failed (module docstring)."""
    run = _read(rep, batch)
    batch.report.run_ids.append(run.rid)
    stdout_sha = hashlib.sha256(rep.bench.output_bytes).hexdigest()
    if run.rid in batch.stored:
        _count_stored(run, stdout_sha, batch)
        return
    batch.stored[run.rid] = stdout_sha  # a second repetition of this id in the archive is a clash
    tmp = batch.store.begin(run.rid)
    _write_raw(tmp, rep, batch.arc)
    dcgm = _dmon_options(rep.dcgm_start, batch.arc.name) if rep.dcgm else None
    manifest = _manifest(run, batch, dcgm)
    _derive_and_commit(run, tmp, manifest, dcgm, batch)


def _read(rep: Repetition, batch: ImportBatch) -> _Run:
    """The repetition's parameters, AiSIO's JSON for it, and its identity and number."""
    bench = rep.bench
    cmd_params = command_params(bench, batch.arc.name)
    aisio = None
    label = rep.result or f"{bench.path}.output"
    if rep.result:
        try:
            aisio = read_result(batch.arc.files[rep.result], rep.result)
        except ParseError as exc:
            batch.report.notes.append(f"{exc}; no cross-check")
    name_fields = parse_result_name(PurePosixPath(rep.result).name) if rep.result else None

    params = {k: cmd_params[k] for k in ("qdepth", "iosize", "ndevs", "ncpus", "nqueues", "tool",
                                         "backend")}
    if bench.kind == exp.XNVMEPERF_CUDA_RUN:
        # AiSIO's cuda branch never sets SMT, turbo or the governor but records 0s; not kept.
        params.update({k: None for k in JSON_SETTINGS})
    else:
        params.update({k: aisio_setting(aisio, k) for k in JSON_SETTINGS})
    settings = {"runtime_s": cmd_params["runtime_s"], "tool": params["tool"],
                "backend": params["backend"], "source": "aisio"}
    identity = exp.identity(batch.experiment, batch.environment, params, settings)
    key = json.dumps(identity, sort_keys=True)
    number = name_fields["rep"] if name_fields is not None else batch.ordinals[key]
    batch.ordinals[key] += 1
    return _Run(rep, label, cmd_params, aisio, name_fields, params, settings, identity, number,
                run_id(identity, number))


def _count_stored(run: _Run, stdout_sha: str, batch: ImportBatch) -> None:
    """A run id already stored: skipped with the same raw output, failed with other."""
    if batch.stored[run.rid] == stdout_sha:
        batch.report.skipped += 1
    else:
        batch.report.failed += 1
        batch.report.notes.append(f"{run.label}: run id {run.rid} is already stored with "
                                  f"different raw output (another archive with the same "
                                  f"parameters?); import it into another experiment or "
                                  f"environment name")


def _write_raw(tmp: Path, rep: Repetition, arc: Archive) -> None:
    files = {exp.STDOUT: rep.bench.output_bytes, exp.STATE: rep.bench.state_bytes}
    if rep.cpufreq:
        files[exp.CPUFREQ] = rep.cpufreq.output_bytes
    if rep.dcgm:
        files[exp.DCGM] = rep.dcgm.output_bytes
    if rep.result:
        files[exp.AISIO_JSON] = arc.files[rep.result]
    for name, data in files.items():
        (tmp / name).write_bytes(data)


def _manifest(run: _Run, batch: ImportBatch, dcgm: dict[str, Any] | None) -> RunManifest:
    rep, bench, arc = run.rep, run.rep.bench, batch.arc
    return RunManifest(
        run_id=run.rid, identity=run.identity, experiment=batch.experiment,
        environment=batch.environment, rep=run.number, point=run.params, settings=run.settings,
        config_id=config_id(batch.experiment, batch.environment, run.settings),
        tool=run.params["tool"], argv=bench.argv, cwd="(recorded by CIJOE)",
        cpus=run.cmd_params["cpus"], host_fingerprint=batch.fingerprint,
        started_at=_iso(bench.state.get("begin")), ended_at=_iso(bench.state.get("end")),
        duration_s=bench.state.get("elapsed"), exit_code=bench.state.get("err"),
        extra={"cmd": bench.cmd, "tool_kind": bench.kind, "dcgm": dcgm, "imported_from": {
            "source": SOURCE, "archive": arc.name, "archive_sha256": arc.sha256,
            "state": f"{bench.path}.state", "output": f"{bench.path}.output",
            "cpufreq": f"{rep.cpufreq.path}.output" if rep.cpufreq else None,
            "dcgm": f"{rep.dcgm.path}.output" if rep.dcgm else None,
            "aisio_result": rep.result}})


def _derive_and_commit(run: _Run, tmp: Path, manifest: RunManifest,
                       dcgm: dict[str, Any] | None, batch: ImportBatch) -> None:
    """Derive the run, cross-check it, and commit it: as failed when its benchmark failed or
    its output cannot be derived."""
    bench, report = run.rep.bench, batch.report
    problem, derived = None, None
    foreign = ""
    try:
        # a window no clock gives fails the run before anything is derived from it
        exp.state_window(bench.state, f"{batch.arc.name}:{bench.path}.state")
        derived = exp.derive(tmp, bench.kind, run.cmd_params["cpus"], dcgm,
                             run.cmd_params["iosize"])
        foreign = foreign_report(bench, tmp)
    except ParseError as exc:
        problem = str(exc)
    if derived is not None:
        # the same checks as a measured run's, in its order: the tool's problem, an output
        # that is not its command's, and no sample (an infinite IOPS or a NaN)
        problem = derived.metrics["run_problem"] or foreign or exp.sample_problem(
            derived.metrics, run.params["tool"], len(batch.topology) or None) or None
        cross_check(run.rep, run.label, run.rid, run.cmd_params, derived, run.aisio,
                    run.name_fields, batch.topology, report)
        check_log_clock(run.rep, run.label, derived, report)
        report.notes.extend(f"{run.label}: {n}" for n in derived.notes)
    if bench.state.get("is_done") is not True:
        # CIJOE sets is_done once the command returned; without it the output is a partial one
        problem = (f"CIJOE's state says is_done {bench.state.get('is_done')!r}: it never saw "
                   f"the benchmark finish" + (f"; {problem}" if problem else ""))
    elif bench.state.get("err") != 0:
        problem = f"the benchmark exited with err {bench.state.get('err')}" + (
            f"; {problem}" if problem else "")
    elif derived is not None and "GNU time's report says" in derived.metrics["run_problem"]:
        report.notes.append(f"{run.label}: CIJOE's state says err 0, but GNU time's report "
                            "says the tool did not end well")
    if problem:
        manifest.failure = problem
        batch.store.commit_failed(tmp, manifest)
        report.failed += 1
        report.notes.append(f"{run.label}: stored as failed: {problem}")
    else:
        batch.store.commit(tmp, manifest)
        report.imported += 1


def foreign_report(bench: Command, run_dir: Path) -> str:
    """Why the benchmark's output in ``run_dir`` is not the report of CIJOE's command (""
    when it is, or the tool cannot tell): the tool adapter's check of a measured run
    (:meth:`~iolab.tools.base.ToolAdapter.foreign_report`), given the command as the adapter
    reads a measured run's argv. xnvmeperf and bdevperf run under a driver whose argv ends
    with ``--`` and the tool's own words; spdk_nvme_perf runs without one, its argv its
    command."""
    program = program_argv(bench.argv)
    argv = program if bench.kind == exp.SPDK_NVME_PERF else [f"{bench.path}.state", "--",
                                                            *program[1:]]
    return tool_registry.adapter(_ADAPTERS[bench.kind]).foreign_report(run_dir, argv)


def stored_stdout_shas(store: Store) -> dict[str, str | None]:
    """The sha256 of the stdout of every run stored (complete or failed), by run id, read
    through the manifest module (so version-1 imports are found under their new ids)."""
    runs = {r.run_id: r.manifest.files for r in store.complete_runs()}
    for folder in store.failed_runs():
        try:
            doc = mf.load_json(folder / mf.FILE)
        except mf.UnreadableManifest:
            continue
        try:
            if mf.check_version(doc, folder / mf.FILE) == 1:
                manifest = store.upgrade(doc, folder / mf.FILE, store.read_host() or {})
            else:
                manifest = mf.from_json(doc, folder / mf.FILE)
        except mf.DamagedManifest:
            continue  # an altered failed run's record holds no stdout to match; as unreadable
        runs.setdefault(manifest.run_id, manifest.files)
    return {rid: files.get(exp.STDOUT, {}).get("sha256") for rid, files in runs.items()}


def _dmon_options(start: Command, archive: str) -> dict[str, Any]:
    """What the dmon command that made a capture watched (see :func:`dcgmi.read_argv`), and the
    command itself."""
    try:
        return {**dcgmi.read_argv(start.cmd), "cmd": start.cmd}
    except InputError as exc:
        raise InputError(f"{archive}:{start.path}.state", exc.key, exc.problem,
                         exc.allowed) from None


def _iso(epoch: Any) -> str | None:
    """A CIJOE time as ISO 8601; None when it is none a clock gives (the run then fails:
    :func:`iolab.importers.aisio.state_window`)."""
    if (not isinstance(epoch, (int, float)) or isinstance(epoch, bool)
            or not exp.EARLIEST_S <= epoch <= exp.LATEST_S):  # False for NaN too
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")
