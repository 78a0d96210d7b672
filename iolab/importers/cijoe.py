"""Import an AiSIO CIJOE result archive into the run store, re-deriving every metric.

An AiSIO archive (``artifacts/<experiment>.tar.gz`` in github.com/xnvme/aisio) is a CIJOE
output folder: ``NNN_<step>/cmd_XX.state`` (YAML: begin, end, elapsed, cmd, err, …) with
``cmd_XX.output`` (stdout and stderr merged), ``config*.orig``, ``workflow.*`` and
``artifacts/`` where AiSIO's scripts write one JSON result per repetition
(``artifacts/bench-results/d16-c1-o512-q128-be_upcie-tool_xnvmeperf-thrsib0-freq_performance-
stress0-SMT1-turbo1-0.out``).

How AiSIO's ``run`` step lays out one repetition (seen in both archived runs; every CIJOE
command is one ``cmd_XX`` in order)::

    cpupower frequency-set -g ondemand --max 4.0GHz --min 0.8GHz    reset all CPUs
    for cpu in 0; do cpupower -c $cpu frequency-set -g performance; done
    /tmp/cpu_freq_logger.sh /tmp/cpu_freq_logger.out 0.5            logger starts (detached)
    rm -f /tmp/dcgm_monitor.txt                                     } upcie-cuda only
    screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > …"    }
    /usr/bin/time xnvmeperf run --cpumask 0001 … <BDF> …            the benchmark
    pkill -f cpu_freq_logger                                        err -15 (see below)
    cat /tmp/cpu_freq_logger.out                                    the frequency log
    pkill -f dcgmi; sleep 0.2                                       } upcie-cuda only
    cat /tmp/dcgm_monitor.txt                                       }
    (AiSIO writes the result JSON; no command)

So a benchmark's captures are the logger/dmon starts since the previous benchmark and the
``cat`` of their files before the next one; the result JSON's modification time (whole
seconds in the tar) lies between the benchmark's end and the next benchmark's begin. SMT,
turbo and ``lscpu -e`` come once per step, before the first repetition. ``pkill -f`` matches
the shell CIJOE runs it in, so those commands end with err -15 and the ``sleep 0.2`` meant to
let dmon flush never runs. The frequency log's timestamps are UTC (they match the ``.state``
epochs of the logger's start); the importer notes any log that does not.

Pairing: each benchmark command is matched to the result JSON whose name agrees with the
command line (devices, CPUs, I/O size, queue depth, backend, tool) and whose time lies in
that window; if no time fits (files copied without their times), the first unused one in
AiSIO's order (without thread siblings before with them, then by repetition) is taken, with
a note. Parameters come from the command line (qdepth, iosize, ndevs, ncpus, nqueues,
backend, tool, runtime; bdevperf's names only its device config, so its ndevs is the number
of bdevs its table lists) and, for what the command line cannot show (thr_sib, smt, turbo,
stress, cpu_governor, fixed_freq), from the JSON.

Cross-checks (every one listed in the report, never resolved silently): the re-derived
iops and mibs (relative tolerance 1e-6), cpu_usage (exact), dcgm p95 and the per-CPU
frequency mean and variance (relative 1e-6) against AiSIO's JSON; the JSON's parameters
against the command line and against its own file name; the p2p reference value AiSIO wrote
to ``artifacts/cuda-sample-p2p-bandwidth`` against the parsed matrix.

Responsible for: reading the archive (tar.gz or an extracted folder, never extracting to
disk), indexing and classifying commands, pairing, cross-checking, and writing runs, the
host record and archive-level extras with :class:`~iolab.core.store.Store`. Not responsible
for: reading CIJOE's ``.state`` records and splitting command lines
(:mod:`iolab.parsers.cijoe_state`, :mod:`iolab.parsers.shell_words`), reading a tool's command
line or output (its adapter in ``iolab.tools``, and ``iolab.parsers``) or turning a run folder
into metrics (:mod:`iolab.importers.aisio`, shared with ``iolab tidy``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tarfile
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

from iolab.core.identity import config_id, run_id
from iolab.core import manifest as mf
from iolab.core.manifest import RunManifest
from iolab.core.store import Store, open_store, sha256_file
from iolab.errors import InputError, ParseError
from iolab.importers import aisio as exp
from iolab.parsers import shell_words
from iolab.parsers.bdevperf import parse_bdevperf_text
from iolab.parsers.cijoe_state import parse_cijoe_state
from iolab.parsers.cpufreq_log import parse_cpufreq_log
from iolab.parsers.lscpu import offline_cpus, parse_lscpu_e
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.collectors import dcgmi
from iolab.tools import p2p_bandwidth, spdk_nvme_perf, xnvmeperf

SOURCE = "aisio-cijoe-import"
RTOL = 1e-6

# Command kinds besides the benchmarks (iolab.importers.aisio.BENCHMARK_KINDS).
DCGM_START = "dcgmi dmon"
DCGM_READ = "dcgmi dmon capture"
CPUFREQ_START = "cpu freq logger"
CPUFREQ_READ = "cpu freq log"
P2P = "p2pBandwidthLatencyTest"
LSCPU = "lscpu"
OTHER = "other"

# AiSIO's tool names (the "tool" key of its JSON) per benchmark kind.
TOOL_NAMES = {exp.XNVMEPERF_RUN: "xnvmeperf", exp.XNVMEPERF_CUDA_RUN: "xnvmeperf-cuda",
              exp.BDEVPERF: "bdevperf", exp.SPDK_NVME_PERF: "spdk_nvme_perf"}
# AiSIO names SPDK-tool results "be_upcie" (its default) although they use SPDK's driver.
SPDK_KINDS = (exp.BDEVPERF, exp.SPDK_NVME_PERF)

_STATE = re.compile(r"^(?P<root>(?:.*/)?)(?P<step>\d{3}_[^/]+)/cmd_(?P<n>\d+)\.state$")
_RESULT_CPU = re.compile(
    r"^d(?P<ndevs>\d+)-c(?P<ncpus>\d+)-o(?P<iosize>\d+)-q(?P<qdepth>\d+)-be_(?P<backend>.+?)"
    r"-tool_(?P<tool>.+?)-thrsib(?P<thr_sib>[01])-freq_(?P<freq>[^-]+)-stress(?P<stress>[01])"
    r"-SMT(?P<smt>[01])-turbo(?P<turbo>[01])-(?P<rep>\d+)\.out$")
_RESULT_CUDA = re.compile(
    r"^d(?P<ndevs>\d+)-c(?P<ncpus>\d+)-o(?P<iosize>\d+)-q(?P<qdepth>\d+)-nq(?P<nqueues>\d+)"
    r"-be_(?P<backend>.+?)-tool_(?P<tool>xnvmeperf-cuda)-(?P<rep>\d+)\.out$")
# bdevperf's options that take a value; its adapter has no reader of command lines yet
_BDEVPERF_VALUED = {"-c", "-m", "-q", "-o", "-t", "-w", "-r", "-M", "-j", "-S", "-P", "-T"}
_DMON_OUTPUT = re.compile(r">\s*(\S+?)[\"']?\s*$")
# Settings AiSIO records only in its JSON (and the file name), never on the command line.
JSON_SETTINGS = ("thr_sib", "smt", "turbo", "stress", "cpu_governor", "fixed_freq")


@dataclass
class Disagreement:
    """A value that iolab re-derived differently from AiSIO's own record."""

    result: str  # archive path of AiSIO's result file (or other artifact) compared with
    field: str
    ours: Any
    aisio: Any
    run_id: str | None = None

    def __str__(self) -> str:
        where = f"{self.result}" + (f" (run {self.run_id})" if self.run_id else "")
        return f"{where}: {self.field}: iolab {self.ours!r} != AiSIO {self.aisio!r}"


