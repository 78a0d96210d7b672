"""Grouping an archive's commands into repetitions, and giving each AiSIO's result file.

A repetition is a benchmark command with the captures that belong to it: the logger and dmon
starts since the previous benchmark and the ``cat`` of their files before the next one (the
layout of AiSIO's ``run`` step is in :mod:`iolab.importers.cijoe`).

Pairing: each benchmark command is matched to the result JSON whose name agrees with the
command line (devices, CPUs, I/O size, queue depth, backend, tool) and whose time lies in
that window; if no time fits (files copied without their times), the first unused one in
AiSIO's order (without thread siblings before with them, then by repetition) is taken, with
a note.

Responsible for: repetitions, AiSIO's result file names, and pairing benchmarks with them.
Not responsible for: reading a benchmark's parameters (:mod:`iolab.importers.cijoe.params`)
or comparing a result file's values with iolab's
(:mod:`iolab.importers.cijoe.crosscheck`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Archive, Command
from iolab.importers.cijoe.kinds import (CPUFREQ_READ, CPUFREQ_START, DCGM_READ, DCGM_START,
                                         SPDK_KINDS)
from iolab.importers.cijoe.params import command_params
from iolab.importers.cijoe.report import ImportReport
from iolab.parsers import is_digits

# numbers in ASCII digits, at most 9 ([0-9]: \d and str.isdigit take any script's, and int()
# refuses 4,300 digits and more); AiSIO names its files with small whole numbers
_N = "[0-9]{1,9}"
_RESULT_CPU = re.compile(
    rf"^d(?P<ndevs>{_N})-c(?P<ncpus>{_N})-o(?P<iosize>{_N})-q(?P<qdepth>{_N})-be_(?P<backend>.+?)"
    r"-tool_(?P<tool>.+?)-thrsib(?P<thr_sib>[01])-freq_(?P<freq>[^-]+)-stress(?P<stress>[01])"
    rf"-SMT(?P<smt>[01])-turbo(?P<turbo>[01])-(?P<rep>{_N})\.out$")
_RESULT_CUDA = re.compile(
    rf"^d(?P<ndevs>{_N})-c(?P<ncpus>{_N})-o(?P<iosize>{_N})-q(?P<qdepth>{_N})-nq(?P<nqueues>{_N})"
    rf"-be_(?P<backend>.+?)-tool_(?P<tool>xnvmeperf-cuda)-(?P<rep>{_N})\.out$")


@dataclass
class Repetition:
    """A benchmark command and the captures that belong to it."""

    bench: Command
    cpufreq_start: Command | None = None
    cpufreq: Command | None = None
    dcgm_start: Command | None = None
    dcgm: Command | None = None
    result: str | None = None  # archive path of AiSIO's JSON


def find_repetitions(commands: list[Command], report: ImportReport) -> list[Repetition]:
    """Benchmarks in order, each with the captures started before and read after it."""
    reps: list[Repetition] = []
    by_step: dict[str, list[Command]] = {}
    for command in commands:
        by_step.setdefault(command.step, []).append(command)
    for step_commands in by_step.values():
        current: Repetition | None = None
        started: dict[str, Command] = {}
        for command in step_commands:
            if command.kind in (CPUFREQ_START, DCGM_START):
                started[command.kind] = command
            elif command.kind in exp.BENCHMARK_KINDS:
                current = Repetition(command, cpufreq_start=started.pop(CPUFREQ_START, None),
                                     dcgm_start=started.pop(DCGM_START, None))
                reps.append(current)
            elif command.kind in (CPUFREQ_READ, DCGM_READ):
                start_attr, read_attr = (("cpufreq_start", "cpufreq") if command.kind == CPUFREQ_READ
                                         else ("dcgm_start", "dcgm"))
                if current is None or getattr(current, start_attr) is None \
                        or getattr(current, read_attr) is not None:
                    report.notes.append(f"{command.path}: '{command.cmd}' reads a capture that no "
                                        f"preceding benchmark started afresh; not used")
                else:
                    setattr(current, read_attr, command)
    return reps


def parse_result_name(name: str) -> dict[str, Any] | None:
    """The fields encoded in an AiSIO result file name, or None if it is not one."""
    match = _RESULT_CPU.match(name) or _RESULT_CUDA.match(name)
    if match is None:
        return None
    return {k: (int(v) if is_digits(v) else v) for k, v in match.groupdict().items()}


def pair_results(reps: list[Repetition], arc: Archive, report: ImportReport) -> None:
    """Give each repetition its AiSIO result JSON (see the module docstring)."""
    results = _result_files(arc, report)
    unused = set(results)
    by_order = []
    # the results by their _name_key, for SPDK kinds and others (the key depends on which)
    by_key: dict[bool, dict[tuple, list[str]]] = {}
    ordered = sorted(reps, key=lambda r: r.bench.state["begin"])
    for i, rep in enumerate(ordered):
        kind = rep.bench.kind
        key = _name_key(command_params(rep.bench, arc.name), kind)
        keyed = by_key.setdefault(kind in SPDK_KINDS, {})
        if not keyed:
            for path, fields in results.items():
                keyed.setdefault(_name_key(fields, kind), []).append(path)
        same = keyed.get(key, [])
        lo = float(rep.bench.state["end"]) - 1
        hi = float(ordered[i + 1].bench.state["begin"]) + 1 if i + 1 < len(ordered) else float("inf")
        timely = [p for p in same if p in unused and lo <= arc.mtimes[p] <= hi]
        if len(timely) > 1:
            report.notes.append(f"{rep.bench.path}: {len(timely)} result files fit its time window "
                                f"({', '.join(sorted(timely))}); none used")
            continue
        if not timely:
            # The key cannot tell thread siblings from none (a 1-CPU mask is the same), and
            # AiSIO runs every point without them before any with them.
            spare = sorted((p for p in same if p in unused),
                           key=lambda p: (results[p].get("thr_sib", 0), results[p]["rep"]))
            if not spare:
                report.notes.append(f"{rep.bench.path}: no AiSIO result file for this benchmark; "
                                    f"imported without a cross-check")
                continue
            timely = spare[:1]
            by_order.append(f"{rep.bench.path} <- {timely[0]}")
        rep.result = timely[0]
        unused.discard(timely[0])
    _note_unpaired(by_order, unused, report)


def _result_files(arc: Archive, report: ImportReport) -> dict[str, dict[str, Any]]:
    """AiSIO's result files in the archive, by path, with the fields their names encode."""
    results = {}
    for path in arc.files:
        if path.startswith("artifacts/") and path.endswith(".out"):
            fields = parse_result_name(PurePosixPath(path).name)
            if fields is None:
                report.notes.append(f"{path}: not an AiSIO result name this importer knows; ignored")
            else:
                results[path] = fields
    return results


def _note_unpaired(by_order: list[str], unused: set[str], report: ImportReport) -> None:
    """Say which pairs only the order made, and which results no benchmark took."""
    if by_order:
        report.notes.append(f"{len(by_order)} result files paired by order because their file "
                            f"times lie outside their commands' windows (copied without their "
                            f"times?), e.g. {by_order[0]}")
    for path in sorted(unused):
        report.notes.append(f"{path}: an AiSIO result with no benchmark output in the archive "
                            f"(made by an earlier run and reused?); not imported")


def _name_key(params: dict[str, Any], kind: str) -> tuple:
    """What a result file name and a command line both show, for matching them."""
    backend = None if kind in SPDK_KINDS else params.get("backend")
    return (params.get("ndevs"), params.get("ncpus"), params.get("iosize"), params.get("qdepth"),
            backend, params.get("tool"))
