"""The Experiment interface: one subclass per experiment, found by the registry.

An experiment declares, as class attributes, its name, book label, chapter, the fields of its
spec (settings, variables, analysis keys), which variables are knobs, the metrics it derives
for the tidy table, and readable names for values; and implements :meth:`invocation` (which
tool runs a point, with which options). Optionally: collectors, host checks, campaign-wide
knobs, the value a knob is set to, and the scratch files its runs leave behind. Its analysis
lives beside it (``analysis.py`` in its package) as pure functions over the tidy table.

From these the base class derives what the rest of the package needs: the schema, a point's
identity and launch, the programs a plan needs, the metrics of a row and whether they are a
sample (no metric NaN, infinite or negative; no rate above what any device here does, or at
0 beside another rate of its tool that says it moved something, or of other bytes per
operation than the run's block size), and the reading of manifests
written before this interface existed (version 1).

Responsible for: the interface and those derivations. Not responsible for: any one
experiment, running (``iolab.execution.runner``) or planning (``iolab.core.planner``).
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from iolab.collectors.cpufreq import KHZ_LEAST, KHZ_MOST
from iolab.collectors.quiet import Quiet
from iolab.core import tool_registry
from iolab.core.identity import config_id
from iolab.core.manifest import DamagedManifest, RunManifest, from_v1
from iolab.core.rows import standard_row
from iolab.core.schema import Choice, Field, Int, Number, Schema, Text, in_order
from iolab.core.store import StoredRun
from iolab.errors import ParseError, ToolError, excerpt
from iolab.host.scratch import ScratchFile
from iolab.parsers import CPU_IDS_ALLOWED, is_cpu_ids, record_object, record_value
from iolab.paths import NOTEBOOKS_DIR, PARAMS_DIR, REPO_ROOT
from iolab.tools.base import Collector, Invocation, Launch, Program, ToolAdapter, link_gbs

PALETTES = ("colorblind", "deep", "muted", "bright", "dark", "pastel")

# Analysis keys every experiment has; experiments add their own.
COMMON_ANALYSIS: dict[str, Field] = {
    "confidence": Number(0.5, 0.999, default=0.95, help="confidence level of every interval"),
    "palette": Choice(*PALETTES, default="colorblind", help="seaborn colour palette"),
    "figure_width": Number(4, 20, default=11, help="width of wide figures, inches"),
    "cell_timeout_s": Int(5, 30 * 86400, default=900, help="longest a notebook cell may run "
                          "before its execution fails (a batch job running a campaign in one "
                          "cell needs the campaign's time)"),
    "kernel_start_timeout_s": Int(5, 3600, default=120, help="longest a notebook's kernel may "
                                  "take to start"),
    "part_of": Text(default=None, help="the environment whose chapter shows this campaign (a "
                    "search's proof grid or live search on that environment's host); it gets "
                    "no page and no comparison column of its own"),
}

# Collector names of version-1 manifests that changed.
_V1_COLLECTORS = {"proctree-cpu": "proctree", "stress-ng": "stress_ng"}


# The most any device this package measures could do, with a margin: a rate above one is no
# measurement (a counter that wrapped or was never set, a damaged report). What it measures
# stays far below: a PCIe 5.0 NVMe SSD does about 3 million 4 KiB reads and 14 GB/s, so a
# hundred of them together 3e8 operations and 1.4e12 bytes per second; a null device (SPDK's
# null bdev, fio's null engine) some tens of millions of operations per second per core, 2e9
# on 200 cores; a GPU's PCIe 5.0 x16 link 64 GB/s each way, its NVLink 0.9 TB/s, and even
# its own memory, which no experiment here reads, 4.8 TB/s (an H200's HBM3e; 8 TB/s a
# B200's). The committed runs reach 1.0e8 requests (gpu_pcie) and 1.2e11 bytes per second (a
# GPU's PCIe counter). An experiment that measures something faster must raise these.
MAX_OPERATIONS_PER_S = 1e10
MAX_BYTES_PER_S = 1e13
# the units of a rate: operations per second, or bytes per second in each unit of a rate of
# bytes (a tool adapter's ``rates``, a metric's ``unit``)
PER_S = {"op/s": 1.0, "B/s": 1.0, "MiB/s": 2.0**20, "GB/s": 1e9}
# A tool's own rate at 0 beside another of its rates at least this high (per second) says
# nothing was moved and something was. Tools print a rate with 2 decimals at least (bdevperf;
# fio 6): 0 operations per second beside 1 MiB/s would be one operation of 200 MiB or more in
# over 200 s, which none of them makes; 0 bytes per second beside 1,000 operations (of 512
# bytes at least) would be under 0.005 MiB/s where they move 0.49 MiB/s or more.
ZERO_OPERATIONS_BESIDE_BYTES_PER_S = 2.0**20
ZERO_BYTES_BESIDE_OPERATIONS_PER_S = 1000.0
# The most bytes one operation moves: the largest here is a GPU copy of 256 MiB; a report of
# 1e-300 operations per second beside 300 MB/s (a rate that rounds to nothing, which the rule
# for 0 missed) implies operations of astronomical size
MAX_BYTES_PER_OPERATION = 2.0**34
# How far the bytes per operation that a tool's own rates give (a rate of bytes over its rate
# of operations) may stray from the size each operation of the run moves (its block or I/O
# size, :attr:`Experiment.operation_size`). The rates come from counts that part: fio counts
# the bytes of completed I/Os and the I/Os issued, which differ by those in flight when it
# zeroes its counters and when it stops (0.17 % in the committed runs, but a short run on a
# slow device at a deep queue has few I/Os beside those in flight; its parser holds that
# part exactly), and bdevperf and xnvmeperf print both rates with 2 decimals (under 0.01 %
# here). 25 % takes any run that completed 4 times the I/Os it keeps in flight, and refuses
# a report of half or twice the run's size, or a bandwidth 100 times its operations.
OPERATION_SIZE_SLACK = 0.25
# The most CPUs a host has when the caller does not say (Linux's largest NR_CPUS): a CPU share
# is at most 100 % of each of them
MAX_CPUS = 8192
# the units of a CPU share: percent of one CPU, or of the whole host
CPU_SHARES = {"% of one CPU": None, "% of all CPUs": 1}
# The parts of one CPU share a tool reports apart (fio's user and system time, each in % of
# one CPU): together they are the tool's share, bounded as one (a process cannot use more
# than every CPU there is, however its time is split)
CPU_PARTS = ("usr_cpu", "sys_cpu")
# A unit whose measurements lie in a physical range: (least, most, why)
UNIT_RANGES = {"kHz": (KHZ_LEAST, KHZ_MOST, "1 MHz to 100 GHz: no CPU runs outside")}
# A share counted in clock ticks over a window can overshoot its ceiling by a tick or two
# (the committed runs reach 198.1 % on 2 CPUs); a share beyond this margin was not measured
CPU_SHARE_SLACK = 1.05
# a percentile column: <what>_p<digits>_<unit>, p50 the 0.50 quantile, p999 the 0.999 one
_PERCENTILE = re.compile(r"^(?P<what>.+)_p(?P<digits>[0-9]+)_(?P<unit>[a-z_]+)$")


@dataclass(frozen=True)
class Metric:
    """A tidy column the experiment derives from tool- or collector-namespaced columns.

    ``sources`` are tried in order; the first present and not missing wins (e.g. IOPS from
    ``fio.iops`` or ``bdevperf.iops``). ``interval`` names the confidence interval that suits
    the quantity: ``t`` (Student's t on the values) or ``lognormal`` (for strictly positive,
    skewed quantities such as latency percentiles; see :mod:`iolab.analysis.stats`).
    ``ceiling`` ``"link"`` marks a rate over a PCIe link in one direction: a value above the
    line rate of the link the run recorded (:attr:`Experiment.link_columns`) is no
    measurement of it, and :meth:`Experiment.derive` leaves it out with the reason.
    """

    label: str
    sources: tuple[str, ...]
    unit: str = ""
    interval: str = "t"
    ceiling: str = ""


def missing_value(value: Any) -> bool:
    """None or NaN: a tidy cell without a value."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# GNU time's elapsed (%e, hundredths) against the run's wall time (run.duration_s), which