@dataclass
class ImportReport:
    archive: str
    experiment: str
    environment: str
    imported: int = 0
    skipped: int = 0  # already stored with the same raw output
    failed: int = 0
    run_ids: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [f"{self.archive} -> {self.experiment}/{self.environment}: imported {self.imported}, "
                 f"skipped {self.skipped} (already stored), failed {self.failed}; "
                 f"{len(self.disagreements)} disagreements with AiSIO's own results"]
        lines += [f"  disagreement: {d}" for d in self.disagreements]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class Command:
    """One CIJOE command: its ``.state`` (parsed and raw) and its ``.output``."""

    step: str
    number: int
    state: dict[str, Any]
    state_bytes: bytes
    output_bytes: bytes
    kind: str = OTHER
    # what _command_params read from a benchmark's command line (and output), read once
    params: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def path(self) -> str:
        return f"{self.step}/cmd_{self.number:02d}"

    @property
    def cmd(self) -> str:
        return str(self.state.get("cmd", ""))

    @cached_property
    def argv(self) -> list[str]:
        return _words(self.cmd)


@dataclass
class Repetition:
    """A benchmark command and the captures that belong to it."""

    bench: Command
    cpufreq_start: Command | None = None
    cpufreq: Command | None = None
    dcgm_start: Command | None = None
    dcgm: Command | None = None
    result: str | None = None  # archive path of AiSIO's JSON


@dataclass
class _Archive:
    name: str
    sha256: str
    files: dict[str, bytes]  # path relative to the CIJOE output root
    mtimes: dict[str, float]


# -- public entry point -------------------------------------------------------------------

