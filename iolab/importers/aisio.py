"""Campaigns imported from AiSIO CIJOE result archives: metrics re-derived from the raw files.

Campaigns written by :mod:`iolab.importers.cijoe` are named ``aisio-<name>`` (:data:`PREFIX`);
:func:`iolab.execution.campaign.source` hands every such name to :class:`ImportedCampaign`. Each run
folder holds the files copied verbatim from the archive: ``stdout`` (the benchmark's CIJOE
capture, stdout and stderr merged, so GNU time's report is at its end), ``cijoe.state``, and
where AiSIO made them ``cpufreq.log`` (frequency logger), ``dcgm.txt`` (``dcgmi dmon``) and
``aisio.json`` (AiSIO's own per-repetition result, kept for comparison and never read here).

Metrics (tidy columns; AiSIO's names where AiSIO has the metric):

* ``iops``, ``mibs`` (MiB/s, 2^20 B/s): the tool's Total row.
* ``failed`` (count of failed commands; xnvmeperf only) and ``elapsed_s`` (the tool's own
  timer; xnvmeperf only). AiSIO ignores both.
* ``run_problem``: why the run is not usable (the tool adapter's ``problem``: failed
  commands or error lines for xnvmeperf, a controller without I/O for spdk_nvme_perf; for
  bdevperf its parser's problems, e.g. Fail/s > 0; for every tool, a GNU time report that
  says the tool exited non-zero or was killed by a signal), else empty. As for native experiments,
  the importer stores a run with a problem as failed, and one whose metrics no measurement
  can have (:func:`sample_problem`, the check of a measured run: NaN, inf, a rate beyond any
  device, ...).
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

Tidy columns: AiSIO's parameters and the metrics above under AiSIO's names (bare: they are
this campaign's vocabulary, as an experiment's variables and metrics are), and ``run.id``,
``run.rep``, ``run.environment``, ``run.host_fingerprint``, ``run.config``, ``run.tool``,
``run.tool_version``, ``run.started_at``, ``run.duration_s`` (see :mod:`iolab.core.tidy`).
The raw metrics are not namespaced by tool because one derivation covers every tool kind.

Responsible for: the tidy source of imported campaigns (:class:`ImportedCampaign`), their run
identity, and the derivation shared by the tidy table and the importer (:func:`derive`).
Not responsible for: reading archives, pairing files or writing the store
(:mod:`iolab.importers.cijoe`). Imported campaigns have no params file and cannot be run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from iolab.checks import is_positive_int
from iolab.collectors import dcgmi
from iolab.core.experiment import Experiment, Metric
from iolab.core.identity import config_id
from iolab.core.manifest import RunManifest, from_v1
from iolab.core.store import StoredRun
from iolab.errors import ParseError
from iolab.parsers.bdevperf import parse_bdevperf_text
from iolab.parsers.cijoe_state import parse_cijoe_state
from iolab.parsers.cpufreq_log import FreqLine, aisio_cpu_freqs, parse_cpufreq_log
from iolab.parsers.dcgm_dmon import aisio_p95, window_stats
from iolab.parsers.gnu_time import parse_gnu_time_default
from iolab.tools import xnvmeperf
from iolab.tools.spdk_nvme_perf import SpdkNvmePerf

PREFIX = "aisio-"
# How ``run.source`` starts for a run imported into a registered experiment (its chapter
# keeps such runs apart from the package's own).
IMPORTED_SOURCE = "AiSIO archive"

# The benchmark kinds the importer recognises (value of "tool_kind" in run.json).
XNVMEPERF_RUN = "xnvmeperf run"
XNVMEPERF_CUDA_RUN = "xnvmeperf cuda-run"
BDEVPERF = "bdevperf"
SPDK_NVME_PERF = "spdk_nvme_perf"
BENCHMARK_KINDS = (XNVMEPERF_RUN, XNVMEPERF_CUDA_RUN, BDEVPERF, SPDK_NVME_PERF)

# File names in a run folder.
STDOUT, STATE, AISIO_JSON = "stdout", "cijoe.state", "aisio.json"
CPUFREQ, DCGM = "cpufreq.log", "dcgm.txt"


@dataclass
class Derived:
    """What :func:`derive` finds in one run folder."""

    metrics: dict[str, Any]
    echo: dict[str, Any] | None = None  # xnvmeperf's argument echo
    cpu_freqs: dict[int, tuple[float, float]] | None = None  # AiSIO's (mean, variance) per CPU
    # the frequency log's lines, where it was read (a run with a cpumask); the importer checks
    # the log's clock with them rather than reading the log again
    cpufreq_lines: list[FreqLine] | None = None
    notes: list[str] = field(default_factory=list)


def identity(experiment: str, environment: str, params: dict[str, Any],
             settings: dict[str, Any]) -> dict[str, Any]:
    """What an imported repetition ran: AiSIO's parameters and its command's settings."""
    return {"experiment": experiment, "environment": environment,
            "point": dict(sorted(params.items())), "invocation": settings}


class ImportedCampaign:
    """The tidy source of one imported campaign (``aisio-<name>``)."""

    def __init__(self, name: str):
        self.name = name

    def tidy_row(self, run: StoredRun) -> dict[str, Any]:
        m = run.manifest
        metrics = derive(run.path, m.extra["tool_kind"], m.cpus, m.extra.get("dcgm"),
                         m.point.get("iosize")).metrics
        return {**m.point, **metrics, "run.id": m.run_id, "run.rep": m.rep,
                "run.environment": m.environment, "run.host_fingerprint": m.host_fingerprint,
                "run.config": m.config_id, "run.tool": m.tool, "run.tool_version": m.tool_version,
                "run.started_at": m.started_at, "run.duration_s": m.duration_s}

    def upgrade_v1(self, doc: dict[str, Any], path: Path, host: dict | None) -> RunManifest:
        """A manifest the importer wrote before version 2, as version 2."""
        settings = doc["config"]["settings"]
        ident = identity(doc["experiment"], doc["environment"], doc["params"], settings)
        return from_v1(doc, identity=ident, settings=settings,
                       config_id=config_id(doc["experiment"], doc["environment"], settings),
                       cwd="(recorded by CIJOE)", cpus=doc.get("cpus"),
                       extra={key: doc.get(key) for key in ("cmd", "tool_kind", "dcgm",
                                                            "imported_from")})

    def code_files(self) -> list[Path]:
        return [Path(__file__)]


class _Samples(Experiment):
    """The sample check of measured runs (:meth:`Experiment.sample_problem`) over an imported
    run's metrics: the tool's numbers are also put under ``<tool>.<key>``, as a measured
    run's are, so that a NaN the tool printed is no sample either; a collector's (DCGM, the
    frequency log) is its missing value."""

    name = "aisio"
    metrics = {"iops": Metric("IOPS", (), "op/s"), "mibs": Metric("bandwidth", (), "MiB/s"),
               "failed": Metric("failed commands", ()),
               "elapsed_s": Metric("the tool's own timer", (), "s"),
               "cpu_usage": Metric("CPU over the tool's lifetime (GNU time)", (),
                                   "% of one CPU"),
               "dcgm_p95_bytes_per_s": Metric("PCIe receive traffic, p95", (), "B/s"),
               "dcgm_mean_bytes_per_s": Metric("PCIe receive traffic, mean", (), "B/s"),
               "cpufreq_mean_khz": Metric("mean CPU frequency", (), "kHz"),
               "cpufreq_window_mean_khz": Metric("mean CPU frequency in the window", (), "kHz")}


_TOOL_KEYS = ("iops", "mibs", "failed", "elapsed_s", "cpu_usage")


def sample_problem(metrics: dict[str, Any], tool: str, cpus: int | None) -> str:
    """Why an imported run's :func:`derive` metrics are no sample ("" when they are), by the
    rules of a measured run (:meth:`Experiment.sample_problem`); ``tool`` is the run's tool,
    ``cpus`` the host's logical CPUs (None: not known)."""
    row = {**metrics, "run.tool": tool,
           **{f"{tool}.{key}": metrics.get(key) for key in _TOOL_KEYS}}
    return _Samples().sample_problem(row, cpus)