# iolab's runner measures around GNU time's whole process: in the committed runs elapsed is
# 0.003 s to 0.062 s *below* it. The slack covers the rounding of %e and the two clocks
# being read at different moments.
LIFETIME_SLACK_S = 0.1


# what names the device a tool ran on and a collector sampled, in both of their columns
_DEVICE_KEYS = ("gpu_pci",)


def _another_device(row: dict[str, Any]) -> str:
    """Why a collector's readings are of another device than the tool's ("" when not): a
    collector that records the GPU it sampled (NVML's and DCGM's ``gpu_pci``)
    beside a tool that reports the GPU it ran on names another one. CUDA's device order and
    NVML's index order differ on hosts with several GPUs, so the counters would be another
    GPU's traffic stored as the run's."""
    tool = f"{row.get('run.tool')}."
    for key in _DEVICE_KEYS:
        ran_on = row.get(tool + key)
        if not isinstance(ran_on, str):
            continue
        for column, value in row.items():
            if (column.endswith(f".{key}") and not column.startswith(tool)
                    and isinstance(value, str) and value.lower() != ran_on.lower()):
                return (f"{column} is {excerpt(value)}, but the tool ran on {key} "
                        f"{excerpt(ran_on)} ({tool}{key}): the collector sampled another device")
    return ""


def _lifetime_beyond_run(row: dict[str, Any]) -> str:
    """Why GNU time's elapsed cannot be the tool's lifetime ("" when it can): the process ran
    inside the run, so it cannot have lived longer than the run's wall time
    (``run.duration_s``) plus :data:`LIFETIME_SLACK_S`."""
    elapsed, duration = row.get("gnu_time.elapsed_s"), row.get("run.duration_s")
    if not (_present(elapsed) and _present(duration)) or elapsed <= duration + LIFETIME_SLACK_S:
        return ""
    return (f"gnu_time.elapsed_s reads {elapsed:g} s, longer than the whole run "
            f"({duration:g} s, run.duration_s, allowed: up to {LIFETIME_SLACK_S:g} s more): "
            "GNU time's process ran inside the run")


