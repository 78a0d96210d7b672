"""SMT, THP and sync vs async I/O with fio: argv construction and metric extraction.

Variables (see ``notebooks/smt_thp.ipynb``): ``engine`` (psync | io_uring), ``concurrency``
(numjobs for psync, iodepth for io_uring; both are recorded), ``affinity`` (unpinned |
one_core | two_cores | all_cores, sibling-aware), ``smt`` and ``thp`` (knob-backed; ``asis``
leaves the host as it is), ``bs``, ``direct``, ``rw``.

Responsible for: turning a point into the fio driver's argv and a stored run into metrics.
Not responsible for: knobs (the runner applies them) or statistics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..collectors import ProcStat, parse_procstat
from ..errors import InputError
from ..inventory import pick_cpus
from ..tools import Tool
from ..parsers.fio import parse_fio_file

NAME = "smt_thp"
FIO = Tool("fio", "fio.sh", ("fio", "--version"))
OUTPUT = "fio.json"
KNOB_VARIABLES = {"smt": "smt", "thp": "thp"}
AFFINITY_CORES = {"one_core": 1, "two_cores": 2}


def tool(settings: dict[str, Any]) -> Tool:
    return FIO


def collectors(settings: dict[str, Any], params: dict[str, Any], topology: list[dict]) -> list:
    return [ProcStat()]


def concurrency_split(engine: str, concurrency: int) -> tuple[int, int]:
    """(numjobs, iodepth): psync gets parallelism from processes, io_uring from queue depth."""
    if engine == "psync":
        return concurrency, 1
    return 1, concurrency


def cpus_for(affinity: str, topology: list[dict[str, Any]]) -> list[int] | None:
    """Logical CPUs for an affinity setting; ``None`` means unpinned.

    A "core" is a physical core with all its hardware threads, so pinning to one core on an
    SMT host gives fio both siblings.
    """
    if affinity == "unpinned":
        return None
    if affinity == "all_cores":
        return sorted(c["cpu"] for c in topology)
    if affinity in AFFINITY_CORES:
        return pick_cpus(topology, AFFINITY_CORES[affinity], use_siblings=True)
    raise InputError(None, "affinity", f"unknown value {affinity!r}",
                     allowed="unpinned, one_core, two_cores, all_cores")


def build_argv(settings: dict[str, Any], params: dict[str, Any],
               topology: list[dict[str, Any]]) -> list[str]:
    """The driver's argv; it runs inside the run folder, so output paths are relative."""
    numjobs, iodepth = concurrency_split(params["engine"], params["concurrency"])
    argv = [
        str(FIO.driver_path), "--output", OUTPUT,
        "--output-format=json",
        "--name=smt_thp", f"--filename={settings['target_path']}", f"--size={settings['target_size']}",
        f"--rw={params['rw']}", f"--bs={params['bs']}", f"--direct={params['direct']}",
        f"--ioengine={params['engine']}", f"--iodepth={iodepth}", f"--numjobs={numjobs}",
        "--group_reporting=1", "--time_based=1",
        f"--runtime={settings['runtime_s']}s", f"--ramp_time={settings['ramp_s']}s",
        "--invalidate=0", "--randrepeat=0",
    ]
    cpus = cpus_for(params["affinity"], topology)
    if cpus is not None:
        argv += [f"--cpus_allowed={','.join(map(str, cpus))}", "--cpus_allowed_policy=shared"]
    return argv


def parse_run(run_dir: Path) -> dict[str, Any]:
    """Metrics of one stored run, re-derived from its raw files."""
    fio = parse_fio_file(run_dir / OUTPUT)
    metrics = {
        "iops": fio["iops"],
        "mibs": fio["mibs"],
        "clat_p50_us": fio["clat_p50_us"],
        "clat_p99_us": fio["clat_p99_us"],
        "clat_mean_us": fio["clat_mean_us"],
        "usr_cpu": fio["usr_cpu"],
        "sys_cpu": fio["sys_cpu"],
        "fio_error": fio["error"],
        # a run whose fio job reports an errno is not a measurement, whatever the exit code
        "run_problem": f"fio reported error {fio['error']}" if fio["error"] else None,
        "fio_version": fio["fio_version"],
    }
    before, after = run_dir / "procstat.before", run_dir / "procstat.after"
    if before.exists() and after.exists():
        metrics.update(parse_procstat(before.read_text(), after.read_text(), str(run_dir / "procstat")))
    return metrics
