"""The fio adapter: options in fio's vocabulary -> fio's argv; fio's JSON -> metrics.

Options are fio's own job options (``rw``, ``bs``, ``iodepth``, ...), given in the order they
go on the command line; a :class:`~iolab.tools.base.CpuRequest` as the value of
``cpus_allowed`` is resolved to a CPU list on the host that runs (a
:class:`~iolab.tools.base.CpuCount`, e.g. for ``numjobs``, to the number of those CPUs).

fio is started directly, without a driver script: the adapter chooses the report format,
``json+`` (with the latency histogram bins), written to ``fio.json`` in the run folder, and
no option here may choose a format, because a format is not part of what a run measures.
Until iolab 0.2 a script, ``scripts/drivers/fio.sh`` version 1, stood between: it printed
``fio --version`` (the manifest has the version already) and then replaced itself with
exactly this argv. It cost a shell and a fio start per run and added nothing, so it is gone;
its name and version stay as this adapter's :attr:`contract`, so that the runs it made keep
their ids. What fio measured is unchanged; what GNU time measured around it is not quite:
its user, system and elapsed times of runs made through the script include a shell and a
``fio --version`` (a few milliseconds), those of later runs do not.

Responsible for: finding fio, the argv, parsing ``fio.json`` (via :mod:`iolab.parsers.fio`),
the measurement window, and whether a stored report is the run's own (its jobs' options, the
number of job objects, and the directions its I/O moved in, against the argv). Not responsible for: which options an experiment wants.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError, excerpt
from iolab.parsers.fio import parse_fio_file
from iolab.tools.base import CpuCount, CpuRequest, Invocation, Launch, Program, ToolAdapter

OUTPUT = "fio.json"
# The driver's own choice; an option choosing a format would replace json+ (and lose the bins).
FORMAT_OPTIONS = ("output-format", "output")

METRICS = ("iops", "mibs", "bw_bytes", "clat_mean_us", "clat_p50_us", "clat_p99_us",
           "usr_cpu", "sys_cpu", "runtime_ms", "njobs", "error", "direction")


class Fio(ToolAdapter):
    name = "fio"
    # what scripts/drivers/fio.sh v1 ran: see the module's docstring
    contract = ("fio.sh", "1")
    _CONTRACT_ARGV = ["scripts/drivers/fio.sh", "--output", OUTPUT]
    _ARGV = ["fio", "--output-format=json+", f"--output={OUTPUT}"]
    startup_s = 1.0
    rates = {"iops": "op/s", "bw_bytes": "B/s", "mibs": "MiB/s"}
    # iolab before 0.2 passed this after the driver's json+, losing the histogram bins
    output_only_args = ("--output-format=json",)

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        return Program("fio", "fio", ("--version",),
                       install="install it with 'apt-get install fio' (Debian/Ubuntu) or "
                               "'conda install -c conda-forge fio'")

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        argv = list(self._ARGV)
        cpus = None
        for key, value in invocation.options.items():
            if key in FORMAT_OPTIONS:
                raise InputError(None, f"fio option '{key}'", "the fio driver chooses the report "
                                 "format (json+, into fio.json); do not set it")
            if isinstance(value, CpuRequest):
                cpus = value.resolve(topology)
                value = ",".join(map(str, cpus))
            elif isinstance(value, CpuCount):
                value = value.resolve(topology)
            argv.append(f"--{key}={value}")
        return Launch(argv, cpus=cpus)

    def recorded_argv(self, argv: list[str]) -> list[str]:
        n = len(self._ARGV)
        for i in range(len(argv)):  # after a wrapper (GNU time), if any
            if argv[i:i + n] == self._ARGV:
                return argv[:i] + self._CONTRACT_ARGV + argv[i + n:]
        return argv

    def parse(self, run_dir: Path) -> dict[str, Any]:
        fio = _report(run_dir)
        metrics = {key: fio[key] for key in METRICS}
        metrics["version"] = fio["fio_version"]
        # a job that reports an errno is not a measurement, whatever fio's exit status
        metrics["problem"] = f"fio reported error {fio['error']}" if fio["error"] else None
        metrics["note"] = None
        return metrics

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A job of the report whose name or options differ from the ``--key=value`` options
        the run gave fio (bar the report's own format and file) ran something else: a report
        left by another job, or written there by something that is not this run."""
        given = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
        for key in ("output", *FORMAT_OPTIONS):
            given.pop(key, None)
        report = _report(run_dir)
        expected = expected_jobs(argv)
        if expected is not None and report["njobs"] != expected:
            return (f"{OUTPUT} is not this run's report: it has {report['njobs']} job "
                    f"object(s), the run's argv makes fio report {expected} (its --name "
                    "sections, --numjobs and --group_reporting); the parser sums every job, so "
                    "a job given twice would count the I/O twice")
        for i, job in enumerate(report["job_options"]):
            if job is None:
                continue
            for key, value in given.items():
                if job.get(key) != value:
                    return (f"{OUTPUT} is not this run's report: its jobs[{i}] ran with "
                            f"{key} {excerpt(job.get(key))}, the run gave fio {excerpt(value)}")
        return _foreign_direction(report, given)

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """fio stamps its report when the measurement ends and says how long it measured."""
        if not os.path.exists(os.path.join(run_dir, OUTPUT)):
            return None
        fio = _report(run_dir)
        runtime_ms, end_ms = fio["runtime_ms"], fio["timestamp_ms"]
        if not runtime_ms or end_ms is None:
            return None
        return int((end_ms - runtime_ms) * 1e6), int(end_ms * 1e6)


