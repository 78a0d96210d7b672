"""What every tool adapter and collector shares: finding a program, its version, its driver.

A *tool adapter* (one module per tool in this folder) knows one benchmark program: where to
find it and how to ask its version, how to turn options in the tool's own vocabulary into the
driver's argv, which input files a run needs, how to parse what the tool wrote, and when the
tool measured. Experiments describe a run as an :class:`Invocation` (a tool name and options)
and never build argv themselves.

A *collector* samples something around a run (CPU frequency, CPU time, a GPU's PCIe traffic)
or wraps the driver's argv (GNU time); its parser is a pure function of the files it wrote.

Responsible for: :class:`Program` (find, version, install hint), :class:`CpuRequest` (a CPU
set named by cores, resolved against a host's topology at run time), :class:`Invocation`,
the :class:`ToolAdapter` and :class:`Collector` interfaces, reading a driver's version, the
one spelling of a PCI address (:func:`pci_address`), and the run's window as every
collector's parser checks its own time stamps against it (:func:`driver_window`,
:func:`run_window`, :func:`check_brackets`, :func:`check_within`, with one stated
tolerance, :data:`WINDOW_SLACK_NS`), and a tool's own window held to the driver's
(:func:`check_tool_window`).
Not responsible for: running anything (``iolab.execution.runner``), or any one tool.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Mapping

from iolab.errors import InputError, ParseError, ToolError, excerpt
from iolab.host.inventory import pick_cpus, version_output
from iolab.host.knobs import format_cpulist
from iolab.parsers import (CLOCK_NS_ALLOWED, int_within_float, is_clock_ns, is_digits,
                           record_object, record_value)
from iolab.paths import DRIVERS_DIR, REPO_ROOT



@dataclass(frozen=True)
class Program:
    """A program on this host: what it is called, how to ask its version, how to install it."""

    name: str                          # what the user installs or builds, e.g. "fio"
    executable: str                    # a name looked up on PATH, or a path
    version_args: tuple[str, ...] = ("--version",)
    install: str = "install it first"  # how, in one phrase
    role: str = "benchmark"            # what the plan says it is needed for
    # Where the version is in what version_args print: a regular expression whose groups,
    # joined by dots, are the version (default: the first line). None with
    # reports_version=False for programs that print no version at all (version_args then only
    # check that the program starts).
    version_pattern: str | None = None
    reports_version: bool = True
    # What the program needs besides itself to work (a program built on first use needs
    # its compiler and headers): commands looked up on PATH, or absolute paths; any one
    # missing counts as the program missing.
    needs: tuple[str, ...] = ()
    # The key of the build ``make tools`` made of this program (scripts/build_tools.py), if
    # it is one: part of the version, so a rebuild with other patches, libraries or sources
    # is another tool to the host's fingerprint even when the program prints the same version.
    build: str | None = None

    def missing_needs(self) -> list[str]:
        """What the program needs (see ``needs``) that is not here."""
        return [need for need in self.needs
                if not (Path(need).exists() if need.startswith("/") else shutil.which(need))]

    def find(self) -> str | None:
        """The program's path, or None when it (or anything it needs) is not there."""
        if self.missing_needs():
            return None
        if "/" in self.executable:
            return self.executable if Path(self.executable).is_file() else None
        return shutil.which(self.executable)

    def require(self) -> str:
        where = self.find()
        if where is None:
            place = f"at {self.executable}" if "/" in self.executable else "on PATH"
            raise ToolError(f"{self.name} not found {place}; {self.install}. "
                            "Nothing was run and no system setting was touched.")
        return where

    def version(self) -> str | None:
        """The first line the program prints for its version, or None (missing, or it failed)."""
        where = self.find()
        if where is None or not self.reports_version:
            return None
        version = _version_line(where, self.version_args, self.version_pattern)
        return f"{version} (build {self.build})" if version and self.build else version

    def status(self) -> dict[str, Any]:
        """What the plan shows: found where and which version, or how to install it."""
        where = self.find()
        return {"name": self.name, "role": self.role, "found": where is not None, "path": where,
                "missing_needs": self.missing_needs(),
                "version": self.version(), "reports_version": self.reports_version,
                "build": self.build, "version_argv": [self.executable, *self.version_args],
                "install": None if where else self.install}


