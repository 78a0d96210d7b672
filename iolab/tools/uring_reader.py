"""The adapter of the project's io_uring reader: random reads with chosen ring setup flags.

fio cannot set ``IORING_SETUP_COOP_TASKRUN``, which the IRQ affinity study switches; the reader
(``scripts/src/uring_reader.c``, built with liburing by its driver on first use) can. Options
are the reader's own: ``file``, ``bs``, ``qdepth``, ``runtime``, ``ramp``, ``cpus`` (a list of
CPU ids, or a host-resolved CPU set), ``seed``, and the flags ``coop_taskrun``,
``single_issuer``, ``defer_taskrun``, ``iopoll`` and ``direct`` (true to set). The report goes
to ``uring.json``; the setup flags the kernel accepted are recorded in it and become the
tidy column ``uring_reader.setup_flags``.

Responsible for: the argv, finding the reader and its build dependencies, and the metrics of
a stored run, with the reason a run is no measurement (reads that failed or came back short). Not responsible for: the report's format (:mod:`iolab.parsers.uring_reader`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError, excerpt
from iolab.parsers.uring_reader import parse_uring_reader_file
from iolab.paths import DRIVERS_DIR
from iolab.tools.base import (Invocation, Launch, Program, ToolAdapter, is_host_value,
                              source_version)

OUTPUT = "uring.json"
SOURCE = Path(__file__).resolve().parents[2] / "scripts" / "src" / "uring_reader.c"
VALUES = ("file", "bs", "qdepth", "runtime", "ramp", "cpus", "seed")
FLAGS = ("coop_taskrun", "single_issuer", "defer_taskrun", "iopoll", "direct")
METRICS = ("iops", "mibs", "ios", "threads", "clat_mean_us", "clat_p50_us", "clat_p90_us",
           "clat_p99_us", "clat_p999_us", "clat_max_us", "errors", "short_reads")


class UringReader(ToolAdapter):
    name = "uring_reader"
    driver = "uring_reader.sh"
    startup_s = 0.5
    rates = {"iops": "op/s", "mibs": "MiB/s"}

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        return Program("uring_reader", str(DRIVERS_DIR / self.driver), ("--version",),
                       install="it is built on first use and needs a C compiler and liburing: "
                               "'apt-get install gcc liburing-dev'",
                       version_pattern=r"uring_reader (\S+ \(liburing \S+\))",
                       needs=("cc", "/usr/include/liburing.h"))

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        argv = [str(self.driver_path), "--output", OUTPUT]
        cpus = None
        for key, value in invocation.options.items():
            if key in FLAGS:
                if not isinstance(value, bool):
                    raise InputError(None, f"uring_reader option '{key}'", f"{value!r} is not "
                                     "true or false")
                if value:
                    argv.append(f"--{key.replace('_', '-')}")
            elif key == "cpus":
                cpus = value.resolve(topology) if is_host_value(value) else list(value)
                argv += ["--cpus", ",".join(map(str, cpus))]
            elif key in VALUES:
                argv += [f"--{key}", str(value)]
            else:
                raise InputError(None, f"uring_reader option '{key}'", "unknown option",
                                 allowed=", ".join(VALUES + FLAGS))
        return Launch(argv, cpus=cpus)

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        """Also the reader's own version: the driver builds whatever source is there, so a
        changed reader must give new runs (its ``iolab-reader-version`` line)."""
        return {**super().identity(invocation), "reader_version": reader_version()}

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        path = Path(run_dir) / OUTPUT
        return parse_uring_reader_file(path)["window_ns"] if path.exists() else None

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A report of another file, block size, queue depth, seed, time, CPUs or of buffered
        reads than the run gave the reader was not written by this run (another run's, or
        something else's): its numbers are not this run's."""
        report = parse_uring_reader_file(Path(run_dir) / OUTPUT)
        given = _given(argv)
        for key, (field, read) in _ECHOED.items():
            if key not in given:
                continue
            try:
                wanted = read(given[key])
            except ValueError:
                continue  # the reader refuses what it cannot read: no report to compare
            got = report[field]
            same = (abs(got - wanted) <= 1e-5 * abs(wanted) if isinstance(wanted, float)
                    else got == wanted)  # %g prints 6 significant digits of a time
            if not same:
                return (f"{OUTPUT} is not this run's report: it read with {field} "
                        f"{excerpt(got)}, the run gave the reader --{key} {excerpt(given[key])}")
        if ("direct" in given) != report["direct"]:
            return (f"{OUTPUT} is not this run's report: its direct is "
                    f"{str(report['direct']).lower()}, the run "
                    f"{'gave' if 'direct' in given else 'did not give'} the reader --direct")
        return ""

    def parse(self, run_dir: Path) -> dict[str, Any]:
        report = parse_uring_reader_file(Path(run_dir) / OUTPUT)
        metrics = {key: report[key] for key in METRICS}
        metrics["setup_flags"] = ",".join(report["setup_flags"]) or "none"
        metrics["version"] = f"{report['version']} (liburing {report['liburing']})"
        metrics["problem"] = _problem(report)
        metrics["note"] = None
        return metrics


def _problem(report: dict[str, Any]) -> str | None:
    """Why the run is no measurement (None when it is one): reads that failed, or reads that
    returned fewer bytes than the block size. The reader counts a short read as a read of
    ``bs`` bytes in ``mibs`` (it does not add up what each returned), so even one makes the
    bandwidth more than was read; a read of a file laid out in whole blocks is never short."""
    if report["errors"]:
        return f"{report['errors']} reads failed ({report['first_error']})"
    if report["short_reads"]:
        return (f"{report['short_reads']} of {report['ios']} reads returned fewer than the "
                f"{report['bs']} bytes asked for (short reads), which mibs counts as whole "
                "blocks: the bandwidth is not what was read")
    return None


def _cpu_list(text: str) -> list[int]:
    return [int(cpu) for cpu in text.split(",")]


# what the reader echoes of its arguments in its report: option -> (report key, how to read it)
_ECHOED = {"file": ("file", str), "bs": ("bs", int), "qdepth": ("qdepth", int),
           "runtime": ("runtime_s", float), "ramp": ("ramp_s", float), "seed": ("seed", int),
           "cpus": ("cpus", _cpu_list)}


def _given(argv: list[str]) -> dict[str, str]:
    """The reader's options in ``argv``: ``--key value`` pairs, and flags as ``""``."""
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        key = arg[2:]
        if key in _ECHOED or key == "output":
            out[key] = argv[i + 1] if i + 1 < len(argv) else ""
        else:
            out[key.replace("-", "_")] = ""
    return out


def reader_version() -> str:
    return source_version(SOURCE, "iolab-reader-version")
