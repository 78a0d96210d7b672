"""The adapter of the project's io_uring reader: random reads with chosen ring setup flags.

fio cannot set ``IORING_SETUP_COOP_TASKRUN``, which the IRQ affinity study switches; the reader
(``scripts/src/uring_reader.c``, built with liburing by its driver on first use) can. Options
are the reader's own: ``file``, ``bs``, ``qdepth``, ``runtime``, ``ramp``, ``cpus`` (a list of
CPU ids, or a host-resolved CPU set), ``seed``, and the flags ``coop_taskrun``,
``single_issuer``, ``defer_taskrun``, ``iopoll`` and ``direct`` (true to set). The report goes
to ``uring.json``; the setup flags the kernel accepted are recorded in it and become the
tidy column ``uring_reader.setup_flags``.

Responsible for: the argv, finding the reader and its build dependencies, and the metrics of
a stored run. Not responsible for: the report's format (:mod:`iolab.parsers.uring_reader`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError
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

    def parse(self, run_dir: Path) -> dict[str, Any]:
        report = parse_uring_reader_file(Path(run_dir) / OUTPUT)
        metrics = {key: report[key] for key in METRICS}
        metrics["setup_flags"] = ",".join(report["setup_flags"]) or "none"
        metrics["version"] = f"{report['version']} (liburing {report['liburing']})"
        metrics["problem"] = (f"{report['errors']} reads failed ({report['first_error']})"
                              if report["errors"] else None)
        metrics["note"] = None
        return metrics


def reader_version() -> str:
    return source_version(SOURCE, "iolab-reader-version")