def import_archive(archive: Path, experiment: str, environment: str, data_dir: Path, *,
                   progress: bool = True) -> ImportReport:
    """Import one AiSIO CIJOE archive (``.tar.gz`` or extracted folder) into
    ``data/raw/<experiment>/<environment>/``. ``experiment`` is a campaign of its own,
    ``aisio-<name>`` (tidied by :mod:`iolab.importers.aisio`), or a registered experiment
    with ``aisio_kinds`` (e.g. ``pcie_saturation``), whose chapter then shows the imported
    runs apart from its own; benchmarks of other kinds, or of other back ends than its
    ``aisio_backends``, are left out with a note.

    Re-importing is a no-op: runs already stored with the same raw output are skipped (and,
    having been checked when first imported, are not cross-checked again). A run id stored
    with different raw output (e.g. from another archive of the same parameters) counts as
    failed, with a note; nothing stored is ever overwritten.
    """
    target = _target(experiment)
    arc = _open(Path(archive))
    report = ImportReport(arc.name, experiment, environment)
    commands = _index(arc, report)
    host, fingerprint = _host(arc, commands, report)
    every = _repetitions(commands, report)
    _pair_results(every, arc, report)
    reps = _taken(every, target, arc, report)
    own_campaign = isinstance(target, exp.ImportedCampaign)
    if not reps and not own_campaign:
        raise InputError(arc.name, "experiment", f"the archive holds no benchmark that "
                         f"{experiment} takes; nothing was stored ({report.notes[-1]})",
                         allowed=f"archives with {', '.join(target.aisio_kinds)} runs on "
                                 f"the {', '.join(target.aisio_backends)} back end")
    store = open_store(target, environment, data_dir)
    if own_campaign:
        stored = store.read_host()
        diff = [] if stored is None else [k for k in ("cpu", "topology")
                                          if stored.get(k) != host.get(k)]
        store.check_or_record_host(host, fingerprint, diff)
    else:
        # the experiment's host.json belongs to the host that runs it; the archive's host
        # is kept beside its other raw extras, so an import never blocks a campaign
        _write_host_extra(store, arc, host, fingerprint, report)
    _store_extras(arc, commands, store, report)

    topology = {entry["cpu"]: entry["core"] for entry in host.get("topology") or []}
    ordinals: Counter = Counter()
    iterator = reps
    if progress:
        from tqdm import tqdm
        iterator = tqdm(reps, desc=f"importing {arc.name}", unit="run", leave=False)
    stored = _stored_stdout_shas(store)
    with store.batch():  # one sync for the whole archive
        for rep in iterator:
            _import_one(rep, arc, store, stored, experiment, environment, fingerprint,
                        topology, ordinals, report)
    return report


def _taken(reps: list[Repetition], target: Any, arc: _Archive,
           report: ImportReport) -> list[Repetition]:
    """The repetitions of the benchmark kinds and back ends the target takes (every one for
    a campaign of its own); each left out is noted."""
    kinds = getattr(target, "aisio_kinds", None)
    backends = getattr(target, "aisio_backends", None)
    taken = []
    for rep in reps:
        if kinds is not None and rep.bench.kind not in kinds:
            report.notes.append(f"{rep.bench.path}: a '{rep.bench.kind}' benchmark, which "
                                f"{report.experiment} does not take ({', '.join(kinds)}); "
                                "not imported")
            continue
        backend = _command_params(rep.bench, arc.name)["backend"]
        if backends is not None and backend not in backends:
            report.notes.append(f"{rep.bench.path}: back end {backend!r}, which "
                                f"{report.experiment} does not take ({', '.join(backends)}); "
                                "not imported")
            continue
        taken.append(rep)
    return taken


def _write_host_extra(store: Store, arc: _Archive, host: dict[str, Any], fingerprint: str,
                      report: ImportReport) -> None:
    folder = store.root / "extras" / _stem(arc.name)
    folder.mkdir(parents=True, exist_ok=True)
    data = json.dumps({**host, "fingerprint": fingerprint}, indent=2, sort_keys=True)
    _write_once(folder / "host.json", (data + "\n").encode(), report)


def _target(experiment: str) -> Any:
    """Where an import goes: a campaign of its own (``aisio-<name>``), or a registered
    experiment that declares which AiSIO benchmark kinds it takes (``aisio_kinds``)."""
    if experiment.startswith(exp.PREFIX):
        return exp.ImportedCampaign(experiment)
    from iolab.core import registry

    takers = [e.name for e in registry.all_experiments() if getattr(e, "aisio_kinds", ())]
    allowed = f"{exp.PREFIX}<name>, or one of {', '.join(takers)}"
    if experiment not in registry.names():
        raise InputError(None, "experiment", f"unknown experiment {experiment!r}: imported "
                         f"campaigns are named '{exp.PREFIX}<name>' or go into an experiment "
                         "that takes AiSIO's runs", allowed=allowed)
    target = registry.get(experiment)
    if not getattr(target, "aisio_kinds", ()):
        raise InputError(None, "experiment", f"{experiment} cannot take runs imported from "
                         "AiSIO's archives", allowed=allowed)
    return target


# -- reading the archive ------------------------------------------------------------------

def _open(path: Path) -> _Archive:
    """All regular files of the archive, keyed by their path below the CIJOE output root."""
    if path.is_dir():
        raw = {str(p.relative_to(path).as_posix()): p for p in path.rglob("*") if p.is_file()}
        files = {name: p.read_bytes() for name, p in raw.items()}
        mtimes = {name: p.stat().st_mtime for name, p in raw.items()}
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
        sha = digest.hexdigest()
    elif path.is_file():
        files, mtimes = {}, {}
        try:
            with tarfile.open(path, "r:*") as tar:
                for member in tar:
                    if member.isfile():
                        files[member.name] = tar.extractfile(member).read()
                        mtimes[member.name] = float(member.mtime)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise InputError(path, None, f"not a readable tar archive ({exc})") from None
        sha = sha256_file(path)
    elif path.exists():  # a FIFO or a device: never read (a FIFO would block for ever)
        raise InputError(path, None, "is neither a regular file nor a folder",
                         allowed="a .tar.gz archive or its extracted folder")
    else:
        raise InputError(path, None, "no such archive or folder")
    roots = {m.group("root") for m in map(_STATE.match, files) if m}
    if len(roots) != 1:
        raise InputError(path, None, "not a CIJOE output: expected NNN_<step>/cmd_XX.state files "
                         f"under one root folder, found {len(roots)} roots {sorted(roots)}")
    root = roots.pop()
    name = path.name
    return _Archive(name, sha,
                    {n[len(root):]: b for n, b in files.items() if n.startswith(root)},
                    {n[len(root):]: t for n, t in mtimes.items() if n.startswith(root)})