# the directions each of fio's rw values moves data in ("rw=randread:8" is randread)
RW_DIRECTIONS = {"read": {"read"}, "randread": {"read"}, "write": {"write"},
                 "randwrite": {"write"}, "trim": {"trim"}, "randtrim": {"trim"},
                 "rw": {"read", "write"}, "readwrite": {"read", "write"},
                 "randrw": {"read", "write"}, "trimwrite": {"trim", "write"},
                 "randtrimwrite": {"trim", "write"}}
# a verify option other than these makes a writing job read back what it wrote
NO_VERIFY = ("0", "none")


def _sections(argv: list[str]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """fio's command line as its global options (those before the first ``--name``) and
    its job sections (each ``--name`` starts one), each ``{key: value}``; an option without
    ``=value`` (``--group_reporting``) is a set flag, "1"."""
    glob: dict[str, str] = {}
    sections: list[dict[str, str]] = []
    for word in argv:
        if not word.startswith("--") or len(word) == 2:
            continue
        key, _, value = word[2:].partition("=")
        if key == "name":
            sections.append({})
        (sections[-1] if sections else glob)[key] = value if "=" in word else "1"
    return glob, sections


def _count(value: str | None, default: int) -> int | None:
    """A count option's value as fio reads plain digits; None for one it reads otherwise."""
    if value is None:
        return default
    return int(value) if value.isascii() and value.isdigit() and len(value) < 10 else None


def expected_jobs(argv: list[str]) -> int | None:
    """How many job objects fio's report holds for ``argv`` (None where the argv leaves it
    to something this does not model): without ``group_reporting`` one per job, ``numjobs``
    of each ``--name`` section; with it, one per group (a section with ``stonewall`` or
    ``new_group`` starts a new one). An argv without ``--name`` counts as one section (fio
    itself refuses it: "No job(s) defined"), as the options of one job."""
    glob, sections = _sections(argv)
    sections = [{**glob, **section} for section in sections] or [dict(glob)]
    grouped = {_count(section.get("group_reporting"), 0) for section in sections}
    numjobs = [_count(section.get("numjobs"), 1) for section in sections]
    if None in grouped or None in numjobs or len(grouped) != 1:
        return None  # a value fio may read that is not plain digits, or groups mixed
    if grouped == {0}:
        return sum(numjobs)  # type: ignore[arg-type]
    new = [_count(section.get(key), 0) for section in sections[1:]
           for key in ("stonewall", "new_group")]
    if None in new:
        return None
    return 1 + sum(1 for section in sections[1:]
                   if _count(section.get("stonewall"), 0) or _count(section.get("new_group"), 0))


def _foreign_direction(report: dict[str, Any], given: dict[str, str]) -> str:
    """Why the report's I/O is not of the directions its jobs were given ("" when it is): a
    direction that moved bytes, or counted I/Os, that no job's ``rw`` (fio's default: read)
    moves in, reads of a verify aside. Its rates are summed into ``iops``, so a write section
    in a randread run's report would count I/O the run never did."""
    allowed: set[str] = set()
    given_rw: list[str] = []
    for job in report["job_options"]:
        options = job if job is not None else given
        rw = str(options.get("rw", options.get("readwrite", "read"))).split(":", 1)[0]
        if rw not in RW_DIRECTIONS:
            return ""  # a value fio may take that is not listed here: nothing to set against
        allowed |= RW_DIRECTIONS[rw]
        given_rw.append(rw)
        if options.get("verify", "0") not in NO_VERIFY:
            allowed.add("read")
    for d in ("read", "write", "trim"):
        moved = {key: report[f"{d}_{key}"] for key in ("io_bytes", "total_ios")}
        if d not in allowed and any(moved.values()):
            return (f"{OUTPUT} is not this run's report: it has {d} I/O (io_bytes "
                    f"{moved['io_bytes']}, total_ios {moved['total_ios']}), which its jobs' rw "
                    f"({excerpt(', '.join(dict.fromkeys(given_rw)))}) never does (allowed: "
                    f"{', '.join(sorted(allowed))} I/O only)")
    return ""


def _report(run_dir: str | Path) -> dict[str, Any]:
    """The parsed report of a run (read-only: it may be shared). A tidy row asks for the
    metrics and then for the window of the same run; one parse serves both."""
    path = os.path.join(run_dir, OUTPUT)
    st = os.stat(path)
    return _parse_once(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _parse_once(path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    return parse_fio_file(path)