# The tool's own runtime (``<tool>.runtime_ms``, ``<tool>.runtime_s``) against the run's wall
# time: the tool measured inside the process iolab timed, so its runtime is shorter (fio rounds
# its runtime up to the next ms; the committed runs' runtimes are 0.27 s to 1.38 s below it).
# The slack is that of GNU time's lifetime: rounding and two clocks read at different moments.
RUNTIME_SLACK_S = LIFETIME_SLACK_S


def _runtime_beyond_run(row: dict[str, Any]) -> str:
    """Why the tool's reported runtime cannot be this run's ("" when it can): the tool measured
    inside the run, so its runtime is not longer than the run's wall time (``run.duration_s``)
    plus :data:`RUNTIME_SLACK_S`; a longer one is of a report another run wrote."""
    tool, duration = row.get("run.tool"), row.get("run.duration_s")
    if not _present(duration):
        return ""
    for key, scale in (("runtime_s", 1.0), ("runtime_ms", 1e-3)):
        value = row.get(f"{tool}.{key}")
        if _present(value) and value * scale > duration + RUNTIME_SLACK_S:
            return (f"{tool}.{key} reads {value:g}, a runtime of {value * scale:g} s, longer "
                    f"than the whole run ({duration:g} s, run.duration_s, allowed: up to "
                    f"{RUNTIME_SLACK_S:g} s more): the tool measured inside the run")
    return ""