def _index(arc: _Archive, report: ImportReport) -> list[Command]:
    """Every command of every step, in order, classified."""
    commands = []
    for path in arc.files:
        match = _STATE.match(path)
        if not match:
            continue
        state = parse_cijoe_state(arc.files[path], f"{arc.name}:{path}")
        if "cmd" not in state:
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without 'cmd'")
        if not all(isinstance(state.get(k), (int, float)) for k in ("begin", "end")):
            raise ParseError(f"{arc.name}:{path}", "a CIJOE .state without numeric 'begin' and 'end'")
        output = path[:-len(".state")] + ".output"
        if output not in arc.files:
            report.notes.append(f"{path}: no .output next to it; treated as empty")
        commands.append(Command(match.group("step"), int(match.group("n")), state,
                                arc.files[path], arc.files.get(output, b"")))
    commands.sort(key=lambda c: (c.step, c.number))
    _classify_all(commands)
    counts = Counter(c.kind for c in commands)
    report.notes.append(f"indexed {len(commands)} commands in "
                        f"{len({c.step for c in commands})} steps: "
                        + ", ".join(f"{n} {kind}" for kind, n in counts.most_common()))
    killed = [c for c in commands if c.state.get("err") == -15 and c.cmd.startswith("pkill")]
    if killed:
        report.notes.append(f"{len(killed)} 'pkill -f …' commands ended with err -15: pkill "
                            f"matched the shell CIJOE ran it in, so anything after it on the same "
                            f"line (AiSIO's 'sleep 0.2' after 'pkill -f dcgmi') never ran")
    return commands


def classify(cmd: str, capture_files: dict[str, str] | None = None) -> str:
    """The kind of one CIJOE command line.

    ``capture_files`` maps files that started captures write to the capture's kind
    (``DCGM_START`` or ``CPUFREQ_START``), so that ``cat <file>`` is recognised as reading it.
    """
    return _classify(cmd, _words(cmd), capture_files)


def _classify(cmd: str, argv: list[str], capture_files: dict[str, str] | None) -> str:
    """:func:`classify` with the line already split (``argv``)."""
    if "dcgmi dmon" in cmd:  # started inside 'screen -dm bash -c "…"'
        return DCGM_START
    program = _program(argv)
    if not program:
        return OTHER
    name = PurePosixPath(program[0]).name
    if name == "xnvmeperf" and len(program) > 1 and program[1] in ("run", "cuda-run"):
        return exp.XNVMEPERF_RUN if program[1] == "run" else exp.XNVMEPERF_CUDA_RUN
    if name == "bdevperf":  # the text table; bdevperf.py (RPC client) prints JSON instead
        return exp.BDEVPERF
    if name == "spdk_nvme_perf":
        return exp.SPDK_NVME_PERF
    if name == "cpu_freq_logger.sh":
        return CPUFREQ_START
    if name == "p2pBandwidthLatencyTest":
        return P2P
    if name == "lscpu":
        return LSCPU
    if name == "cat" and len(program) == 2 and capture_files and program[1] in capture_files:
        return {DCGM_START: DCGM_READ, CPUFREQ_START: CPUFREQ_READ}[capture_files[program[1]]]
    return OTHER


def _words(cmd: str) -> list[str]:
    """A command line split as the shell would; on unbalanced quotes, split on whitespace."""
    try:
        return shell_words.split(cmd)
    except ValueError:
        return cmd.split()


def _program(argv: list[str]) -> list[str]:
    """The argv of the program a command line runs, past GNU time (and its options),
    taskset, env, sudo, nohup and VAR=value assignments."""
    at = 0
    while at < len(argv):
        word = PurePosixPath(argv[at]).name
        if word in ("time", "sudo", "nohup", "env") or "=" in argv[at] and not argv[at].startswith("-"):
            at += 1
            while word == "time" and at < len(argv) and argv[at].startswith("-"):
                at += 2 if argv[at] in ("-o", "-f", "--output", "--format") else 1
        elif word == "taskset":
            at += 3 if at + 1 < len(argv) and argv[at + 1].startswith("-") else 2
        else:
            return argv[at:]
    return []


def _classify_all(commands: list[Command]) -> None:
    """Classify in order: a capture's file is known once the command starting it was seen."""
    capture_files: dict[str, str] = {}
    for command in commands:
        command.kind = _classify(command.cmd, command.argv, capture_files)
        if command.kind == CPUFREQ_START and len(_program(command.argv)) > 1:
            capture_files[_program(command.argv)[1]] = CPUFREQ_START
        elif command.kind == DCGM_START:
            target = _DMON_OUTPUT.search(command.cmd)
            if target:
                capture_files[target.group(1)] = DCGM_START


# -- pairing --------------------------------------------------------------------------------

def _repetitions(commands: list[Command], report: ImportReport) -> list[Repetition]:
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