def derive(run_dir: Path, kind: str, cpus: list[int] | None, dcgm: dict | None,
           io_size: Any = None) -> Derived:
    """Parse the raw files of one run of tool ``kind``; ``cpus`` are the cpumask's CPU ids (or
    None), ``dcgm`` is :func:`iolab.collectors.dcgmi.read_argv` of the dmon command line (or
    None) and ``io_size`` the command's I/O size in bytes (``iosize``; None: not known), which
    spdk_nvme_perf's MiB/s must agree with (xnvmeperf echoes its own). Raises ParseError when
    any raw file is malformed.
    """
    stdout_path = run_dir / STDOUT
    stdout = stdout_path.read_text(encoding="utf-8", errors="replace")
    echo = None
    failed = elapsed_s = None
    problems: list[str] = []
    if kind in (XNVMEPERF_RUN, XNVMEPERF_CUDA_RUN):
        report = xnvmeperf.read_report(run_dir)
        expected = "cuda-run" if kind == XNVMEPERF_CUDA_RUN else "run"
        if report["kind"] != expected:
            raise ParseError(stdout_path, f"the command was 'xnvmeperf {expected}', but the "
                             f"output is a '{report['kind']}' report")
        tool = xnvmeperf.metrics(report)
        iops, mibs, failed = tool["iops"], tool["mibs"], tool["failed"]
        elapsed_s, echo = tool["elapsed_s"], report["echo"]
        problems = [tool["problem"]] if tool["problem"] else []
    elif kind == SPDK_NVME_PERF:
        size = io_size if is_positive_int(io_size) else None
        tool = SpdkNvmePerf().parse(run_dir, size)
        iops, mibs = tool["iops"], tool["mibs"]
        problems = [tool["problem"]] if tool["problem"] else []
    elif kind == BDEVPERF:
        report = parse_bdevperf_text(stdout, str(stdout_path))
        iops, mibs, problems = report["iops"], report["mibs"], report["problems"]
    else:
        raise ParseError(stdout_path, f"iolab has no parser for {kind!r} output")
    time = parse_gnu_time_default(stdout, str(stdout_path))
    ended = _ended_badly(time)
    problem = "; ".join(problems + ([ended] if ended else []))
    derived = Derived(metrics={"iops": iops, "mibs": mibs, "failed": failed,
                               "elapsed_s": elapsed_s, "cpu_usage": time["cpu_percent"],
                               "run_problem": problem},
                      echo=echo)
    derived.metrics.update(_dcgm(run_dir, dcgm, derived.notes))
    derived.metrics.update(_cpufreq(run_dir, cpus, derived))
    return derived


