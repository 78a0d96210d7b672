"""The fio adapter: options in fio's vocabulary -> the driver's argv; fio's JSON -> metrics.

Options are fio's own job options (``rw``, ``bs``, ``iodepth``, ...), given in the order they
go on the command line; a :class:`~iolab.tools.base.CpuRequest` as the value of
``cpus_allowed`` is resolved to a CPU list on the host that runs (a
:class:`~iolab.tools.base.CpuCount`, e.g. for ``numjobs``, to the number of those CPUs). The driver
(``scripts/drivers/fio.sh``) chooses the report format itself, ``json+`` (with the latency
histogram bins), written to ``fio.json`` in the run folder; no option here may choose a
format, because a format is not part of what a run measures.

Responsible for: finding fio, the argv, parsing ``fio.json`` (via :mod:`iolab.parsers.fio`)
and the measurement window. Not responsible for: which options an experiment wants.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError
from iolab.parsers.fio import parse_fio_file
from iolab.tools.base import CpuCount, CpuRequest, Invocation, Launch, Program, ToolAdapter

OUTPUT = "fio.json"
# The driver's own choice; an option choosing a format would replace json+ (and lose the bins).
FORMAT_OPTIONS = ("output-format", "output")

METRICS = ("iops", "mibs", "bw_bytes", "clat_mean_us", "clat_p50_us", "clat_p99_us",
           "usr_cpu", "sys_cpu", "runtime_ms", "njobs", "error", "direction")


class Fio(ToolAdapter):
    name = "fio"
    driver = "fio.sh"
    startup_s = 1.0
    # iolab before 0.2 passed this after the driver's json+, losing the histogram bins
    output_only_args = ("--output-format=json",)

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        return Program("fio", "fio", ("--version",),
                       install="install it with 'apt-get install fio' (Debian/Ubuntu) or "
                               "'conda install -c conda-forge fio'")

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        argv = [str(self.driver_path), "--output", OUTPUT]
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

    def parse(self, run_dir: Path) -> dict[str, Any]:
        fio = parse_fio_file(Path(run_dir) / OUTPUT)
        metrics = {key: fio[key] for key in METRICS}
        metrics["version"] = fio["fio_version"]
        # a job that reports an errno is not a measurement, whatever fio's exit status
        metrics["problem"] = f"fio reported error {fio['error']}" if fio["error"] else None
        metrics["note"] = None
        return metrics

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """fio stamps its report when the measurement ends and says how long it measured."""
        path = Path(run_dir) / OUTPUT
        if not path.exists():
            return None
        runtime_ms = parse_fio_file(path)["runtime_ms"]
        if not runtime_ms:
            return None
        end_ms = json.loads(path.read_text())["timestamp_ms"]
        return int((end_ms - runtime_ms) * 1e6), int(end_ms * 1e6)