def _result_name(name: str) -> dict[str, Any] | None:
    """The fields encoded in an AiSIO result file name, or None if it is not one."""
    match = _RESULT_CPU.match(name) or _RESULT_CUDA.match(name)
    if match is None:
        return None
    return {k: (int(v) if v.isdigit() else v) for k, v in match.groupdict().items()}


def _pair_results(reps: list[Repetition], arc: _Archive, report: ImportReport) -> None:
    """Give each repetition its AiSIO result JSON (see the module docstring)."""
    results = {}
    for path in arc.files:
        if path.startswith("artifacts/") and path.endswith(".out"):
            fields = _result_name(PurePosixPath(path).name)
            if fields is None:
                report.notes.append(f"{path}: not an AiSIO result name this importer knows; ignored")
            else:
                results[path] = fields
    unused = set(results)
    by_order = []
    # the results by their _name_key, for SPDK kinds and others (the key depends on which)
    by_key: dict[bool, dict[tuple, list[str]]] = {}
    ordered = sorted(reps, key=lambda r: r.bench.state["begin"])
    for i, rep in enumerate(ordered):
        kind = rep.bench.kind
        key = _name_key(_command_params(rep.bench, arc.name), kind)
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


def _command_params(bench: Command, archive: str) -> dict[str, Any]:
    """Parameters visible on a benchmark's command line, with AiSIO's names (bdevperf's
    devices from its table: :func:`_bdevperf_bdevs`).

    ``cpus`` (the cpumask's CPU ids) is not an AiSIO parameter; it selects the frequency
    columns. cuda-run has no cpumask: AiSIO names it ``c0`` and so does this. A command line
    the tool's adapter cannot read raises InputError naming the ``.state`` file. Read once
    per command (pairing, selection and import all ask).
    """
    if bench.params is None:
        bench.params = _read_command_params(bench, archive)
    return bench.params


def _read_command_params(bench: Command, archive: str) -> dict[str, Any]:
    argv = _program(bench.argv)
    kind = bench.kind
    params: dict[str, Any] = {"tool": TOOL_NAMES[kind]}
    try:
        if kind in (exp.XNVMEPERF_RUN, exp.XNVMEPERF_CUDA_RUN):
            opts = xnvmeperf.read_argv(argv)
            cpus, devices = opts["cpumask"], opts["devices"]
            params.update(qdepth=opts["qdepth"], iosize=opts["iosize"], runtime_s=opts["runtime"],
                          # xnvmeperf's defaults where the line leaves them out (its echo agrees)
                          nqueues=(xnvmeperf.DEFAULT_NQUEUES if opts["nqueues"] is None
                                   else opts["nqueues"]),
                          backend=opts["be"] or (xnvmeperf.CUDA_BACKEND
                                                 if kind == exp.XNVMEPERF_CUDA_RUN else None))
        elif kind == exp.SPDK_NVME_PERF:
            opts = spdk_nvme_perf.read_argv(argv)
            cpus, devices = opts["core_mask"], opts["devices"]
            params.update(qdepth=opts["io_depth"], iosize=opts["io_size"], runtime_s=opts["time"],
                          nqueues=None, backend="spdk")
        else:  # bdevperf: -c names its JSON config, which holds the devices
            opts = _options(argv[1:], _BDEVPERF_VALUED)
            mask = _last(opts, "-m")
            cpus = spdk_nvme_perf.core_mask_cpus(mask) if mask else None
            devices = _bdevperf_bdevs(bench)
            params.update(qdepth=_int(_last(opts, "-q")), iosize=_int(_last(opts, "-o")),
                          runtime_s=_int(_last(opts, "-t")), nqueues=None, backend="spdk")
    except InputError as exc:
        raise InputError(f"{archive}:{bench.path}.state", exc.key, exc.problem,
                         exc.allowed) from None
    params["cpus"] = cpus
    params["ncpus"] = (len(cpus) if cpus is not None
                       else 0 if kind == exp.XNVMEPERF_CUDA_RUN else None)
    params["ndevs"] = len(devices) if devices is not None else None
    return params


def _bdevperf_bdevs(bench: Command) -> list[str] | None:
    """The bdevs a bdevperf run measured (None without a readable table).

    Its command line names only its ``-c`` config, and the archive keeps AiSIO's configs
    (``<step>/bdevperf-configs/d<N>.json``) but not which one was copied there for a run.
    Each attaches one controller per device and bdevperf runs a job on every bdev, so the
    bdevs of the table are the run's devices.
    """
    text = bench.output_bytes.decode("utf-8", errors="replace")
    try:
        jobs = parse_bdevperf_text(text, f"{bench.path}.output")["jobs"]
    except ParseError:
        return None
    return sorted({job["name"] for job in jobs})


def _options(words: list[str], valued: set[str]) -> dict[str, list[str]]:
    """{option: [values]} for the options in ``valued`` (``-o value`` or ``-o=value``)."""
    out: dict[str, list[str]] = {}
    at = 0
    while at < len(words):
        name, eq, value = words[at].partition("=")
        if eq and name in valued:
            out.setdefault(name, []).append(value)
        elif words[at] in valued and at + 1 < len(words):
            out.setdefault(words[at], []).append(words[at + 1])
            at += 1
        at += 1
    return out


