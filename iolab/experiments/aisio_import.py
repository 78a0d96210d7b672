"""Campaigns imported from AiSIO CIJOE result archives: metrics re-derived from the raw files.

Campaigns written by :mod:`iolab.cijoe_import` are named ``aisio-<name>`` (:data:`PREFIX`);
the experiment registry hands every such name to this module. Each run folder holds the
files copied verbatim from the archive: ``stdout`` (the benchmark's CIJOE capture, stdout and
stderr merged, so GNU time's report is at its end), ``cijoe.state``, and where AiSIO made
them ``cpufreq.log`` (frequency logger), ``dcgm.txt`` (``dcgmi dmon``) and ``aisio.json``
(AiSIO's own per-repetition result, kept for comparison and never read here).

Metrics (tidy columns; AiSIO's names where AiSIO has the metric):

* ``iops``, ``mibs`` (MiB/s, 2^20 B/s): the tool's Total row.
* ``failed`` (count of failed commands; xnvmeperf only) and ``elapsed_s`` (the tool's own
  timer; xnvmeperf only). AiSIO ignores both.
* ``run_problem``: why the run is not usable (failed commands; for bdevperf its parser's
  problems, e.g. Fail/s > 0), else empty. As for native experiments, the importer stores a
  run with a problem as failed.
* ``cpu_usage``: GNU time's ``%CPU`` in percent of one CPU over the tool's whole lifetime
  (start-up and teardown included, as in AiSIO); None where GNU time printed ``?``.
* ``dcgm_p95_bytes_per_s``: AiSIO's ``dcgm``, the p95 of all 100 ms samples of DCGM field
  1010 (PCIe RX bytes/s incl. protocol overhead) over the whole capture, which starts before
  and ends after the benchmark; ``dcgm_mean_bytes_per_s``: their mean (idle samples pull it
  down). None without a capture.
* ``cpufreq_mean_khz``: AiSIO's frequency figure: per CPU of the run's cpumask, the mean of
  the 10 %/10 % trimmed log (:func:`~iolab.parsers.cpufreq_log.aisio_cpu_freqs`), averaged
  over those CPUs. ``cpufreq_window_mean_khz``: the mean over the same CPUs of the samples
  whose whole timestamp second lies inside the benchmark's CIJOE begin/end (the log's
  timestamps are UTC in the archives seen so far; the importer checks). None without a log,
  for runs without a cpumask (cuda-run), or when no sample falls inside.

Responsible for: the experiment-module interface of imported campaigns (``NAME``,
``KNOB_VARIABLES``, ``parse_run``) and the derivation shared by ``parse_run`` and the importer
(:func:`derive`). Not responsible for: reading archives, pairing files or writing the store
(:mod:`iolab.cijoe_import`). Imported campaigns have no notebook spec and cannot be run, so
this module has no ``tool``, ``collectors`` or ``build_argv``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from ..errors import ParseError
from ..parsers.bdevperf import parse_bdevperf_text
from ..parsers.cpufreq_log import aisio_cpu_freqs, parse_cpufreq_log
from ..parsers.dcgm_dmon import aisio_p95, parse_dcgm_dmon, window_stats
from ..parsers.gnu_time import parse_gnu_time_default
from ..parsers.spdk_nvme_perf import parse_spdk_nvme_perf
from ..parsers.xnvmeperf import parse_xnvmeperf

NAME = "aisio_import"
PREFIX = "aisio-"
KNOB_VARIABLES: dict[str, str] = {}  # the importer sets no knob; AiSIO's settings are params

# The benchmark kinds the importer recognises (value of "tool_kind" in run.json).
XNVMEPERF_RUN = "xnvmeperf run"
XNVMEPERF_CUDA_RUN = "xnvmeperf cuda-run"
BDEVPERF = "bdevperf"
SPDK_NVME_PERF = "spdk_nvme_perf"
BENCHMARK_KINDS = (XNVMEPERF_RUN, XNVMEPERF_CUDA_RUN, BDEVPERF, SPDK_NVME_PERF)

DCGM_RX_FIELD = 1010  # DCGM_FI_PROF_PCIE_RX_BYTES, the field AiSIO reports

# File names in a run folder.
STDOUT, STATE, AISIO_JSON = "stdout", "cijoe.state", "aisio.json"
CPUFREQ, DCGM = "cpufreq.log", "dcgm.txt"


@dataclass
class Derived:
    """What :func:`derive` finds in one run folder."""

    metrics: dict[str, Any]
    echo: dict[str, Any] | None = None  # xnvmeperf's argument echo
    cpu_freqs: dict[int, tuple[float, float]] | None = None  # AiSIO's (mean, variance) per CPU
    notes: list[str] = field(default_factory=list)


def parse_run(run_dir: Path) -> dict[str, Any]:
    """Metrics of one stored run, re-derived from its raw files (see the module docstring)."""
    manifest = json.loads((Path(run_dir) / "run.json").read_text())
    return derive(Path(run_dir), manifest).metrics


def derive(run_dir: Path, manifest: dict[str, Any]) -> Derived:
    """Parse the raw files of one run; ``manifest`` supplies ``tool_kind``, ``cpus`` (the
    cpumask's CPU ids, or None) and ``dcgm`` ({``field_ids``, ``gpu_ids``} from the dmon
    command line, or None). Raises ParseError when any raw file is malformed.
    """
    stdout_path = run_dir / STDOUT
    stdout = stdout_path.read_text(encoding="utf-8", errors="replace")
    kind = manifest["tool_kind"]
    echo = None
    failed = elapsed_s = None
    problems: list[str] = []
    if kind in (XNVMEPERF_RUN, XNVMEPERF_CUDA_RUN):
        report = parse_xnvmeperf(stdout, str(stdout_path))
        expected = "cuda-run" if kind == XNVMEPERF_CUDA_RUN else "run"
        if report["kind"] != expected:
            raise ParseError(stdout_path, f"the command was 'xnvmeperf {expected}', but the "
                             f"output is a '{report['kind']}' report")
        iops, mibs = report["totals"]["iops"], report["totals"]["mibs"]
        failed, elapsed_s, echo = report["totals"]["failed"], report["elapsed_s"], report["echo"]
        if failed:
            problems.append(f"{failed} failed commands")
    elif kind == SPDK_NVME_PERF:
        total = parse_spdk_nvme_perf(stdout, str(stdout_path))["total"]
        iops, mibs = total["iops"], total["mibs"]
    elif kind == BDEVPERF:
        report = parse_bdevperf_text(stdout, str(stdout_path))
        iops, mibs, problems = report["iops"], report["mibs"], report["problems"]
    else:
        raise ParseError(stdout_path, f"iolab has no parser for {kind!r} output")
    time = parse_gnu_time_default(stdout, str(stdout_path))
    problem = "; ".join(problems)
    derived = Derived(metrics={"iops": iops, "mibs": mibs, "failed": failed,
                               "elapsed_s": elapsed_s, "cpu_usage": time["cpu_percent"],
                               "run_problem": problem},
                      echo=echo)
    derived.metrics.update(_dcgm(run_dir, manifest.get("dcgm"), derived.notes))
    derived.metrics.update(_cpufreq(run_dir, manifest.get("cpus"), derived))
    return derived


def _dcgm(run_dir: Path, dcgm: dict | None, notes: list[str]) -> dict[str, float | None]:
    path = run_dir / DCGM
    if not path.exists() or not dcgm:
        return {"dcgm_p95_bytes_per_s": None, "dcgm_mean_bytes_per_s": None}
    parsed = parse_dcgm_dmon(path.read_text(encoding="utf-8", errors="replace"), str(path),
                             field_ids=dcgm["field_ids"])
    notes.extend(parsed["notes"])
    if DCGM_RX_FIELD not in parsed["field_ids"]:
        raise ParseError(path, f"field {DCGM_RX_FIELD} (PCIe RX) was not sampled "
                         f"(fields {parsed['field_ids']})")
    if len(dcgm["gpu_ids"]) != 1:
        raise ParseError(path, f"dmon watched GPUs {dcgm['gpu_ids']}; the RX figure needs one GPU")
    entity = f"GPU {dcgm['gpu_ids'][0]}"
    if entity not in parsed["samples"]:
        raise ParseError(path, f"no rows for {entity} (entities: {sorted(parsed['samples'])})")
    name = parsed["fields"][parsed["field_ids"].index(DCGM_RX_FIELD)]
    values = parsed["samples"][entity][name]
    return {"dcgm_p95_bytes_per_s": aisio_p95(values),
            "dcgm_mean_bytes_per_s": window_stats(values)["mean"]}


def _cpufreq(run_dir: Path, cpus: list[int] | None, derived: Derived) -> dict[str, float | None]:
    path = run_dir / CPUFREQ
    if not path.exists() or not cpus:
        return {"cpufreq_mean_khz": None, "cpufreq_window_mean_khz": None}
    text = path.read_text(encoding="utf-8", errors="replace")
    derived.cpu_freqs = aisio_cpu_freqs(text, cpus, str(path))
    parsed = parse_cpufreq_log(text, str(path))
    derived.notes.extend(parsed["notes"])
    begin, end = _run_window(run_dir / STATE)
    wanted = set(cpus)
    inside = [s.khz for s in parsed["samples"]
              if s.cpu in wanted and s.timestamp >= begin and s.timestamp + timedelta(seconds=1) <= end]
    return {"cpufreq_mean_khz": sum(m for m, _ in derived.cpu_freqs.values()) / len(cpus),
            "cpufreq_window_mean_khz": sum(inside) / len(inside) if inside else None}


def _run_window(state_path: Path) -> tuple[datetime, datetime]:
    """The benchmark's CIJOE begin and end as naive UTC datetimes (the log's convention)."""
    state = yaml.safe_load(state_path.read_text())
    try:
        begin, end = float(state["begin"]), float(state["end"])
    except (KeyError, TypeError, ValueError):
        raise ParseError(state_path, "no numeric 'begin' and 'end'") from None
    if not (math.isfinite(begin) and math.isfinite(end)) or end < begin:
        raise ParseError(state_path, f"begin {begin} and end {end} are not a time window")

    def utc(t: float) -> datetime:
        return datetime.fromtimestamp(t, timezone.utc).replace(tzinfo=None)

    return utc(begin), utc(end)
