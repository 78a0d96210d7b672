"""Collectors: samplers started before and stopped after a driver, writing raw files.

Each collector has ``start(run_dir)`` and ``stop(run_dir)`` and writes only into ``run_dir``;
its parser is a pure function of those files.

Responsible for: the collector protocol, the host-side collectors and their pure parsers:

==================  ==========================================  ==========================
collector           files in the run folder                     parser
==================  ==========================================  ==========================
``ProcStat``        procstat.before, procstat.after              ``parse_procstat``
``CpufreqSampler``  cpufreq.csv, cpufreq-meta.json               ``parse_cpufreq_samples``
``ProcTreeCpu``     proctree-cpu.csv, proctree-cpu.json          ``parse_proctree_cpu``
``OutputMarker``    marker.json                                  (JSON as written)
``Hugepages``       hugepages.json                               (JSON as written)
GNU time            the file given to ``gnu_time_prefix``        ``parse_gnu_time_kv``
==================  ==========================================  ==========================

GNU time is not an object with start/stop: it wraps the driver's argv.
Not responsible for: deciding which collectors an experiment uses (the experiment module
does), tool-specific metrics (parsers), or GNU time's default two-line format (parsed with
the tool outputs).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from .errors import IolabError, ParseError
from .knobs import SmtKnob, SysRoot, TurboKnob


class Collector(Protocol):
    name: str

    def start(self, run_dir: Path) -> None: ...

    def stop(self, run_dir: Path) -> None: ...


class ProcStat:
    """Snapshots of ``/proc/stat`` with a wall-clock stamp, just before and just after the driver.

    The delta covers the driver's whole lifetime (set-up, ramp and measurement), so it is
    reported as host CPU use *around* the run, not inside fio's measurement window.
    """

    name = "procstat"

    def __init__(self, proc: Path = Path("/proc")):
        self.proc = proc

    def _snap(self, dest: Path) -> None:
        dest.write_text(f"# time_ns {time.time_ns()}\n" + (self.proc / "stat").read_text())

    def start(self, run_dir: Path) -> None:
        self._snap(run_dir / "procstat.before")

    def stop(self, run_dir: Path) -> None:
        self._snap(run_dir / "procstat.after")


def _cpu_lines(text: str, source: str) -> tuple[int, dict[str, list[int]]]:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# time_ns "):
        raise ParseError(source, "missing '# time_ns' header line")
    stamp = int(lines[0].split()[2])
    cpus = {}
    for line in lines[1:]:
        if line.startswith("cpu"):
            name, *vals = line.split()
            cpus[name] = [int(v) for v in vals]
    if "cpu" not in cpus:
        raise ParseError(source, "no aggregate 'cpu' line")
    return stamp, cpus


def parse_procstat(before: str, after: str, source: str = "procstat") -> dict[str, float]:
    """Busy share of all CPUs between the snapshots, in percent (idle and iowait count as idle)."""
    t0, a = _cpu_lines(before, f"{source}.before")
    t1, b = _cpu_lines(after, f"{source}.after")
    delta = [y - x for x, y in zip(a["cpu"], b["cpu"])]
    if len(delta) < 5:
        raise ParseError(source, "aggregate cpu line has fewer than 5 fields")
    total = sum(delta[:8])  # user nice system idle iowait irq softirq steal; guest is inside user
    idle = delta[3] + delta[4]
    return {
        "host_busy_pct": 100.0 * (total - idle) / total if total else float("nan"),
        "host_window_s": (t1 - t0) / 1e9,
    }


# -- CPU frequency ---------------------------------------------------------------------------

CPUFREQ_HEADER = "cpu,timestamp_ns,khz"


def _optional_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class CpufreqSampler:
    """Samples ``scaling_cur_freq`` of each CPU from a background thread.

    Writes ``cpufreq.csv`` in long format, one line per CPU and sample::

        cpu,timestamp_ns,khz
        0,1732181234000000000,3196599

    with the CPU id explicit, so an offline CPU or an SMT change never shifts a column (the
    AiSIO logger mapped columns to CPUs by position), and a CLOCK_REALTIME stamp taken as
    each value is read, so ``parse_cpufreq_samples`` can cut the samples to the measurement
    window. Samples are taken at start, every ``interval_s`` on a fixed schedule (no drift
    from the time the reads take), and once more at stop. A CPU that cannot be read in one
    sample (offline) is left out of that sample and counted in the metadata.

    ``cpufreq-meta.json`` records, once at start, the governor, ``scaling_driver`` and
    ``cpuinfo_max_freq`` of every sampled CPU and the SMT and turbo state read back, and at
    stop the number of samples and failed reads. Without cpufreq (virtual machines) the CSV
    holds only its header and the metadata says ``{"available": false, "reason": ...}``.
    """

    name = "cpufreq"

    def __init__(self, cpus: list[int] | None = None, interval_s: float = 0.25,
                 root: SysRoot | None = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        self.cpus = sorted(set(cpus)) if cpus is not None else None
        self.interval_s = interval_s
        self.root = root or SysRoot()
        self._files: dict[int, Path] = {}
        self._meta: dict[str, Any] = {}
        self._failed_reads: dict[int, int] = {}
        self._samples = 0
        self._error: str | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def _cpufreq_dirs(self) -> dict[int, Path]:
        dirs = {}
        for cpu_dir in self.root.cpu_dir.glob("cpu[0-9]*"):
            cpu = cpu_dir.name[3:]
            if cpu.isdigit() and (cpu_dir / "cpufreq/scaling_cur_freq").exists():
                dirs[int(cpu)] = cpu_dir / "cpufreq"
        return dict(sorted(dirs.items()))

    def _host_state(self) -> dict[str, Any]:
        state = {}
        for knob in (SmtKnob(self.root), TurboKnob(self.root)):
            try:
                state[knob.name] = knob.read()
            except IolabError:
                state[knob.name] = None
        return state

    def start(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        dirs = self._cpufreq_dirs()
        wanted = dirs if self.cpus is None else {c: d for c, d in dirs.items() if c in self.cpus}
        self._meta = {"available": bool(wanted), "source": "scaling_cur_freq",
                      "interval_s": self.interval_s,
                      "requested_cpus": self.cpus, **self._host_state()}
        if not dirs:
            self._meta["reason"] = (f"no {self.root.cpu_dir}/cpu*/cpufreq/scaling_cur_freq "
                                    f"(virtual machine or no cpufreq driver loaded)")
        elif not wanted:
            self._meta["reason"] = f"none of CPUs {self.cpus} has cpufreq (offline or absent)"
        else:
            self._meta["cpus"] = {str(cpu): {
                "governor": _optional_text(d / "scaling_governor"),
                "scaling_driver": _optional_text(d / "scaling_driver"),
                "cpuinfo_max_freq_khz": _int_or_none(_optional_text(d / "cpuinfo_max_freq")),
            } for cpu, d in wanted.items()}
            if self.cpus is not None:
                self._meta["cpus_without_cpufreq"] = [c for c in self.cpus if c not in wanted]
        self._write_meta(run_dir)
        if not wanted:
            (run_dir / "cpufreq.csv").write_text(CPUFREQ_HEADER + "\n")
            return
        # Closed by the sampling thread when it ends.
        out = open(run_dir / "cpufreq.csv", "w")
        out.write(CPUFREQ_HEADER + "\n")
        self._files = {cpu: d / "scaling_cur_freq" for cpu, d in wanted.items()}
        self._failed_reads = {cpu: 0 for cpu in wanted}
        self._samples = 0
        self._error = None
        self._halt.clear()
        self._sample(out)
        self._thread = threading.Thread(target=self._loop, args=(out,), name="cpufreq-sampler",
                                        daemon=True)
        self._thread.start()

    def _sample(self, out) -> None:
        lines = []
        for cpu, path in self._files.items():
            try:
                khz = int(path.read_text())
            except (OSError, ValueError):
                self._failed_reads[cpu] += 1
                continue
            lines.append(f"{cpu},{time.time_ns()},{khz}\n")
        out.write("".join(lines))
        # Flushed per sample, so a run killed mid-way keeps every sample taken before.
        out.flush()
        self._samples += 1

    def _loop(self, out) -> None:
        next_at = time.monotonic()
        try:
            while True:
                next_at += self.interval_s
                if self._halt.wait(max(0.0, next_at - time.monotonic())):
                    break
                self._sample(out)
            self._sample(out)
        # The run itself is still valid without frequencies: the failure goes into the
        # metadata instead of ending the campaign.
        except Exception as exc:
            self._error = f"sampling stopped: {exc}"
        finally:
            out.close()

    def stop(self, run_dir: Path) -> None:
        if self._thread is None:
            return
        self._halt.set()
        self._thread.join()
        self._thread = None
        self._meta.update(samples=self._samples,
                          failed_reads={str(c): n for c, n in self._failed_reads.items()},
                          error=self._error)
        self._write_meta(Path(run_dir))

    def _write_meta(self, run_dir: Path) -> None:
        (run_dir / "cpufreq-meta.json").write_text(json.dumps(self._meta, indent=2) + "\n")


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def parse_cpufreq_samples(csv_text: str, window_start_ns: int, window_end_ns: int,
                          source: str = "cpufreq.csv") -> dict[str, Any]:
    """Frequency statistics of the samples taken inside [window_start_ns, window_end_ns].

    Returns ``{"cpus": {"0": {"mean_khz", "min_khz", "max_khz", "n"}, ...}, "mean_khz",
    "n", "window_s"}`` where the overall ``mean_khz`` is the mean over CPUs of each CPU's
    mean (every CPU weighs the same, even one that missed a sample) and is NaN when no sample
    falls inside the window. Both window ends are inclusive.
    """
    if window_end_ns < window_start_ns:
        raise ValueError(f"window ends ({window_end_ns}) before it starts ({window_start_ns})")
    lines = csv_text.splitlines()
    if not lines or lines[0].strip() != CPUFREQ_HEADER:
        got = repr(lines[0]) if lines else "an empty file"
        raise ParseError(source, f"line 1: expected the header '{CPUFREQ_HEADER}', got {got}")
    per_cpu: dict[int, list[int]] = {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split(",")
        if len(fields) != 3 or not all(f.strip().isdigit() for f in fields):
            raise ParseError(source, f"line {number}: expected three whole numbers "
                             f"'{CPUFREQ_HEADER}', got {line!r}")
        cpu, stamp, khz = (int(f) for f in fields)
        if window_start_ns <= stamp <= window_end_ns:
            per_cpu.setdefault(cpu, []).append(khz)
    cpus = {str(cpu): {"mean_khz": sum(v) / len(v), "min_khz": min(v), "max_khz": max(v),
                       "n": len(v)}
            for cpu, v in sorted(per_cpu.items())}
    means = [entry["mean_khz"] for entry in cpus.values()]
    return {"cpus": cpus,
            "mean_khz": sum(means) / len(means) if means else float("nan"),
            "n": sum(entry["n"] for entry in cpus.values()),
            "window_s": (window_end_ns - window_start_ns) / 1e9}


# -- CPU time of the driver's process tree, cut to the measurement window -------------------

PROCTREE_HEADER = "timestamp_ns,pid,comm,utime,stime"


def _children(proc: Path) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended between the listing and the read
        fields = text.rpartition(")")[2].split()
        kids.setdefault(int(fields[1]), []).append(int(text.split(" (", 1)[0]))
    return kids


class ProcTreeCpu:
    """Samples utime and stime of the spawned process and all its descendants.

    GNU time reports CPU over the tool's whole life, start-up and teardown included, which
    made AiSIO's CPU figures incomparable across tools. This sampler writes, every
    ``interval_s`` from ``attach(pid)`` until ``stop``, one line per process of the tree to
    ``proctree-cpu.csv``::

        timestamp_ns,pid,comm,utime,stime

    (utime and stime in clock ticks, ``clk_tck`` in ``proctree-cpu.json``), so that
    ``parse_proctree_cpu`` can cut the samples to the measurement window the tool itself
    reports. Descendants matter: with GNU time in front, the tool is GNU time's child, and a
    driver script may start it in the background.
    """

    name = "proctree-cpu"

    def __init__(self, interval_s: float = 0.2, proc: Path = Path("/proc")) -> None:
        self.interval_s = interval_s
        self.proc = proc
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out = None

    def start(self, run_dir: Path) -> None:
        self._out = open(Path(run_dir) / "proctree-cpu.csv", "w")
        self._out.write(PROCTREE_HEADER + "\n")
        (Path(run_dir) / "proctree-cpu.json").write_text(
            json.dumps({"clk_tck": os.sysconf("SC_CLK_TCK"), "interval_s": self.interval_s}) + "\n")

    def attach(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._loop, args=(pid,), daemon=True)
        self._thread.start()

    def _sample(self, root_pid: int) -> None:
        kids = _children(self.proc)
        todo, seen = [root_pid], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo += kids.get(pid, [])
        stamp = time.time_ns()
        for pid in seen:
            try:
                text = (self.proc / str(pid) / "stat").read_text()
            except OSError:
                continue
            comm = text.split(" (", 1)[1].rpartition(")")[0].replace(",", "_")
            fields = text.rpartition(")")[2].split()
            self._out.write(f"{stamp},{pid},{comm},{fields[11]},{fields[12]}\n")

    def _loop(self, pid: int) -> None:
        while not self._stop.is_set():
            self._sample(pid)
            self._stop.wait(self.interval_s)

    def stop(self, run_dir: Path) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._out is not None:
            self._out.close()


def parse_proctree_cpu(csv_text: str, meta_text: str, window_start_ns: int, window_end_ns: int,
                       source: str = "proctree-cpu.csv") -> dict[str, Any]:
    """CPU use of the process tree inside [window_start_ns, window_end_ns], in % of one CPU.

    For every process, the growth of utime + stime between its first and last sample inside
    the window; the sum over processes is divided by the span of those samples. Returns
    ``{"cpu_pct", "utime_s", "stime_s", "span_s", "processes"}``; ``cpu_pct`` is NaN when
    fewer than two samples fall inside the window.
    """
    ticks = json.loads(meta_text)["clk_tck"]
    lines = csv_text.splitlines()
    if not lines or lines[0].strip() != PROCTREE_HEADER:
        raise ParseError(source, f"line 1: expected the header '{PROCTREE_HEADER}'")
    first: dict[int, tuple[int, int, int]] = {}
    last: dict[int, tuple[int, int, int]] = {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split(",")
        if len(fields) != 5:
            raise ParseError(source, f"line {number}: expected 5 fields, got {line!r}")
        try:
            stamp, pid, utime, stime = int(fields[0]), int(fields[1]), int(fields[3]), int(fields[4])
        except ValueError:
            raise ParseError(source, f"line {number}: expected whole numbers, got {line!r}") from None
        if window_start_ns <= stamp <= window_end_ns:
            first.setdefault(pid, (stamp, utime, stime))
            last[pid] = (stamp, utime, stime)
    stamps = sorted({v[0] for v in first.values()} | {v[0] for v in last.values()})
    if len(stamps) < 2:
        return {"cpu_pct": float("nan"), "utime_s": float("nan"), "stime_s": float("nan"),
                "span_s": 0.0, "processes": len(first)}
    span_s = (stamps[-1] - stamps[0]) / 1e9
    utime_s = sum(last[p][1] - first[p][1] for p in first) / ticks
    stime_s = sum(last[p][2] - first[p][2] for p in first) / ticks
    return {"cpu_pct": 100.0 * (utime_s + stime_s) / span_s, "utime_s": utime_s,
            "stime_s": stime_s, "span_s": span_s, "processes": len(first)}


# -- markers in the tool's own output --------------------------------------------------------

class OutputMarker:
    """Timestamps the first line of the driver's stdout that matches ``pattern``.

    Tools announce their measurement (bdevperf prints "Running I/O for 10 seconds...") but do
    not timestamp it; a thread polls ``stdout`` every ``interval_s`` and writes
    ``marker.json`` = {"pattern", "line", "time_ns"} (time_ns at most ``interval_s`` late).
    """

    name = "marker"

    def __init__(self, pattern: str, interval_s: float = 0.05) -> None:
        self.pattern = re.compile(pattern)
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, run_dir: Path) -> None:
        self._thread = threading.Thread(target=self._loop, args=(Path(run_dir),), daemon=True)
        self._thread.start()

    def _loop(self, run_dir: Path) -> None:
        stdout = run_dir / "stdout"
        while not self._stop.is_set():
            try:
                text = stdout.read_text(errors="replace")
            except OSError:
                text = ""
            for line in text.replace("\r", "\n").splitlines():
                if self.pattern.search(line):
                    (run_dir / "marker.json").write_text(json.dumps(
                        {"pattern": self.pattern.pattern, "line": line.strip(),
                         "time_ns": time.time_ns()}) + "\n")
                    return
            self._stop.wait(self.interval_s)

    def stop(self, run_dir: Path) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


# -- hugepages -------------------------------------------------------------------------------

class Hugepages:
    """Hugepage counts at start and stop, in ``run_dir/hugepages.json``.

    SPDK and xNVMe allocate their DMA buffers from hugepages; a pool that is too small or
    already used shows up here. Format::

        {"start": {"time_ns": ..., "meminfo": {"HugePages_Total": 1024,
                                               "Hugepagesize_kib": 2048,
                                               "AnonHugePages_kib": 6144, ...},
                   "pools": {"hugepages-2048kB": {"nr_hugepages": 1024,
                                                  "free_hugepages": 1024}, ...}},
         "stop": {...}}

    ``meminfo`` holds every /proc/meminfo line whose name contains "Huge" (so the
    transparent-hugepage counters too), values in kB get a ``_kib`` suffix.
    """

    name = "hugepages"

    def __init__(self, root: SysRoot | None = None) -> None:
        self.root = root or SysRoot()

    def _snapshot(self) -> dict[str, Any]:
        meminfo = {}
        for line in (self.root.proc / "meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if "Huge" in key:
                number, *unit = value.split()
                meminfo[key + ("_kib" if unit == ["kB"] else "")] = int(number)
        pools = {}
        for pool in sorted((self.root.sys / "kernel/mm/hugepages").glob("hugepages-*")):
            pools[pool.name] = {f: _int_or_none(_optional_text(pool / f))
                                for f in ("nr_hugepages", "free_hugepages")}
        return {"time_ns": time.time_ns(), "meminfo": meminfo, "pools": pools}

    def start(self, run_dir: Path) -> None:
        self._write(Path(run_dir), {"start": self._snapshot()})

    def stop(self, run_dir: Path) -> None:
        path = Path(run_dir) / "hugepages.json"
        record = json.loads(path.read_text()) if path.exists() else {}
        self._write(Path(run_dir), {**record, "stop": self._snapshot()})

    @staticmethod
    def _write(run_dir: Path, record: dict[str, Any]) -> None:
        (run_dir / "hugepages.json").write_text(json.dumps(record, indent=2) + "\n")


# -- GNU time ----------------------------------------------------------------------------------

GNU_TIME = "/usr/bin/time"

# (key, GNU time 1.9 directive, type). The format and its parser are both built from this.
# GNU time has no directive for the signal that ended the command (%k counts signals
# *delivered*); it writes "Command terminated by signal N" above the stats instead, and then
# %x reads 0.
_GNU_TIME_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("user_s", "%U", float),
    ("sys_s", "%S", float),
    ("elapsed_s", "%e", float),
    ("cpu_pct", "%P", int),
    ("maxrss_kib", "%M", int),
    ("major_faults", "%F", int),
    ("minor_faults", "%R", int),
    ("voluntary_ctxsw", "%w", int),
    ("involuntary_ctxsw", "%c", int),
    ("fs_inputs", "%I", int),
    ("fs_outputs", "%O", int),
    ("swaps", "%W", int),
    ("exit", "%x", int),
)

GNU_TIME_FORMAT = "\n".join(f"{key}={directive}" for key, directive, _ in _GNU_TIME_FIELDS)


def gnu_time_prefix(out_file: str | Path) -> list[str]:
    """The argv to put before a driver's so that GNU time writes ``GNU_TIME_FORMAT`` to a file.

    The values cover the command's whole lifetime (start-up and teardown too) and include
    its waited-for children; ``ProcPidCpu`` measures inside the window instead. GNU time is
    the Debian package ``time``; the bash keyword of the same name is a different thing,
    hence the absolute path.
    """
    return [GNU_TIME, "-o", str(out_file), "-f", GNU_TIME_FORMAT]


_TIME_EXITED = re.compile(r"Command exited with non-zero status (\d+)")
_TIME_SIGNALLED = re.compile(r"Command terminated by signal (\d+)")


def parse_gnu_time_kv(text: str, source: str = "time.out") -> dict[str, Any]:
    """Parse a file written with ``gnu_time_prefix``.

    Returns every key of ``GNU_TIME_FORMAT`` plus ``signal``. ``cpu_pct`` is None when GNU
    time printed ``?%`` (elapsed time of zero); ``exit`` is None and ``signal`` the signal
    number when a signal ended the command.
    """
    types = {key: kind for key, _, kind in _GNU_TIME_FIELDS}
    values: dict[str, Any] = {}
    status_line: int | None = None
    signal_number: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if match := _TIME_EXITED.fullmatch(line):
            status_line = int(match.group(1))
            continue
        if match := _TIME_SIGNALLED.fullmatch(line):
            signal_number = int(match.group(1))
            continue
        key, eq, raw = line.partition("=")
        if not eq or key not in types:
            raise ParseError(source, f"line {number}: not a GNU time line of iolab's format: "
                             f"{line!r}")
        if key in values:
            raise ParseError(source, f"line {number}: '{key}' appears twice")
        if key == "cpu_pct" and raw == "?%":
            values[key] = None
            continue
        try:
            values[key] = types[key](raw.removesuffix("%") if key == "cpu_pct" else raw)
        except ValueError:
            raise ParseError(source, f"line {number}: '{key}' has the value {raw!r}") from None
    missing = [key for key in types if key not in values]
    if missing:
        raise ParseError(source, f"missing {', '.join(missing)} (empty or cut-off file: was "
                         f"GNU time killed?)")
    if signal_number is not None:
        values["exit"] = None
    elif values["exit"] != (status_line or 0):
        raise ParseError(source, f"exit={values['exit']} disagrees with the line 'Command "
                         f"exited with non-zero status {status_line}'")
    values["signal"] = signal_number
    return values