def _last(opts: dict[str, list[str]], name: str) -> str | None:
    return opts[name][-1] if name in opts else None


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


# -- host record and extras -------------------------------------------------------------------

def _host(arc: _Archive, commands: list[Command], report: ImportReport) -> tuple[dict, str]:
    """host.json content from the archive's ``lscpu -e`` and config, and its fingerprint.

    Each run step prints ``lscpu -e`` before it sets SMT, so an output can show the sibling
    threads offline; the output with the most online CPUs describes the host.
    """
    outputs = []
    for command in commands:
        if command.kind == LSCPU and command.state.get("err") == 0:
            text = command.output_bytes.decode("utf-8", errors="replace")
            topology = parse_lscpu_e(text, f"{arc.name}:{command.path}.output")
            offline = offline_cpus(text)
            outputs.append((len(topology), command, text, topology))
            if offline:
                report.notes.append(f"{command.path}: lscpu -e shows {offline} of "
                                    f"{offline + len(topology)} CPUs offline (it ran before the "
                                    f"step set SMT)")
    topology = lscpu_text = cpu = None
    if outputs:
        _, chosen, lscpu_text, topology = max(outputs, key=lambda o: o[0])
        for _, command, _, other in outputs:
            if other != topology and len(other) == len(topology):
                report.notes.append(f"{command.path}: lscpu topology differs from {chosen.path}")
        per_core = Counter((e["package"], e["core"]) for e in topology)
        cpu = {"model_name": None, "logical_cpus": len(topology),
               "threads_per_core": max(per_core.values())}
    else:
        report.notes.append("no lscpu output in the archive: host topology unknown")
    host = {
        "schema_version": 1,
        "source": SOURCE,
        "hostname": None,  # CIJOE does not record it
        "archive": arc.name,
        "archive_sha256": arc.sha256,
        "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "topology": topology,
        "lscpu_e": lscpu_text,
        **_config(arc, report),
    }
    canonical = json.dumps({"source": SOURCE, "cpu": cpu, "topology": topology},
                           sort_keys=True, separators=(",", ":"))
    return host, hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _config(arc: _Archive, report: ImportReport) -> dict[str, Any]:
    """OS, devices and software versions from CIJOE's merged config (``config.orig``).

    Only these keys are copied: the configs may hold an SSH password.
    """
    raw = arc.files.get("config.orig")
    if raw is None:
        report.notes.append("no config.orig in the archive: OS, devices and versions unknown")
        return {"os": None, "devices": None, "software": None}
    try:
        config = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        report.notes.append(f"config.orig is not valid TOML ({exc}); OS, devices and versions unknown")
        return {"os": None, "devices": None, "software": None}
    software = {}

    def walk(table: dict, prefix: str) -> None:
        picked = {k: table[k] for k in ("remote", "tag", "branch", "version", "apt_version")
                  if isinstance(table.get(k), str)}
        if picked and prefix not in ("", "os") and not prefix.startswith("cijoe"):
            software[prefix.removesuffix(".repository")] = picked
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}.{key}" if prefix else key)

    walk(config, "")
    os_table = config.get("os") if isinstance(config.get("os"), dict) else {}
    return {"os": {k: os_table.get(k) for k in ("distro", "version")} or None,
            "devices": [d.get("pci_addr") for d in config.get("devices", []) if isinstance(d, dict)],
            "software": software}


def _store_extras(arc: _Archive, commands: list[Command], store: Store,
                  report: ImportReport) -> None:
    """The p2pBandwidthLatencyTest output (with its .state) under ``extras/<archive>/``.

    Only raw files are stored; the output is parsed here to check it and to compare AiSIO's
    ``artifacts/cuda-sample-p2p-bandwidth`` with the matrix it came from.
    """
    p2p = [c for c in commands if c.kind == P2P]
    if not p2p:
        return
    folder = store.root / "extras" / _stem(arc.name)
    folder.mkdir(parents=True, exist_ok=True)
    for command in p2p:
        name = f"{P2P}-{command.step}-cmd_{command.number:02d}"
        for suffix, data in ((".output", command.output_bytes), (".state", command.state_bytes)):
            _write_once(folder / f"{name}{suffix}", data, report)
        source = f"{arc.name}:{command.path}.output"
        try:
            parsed = parse_p2p_bandwidth(command.output_bytes.decode("utf-8", errors="replace"), source)
        except ParseError as exc:
            report.notes.append(f"{exc} (stored unparsed)")
            continue
        aisio_value = arc.files.get("artifacts/cuda-sample-p2p-bandwidth")
        ours = p2p_bandwidth.aisio_reference(parsed)
        if aisio_value is not None and ours is not None:
            theirs = float(aisio_value.decode().strip())
            if not _close(ours, theirs):
                report.disagreements.append(Disagreement(
                    "artifacts/cuda-sample-p2p-bandwidth", "p2p bidirectional (0,1)/(1,0) mean GB/s",
                    ours, theirs))


def _stem(name: str) -> str:
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _write_once(path: Path, data: bytes, report: ImportReport) -> None:
    """Write a raw extra file; keep an existing identical one; never overwrite a different one."""
    if path.exists():
        if path.read_bytes() != data:
            report.notes.append(f"{path}: exists with different content; kept the stored file")
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# -- one repetition ----------------------------------------------------------------------------