def _ended_badly(time: dict) -> str:
    """Why GNU time's report says the tool did not end well ("" when it exited 0): a tool that
    exited non-zero or was killed measured nothing that can be trusted, whatever CIJOE says."""
    if time["signal"] is not None:
        return f"GNU time's report says the tool was killed by signal {time['signal']}"
    if time["exit_status"] is not None:
        return f"GNU time's report says the tool exited with status {time['exit_status']}"
    return ""


def _dcgm(run_dir: Path, dcgm: dict | None, notes: list[str]) -> dict[str, float | None]:
    path = run_dir / DCGM
    if not path.exists() or not dcgm:
        return {"dcgm_p95_bytes_per_s": None, "dcgm_mean_bytes_per_s": None}
    capture = dcgmi.read_capture(path.read_text(encoding="utf-8", errors="replace"), str(path),
                                 dcgm)
    notes.extend(capture["notes"])
    return {"dcgm_p95_bytes_per_s": aisio_p95(capture["rx"]),
            "dcgm_mean_bytes_per_s": window_stats(capture["rx"])["mean"]}


def _cpufreq(run_dir: Path, cpus: list[int] | None, derived: Derived) -> dict[str, float | None]:
    path = run_dir / CPUFREQ
    if not path.exists() or not cpus:
        return {"cpufreq_mean_khz": None, "cpufreq_window_mean_khz": None}
    text = path.read_text(encoding="utf-8", errors="replace")
    derived.cpu_freqs = aisio_cpu_freqs(text, cpus, str(path))
    parsed = parse_cpufreq_log(text, str(path))
    derived.cpufreq_lines = parsed["lines"]
    derived.notes.extend(parsed["notes"])
    begin, end = _run_window(run_dir / STATE)
    wanted = set(cpus)
    columns = [cpu for cpu in range(parsed["ncpus"]) if cpu in wanted]
    second = timedelta(seconds=1)
    inside = [line.khz[cpu] for line in parsed["lines"]
              if line.timestamp >= begin and line.timestamp + second <= end for cpu in columns]
    return {"cpufreq_mean_khz": sum(m for m, _ in derived.cpu_freqs.values()) / len(cpus),
            "cpufreq_window_mean_khz": sum(inside) / len(inside) if inside else None}


# the clock times a CIJOE state can hold: from 2000-01-01 to 2100-01-01 UTC (CIJOE is younger;
# a time outside, like .inf, .nan or 1e300, is no clock's, and no datetime holds some of them)
EARLIEST_S, LATEST_S = 946684800.0, 4102444800.0


def state_window(state: dict[str, Any], source: str | Path) -> tuple[float, float]:
    """A CIJOE state's ``begin`` and ``end`` as seconds since the epoch; ParseError naming
    ``source`` unless both are numbers of a clock (:data:`EARLIEST_S` to :data:`LATEST_S`),
    the end not before the begin."""
    try:
        begin, end = float(state["begin"]), float(state["end"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise ParseError(source, "no numeric 'begin' and 'end'") from None
    if (not all(math.isfinite(t) and EARLIEST_S <= t <= LATEST_S for t in (begin, end))
            or end < begin):
        raise ParseError(source, f"begin {begin} and end {end} are not a time window (times "
                         "from 2000 to 2100, the end not before the begin)")
    return begin, end


def _run_window(state_path: Path) -> tuple[datetime, datetime]:
    """The benchmark's CIJOE begin and end as naive UTC datetimes (the log's convention)."""
    state = parse_cijoe_state(state_path.read_bytes(), str(state_path))
    begin, end = state_window(state, state_path)

    def utc(t: float) -> datetime:
        return datetime.fromtimestamp(t, timezone.utc).replace(tzinfo=None)

    return utc(begin), utc(end)
