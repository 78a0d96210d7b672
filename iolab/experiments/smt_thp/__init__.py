"""SMT, THP and synchronous vs asynchronous I/O with fio.

Variables: ``engine`` (psync | io_uring), ``concurrency`` (numjobs for psync, iodepth for
io_uring; both are fio options of every run), ``affinity`` (unpinned | one_core | two_cores |
all_cores, a *core* being a physical core with all its hardware threads), ``smt`` and ``thp``
(knobs; ``asis`` leaves the host as it is), ``rw``, ``bs`` (bytes), ``direct``, and
``layout``: how the file fio reads was laid out, ``written`` (the target, written with data
before the first run) or ``fallocated`` (a second file beside it, ``<name>.fallocated<suffix>``,
whose space fallocate(2) allocated and nothing ever wrote).

Why ``fallocated``: the study this repeats laid its test file out with ``fallocate -l 4G`` and
read it with direct I/O. On ext4 and xfs such a file's extents are *unwritten*, and the kernel
answers reads of them with zeros without reading the device, which would explain its p99 of
about 1.7 µs. The layout grid reads both files side by side.

Why a ``written`` point's identity has no ``layout``: the variable came after the stored
campaigns, whose runs all read the written target. A run's id hashes its point
(:mod:`iolab.core.identity`), so a point that named ``layout: written`` would get a new id,
and every stored run would look unstored and be measured again. ``written`` therefore stays
out of the identity (and fio's options are the same as before), so those runs keep their ids
and count for the points that read the written file; ``fallocated`` enters it, and reads
another file, so its runs get ids of their own. Likewise their tidy rows, whose manifests name
no layout, read ``written`` (:meth:`SmtThp.tidy_row`). No setting was added: the configuration
id is unchanged.

Responsible for: the spec's fields, a point -> fio's options, the metrics of the chapter.
Not responsible for: knobs (the runner applies them), statistics (``analysis``), figures
and wording (``page``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.collectors.procstat import ProcStat
from iolab.core.experiment import Experiment, Metric
from iolab.core.schema import Choice, Flag, Int, Size, Text, size_bytes
from iolab.core.store import StoredRun
from iolab.host.scratch import ScratchFile
from iolab.tools.base import CpuRequest, Invocation

AFFINITY_CORES = {"one_core": 1, "two_cores": 2}
# the layout of every run stored before the variable existed
WRITTEN = "written"


def fallocated_path(target: Path) -> Path:
    """The fallocated file beside the target: ``smt_thp.dat`` -> ``smt_thp.fallocated.dat``."""
    return target.with_name(f"{target.stem}.fallocated{target.suffix}")


def target_of(settings: dict[str, Any], layout: str) -> Path:
    """The file a point of ``layout`` reads."""
    target = Path(settings["target_path"])
    return target if layout == WRITTEN else fallocated_path(target)


def concurrency_split(engine: str, concurrency: int) -> tuple[int, int]:
    """(numjobs, iodepth): psync gets parallelism from processes, io_uring from queue depth."""
    if engine == "psync":
        return concurrency, 1
    return 1, concurrency


def cpu_request(affinity: str) -> CpuRequest | None:
    """The CPUs of an affinity setting (None: unpinned); a core brings all its threads."""
    if affinity == "unpinned":
        return None
    if affinity == "all_cores":
        return CpuRequest(None)
    return CpuRequest(AFFINITY_CORES[affinity], siblings=True)


class SmtThp(Experiment):
    name = "smt_thp"
    title = "SMT, THP and synchronous vs asynchronous I/O"
    label = "sec-experiments-smt-thp"
    chapter = "experiments/smt_thp"
    operation_size = "bs"  # fio's bs: the bytes of each operation
    settings = {
        "tool": Choice("fio", default="fio", help="the benchmark tool"),
        "runtime_s": Int(1, 86400, help="measured seconds per run"),
        "ramp_s": Int(0, 3600, default=0, help="seconds of warm-up before fio measures"),
        "target_path": Text(help="the file fio reads (an absolute path; written with data "
                                 "before the first run, then reused); points of layout "
                                 "'fallocated' read <name>.fallocated<suffix> beside it, "
                                 "laid out with fallocate(2) and never written"),
        "target_size": Size(help="its size"),
    }
    variables = {
        "engine": Choice("psync", "io_uring"),
        "concurrency": Int(1, 4096),
        "affinity": Choice("unpinned", "one_core", "two_cores", "all_cores"),
        "smt": Choice("asis", "on", "off"),
        "thp": Choice("asis", "always", "madvise", "never"),
        "rw": Choice("randread", "read"),
        "bs": Int(512, 64 * 2**20),
        "direct": Choice(0, 1),
        "layout": Choice(WRITTEN, "fallocated"),
    }
    analysis_fields = {
        "show_repetitions": Flag(default=True, help="draw every repetition beside the means"),
    }
    knob_variables = {"smt": "smt", "thp": "thp"}
    metrics = {
        "iops": Metric("IOPS", ("fio.iops",)),
        "mibs": Metric("bandwidth", ("fio.mibs",), "MiB/s"),
        "clat_p50_us": Metric("completion latency p50", ("fio.clat_p50_us",), "µs", "lognormal"),
        "clat_p99_us": Metric("completion latency p99", ("fio.clat_p99_us",), "µs", "lognormal"),
        "clat_mean_us": Metric("mean completion latency", ("fio.clat_mean_us",), "µs",
                               "lognormal"),
        "usr_cpu": Metric("fio user CPU", ("fio.usr_cpu",), "% of one CPU"),
        "sys_cpu": Metric("fio system CPU", ("fio.sys_cpu",), "% of one CPU"),
        "host_busy_pct": Metric("host CPU busy around the run", ("procstat.host_busy_pct",),
                                "% of all CPUs"),
    }
    variable_labels = {"engine": "engine", "concurrency": "concurrency",
                       "affinity": "CPU affinity", "smt": "SMT", "thp": "THP",
                       "rw": "access pattern", "bs": "block size (bytes)", "direct": "direct I/O",
                       "layout": "file layout"}
    value_labels = {
        "affinity": {"unpinned": "unpinned", "one_core": "one core", "two_cores": "two cores",
                     "all_cores": "all cores"},
        "smt": {"asis": "as found", "on": "on", "off": "off"},
        "thp": {"asis": "as found", "always": "always", "madvise": "madvise", "never": "never"},
        "direct": {0: "buffered", 1: "direct"},
        "layout": {WRITTEN: "written", "fallocated": "fallocated, never written"},
    }

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        numjobs, iodepth = concurrency_split(point["engine"], point["concurrency"])
        options: dict[str, Any] = {
            "name": "smt_thp",
            "filename": str(target_of(settings, point.get("layout", WRITTEN))),
            "size": settings["target_size"], "rw": point["rw"], "bs": point["bs"],
            "direct": point["direct"], "ioengine": point["engine"], "iodepth": iodepth,
            "numjobs": numjobs, "group_reporting": 1, "time_based": 1,
            "runtime": f"{settings['runtime_s']}s", "ramp_time": f"{settings['ramp_s']}s",
            "invalidate": 0, "randrepeat": 0,
        }
        cpus = cpu_request(point["affinity"])
        if cpus is not None:
            options.update(cpus_allowed=cpus, cpus_allowed_policy="shared")
        return Invocation("fio", options)

    def identity(self, environment: str, settings: dict[str, Any],
                 point: dict[str, Any]) -> dict[str, Any]:
        """The base identity, without ``layout`` when it is ``written`` (see the module's
        docstring: the stored runs keep their ids)."""
        ident = super().identity(environment, settings, point)
        if point.get("layout") == WRITTEN:
            ident["point"] = {k: v for k, v in ident["point"].items() if k != "layout"}
        return ident

    def tidy_row(self, run: StoredRun) -> dict[str, Any]:
        """The standard row; a run stored before ``layout`` existed read the written file."""
        row = super().tidy_row(run)
        if "layout" in row:
            return row
        # the variables first, in their declared order, as for every other run
        return {**{v: row.get(v, WRITTEN) for v in self.variables if v in row or v == "layout"},
                **row}

    def collectors(self, settings, point, cpus, topology) -> list:
        return [ProcStat()]

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        wanted = AFFINITY_CORES.get(point["affinity"], 0)
        cores = len({(c["package"], c["core"]) for c in topology})
        if wanted > cores:
            return f"affinity {point['affinity']} needs {wanted} physical cores, this host has {cores}"
        return None

    def scratch_files(self, settings: dict[str, Any],
                      points: list[dict[str, Any]]) -> list[ScratchFile]:
        """The file each layout the points read: the target, written with data, and the
        fallocated file beside it, never written."""
        size = size_bytes(settings["target_size"])
        layouts = dict.fromkeys(p.get("layout", WRITTEN) for p in points)
        return [ScratchFile("target_path", target_of(settings, layout), size, layout)
                for layout in layouts]


EXPERIMENT = SmtThp()
