"""Cross-checking what iolab re-derives from the archive's raw output against what AiSIO
recorded itself.

Every check's difference is listed in the report, never resolved silently: the re-derived
iops and mibs (relative tolerance :data:`RTOL`), cpu_usage (exact), dcgm p95 and the per-CPU
frequency mean and variance (relative :data:`RTOL`) against AiSIO's JSON; the JSON's
parameters against the command line and against its own file name; the p2p reference value
AiSIO wrote to ``artifacts/cuda-sample-p2p-bandwidth`` against the parsed matrix. It also
notes an xnvmeperf echo whose queues per device are not the default the command line leaves
them to (an echo that contradicts the command line's own options fails the run instead:
:mod:`iolab.importers.cijoe.runs`), and a frequency log whose clock is not UTC.

Responsible for: comparing values and recording each disagreement or note.
Not responsible for: deriving the values (:mod:`iolab.importers.aisio`,
:mod:`iolab.tools.p2p_bandwidth`) or deciding whether a run is stored as failed
(:mod:`iolab.importers.cijoe.runs`).
"""

from __future__ import annotations

import math
import re
from datetime import timezone
from typing import Any

from iolab.errors import excerpt
from iolab.importers import aisio as exp
from iolab.importers.cijoe.archive import Archive
from iolab.importers.cijoe.kinds import SPDK_KINDS, program_argv
from iolab.importers.cijoe.pairing import Repetition
from iolab.importers.cijoe.params import aisio_setting
from iolab.importers.cijoe.report import Disagreement, ImportReport
from iolab.parsers.cpufreq_log import parse_cpufreq_log
from iolab.tools import p2p_bandwidth, xnvmeperf

RTOL = 1e-6
P2P_RESULT = "artifacts/cuda-sample-p2p-bandwidth"
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= RTOL * max(abs(a), abs(b))
    return a == b


def cross_check(rep: Repetition, label: str, rid: str, cmd_params: dict, derived: exp.Derived,
                aisio: dict | None, name_fields: dict | None, topology: dict[int, int],
                 report: ImportReport) -> None:
    """List every difference between what iolab derives and what AiSIO recorded."""
    def differ(field_name: str, ours: Any, theirs: Any) -> None:
        report.disagreements.append(Disagreement(label, field_name, ours, theirs, rid))

    # an echo that contradicts an option the command line gives fails the run (the adapter's
    # foreign_report, in iolab.importers.cijoe.runs); one the line leaves out, xnvmeperf's
    # default, can only be noted
    if derived.echo is not None and _nqueues_left_out(rep):
        echoed = derived.echo.get("queues_per_device", cmd_params["nqueues"])
        if echoed != cmd_params["nqueues"]:
            report.notes.append(f"{label}: the command line leaves nqueues to xnvmeperf's "
                                f"default {cmd_params['nqueues']}, but xnvmeperf's echo says "
                                f"{excerpt(echoed)}")
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
            if (key in name_fields and key in aisio
                    and aisio_setting(aisio, key) != name_fields[key]):
                differ(f"{key} (JSON vs its file name)", aisio[key], name_fields[key])
        named = name_fields.get("freq")
        if named is not None:
            # The name holds the governor, or the fixed frequency in GHz for 'userspace'.
            if _is_number(named):
                if not _close(float(named), aisio.get("fixed_freq")):
                    differ("fixed_freq (JSON vs its file name)", aisio.get("fixed_freq"), named)
            elif aisio.get("cpu_governor") != named:
                differ("cpu_governor (JSON vs its file name)", aisio.get("cpu_governor"), named)


def _nqueues_left_out(rep: Repetition) -> bool:
    """Whether the benchmark's xnvmeperf command line leaves ``--nqueues`` out (its parameters
    were read from it already, so it reads)."""
    return xnvmeperf.read_argv(program_argv(rep.bench.argv))["nqueues"] is None


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


def check_log_clock(rep: Repetition, label: str, derived: exp.Derived,
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


def check_p2p(parsed: dict, arc: Archive, report: ImportReport) -> None:
    """AiSIO's ``artifacts/cuda-sample-p2p-bandwidth`` against the matrix it came from."""
    aisio_value = arc.files.get(P2P_RESULT)
    ours = p2p_bandwidth.aisio_reference(parsed)
    if aisio_value is not None and ours is not None:
        theirs = _p2p_value(aisio_value)
        if theirs is None:
            report.notes.append(f"{P2P_RESULT}: {excerpt(aisio_value[:40])} is not the one "
                                "number AiSIO writes there; no cross-check")
        elif not _close(ours, theirs):
            report.disagreements.append(Disagreement(
                P2P_RESULT, "p2p bidirectional (0,1)/(1,0) mean GB/s", ours, theirs))


def _p2p_value(data: bytes) -> float | None:
    """The GB/s AiSIO wrote to its p2p result (one decimal number), or None for anything else
    (it comes from the archive: not UTF-8, not a number, NaN or beyond a float)."""
    text = data.decode("utf-8", errors="replace").strip()
    if not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None
