"""The tools compared: bdevperf, xnvmeperf and fio reading the same targets with the same
I/O size, queue depth, cores and number of targets, AiSIO's "software abstraction overhead"
study with the tools this package drives.

Variables: ``tool`` (fio | bdevperf | xnvmeperf), ``engine`` (io_uring | libaio: the kernel
interface every tool submits through: fio's ioengine, bdevperf's uring or AIO bdev,
xnvmeperf's ``io_uring_*`` or ``libaio_*`` back end), ``qdepth``, ``iosize`` (bytes) and
``ncores`` (physical cores, one target each).

One core drives one target in every tool: bdevperf without ``-C`` gives each bdev to one core,
xnvmeperf spreads its devices over its threads, and fio runs one job per core over all
targets, so with as many targets as cores each core keeps ``qdepth`` reads in flight. Targets
are files in ``file_dir`` (written once with data before the first run, so no tool reads
holes) or whole block devices, which are refused when in use (mounted, the root device, swap).

Responsible for: the spec's fields, a point -> each tool's options, laying out the files, and
the chapter's metrics. Not responsible for: statistics (``analysis``), running anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.collectors.gnu_time import GnuTime
from iolab.collectors.hugepages import Hugepages
from iolab.collectors.procstat import ProcStat
from iolab.core.experiment import Experiment, Metric
from iolab.core.schema import Choice, Int, ListOf, Size, Text, size_bytes
from iolab.errors import InputError
from iolab.host.binding import check_free
from iolab.host.scratch import ScratchFile
from iolab.tools.base import CpuCount, CpuRequest, Invocation

FILES = {"targets": "files"}
BLOCK = {"targets": "block_devices"}
TOOLS = ("fio", "bdevperf", "xnvmeperf")
_BDEV = {"io_uring": "uring", "libaio": "aio"}


def targets(settings: dict[str, Any], n: int) -> list[str]:
    """The first ``n`` targets: files dev00.dat, … in file_dir, or the listed block devices.
    A ':' in a path is refused: fio reads it as the separator of its file names."""
    key = "file_dir" if settings["targets"] == "files" else "block_devices"
    paths = ([str(Path(settings["file_dir"]) / f"dev{i:02d}.dat") for i in range(n)]
             if settings["targets"] == "files" else list(settings["block_devices"][:n]))
    for path in paths:
        if ":" in path:
            raise InputError(None, key, f"{path!r} contains ':', which fio reads as the "
                             "separator between file names", allowed="paths without ':'")
    return paths


class ToolComparison(Experiment):
    name = "tool_comparison"
    title = "CPU-initiated I/O: the tools compared"
    label = "sec-experiments-tool-comparison"
    chapter = "experiments/tool_comparison"
    operation_size = "iosize"  # each tool's I/O size: the bytes of each operation
    settings = {
        "runtime_s": Int(1, 86400, help="measured seconds per run"),
        "workload": Choice("randread", "read", default="randread"),
        "targets": Choice("files", "block_devices", help="what the tools read"),
        "file_dir": Text(when=FILES, help="folder of the files, dev00.dat, dev01.dat, …"),
        "file_size": Size(when=FILES, help="size of each file (written once, with data)"),
        "block_devices": ListOf(Text(pattern=r"/dev/\S+", pattern_help="a /dev path"),
                                when=BLOCK, help="whole block devices, refused when in use"),
        "block_size": Choice(512, 4096, default=512,
                             help="logical block size of bdevperf's bdevs (SPDK cannot "
                                  "detect it on a file)"),
        "spdk_dir": Text(default=None, help="an SPDK tree with a build; absent: the one "
                                            "'make tools' built"),
        "spdk_hugepages": Int(0, 10**7, default=0,
                              help="2 MiB hugepages reserved for the campaign (a journaled "
                                   "knob); 0: bdevperf runs without hugepages"),
        "spdk_memory_mib": Int(64, 10**6, default=512,
                               help="bdevperf's memory without hugepages (--no-huge -s)"),
    }
    variables = {
        "tool": Choice(*TOOLS),
        "engine": Choice("io_uring", "libaio"),
        "qdepth": Int(1, 65536),
        "iosize": Int(512, 2**24),
        "ncores": Int(1, 4096),
    }
    analysis_fields = {
        "reference": Text(default="aisio_tool_comparison",
                          help="published values to show beside, data/reference/<name>.yaml"),
    }
    metrics = {
        "iops": Metric("IOPS", ("fio.iops", "bdevperf.iops", "xnvmeperf.iops")),
        "mibs": Metric("bandwidth", ("fio.mibs", "bdevperf.mibs", "xnvmeperf.mibs"), "MiB/s"),
        "cpu_usage_lifetime_pct": Metric("CPU over the tool's lifetime (GNU time)",
                                         ("gnu_time.cpu_pct",), "% of one CPU"),
    }
    variable_labels = {"tool": "tool", "engine": "kernel interface", "qdepth": "queue depth",
                       "iosize": "I/O size (bytes)", "ncores": "physical cores (one target each)"}
    value_labels = {"engine": {"io_uring": "io_uring", "libaio": "libaio (AIO)"}}

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        cpus = CpuRequest(point["ncores"], siblings=False)
        paths = targets(settings, point["ncores"])
        tool, engine = point["tool"], point["engine"]
        if tool == "bdevperf":
            options: dict[str, Any] = {
                "spdk_dir": settings["spdk_dir"] or None, "devices": paths,
                "json_results": False, "core_mask": cpus, "queue_depth": point["qdepth"],
                "io_size": point["iosize"], "seconds": settings["runtime_s"],
                "workload": settings["workload"], "bdev": _BDEV[engine],
                "block_size": settings["block_size"]}
            if not settings["spdk_hugepages"]:
                options["memory_mib"] = settings["spdk_memory_mib"]
            return Invocation("bdevperf", options)
        if tool == "xnvmeperf":
            kind = "file" if settings["targets"] == "files" else "bdev"
            return Invocation("xnvmeperf", {
                "subcommand": "run", "devices": paths, "iopattern": settings["workload"],
                "qdepth": point["qdepth"], "iosize": point["iosize"],
                "runtime": settings["runtime_s"], "be": f"{engine}_{kind}", "cpumask": cpus,
                "direct": True})
        options = {
            "name": "tool_comparison", "filename": ":".join(paths), "rw": settings["workload"],
            "bs": point["iosize"], "direct": 1, "ioengine": engine, "iodepth": point["qdepth"],
            "numjobs": CpuCount(cpus), "thread": 1, "cpus_allowed": cpus,
            "cpus_allowed_policy": "split", "group_reporting": 1, "time_based": 1,
            "runtime": f"{settings['runtime_s']}s", "norandommap": 1, "randrepeat": 0}
        if settings["targets"] == "files":
            options["filesize"] = settings["file_size"]
        return Invocation("fio", options)

    def collectors(self, settings, point, cpus, topology) -> list:
        return [ProcStat(), Hugepages(), GnuTime()]

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        cores = {(c["package"], c["core"]) for c in topology}
        if point["ncores"] > len(cores):
            return f"needs {point['ncores']} physical cores, this host has {len(cores)}"
        if settings["targets"] == "block_devices" and \
                point["ncores"] > len(settings["block_devices"]):
            return (f"needs {point['ncores']} block devices (one per core), the params list "
                    f"{len(settings['block_devices'])}")
        return None

    def campaign_knobs(self, settings: dict[str, Any]) -> dict[str, Any]:
        pages = settings["spdk_hugepages"]
        return {"hugepages": {"pages": pages}} if pages else {}

    def check_settings(self, settings: dict[str, Any]) -> None:
        if settings["targets"] == "files":
            size = size_bytes(settings["file_size"])
            if size % settings["block_size"]:
                raise InputError(None, "file_size", f"{size} bytes is not a multiple of the "
                                 f"block size {settings['block_size']}",
                                 allowed=f"a multiple of {settings['block_size']} bytes")

    def prepare_host(self, settings: dict[str, Any]) -> None:
        """Refuse block devices in use."""
        if settings["targets"] == "block_devices":
            check_free(list(settings["block_devices"]), key="block_devices")

    def scratch_files(self, settings: dict[str, Any],
                      points: list[dict[str, Any]]) -> list[ScratchFile]:
        """The files the points read (one per core of the largest), written with data:
        neither bdevperf nor xnvmeperf creates them, and all three tools must read the same."""
        if settings["targets"] != "files" or not points:
            return []
        return [ScratchFile("file_dir", Path(f), size_bytes(settings["file_size"]))
                for f in targets(settings, max(p["ncores"] for p in points))]


EXPERIMENT = ToolComparison()