def _import_one(rep: Repetition, arc: _Archive, store: Store, stored: dict[str, str | None],
                experiment: str, environment: str, fingerprint: str, topology: dict[int, int],
                ordinals: Counter, report: ImportReport) -> None:
    bench = rep.bench
    cmd_params = _command_params(bench, arc.name)
    aisio = None
    label = rep.result or f"{bench.path}.output"
    if rep.result:
        try:
            aisio = json.loads(arc.files[rep.result])
        except json.JSONDecodeError as exc:
            report.notes.append(f"{rep.result}: not valid JSON ({exc}); no cross-check")
    name_fields = _result_name(PurePosixPath(rep.result).name) if rep.result else None

    params = {k: cmd_params[k] for k in ("qdepth", "iosize", "ndevs", "ncpus", "nqueues", "tool",
                                         "backend")}
    if bench.kind == exp.XNVMEPERF_CUDA_RUN:
        # AiSIO's cuda branch never sets SMT, turbo or the governor but records 0s; not kept.
        params.update({k: None for k in JSON_SETTINGS})
    else:
        params.update({k: _setting(aisio, k) for k in JSON_SETTINGS})
    settings = {"runtime_s": cmd_params["runtime_s"], "tool": params["tool"],
                "backend": params["backend"], "source": "aisio"}
    identity = exp.identity(experiment, environment, params, settings)
    key = json.dumps(identity, sort_keys=True)
    number = name_fields["rep"] if name_fields is not None else ordinals[key]
    ordinals[key] += 1
    rid = run_id(identity, number)
    report.run_ids.append(rid)

    stdout_sha = hashlib.sha256(bench.output_bytes).hexdigest()
    if rid in stored:
        previous = stored[rid]
        if previous == stdout_sha:
            report.skipped += 1
        else:
            report.failed += 1
            report.notes.append(f"{label}: run id {rid} is already stored with different raw "
                                f"output (another archive with the same parameters?); import it "
                                f"into another experiment or environment name")
        return

    stored[rid] = stdout_sha  # a second repetition of this id in the archive is a clash
    tmp = store.begin(rid)
    files = {exp.STDOUT: bench.output_bytes, exp.STATE: bench.state_bytes}
    if rep.cpufreq:
        files[exp.CPUFREQ] = rep.cpufreq.output_bytes
    if rep.dcgm:
        files[exp.DCGM] = rep.dcgm.output_bytes
    if rep.result:
        files[exp.AISIO_JSON] = arc.files[rep.result]
    for name, data in files.items():
        (tmp / name).write_bytes(data)

    dcgm = _dmon_options(rep.dcgm_start, arc.name) if rep.dcgm else None
    manifest = RunManifest(
        run_id=rid, identity=identity, experiment=experiment, environment=environment,
        rep=number, point=params, settings=settings,
        config_id=config_id(experiment, environment, settings), tool=params["tool"],
        argv=bench.argv, cwd="(recorded by CIJOE)", cpus=cmd_params["cpus"],
        host_fingerprint=fingerprint, started_at=_iso(bench.state.get("begin")),
        ended_at=_iso(bench.state.get("end")), duration_s=bench.state.get("elapsed"),
        exit_code=bench.state.get("err"),
        extra={"cmd": bench.cmd, "tool_kind": bench.kind, "dcgm": dcgm, "imported_from": {
            "source": SOURCE, "archive": arc.name, "archive_sha256": arc.sha256,
            "state": f"{bench.path}.state", "output": f"{bench.path}.output",
            "cpufreq": f"{rep.cpufreq.path}.output" if rep.cpufreq else None,
            "dcgm": f"{rep.dcgm.path}.output" if rep.dcgm else None,
            "aisio_result": rep.result}})
    problem = None
    try:
        derived = exp.derive(tmp, bench.kind, cmd_params["cpus"], dcgm)
    except ParseError as exc:
        problem, derived = str(exc), None
    if derived is not None:
        problem = derived.metrics["run_problem"] or None
        _cross_check(rep, label, rid, cmd_params, derived, aisio, name_fields, topology, report)
        _check_log_clock(rep, label, derived, report)
        report.notes.extend(f"{label}: {n}" for n in derived.notes)
    if bench.state.get("err") != 0:
        problem = f"the benchmark exited with err {bench.state.get('err')}" + (
            f"; {problem}" if problem else "")
    if problem:
        manifest.failure = problem
        store.commit_failed(tmp, manifest)
        report.failed += 1
        report.notes.append(f"{label}: stored as failed: {problem}")
    else:
        store.commit(tmp, manifest)
        report.imported += 1


def _setting(aisio: dict | None, key: str) -> Any:
    """A setting from AiSIO's JSON; its booleans as 0/1 (archived files already use 0/1)."""
    if aisio is None:
        return None
    value = aisio.get(key)
    return int(value) if isinstance(value, bool) else value


def _stored_stdout_shas(store: Store) -> dict[str, str | None]:
    """The sha256 of the stdout of every run stored (complete or failed), by run id, read
    through the manifest module (so version-1 imports are found under their new ids)."""
    runs = {r.run_id: r.manifest.files for r in store.complete_runs()}
    for folder in store.failed_runs():
        try:
            doc = mf.load_json(folder / mf.FILE)
        except mf.UnreadableManifest:
            continue
        if mf.check_version(doc, folder / mf.FILE) == 1:
            manifest = store.upgrade(doc, folder / mf.FILE, store.read_host() or {})
        else:
            manifest = mf.from_json(doc, folder / mf.FILE)
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
    if not isinstance(epoch, (int, float)):
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="milliseconds")