def _version_line(path: str, args: tuple[str, ...], pattern: str | None) -> str | None:
    # not cached here: version_output is, keyed on the executable, so that a tool upgraded
    # while a process lives is asked again, by the plan as by the inventory
    try:
        done = version_output((path, *args))
    except (OSError, subprocess.TimeoutExpired):
        return None
    if pattern is not None:
        match = re.search(pattern, done.stdout + done.stderr)
        return ".".join(match.groups()) if match else None
    # Some tools print their version on stderr, some exit 1 after printing it.
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0].strip() if text else None


def driver_version(driver: Path) -> str:
    """The ``# iolab-driver-version: N`` line of a driver script."""
    if not driver.exists():
        raise ToolError(f"{driver}: driver script not found")
    return _driver_version(driver, driver.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _driver_version(driver: Path, mtime_ns: int) -> str:
    # cached per file version: a plan asks once per run, and a full grid has thousands
    match = re.search(r"^# iolab-driver-version:\s*(\S+)", driver.read_text(), re.M)
    if not match:
        raise ToolError(f"{driver}: no '# iolab-driver-version: N' line")
    return match.group(1)


# Domain, bus, device and function, as NVML and nvidia-smi print them (8-digit domain, upper
# case) or as sysfs does (4 digits, lower case); device 00-1f and function 0-7 are all PCI has.
_PCI_ADDRESS = re.compile(r"(?P<domain>[0-9a-fA-F]{1,8}):(?P<bus>[0-9a-fA-F]{2}):"
                          r"(?P<device>[01][0-9a-fA-F])\.(?P<function>[0-7])")


def pci_address(text: str) -> str:
    """A PCI address in one spelling, ``dddd:bb:dd.f`` in lower case, whichever of NVML's
    (``00000000:4B:00.0``) or sysfs's (``0000:4b:00.0``) it came in, so two tools' addresses
    compare equal. InputError for text that is not a PCI address."""
    match = _PCI_ADDRESS.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InputError(None, "pci address", f"{text!r} is not a PCI address",
                         allowed="domain:bus:device.function in hex, e.g. 0000:4a:00.0 or "
                                 "00000000:4A:00.0")
    # a domain above ffff (VMD, some hypervisors) keeps its extra digits: it needs them
    return (f"{int(match['domain'], 16):04x}:{match['bus'].lower()}:"
            f"{match['device'].lower()}.{match['function']}")


def source_version(source: Path, tag: str) -> str:
    """The ``<tag>: N`` line of a program's source that this project builds (the io_uring
    reader, the GPU probe): a changed program must give new runs, so it enters their identity."""
    if not source.exists():
        raise ToolError(f"{source}: the source is missing")
    match = re.search(rf"{re.escape(tag)}:\s*(\S+)", source.read_text())
    if not match:
        raise ToolError(f"{source}: no '{tag}: N' line")
    return match.group(1)


def cpu_mask(cpus: list[int]) -> str:
    """The hex mask of a set of logical CPUs, as SPDK and xNVMe take it: [0, 1] -> 0x3."""
    if not cpus:
        raise InputError(None, "cpus", "need at least one CPU for a core mask")
    for cpu in cpus:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise InputError(None, "cpus", f"CPU ids must be whole numbers >= 0, got {cpu!r}")
    if len(set(cpus)) != len(cpus):
        raise InputError(None, "cpus", f"CPU ids repeat in {sorted(cpus)}")
    return hex(sum(1 << cpu for cpu in cpus))


def check_cpus(key: str, cpus: list[int], topology: list[dict[str, Any]]) -> list[int]:
    """``cpus`` if every one is an online CPU of the host whose ``topology`` is given, else
    InputError naming ``key`` and the CPUs there are: a tool given a CPU that is not there
    fails late, or silently uses fewer."""
    online = sorted(entry["cpu"] for entry in topology)
    outside = sorted(set(cpus) - set(online))
    if outside:
        raise InputError(None, key, f"CPU {', '.join(map(str, outside))} is not an online CPU "
                         "of this host", allowed=format_cpulist(online))
    return cpus


@dataclass(frozen=True)
class CpuRequest:
    """Logical CPUs named by physical cores, so a run's identity does not depend on CPU ids.

    ``cores`` physical cores in the order of their lowest CPU id (None: every online CPU);
    ``siblings``: all hardware threads of each core, else only its first. Resolved against
    the topology of the host a run executes on (``host.json`` records it).
    """

    cores: int | None
    siblings: bool = True

    def resolve(self, topology: list[dict[str, Any]]) -> list[int]:
        if self.cores is None:
            return sorted(entry["cpu"] for entry in topology)
        return pick_cpus(topology, self.cores, use_siblings=self.siblings)

    def canonical(self) -> dict[str, Any]:
        return {"cores": "all" if self.cores is None else self.cores, "siblings": self.siblings}


@dataclass(frozen=True)
class CpuCount:
    """The number of CPUs a :class:`CpuRequest` gives on the host that runs (e.g. fio's numjobs)."""

    request: CpuRequest

    def resolve(self, topology: list[dict[str, Any]]) -> int:
        return len(self.request.resolve(topology))

    def canonical(self) -> dict[str, Any]:
        return {"cpus_of": self.request.canonical()}


def is_host_value(value: Any) -> bool:
    """A value resolved on the host that runs (CpuRequest, CpuCount, or an experiment's own
    such as ``iolab.host.irqs.IrqCpus``): it has ``resolve(topology)`` and ``canonical()``."""
    return callable(getattr(value, "resolve", None)) and callable(getattr(value, "canonical", None))


def canonical_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Options as JSON-ready data, host-resolved values by their request, for a run's identity."""
    return {k: v.canonical() if is_host_value(v) else v for k, v in options.items()}


@dataclass(frozen=True)
class Invocation:
    """One run of one tool: the adapter's name and options in the tool's own vocabulary.

    Option values are plain data, or a :class:`CpuRequest` where the tool takes a CPU set
    (a :class:`CpuCount` where it takes their number), resolved on the host that runs.
    The options, the driver and its version are a run's identity; nothing that only chooses
    an output format is an option.
    """

    tool: str
    options: Mapping[str, Any]


@dataclass
class Launch:
    """What the runner executes for one run, resolved on this host."""

    argv: list[str]                     # run inside the run folder
    inputs: dict[str, str] = field(default_factory=dict)  # files written before the driver
    cpus: list[int] | None = None       # the resolved CPU set, if the run is pinned


class ToolAdapter:
    """One benchmark tool: subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]                 # also the namespace of its tidy columns
    driver: ClassVar[str | None] = None  # script in scripts/drivers/
    # For a tool the runner starts itself, with no driver script between (its launch argv
    # begins with the program): the (name, version) of that way of starting it, which takes
    # the driver's place in run ids and manifests. Change it when the way changes.
    contract: ClassVar[tuple[str, str] | None] = None
    # Seconds a run takes beyond its runtime (start-up, teardown); an estimate for the plan.
    startup_s: ClassVar[float] = 1.0
    # Arguments older runs recorded that only chose an output format (not part of what ran).
    output_only_args: ClassVar[tuple[str, ...]] = ()
    # The keys of its metrics that are rates of what it moved, with their units: "op/s"
    # (operations per second) or bytes per second ("B/s", "MiB/s", "GB/s"; the units of
    # ``iolab.core.experiment.PER_S``). A run whose rates are beyond any device, or
    # contradict each other (0 operations with bytes moved), is no sample
    # (``Experiment.sample_problem``).
    rates: ClassVar[dict[str, str]] = {}

    def program(self, options: Mapping[str, Any]) -> Program:
        raise NotImplementedError

    def startup_seconds(self, options: Mapping[str, Any]) -> float:
        """Seconds a run with these options takes beyond its runtime; an estimate for the plan."""
        return self.startup_s

    @property
    def runnable(self) -> bool:
        """Whether this package can run the tool (a driver script, or started directly)."""
        return self.driver is not None or self.contract is not None

    @property
    def driver_path(self) -> Path:
        if self.driver is None:
            raise ToolError(f"{self.name}: no driver script; this tool is only read from "
                            "archives so far")
        return DRIVERS_DIR / self.driver

    def driver_record(self) -> tuple[str | None, str | None]:
        """(driver, its version) as a run records them: the script, repository-relative, or
        the contract of a tool started directly."""
        if self.contract is not None:
            return self.contract
        if self.driver is None:
            return None, None
        return (str(self.driver_path.relative_to(REPO_ROOT)),
                driver_version(self.driver_path))

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        """What enters a run id: tool, driver (or contract) and its version, options."""
        if self.contract is not None:
            driver, version = self.contract
        else:
            driver = self.driver
            version = driver_version(self.driver_path) if self.driver else None
        return {"tool": self.name, "driver": driver, "driver_version": version,
                "options": canonical_options(invocation.options)}

    def recorded_argv(self, argv: list[str]) -> list[str]:
        """``argv`` as runs of earlier versions recorded the same launch (for reading
        version-1 manifests); default: unchanged."""
        return argv

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        """The driver's argv (absolute driver path first) and the run's input files."""
        raise NotImplementedError

    def collectors(self, invocation: Invocation) -> list[Collector]:
        """Collectors every run of this tool needs (e.g. a marker of its measurement start)."""
        return []

    def parse(self, run_dir: Path) -> dict[str, Any]:
        """Metrics of a stored run from its raw files; ``problem`` (None or why the run is not
        a measurement) and ``note`` (said once per campaign) are always present."""
        raise NotImplementedError

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """Why the output in ``run_dir`` is not the report of the run launched with ``argv``
        (another job's, say), "" when it is or the tool's output cannot tell; default ""."""
        return ""

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """When the tool measured (CLOCK_REALTIME ns), from its own output, if it says."""
        return None


class Collector:
    """Something sampled around one run; ``parse`` reads only the files ``start``/``stop`` wrote."""

    name: ClassVar[str]                 # also the namespace of its tidy columns

    def programs(self) -> list[Program]:
        """Programs this collector needs on the host (checked by the plan)."""
        return []

    def start(self, run_dir: Path) -> None:
        pass

    def attach(self, pid: int) -> None:
        """Called with the driver's pid once it runs."""

    def stop(self, run_dir: Path) -> None:
        pass

    def wrap(self, argv: list[str]) -> list[str]:
        """A collector may run the driver under it (GNU time); default: unchanged."""
        return argv

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        return {}


class Snapshots(Collector):
    """A collector that copies one /proc file just before and just after the driver, each
    copy headed by ``# time_ns <CLOCK_REALTIME ns>`` (``<name>.before``, ``<name>.after``).
    Subclasses set ``name`` and ``source`` (the file's path under /proc) and parse."""

    source: ClassVar[str]

    def __init__(self, proc: Path = Path("/proc")):
        self.proc = proc

    def _snap(self, dest: Path) -> None:
        dest.write_text(f"# time_ns {time.time_ns()}\n" + (self.proc / self.source).read_text())

    def start(self, run_dir: Path) -> None:
        self._snap(run_dir / f"{self.name}.before")

    def stop(self, run_dir: Path) -> None:
        self._snap(run_dir / f"{self.name}.after")


WINDOW_FILE = "driver-window.json"  # wall-clock start and end of the driver (the runner writes it)
CPUS_FILE = "cpus.json"             # the resolved CPU set of a pinned run (the runner writes it)

# The one tolerance between a collector's own time stamps and the run's window. Collectors
# start just before the driver and stop just after it (on the committed runs every snapshot
# lies within 0.7 s of the driver's window): a minute allows a slow collector's start
# (bpftrace attaching its probes) and never takes a record from another run, an hour away,
# as this run's. Inside the window the runner's own stamps allow nothing but a clock step.
WINDOW_SLACK_NS = 60 * 10**9
CLOCK_STEP_NS = 10**8   # how far a snapshot may read inside the window (a clock adjustment)


def driver_window(run_dir: Path) -> tuple[int, int] | None:
    """When the driver ran (CLOCK_REALTIME ns), from the runner's ``driver-window.json``; None
    without one. Read back as any output is: a cut-off or altered file fails the run naming
    the file and the key, and a time no clock gives (1e300, which ``int`` once took and every
    collector's window then missed) is never a window."""
    path = Path(run_dir) / WINDOW_FILE
    if not path.exists():
        return None
    source = str(path)
    w = record_object(path.read_text(), source)
    start, end = (record_value(w, key, source, is_clock_ns, CLOCK_NS_ALLOWED)
                  for key in ("start_ns", "end_ns"))
    if end < start:
        raise ParseError(source, f"end_ns {end} is before start_ns {start} (the driver ends "
                                 "after it starts)")
    return start, end


def run_window(run_dir: Path, window: tuple[int, int] | None) -> tuple[int, int] | None:
    """The window a collector started before and stopped after: the driver's, where the
    runner wrote it (the tool's own ``window`` leaves out its set-up and ramp), else
    ``window``."""
    return driver_window(run_dir) or window


def _span(start: int, end: int) -> str:
    return f"{start} to {end} ns ({(end - start) / 1e9:.3f} s)"


def check_brackets(t0: int, t1: int, window: tuple[int, int] | None, source: str) -> None:
    """ParseError unless snapshots stamped ``t0`` and ``t1`` bracket the run's ``window``:
    the before one at most :data:`WINDOW_SLACK_NS` before it starts, the after one at most
    that after it ends (neither inside it beyond :data:`CLOCK_STEP_NS`). A pair from
    another run, or one spanning an hour around a 4 s run, is no reading of this run. Without
    a window, only their order is checked."""
    if t1 < t0:
        raise ParseError(source, f"time_ns of the after snapshot ({t1}) is before the before "
                                 f"snapshot's ({t0}) (allowed: after >= before)")
    if window is None:
        return
    w0, w1 = window
    if not (w0 - WINDOW_SLACK_NS <= t0 <= w0 + CLOCK_STEP_NS
            and w1 - CLOCK_STEP_NS <= t1 <= w1 + WINDOW_SLACK_NS):
        raise ParseError(source, f"the snapshots span {_span(t0, t1)}, which does not bracket "
                                 f"the run's window {_span(w0, w1)} (allowed: the before "
                                 f"snapshot at most {WINDOW_SLACK_NS / 1e9:g} s before the "
                                 "window starts and the after one at most that after it "
                                 "ends)")


def check_within(stamp: int, window: tuple[int, int] | None, what: str, source: str) -> None:
    """ParseError unless ``stamp`` (of a sample ``what`` names) lies in the run's ``window``
    widened by :data:`WINDOW_SLACK_NS` on each side: a collector samples only while the run
    is on, so a sample stamped an hour away is another run's."""
    if window is not None and not window[0] - WINDOW_SLACK_NS <= stamp <= window[1] + WINDOW_SLACK_NS:
        raise ParseError(source, f"{what} is stamped {stamp} ns, outside the run's window "
                                 f"{_span(*window)} (allowed: within "
                                 f"{WINDOW_SLACK_NS / 1e9:g} s of it)")


def check_tool_window(window: tuple[int, int] | None, run: tuple[int, int] | None,
                      source: str) -> None:
    """ParseError unless the window a tool's own report gives (``ToolAdapter.window``) lies
    inside the run's (the driver's) widened by :data:`WINDOW_SLACK_NS` on each side: the
    tool measured while its driver ran, so a report stamped a year before the run is
    another run's (every collector's numbers would then be cut to a time no run had)."""
    if window is None or run is None:
        return
    w0, w1 = run
    if not (w0 - WINDOW_SLACK_NS <= window[0] and window[1] <= w1 + WINDOW_SLACK_NS):
        raise ParseError(source, f"the tool's report says it measured {_span(*window)}, "
                                 f"outside the run's window {_span(w0, w1)} (allowed: within "
                                 f"{WINDOW_SLACK_NS / 1e9:g} s of it): it is not this run's "
                                 "report")


def stamped(text: str, source: str) -> tuple[int, str]:
    """(time_ns, the copied text) of one :class:`Snapshots` file; ParseError without a stamp."""
    first, _, rest = text.partition("\n")
    parts = first.split()
    if len(parts) != 3 or parts[:2] != ["#", "time_ns"] or not is_digits(parts[2]):
        raise ParseError(source, "missing '# time_ns' header line (allowed: '# time_ns' and "
                                 "whole nanoseconds, 0-9)")
    stamp = int_within_float(parts[2], "time_ns", source)
    if not is_clock_ns(stamp):  # 10**300 would be stored as the snapshots' window
        raise ParseError(source, f"time_ns is {excerpt(parts[2])} (allowed: {CLOCK_NS_ALLOWED})")
    return stamp, rest


def end_process_group(proc: subprocess.Popen, grace_s: float) -> dict[str, Any]:
    """Stop a background process started in its own session, and every process it forked:
    SIGTERM to the group, SIGKILL after ``grace_s``. Returns how it ended: ``exit_status``
    (None when a signal ended it), ``signal``, ``ended_before_stop`` (it had ended on its
    own), ``killed`` (SIGTERM was not enough)."""
    ended_before_stop = proc.poll() is not None
    killed = False
    if not ended_before_stop:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            killed = True
    code = proc.returncode
    return {"exit_status": code if code >= 0 else None, "signal": -code if code < 0 else None,
            "ended_before_stop": ended_before_stop, "killed": killed}


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass  # the whole group has already exited


# PCIe line rate per lane (GT/s) by generation, and the share of it that carries bits after
# line coding: 8b/10b for Gen 1-2, 128b/130b for Gen 3-5. Gen 6 runs in flit mode, whose
# 1b/1b coding takes nothing; its FEC and CRC bytes are protocol overhead, like TLP headers.
GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 1.0}


def link_gbs(gen: int | None, width: int | None) -> float | None:
    """One direction's line rate of a PCIe link in GB/s (10^9 B/s) after line coding, the
    ceiling no payload reaches (Gen5 x16: 63.015…); None for an unknown generation or width."""
    if gen not in GT_PER_S or not width:
        return None
    return GT_PER_S[gen] * width * ENCODING[gen] / 8