def _percentiles_out_of_order(row: dict[str, Any]) -> str:
    """Why the row's percentiles cannot be measured ("" when they can): of one quantity
    (``<what>_p<digits>_<unit>`` columns, and ``<what>_max_<unit>``), a higher percentile below
    a lower one, or the maximum below a percentile, which no distribution has."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for column, value in row.items():
        match = _PERCENTILE.match(column)
        if match and _present(value):
            key = (match["what"], match["unit"])
            groups.setdefault(key, []).append((float("0." + match["digits"]), column))
    for (what, unit), found in groups.items():
        found.sort()
        highest = f"{what}_max_{unit}"
        if _present(row.get(highest)):
            found.append((1.0, highest))
        for (_, low), (_, high) in zip(found, found[1:]):
            if row[low] > row[high]:
                return (f"{low} reads {row[low]:g}, above {high} at {row[high]:g}: a higher "
                        "percentile is never below a lower one")
    return ""


def _present(value: Any) -> bool:
    """A number, not NaN: a value a rate can be checked on."""
    return _number(value) and not math.isnan(value)


# the tidy column that says which of a row's metrics were left out as above their ceiling
IMPLAUSIBLE = "implausible"


class Experiment:
    """Base class of every experiment; see the module docstring."""

    name: ClassVar[str]
    title: ClassVar[str]
    label: ClassVar[str]            # the chapter's MyST label, e.g. sec-experiments-smt-thp
    chapter: ClassVar[str]          # the rendered notebook's path in book/, without suffix
    settings: ClassVar[dict[str, Field]]
    variables: ClassVar[dict[str, Field]]
    analysis_fields: ClassVar[dict[str, Field]] = {}
    knob_variables: ClassVar[dict[str, str]] = {}
    metrics: ClassVar[dict[str, Metric]] = {}
    variable_labels: ClassVar[dict[str, str]] = {}
    # An experiment that needs an NVIDIA GPU has params only for environments with one.
    needs_gpu: ClassVar[bool] = False
    # A run lasts its run_seconds whatever it measures (fio time_based, bdevperf -t): only
    # then is a run far over that time disturbed (iolab.core.disturbance). Experiments whose
    # runs move a fixed amount of data say False.
    timed: ClassVar[bool] = True
    value_labels: ClassVar[dict[str, dict[Any, str]]] = {}
    # The tidy columns of the PCIe link a run recorded (generation, width), which the metrics
    # with ceiling "link" are held to (see recorded_link); None: none records it.
    link_columns: ClassVar[tuple[str, str] | None] = None
    # The tidy column that holds the bytes each operation of the run's tool moves (its block
    # or I/O size), which the tool's rates of bytes and of operations are held to
    # (:meth:`_size_beside_rates`); None: the run fixes no one size (copies of whole buffers).
    operation_size: ClassVar[str | None] = None
    # Where the notebook and the params files are (tests give an example experiment its own).
    notebook_dir: ClassVar[Path] = NOTEBOOKS_DIR
    params_dir: ClassVar[Path] = PARAMS_DIR

    # -- what an experiment implements -------------------------------------------------------

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        """The tool and its options for one point: the only place a point meets a tool."""
        raise NotImplementedError

    def collectors(self, settings: dict[str, Any], point: dict[str, Any], cpus: list[int] | None,
                   topology: list[dict[str, Any]]) -> list[Collector]:
        """Collectors around one run (``cpus``: the run's resolved CPU set, if pinned)."""
        return []

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        """Why this host cannot run the point (other than a knob), or None."""
        return None

    def campaign_knobs(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Knobs set once for a whole campaign and restored at its end."""
        return {}

    def knob_value(self, variable: str, value: Any) -> Any:
        """The value a knob-backed variable's value sets its knob to."""
        return value

    def scratch_files(self, settings: dict[str, Any],
                      points: list[dict[str, Any]]) -> list[ScratchFile]:
        """The files the runs of ``points`` read and the package writes (each with the params
        key that names it and its size): the runner checks and lays them out before the first
        run (``iolab.host.scratch``), and the plan lists them."""
        return []

    def check_settings(self, settings: dict[str, Any]) -> None:
        """Refuse (InputError naming the key) settings that are valid one by one but not
        together; called when a spec is loaded, which adds the params file to the error."""

    def config_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The settings that make a run's configuration id: by default all of them. An
        experiment that gains a setting leaves it out here while it has the value every
        earlier run had, so stored runs and new ones stay one configuration."""
        return settings

    def prepare_host(self, settings: dict[str, Any]) -> None:
        """Once before a campaign's first run: e.g. create the folder of its scratch files."""

    def prepare_points(self, settings: dict[str, Any], points: list[dict[str, Any]]) -> None:
        """Once before a campaign's first run, given the points it will run: e.g. write the
        target files the largest of them reads (a tool that cannot create its files)."""

    # -- derived -----------------------------------------------------------------------------

    @property
    def notebook(self) -> Path:
        return self.notebook_dir / f"{self.name}.ipynb"

    def schema(self) -> Schema:
        return Schema(self.settings, self.variables, {**COMMON_ANALYSIS, **self.analysis_fields})

    def adapter(self, invocation: Invocation) -> ToolAdapter:
        return tool_registry.adapter(invocation.tool)

    def identity(self, environment: str, settings: dict[str, Any],
                 point: dict[str, Any]) -> dict[str, Any]:
        """What a run of this point executes, for its run id (see ``iolab.core.identity``)."""
        invocation = self.invocation(settings, point)
        return {"experiment": self.name, "environment": environment,
                "point": dict(sorted(point.items())),
                "invocation": self.adapter(invocation).identity(invocation)}

    def launch(self, settings: dict[str, Any], point: dict[str, Any],
               topology: list[dict[str, Any]]) -> tuple[Launch, list[Collector], ToolAdapter]:
        """The argv (wrapped by collectors such as GNU time), inputs and collectors of a run."""
        invocation = self.invocation(settings, point)
        adapter = self.adapter(invocation)
        launch = adapter.launch(invocation, topology)
        # every run records how quiet the host was (foreign CPU, steal): iolab.collectors.quiet
        collectors = (self.collectors(settings, point, launch.cpus, topology)
                      + adapter.collectors(invocation) + [Quiet()])
        for collector in collectors:
            launch.argv = collector.wrap(launch.argv)
        return launch, collectors, adapter

    def programs(self, settings: dict[str, Any], point: dict[str, Any],
                 topology: list[dict[str, Any]] | None = None) -> list[Program]:
        """The programs a run of this point needs: its tool, and, given the topology of a host
        that can run the point, its collectors' programs (GNU time, stress-ng, ...)."""
        invocation = self.invocation(settings, point)
        programs = [self.adapter(invocation).program(invocation.options)]
        if topology is not None:
            try:
                collectors = self.launch(settings, point, topology)[1]
            except ToolError:
                # the tool cannot be launched here (e.g. SPDK not built): its own program's
                # status says so, and a plan, a replayed chapter among them, must still be made
                collectors = []
            for collector in collectors:
                programs += collector.programs()
        return programs

    def run_seconds(self, settings: dict[str, Any]) -> float:
        """How long the tool runs by the settings (measured time and warm-up); experiments
        whose settings are named otherwise override this."""
        return float(settings.get("runtime_s", 0)) + float(settings.get("ramp_s", 0))

    def seconds_per_run(self, settings: dict[str, Any], point: dict[str, Any]) -> float:
        """An estimate before anything is stored: the run itself and the tool's start-up."""
        invocation = self.invocation(settings, point)
        return self.run_seconds(settings) + \
            self.adapter(invocation).startup_seconds(invocation.options)

    def derive(self, row: dict[str, Any]) -> dict[str, Any]:
        """The experiment's metrics of one tidy row, from its namespaced columns. Where the
        experiment holds metrics to a link (``ceiling="link"``), one that reads above the
        line rate of the link the run recorded is left out (NaN), and the row's
        ``implausible`` column says why ("" when nothing was left out): the raw files keep
        what the tool or collector said."""
        out = {}
        for name, metric in self.metrics.items():
            out[name] = next((row[s] for s in metric.sources
                              if s in row and not missing_value(row[s])), float("nan"))
        if any(metric.ceiling == "link" for metric in self.metrics.values()):
            above = self.above_link(row, out)
            out.update({name: float("nan") for name in above})
            out[IMPLAUSIBLE] = "; ".join(f"{name}: {why}" for name, why in above.items())
        return out

    def recorded_link(self, row: dict[str, Any]) -> tuple[float, str] | None:
        """The line rate (GB/s, one direction) of the PCIe link the run recorded, and that
        link in words; None where it recorded none of a known generation. By default from
        :attr:`link_columns`."""
        gen, width = (row.get(column) for column in self.link_columns or (None, None))
        if not all(_present(v) and float(v).is_integer() for v in (gen, width)):
            return None
        line = link_gbs(int(gen), int(width))
        return None if line is None else (line, f"PCIe Gen{int(gen)} x{int(width)}")

    def above_link(self, row: dict[str, Any], metrics: dict[str, Any]) -> dict[str, str]:
        """The metrics held to the recorded link (``ceiling="link"``) that read above its line
        rate, name -> why; none where the row records no link (:meth:`recorded_link`)."""
        link = self.recorded_link(row)
        if link is None:
            return {}
        line, words = link
        out = {}
        for name, metric in self.metrics.items():
            value = metrics.get(name)
            if metric.ceiling == "link" and metric.unit in PER_S and _present(value) \
                    and value * PER_S[metric.unit] > line * 1e9:
                out[name] = (f"{value * PER_S[metric.unit] / 1e9:.1f} GB/s is above the "
                             f"{line:.1f} GB/s line rate of the recorded link ({words}, one "
                             "direction): no traffic over it")
        return out

    def tidy_row(self, run: StoredRun) -> dict[str, Any]:
        return standard_row(run, self.derive, list(self.variables))

    def sample_problem(self, row: dict[str, Any], cpus: int | None = None) -> str:
        """Why a run's row is no sample ("" when it is one): one of the experiment's metrics,
        or a column it is read from, is infinite or negative, or a number of the tool's own
        output (``<tool>.*``) is NaN, infinite or negative. No quantity measured here (rates, times, counts, shares) can be any of
        these, so a tool that reports one did not measure. A collector's NaN and a missing
        value are not problems: they are how a collector says it has no value (no samples in
        the window, no cpufreq on this host). Nor can a rate be above what any device here
        does, or at 0 beside another rate of the tool that says it moved something
        (:meth:`_implausible_rate`). Nor can a bound that no measurement exceeds be crossed:
        a latency longer than the run (:meth:`_latency_beyond_run`), GNU time's lifetime of
        the tool longer than the run that held it (:func:`_lifetime_beyond_run`), the tool's
        own runtime longer than the run (:func:`_runtime_beyond_run`), a latency (not a
        minimum) of 0 where the tool moved something (:meth:`_latency_of_zero`), a CPU
        share above 100 % of each of the host's ``cpus`` (its logical CPUs; :data:`MAX_CPUS`
        when the caller
        does not know them; :meth:`_cpu_share_beyond_host`), a higher percentile below a lower
        one (:func:`_percentiles_out_of_order`), a rate beside a reported runtime of 0
        (:meth:`_rate_without_runtime`), the tool's user and system CPU together above the
        host (:func:`_cpu_parts_beyond_host`), bytes per operation other than the size the
        run's operations move (:meth:`_size_beside_rates`), a frequency no CPU runs at
        (:meth:`_outside_unit_range`), or a collector's readings of another device than the
        one the tool ran on (:func:`_another_device`)."""
        tool = f"{row.get('run.tool')}."
        for name, metric in self.metrics.items():
            for column in (*metric.sources, name):
                value = row.get(column)
                if not _number(value):
                    continue
                if math.isinf(value) or value < 0 or (math.isnan(value)
                                                      and column.startswith(tool)):
                    where = "" if column == name else f" (from {column})"
                    return (f"metric {name}{where} reads {value!r}, which no measurement of "
                            f"{metric.label} can be")
        # the tool's other numbers (latencies, CPU shares, counts) are measurements too, read
        # or not by a metric: a tool that reports one as NaN, infinite or negative did not
        # measure (none of the committed runs' 2,420 rows has one)
        for column, value in row.items():
            if column.startswith(tool) and _number(value) and (
                    math.isnan(value) or math.isinf(value) or value < 0):
                return (f"{column} reads {value!r}, which no measurement the tool reports can "
                        "be")
        return (self._latency_beyond_run(row) or _lifetime_beyond_run(row)
                or _runtime_beyond_run(row) or self._latency_of_zero(row)
                or self._cpu_share_beyond_host(row, cpus)
                or _percentiles_out_of_order(row) or self._rate_without_runtime(row)
                or self._implausible_rate(row) or self._size_beside_rates(row)
                or self._outside_unit_range(row) or _another_device(row))

    def _latencies(self, row: dict[str, Any]) -> dict[str, float]:
        """The run's latencies in µs, column -> value: the tool's own (its columns ending in
        ``_us``, the unit in the name) and each metric's in µs, with their sources."""
        tool = f"{row.get('run.tool')}."
        columns = [c for c in row if c.startswith(tool) and c.endswith("_us")]
        columns += [column for name, metric in self.metrics.items() if metric.unit == "µs"
                    for column in (*metric.sources, name)]
        return {c: row[c] for c in dict.fromkeys(columns) if _present(row.get(c))}

    @staticmethod
    def _run_span_s(row: dict[str, Any]) -> float | None:
        """The longest the run took by any of its own accounts, in s (None: none says): the
        tool's wall time (``run.duration_s``), the ramp and runtime it was given, and the
        runtime the tool reports (``<tool>.runtime_s``, ``<tool>.runtime_ms``)."""
        tool = row.get("run.tool")
        spans = [row.get("run.duration_s"), row.get(f"{tool}.runtime_s")]
        if _present(row.get(f"{tool}.runtime_ms")):
            spans.append(row[f"{tool}.runtime_ms"] / 1000)
        if _present(row.get("config.runtime_s")):
            ramp = row.get("config.ramp_s")
            spans.append(row["config.runtime_s"] + (ramp if _present(ramp) else 0))
        known = [s for s in spans if _present(s) and s > 0]
        return max(known) if known else None

    def _latency_beyond_run(self, row: dict[str, Any]) -> str:
        """Why a latency cannot be measured ("" when it can): it is longer than the whole run
        (:meth:`_run_span_s`), within which every I/O it times began and ended."""
        span_s = self._run_span_s(row)
        if span_s is None:
            return ""
        for column, value in self._latencies(row).items():
            if value > span_s * 1e6:
                return (f"{self._named(column)} reads {value:g} µs, longer than the whole run "
                        f"({span_s:g} s), within which every timed operation began and ended")
        return ""

    def _latency_of_zero(self, row: dict[str, Any]) -> str:
        """Why a latency cannot be measured ("" when it can): a mean, percentile or maximum
        of 0 µs beside a rate of the tool above 0. No I/O completes in no time, so none of
        these is 0 where anything moved (a minimum is left alone: a clock too coarse to see
        the fastest completion reads 0 for it; a count of 0, as of errors, is no latency)."""
        moving = any(value > 0 for _, value in self._tool_rates(row).values())
        if not moving:
            return ""
        for column, value in self._latencies(row).items():
            if value == 0 and "min" not in column.rsplit(".", 1)[-1].split("_"):
                return (f"{self._named(column)} reads 0 µs while the tool moved something: "
                        "no I/O completes in no time")
        return ""

    def _cpu_share_beyond_host(self, row: dict[str, Any], cpus: int | None) -> str:
        """Why a CPU share cannot be measured ("" when it can): one above 100 % of each of the
        host's ``cpus`` (:data:`MAX_CPUS` when not known), or a share of the whole host above
        100 %."""
        most_cpus = cpus if cpus else MAX_CPUS
        for name, metric in self.metrics.items():
            if metric.unit not in CPU_SHARES:
                continue
            ceiling = 100.0 * (CPU_SHARES[metric.unit] or most_cpus) * CPU_SHARE_SLACK
            for column in (*metric.sources, name):
                value = row.get(column)
                if _present(value) and value > ceiling:
                    whose = (f"this host's {cpus} CPUs" if cpus else f"{MAX_CPUS} CPUs, the most "
                             "a host has") if CPU_SHARES[metric.unit] is None else "the host"
                    return (f"{self._named(column)} reads {value:g} {metric.unit}, above "
                            f"{ceiling:g} %, all of {whose} with a margin of "
                            f"{CPU_SHARE_SLACK - 1:.0%}")
        return _cpu_parts_beyond_host(row, cpus)

    def _outside_unit_range(self, row: dict[str, Any]) -> str:
        """Why a metric in a unit with a physical range (:data:`UNIT_RANGES`) cannot be
        measured ("" when it can): it lies outside that range. A collector's NaN is no value,
        not a problem."""
        for name, metric in self.metrics.items():
            if metric.unit not in UNIT_RANGES:
                continue
            least, most, what = UNIT_RANGES[metric.unit]
            for column in (*metric.sources, name):
                value = row.get(column)
                if _present(value) and not least <= value <= most:
                    return (f"{self._named(column)} reads {value:g} {metric.unit}, outside "
                            f"{least:g} to {most:g} {metric.unit} ({what})")
        return ""

    def _rate_without_runtime(self, row: dict[str, Any]) -> str:
        """Why the tool's rates cannot be measured ("" when they can): the tool reports a
        runtime of 0 (``<tool>.runtime_s`` or ``runtime_ms``) beside a rate above 0, which
        something moved over some time."""
        tool = row.get("run.tool")
        zero = next((f"{tool}.{key}" for key in ("runtime_s", "runtime_ms")
                     if _present(row.get(f"{tool}.{key}")) and row[f"{tool}.{key}"] == 0), None)
        if zero is None:
            return ""
        moving = next(((c, unit, v) for c, (unit, v) in self._tool_rates(row).items() if v > 0),
                      None)
        if moving is None:
            return ""
        column, unit, value = moving
        return (f"{zero} reads 0 while {self._named(column)} reads {value:g} {unit}: a rate "
                "needs time to move anything in")

    def _named(self, column: str) -> str:
        """A column as a message names it: the metric read from it, if any."""
        if column in self.metrics:
            return f"metric {column}"
        name = next((n for n, m in self.metrics.items() if column in m.sources), None)
        return column if name is None else f"metric {name} (from {column})"

    def _tool_rates(self, row: dict[str, Any]) -> dict[str, tuple[str, float]]:
        """The rates of what the run's tool moved, column -> (unit, value): those its
        adapter declares (:attr:`~iolab.tools.base.ToolAdapter.rates`) that have a value."""
        tool = row.get("run.tool")
        adapter = tool_registry.ADAPTERS.get(tool)
        declared = adapter.rates if adapter is not None else {}
        return {f"{tool}.{key}": (unit, row[f"{tool}.{key}"]) for key, unit in declared.items()
                if _present(row.get(f"{tool}.{key}"))}

    def _metric_rates(self, row: dict[str, Any]) -> dict[str, tuple[str, float]]:
        """The experiment's metrics with a unit of rate (a collector's too, and a line rate),
        column -> (unit, value): each column a metric is read from, and its own, that has a
        value."""
        return {column: (metric.unit, row[column])
                for name, metric in self.metrics.items() if metric.unit in PER_S
                for column in (*metric.sources, name) if _present(row.get(column))}

    def _implausible_rate(self, row: dict[str, Any]) -> str:
        """Why the run's rates cannot be a measurement ("" when they can): one above the
        ceiling of its kind (:data:`MAX_OPERATIONS_PER_S`, :data:`MAX_BYTES_PER_S`), a rate
        of the tool's or a metric's, or one of the tool's own at 0 beside another of its own
        that says it moved something (:data:`ZERO_OPERATIONS_BESIDE_BYTES_PER_S`,
        :data:`ZERO_BYTES_BESIDE_OPERATIONS_PER_S`). Only the tool's own rates are set
        against each other: a metric's rate may be of something else (a link's line rate,
        a collector's count of all the traffic)."""
        own = self._tool_rates(row)
        rates = {**self._metric_rates(row), **own}
        for column, (unit, value) in rates.items():
            ceiling, what = ((MAX_OPERATIONS_PER_S, "operations") if unit == "op/s" else
                             (MAX_BYTES_PER_S, "bytes"))
            if value * PER_S[unit] > ceiling:
                return (f"{self._named(column)} reads {value:g} {unit}, above what any "
                        f"device this package can measure does ({ceiling:.0e} {what} per "
                        "second)")
        ops = [column for column, (unit, _) in own.items() if unit == "op/s"]
        moved = [column for column, (unit, _) in own.items() if unit != "op/s"]
        for zeros, others, least, why in (
                (ops, moved, ZERO_OPERATIONS_BESIDE_BYTES_PER_S,
                 "bytes were moved, so operations were made"),
                (moved, ops, ZERO_BYTES_BESIDE_OPERATIONS_PER_S,
                 "operations were made, and each moves bytes")):
            zero = next((column for column in zeros if own[column][1] == 0), None)
            moving = next((column for column in others
                           if own[column][1] * PER_S[own[column][0]] >= least), None)
            if zero is not None and moving is not None:
                unit, value = own[moving]
                return (f"{self._named(zero)} reads 0 {own[zero][0]} while "
                        f"{self._named(moving)} reads {value:g} {unit}: {why}")
        for op in ops:
            for column in moved:
                count, size = own[op][1], own[column][1] * PER_S[own[column][0]]
                if count > 0 and size / count > MAX_BYTES_PER_OPERATION:
                    return (f"{self._named(op)} reads {count:g} op/s beside "
                            f"{self._named(column)} at {own[column][1]:g} {own[column][0]}: "
                            f"more than {MAX_BYTES_PER_OPERATION:.3g} bytes per operation, "
                            "which no operation here moves")
        return ""

    def _size_beside_rates(self, row: dict[str, Any]) -> str:
        """Why the tool's rates cannot be a measurement of this run ("" when they can): its
        rate of bytes over its rate of operations is not the size each of the run's operations
        moves (the row's :attr:`operation_size`), within :data:`OPERATION_SIZE_SLACK`. A
        report whose bandwidth is 100 times its IOPS of 4 KiB reads, or that a run of another
        block size wrote, says nothing of this one."""
        size = row.get(self.operation_size) if self.operation_size else None
        if not _present(size) or size <= 0:
            return ""
        own = self._tool_rates(row)
        ops = [(column, value) for column, (unit, value) in own.items()
               if unit == "op/s" and value > 0]
        moved = [(column, unit, value) for column, (unit, value) in own.items()
                 if unit != "op/s" and value > 0]
        for op, count in ops:
            for column, unit, value in moved:
                per_operation = value * PER_S[unit] / count
                if abs(per_operation / size - 1) > OPERATION_SIZE_SLACK:
                    return (f"{self._named(column)} reads {value:g} {unit} beside "
                            f"{self._named(op)} at {count:g} op/s: {per_operation:.6g} bytes "
                            f"per operation, where each of the run's moves {size:g} bytes "
                            f"({self.operation_size}; allowed: within "
                            f"{OPERATION_SIZE_SLACK:.0%})")
        return ""

    def code_files(self) -> list[Path]:
        """The experiment's own code (its package, or its module), for the tidy cache's digest."""
        path = Path(sys.modules[type(self).__module__].__file__)
        return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]

    def describe(self, variable: str, value: Any) -> str:
        """A value as a reader should see it (``one_core`` -> ``one core``)."""
        return self.value_labels.get(variable, {}).get(value, str(value))

    def describe_point(self, point: dict[str, Any]) -> str:
        """A point in words: 'no stress, queue depth 128, devices 1, ...' (a yes/no
        variable's value label is a phrase of its own)."""
        return ", ".join(self.describe(k, v) if self.variables[k].kind == "flag"
                         else f"{self.variable_labels.get(k, k)} {self.describe(k, v)}"
                         for k, v in point.items())

    # -- version-1 manifests -------------------------------------------------------------------

    def applicable_settings(self, values: dict[str, Any]) -> dict[str, Any]:
        """The settings among ``values`` that apply (``when``), as a spec would hold them."""
        out: dict[str, Any] = {}
        for key, fld in in_order(self.settings):
            if key in values and fld.applies(out):
                out[key] = values[key]
        return {key: out[key] for key in self.settings if key in out}

    def upgrade_v1(self, doc: dict[str, Any], path: Path,
                   host: dict[str, Any] | None) -> RunManifest:
        """A version-1 manifest as version 2, its identity taken from what it executed.

        The run's settings and point are run through today's code; the argv that gives is
        compared with the argv the run recorded (less the options that only chose an output
        format). Only when they agree does the run get today's identity, and so count as
        stored for today's plan: otherwise its identity keeps the recorded argv, a different
        id, and ``extra.v1_mismatch`` says why.
        """
        point = doc["params"]
        settings = self.applicable_settings(doc["config"]["settings"])
        environment = doc["environment"]
        identity = self.identity(environment, settings, point)
        problem = self._v1_problem(doc, identity, settings, point,
                                   (host or {}).get("topology") or [])
        extra: dict[str, Any] = {}
        if problem:
            identity["v1_argv"] = doc["argv"]
            identity["v1_driver_version"] = doc.get("driver_version")
            extra["v1_mismatch"] = problem
        cpus_file = Path(path).parent / "cpus.json"
        collectors = [_V1_COLLECTORS.get(c, c) for c in doc.get("collectors", [])]
        if doc.get("argv", [""])[0] == "/usr/bin/time":
            collectors.append("gnu_time")
        return from_v1(doc, identity=identity, settings=settings,
                       config_id=config_id(self.name, environment,
                                           self.config_settings(settings)),
                       cpus=_v1_cpus(cpus_file),
                       collectors=collectors, extra=extra)

    def _v1_problem(self, doc: dict[str, Any], identity: dict[str, Any], settings: dict[str, Any],
                    point: dict[str, Any], topology: list[dict[str, Any]]) -> str | None:
        """Why a version-1 run is not what today's code runs for its point (None if it is)."""
        today_driver = identity["invocation"]["driver_version"]
        if doc.get("driver_version") != today_driver:
            return (f"it ran driver version {doc.get('driver_version')!r}, today's driver is "
                    f"version {today_driver!r}")
        try:
            launch, _, adapter = self.launch(settings, point, topology)
        except Exception as exc:  # any failure to rebuild the argv means it cannot be verified
            return f"today's code cannot rebuild this run's argv: {exc}"
        if adapter.driver is not None:
            rel = str(adapter.driver_path.relative_to(REPO_ROOT))
            today = [rel if a == str(adapter.driver_path) else a for a in launch.argv]
        else:
            today = adapter.recorded_argv(launch.argv)
        recorded = [a for a in doc.get("argv", []) if a not in adapter.output_only_args]
        if today != recorded:
            return (f"the recorded argv differs from what this version runs for the same "
                    f"point: recorded {recorded}, today {today}")
        return None


def _v1_cpus(path: Path) -> list[int] | None:
    """The CPUs a version-1 run was pinned to, from its ``cpus.json`` (None without one).
    The runner's own record, read back checked: a cut-off or altered one makes the run
    corrupt, naming the file and the key, instead of ending the listing of every run."""
    if not path.exists():
        return None
    try:
        return record_value(record_object(path.read_text(), str(path)), "cpus", str(path),
                            is_cpu_ids, CPU_IDS_ALLOWED)
    except ParseError as exc:
        raise DamagedManifest(path, "cpus", str(exc)) from None


def _cpu_parts_beyond_host(row: dict[str, Any], cpus: int | None) -> str:
    """Why the tool's CPU share, its :data:`CPU_PARTS` together, cannot be measured ("" when
    it can): their sum is above 100 % of each of the host's ``cpus`` (:data:`MAX_CPUS` when
    not known), with the margin of :data:`CPU_SHARE_SLACK`; each part alone may be below."""
    tool = row.get("run.tool")
    parts = {f"{tool}.{part}": row.get(f"{tool}.{part}") for part in CPU_PARTS}
    if not all(_present(v) for v in parts.values()):
        return ""
    total = sum(parts.values())
    ceiling = 100.0 * (cpus or MAX_CPUS) * CPU_SHARE_SLACK
    if total <= ceiling:
        return ""
    whose = f"this host's {cpus} CPUs" if cpus else f"{MAX_CPUS} CPUs, the most a host has"
    return (f"{' + '.join(parts)} reads {total:g} % of one CPU, above {ceiling:g} %, all of "
            f"{whose} with a margin of {CPU_SHARE_SLACK - 1:.0%}")