# -- cross-checks ------------------------------------------------------------------------------

def _close(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= RTOL * max(abs(a), abs(b))
    return a == b


def _cross_check(rep: Repetition, label: str, rid: str, cmd_params: dict, derived: exp.Derived,
                 aisio: dict | None, name_fields: dict | None, topology: dict[int, int],
                 report: ImportReport) -> None:
    """List every difference between what iolab derives and what AiSIO recorded."""
    def differ(field_name: str, ours: Any, theirs: Any) -> None:
        report.disagreements.append(Disagreement(label, field_name, ours, theirs, rid))

    if derived.echo is not None:
        announced = {"queue_depth": cmd_params["qdepth"], "io_size": cmd_params["iosize"],
                     "runtime": cmd_params["runtime_s"], "queues_per_device": cmd_params["nqueues"],
                     "devices_total": cmd_params["ndevs"]}
        for key, value in announced.items():
            if key in derived.echo and derived.echo[key] != value:
                report.notes.append(f"{label}: the command line gives {key} {value}, but "
                                    f"xnvmeperf's echo says {derived.echo[key]}")
    if aisio is None:
        return
    metrics = derived.metrics
    for key in ("iops", "mibs"):
        if not _close(metrics[key], aisio.get(key)):
            differ(key, metrics[key], aisio.get(key))
    if metrics["cpu_usage"] != aisio.get("cpu_usage"):
        differ("cpu_usage", metrics["cpu_usage"], aisio.get("cpu_usage"))
    if not _close(metrics["dcgm_p95_bytes_per_s"], aisio.get("dcgm")):
        differ("dcgm", metrics["dcgm_p95_bytes_per_s"], aisio.get("dcgm"))
    _check_cpu_freqs(derived, aisio, differ, topology)
    for key in ("qdepth", "iosize", "ndevs", "ncpus", "tool", "backend"):
        if key == "backend" and rep.bench.kind in SPDK_KINDS:
            continue
        if key in aisio and aisio[key] != cmd_params[key]:
            differ(f"{key} (command line vs JSON)", cmd_params[key], aisio[key])
    if name_fields:
        for key in ("ndevs", "ncpus", "iosize", "qdepth", "backend", "tool", "thr_sib", "smt",
                    "turbo", "stress"):
            if key in name_fields and key in aisio and _setting(aisio, key) != name_fields[key]:
                differ(f"{key} (JSON vs its file name)", aisio[key], name_fields[key])
        named = name_fields.get("freq")
        if named is not None:
            # The name holds the governor, or the fixed frequency in GHz for 'userspace'.
            if _is_number(named):
                if not _close(float(named), aisio.get("fixed_freq")):
                    differ("fixed_freq (JSON vs its file name)", aisio.get("fixed_freq"), named)
            elif aisio.get("cpu_governor") != named:
                differ("cpu_governor (JSON vs its file name)", aisio.get("cpu_governor"), named)


def _check_cpu_freqs(derived: exp.Derived, aisio: dict, differ, topology: dict[int, int]) -> None:
    recorded = aisio.get("cpu_freqs")
    ours = derived.cpu_freqs
    if not recorded or recorded == "N/A":
        if ours:
            differ("cpu_freqs", "present", recorded)
        return
    if ours is None:
        differ("cpu_freqs", None, "present")
        return
    recorded_cpus = [entry[1][0] for entry in recorded]
    if sorted(recorded_cpus) != sorted(ours):
        differ("cpu_freqs CPUs", sorted(ours), recorded_cpus)
        return
    for (mean, variance), (cpu, core) in recorded:
        if not _close(ours[cpu][0], mean):
            differ(f"cpu_freqs[cpu {cpu}] mean kHz", ours[cpu][0], mean)
        if not _close(ours[cpu][1], variance):
            differ(f"cpu_freqs[cpu {cpu}] variance", ours[cpu][1], variance)
        if cpu in topology and topology[cpu] != core:
            differ(f"cpu_freqs[cpu {cpu}] core id (lscpu)", topology[cpu], core)


def _is_number(text: Any) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _check_log_clock(rep: Repetition, label: str, derived: exp.Derived,
                     report: ImportReport) -> None:
    """The logger's first sample should carry the time its start command ran (UTC)."""
    if rep.cpufreq is None or rep.cpufreq_start is None:
        return
    lines = derived.cpufreq_lines
    if lines is None:  # derive did not read this run's log (no cpumask)
        lines = parse_cpufreq_log(rep.cpufreq.output_bytes.decode("utf-8", errors="replace"),
                                  label)["lines"]
    if not lines:
        return
    first = lines[0].timestamp.replace(tzinfo=timezone.utc).timestamp()
    started = float(rep.cpufreq_start.state["begin"])
    if not -1.0 <= first - started <= 2.0:
        report.notes.append(f"{label}: the frequency log starts at {first - started:+.1f} s from "
                            f"the logger's start command; its timestamps may not be UTC")

