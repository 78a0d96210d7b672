"""CPU-initiated I/O: the optimal parameter search of AiSIO's first chapter, with SPDK's
bdevperf (through its NVMe driver on the lab server, through its AIO or io_uring bdevs on
files elsewhere) or with fio (io_uring).

Variables: ``cpu_governor`` (asis | powersave | performance | userspace-3.0GHz), ``turbo``
and ``smt`` (asis | on | off), ``thr_sib`` (use both hardware threads of each core),
``stress`` (stress-ng on every CPU the run does not use), ``qdepth``, ``iosize`` (bytes),
``ncores`` (physical cores) and ``ndevs`` (devices; files for fio).

With bdevperf, each run gets its own SPDK bdev config and a core mask from the host topology:
with ``bdev: nvme`` one controller per device of the environment's ``devices`` list, bound to
a user-space driver for the campaign; with ``bdev: aio`` or ``uring`` one bdev per file in
``file_dir`` (written with data before the first run), read without PCI access. bdevperf
runs on hugepages (``spdk_hugepages`` reserves them for the campaign through a journaled
knob) or without (``spdk_memory_mib``). With fio, one job per selected logical CPU
(``cpus_allowed_policy=split``) reads all device files with direct I/O at the given queue
depth, the closest fio analogue of bdevperf's per-core jobs.

Responsible for: the spec's fields, a point -> the tool's options, which points this host can
run, and the chapter's metrics. Not responsible for: applying knobs or running stress-ng (the
runner and the collectors do), statistics (``analysis``), or plotting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.collectors.cpufreq import CpufreqSampler
from iolab.collectors.gnu_time import GnuTime
from iolab.collectors.hugepages import Hugepages
from iolab.collectors.procstat import ProcStat
from iolab.collectors.proctree import ProcTreeCpu
from iolab.collectors.stress_ng import StressNg, unused_cpus
from iolab.core.experiment import Experiment, Metric
from iolab.core.schema import Choice, Flag, Int, ListOf, Size, Text, size_bytes
from iolab.errors import InputError
from iolab.host.binding import USER_SPACE_DRIVERS
from iolab.host.scratch import ScratchFile
from iolab.tools.base import CpuCount, CpuRequest, Invocation

FIXED_FREQ_KHZ = {"userspace-3.0GHz": 3_000_000}
BDEVPERF = {"tool": "bdevperf"}
NVME = {"tool": "bdevperf", "bdev": "nvme"}
FIO = {"tool": "fio"}
BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]"


def run_cpus(point: dict[str, Any]) -> CpuRequest:
    """``ncores`` physical cores in CPU-id order, both hardware threads with siblings."""
    return CpuRequest(point["ncores"], siblings=point["thr_sib"])


def uses_files(settings: dict[str, Any]) -> bool:
    """Whether the runs read files in file_dir: fio, or bdevperf's AIO and io_uring bdevs."""
    return settings["tool"] == "fio" or settings.get("bdev", "nvme") != "nvme"


def device_files(settings: dict[str, Any], ndevs: int) -> list[str]:
    for key in ("file_dir", "file_size"):
        if settings.get(key) is None:
            raise InputError(None, key, "is needed when the runs read files (tool fio, or "
                             "bdevperf with bdev aio or uring)",
                             allowed="a folder path" if key == "file_dir" else
                             "a size such as 256M")
    return [str(Path(settings["file_dir"]) / f"dev{i:02d}.dat") for i in range(ndevs)]


class CpuSearch(Experiment):
    name = "cpu_search"
    title = "CPU-initiated I/O: optimal parameter search"
    label = "sec-experiments-cpu-initiated"
    chapter = "experiments/cpu_initiated"
    operation_size = "iosize"  # each tool's I/O size: the bytes of each operation
    settings = {
        "tool": Choice("bdevperf", "fio", help="bdevperf with SPDK; fio where there is no SPDK"),
        "runtime_s": Int(1, 86400, help="measured seconds per run"),
        "ramp_s": Int(0, 3600, default=0, when=FIO, help="warm-up seconds before fio measures"),
        "workload": Choice("randread", "read", default="randread"),
        "spdk_dir": Text(default=None, when=BDEVPERF,
                         help="an SPDK tree with build/examples/bdevperf; absent: the one "
                              "'make tools' built"),
        "bdevperf_json": Flag(default=True, when=BDEVPERF,
                              help="read results from perform_tests JSON (SPDK >= 24.09)"),
        "bdev": Choice("nvme", "aio", "uring", default="nvme", when=BDEVPERF,
                       help="SPDK's NVMe driver on the devices, or its AIO or io_uring bdevs "
                            "on the files in file_dir"),
        "user_space_driver": Choice(*USER_SPACE_DRIVERS, default="uio_pci_generic",
                                    when=NVME),
        "devices": ListOf(Text(pattern=BDF, pattern_help="a PCIe address such as 0000:4a:00.0"),
                          when=NVME, help="NVMe controllers, bound for the campaign"),
        "block_size": Choice(512, 4096, default=512, when=BDEVPERF,
                             help="logical block size of bdevperf's AIO and io_uring bdevs"),
        "spdk_hugepages": Int(1, 10**7, default=None, when=BDEVPERF,
                              help="2 MiB hugepages to reserve for the campaign (a journaled "
                                   "knob); absent: as the host has them"),
        "spdk_memory_mib": Int(64, 10**6, default=None, when=BDEVPERF,
                               help="run bdevperf without hugepages, with this much memory "
                                    "(--no-huge -s)"),
        "file_dir": Text(default=None, help="folder of the files that stand in for devices "
                                            "(fio, and bdevperf's AIO and io_uring bdevs)"),
        "file_size": Size(default=None, help="size of each of those files"),
        "fio_ioengine": Choice("io_uring", "libaio", default="io_uring", when=FIO),
        "fio_hipri": Flag(default=False, when=FIO, help="polled completions (io_uring hipri)"),
    }
    variables = {
        "cpu_governor": Choice("asis", "powersave", "performance", "userspace-3.0GHz"),
        "turbo": Choice("asis", "on", "off"),
        "smt": Choice("asis", "on", "off"),
        "thr_sib": Flag(),
        "stress": Flag(),
        "qdepth": Int(1, 65536),
        "iosize": Int(512, 2**24),
        "ncores": Int(1, 4096),
        "ndevs": Int(1, 1024),
    }
    analysis_fields = {
        "reference": Text(default="aisio_cpu_search",
                          help="published values to show beside, data/reference/<name>.yaml"),
        "replicate": Text(default=None, help="another environment whose campaign of the same "
                                             "design the chapter sets beside this one"),
        # named in the params file so that no code outside an experiment names another
        "tool_comparison_experiment": Text(default=None, help="the experiment whose tool "
                                                              "comparison the chapter shows "
                                                              "(absent: none)"),
        "tool_comparison_env": Text(default=None, help="the environment of the tool comparison "
                                                       "the chapter shows (absent: its own)"),
        "search_proof": Text(default=None, help="the environment of a full grid of a search "
                                                "space, measured on this host to prove the "
                                                "adaptive search against (its params sweep "
                                                "the grid: search: {strategy: grid})"),
        "search_live": Text(default=None, help="the environment of a live adaptive search of "
                                               "the same space on this host"),
    }
    knob_variables = {"cpu_governor": "governor", "turbo": "turbo", "smt": "smt"}
    metrics = {
        "iops": Metric("IOPS", ("fio.iops", "bdevperf.iops")),
        "mibs": Metric("bandwidth", ("fio.mibs", "bdevperf.mibs"), "MiB/s"),
        "clat_mean_us": Metric("mean latency", ("fio.clat_mean_us", "bdevperf.lat_mean_us"),
                               "µs", "lognormal"),
        "clat_p99_us": Metric("completion latency p99", ("fio.clat_p99_us",), "µs", "lognormal"),
        "usr_cpu": Metric("fio user CPU", ("fio.usr_cpu",), "% of one CPU"),
        "sys_cpu": Metric("fio system CPU", ("fio.sys_cpu",), "% of one CPU"),
        "cpu_usage_lifetime_pct": Metric("CPU over the tool's lifetime (GNU time)",
                                         ("gnu_time.cpu_pct",), "% of one CPU"),
        "cpu_usage_window_pct": Metric("CPU in the measurement window",
                                       ("proctree.cpu_pct",), "% of one CPU"),
        "cpufreq_mean_khz": Metric("mean CPU frequency", ("cpufreq.mean_khz",), "kHz"),
    }
    variable_labels = {"cpu_governor": "governor", "turbo": "turbo", "smt": "SMT",
                       "thr_sib": "thread siblings", "stress": "stress", "qdepth": "queue depth",
                       "iosize": "I/O size (bytes)", "ncores": "physical cores",
                       "ndevs": "devices"}
    value_labels = {
        "cpu_governor": {"asis": "as found", "userspace-3.0GHz": "userspace at 3.0 GHz"},
        "turbo": {"asis": "as found"},
        "smt": {"asis": "as found"},
        "thr_sib": {True: "both threads of each core", False: "one thread per core"},
        "stress": {True: "stress-ng on the idle CPUs", False: "no stress"},
    }

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        cpus = run_cpus(point)
        if settings["tool"] == "bdevperf":
            options: dict[str, Any] = {
                "spdk_dir": settings["spdk_dir"], "devices": None,
                "json_results": settings["bdevperf_json"], "core_mask": cpus,
                "queue_depth": point["qdepth"], "io_size": point["iosize"],
                "seconds": settings["runtime_s"], "workload": settings["workload"]}
            if settings.get("bdev", "nvme") == "nvme":
                options["devices"] = settings["devices"][:point["ndevs"]]
            else:  # only then: runs on NVMe keep the identity they had before file bdevs
                options.update(devices=device_files(settings, point["ndevs"]),
                               bdev=settings["bdev"], block_size=settings.get("block_size", 512))
            if settings.get("spdk_memory_mib") is not None:
                options["memory_mib"] = settings["spdk_memory_mib"]
            return Invocation("bdevperf", options)
        options = {
            "name": "cpu_search", "filename": ":".join(device_files(settings, point["ndevs"])),
            "filesize": settings["file_size"], "rw": settings["workload"], "bs": point["iosize"],
            "direct": 1, "ioengine": settings["fio_ioengine"], "iodepth": point["qdepth"],
            "numjobs": CpuCount(cpus), "thread": 1, "cpus_allowed": cpus,
            "cpus_allowed_policy": "split", "group_reporting": 1, "time_based": 1,
            "runtime": f"{settings['runtime_s']}s", "ramp_time": f"{settings['ramp_s']}s",
            "norandommap": 1, "randrepeat": 0,
        }
        if settings["fio_hipri"]:
            options["hipri"] = 1
        return Invocation("fio", options)

    def collectors(self, settings, point, cpus, topology) -> list:
        out = [ProcStat(), CpufreqSampler(cpus), Hugepages(), ProcTreeCpu(), GnuTime()]
        if point["stress"]:
            out.append(StressNg(unused_cpus([c["cpu"] for c in topology], cpus),
                                self.run_seconds(settings)))
        return out

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        cores = {(c["package"], c["core"]) for c in topology}
        if point["ncores"] > len(cores):
            return f"needs {point['ncores']} physical cores, this host has {len(cores)}"
        if point["thr_sib"] and all(len(c["siblings"]) < 2 for c in topology):
            return "thread siblings requested, but this host has one hardware thread per core"
        if point["stress"] and not unused_cpus([c["cpu"] for c in topology],
                                               run_cpus(point).resolve(topology)):
            return "stress requested, but the run uses every CPU of this host"
        if settings["tool"] == "bdevperf" and settings.get("bdev", "nvme") == "nvme" and \
                point["ndevs"] > len(settings["devices"]):
            return f"needs {point['ndevs']} devices, the environment lists {len(settings['devices'])}"
        return None

    def campaign_knobs(self, settings: dict[str, Any]) -> dict[str, Any]:
        """bdevperf on NVMe needs the devices on a user-space driver (the knob refuses any
        device in use), and hugepages where the params reserve them."""
        if settings["tool"] != "bdevperf":
            return {}
        knobs: dict[str, Any] = {}
        if settings.get("spdk_hugepages") is not None:
            knobs["hugepages"] = {"pages": settings["spdk_hugepages"]}
        if settings.get("bdev", "nvme") == "nvme":
            knobs["device_binding"] = {"devices": settings["devices"],
                                       "driver": settings["user_space_driver"]}
        return knobs

    def knob_value(self, variable: str, value: Any) -> Any:
        if variable == "cpu_governor" and value in FIXED_FREQ_KHZ:
            return {"governor": "userspace", "khz": FIXED_FREQ_KHZ[value]}
        return value

    def check_settings(self, settings: dict[str, Any]) -> None:
        if uses_files(settings):
            device_files(settings, 1)  # file_dir and file_size are set
            if settings["tool"] == "bdevperf":
                block = settings.get("block_size", 512)
                if size_bytes(settings["file_size"]) % block:
                    raise InputError(None, "file_size", f"{settings['file_size']} is not a "
                                     f"whole number of {block}-byte blocks",
                                     allowed=f"a multiple of {block} bytes (block_size)")
        if settings.get("spdk_hugepages") is not None and \
                settings.get("spdk_memory_mib") is not None:
            raise InputError(None, "spdk_memory_mib", "runs bdevperf without hugepages, but "
                             "spdk_hugepages reserves them", allowed="one of the two")

    def config_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Runs on NVMe keep the configuration they had before file bdevs: the settings that
        came with them are left out while at the value those runs had."""
        if settings["tool"] != "bdevperf" or settings.get("bdev", "nvme") != "nvme":
            return settings
        unchanged = {"bdev": "nvme", "block_size": 512, "spdk_hugepages": None,
                     "spdk_memory_mib": None, "file_dir": None, "file_size": None}
        return {k: v for k, v in settings.items()
                if not (k in unchanged and v == unchanged[k])}

    def scratch_files(self, settings: dict[str, Any],
                      points: list[dict[str, Any]]) -> list[ScratchFile]:
        """One file per device of the largest point, written with data before the first run
        (bdevperf cannot create its files, and fio's own would differ from them)."""
        if not uses_files(settings) or not points:
            return []
        files = device_files(settings, max(p["ndevs"] for p in points))
        return [ScratchFile("file_dir", Path(f), size_bytes(settings["file_size"]))
                for f in files]


EXPERIMENT = CpuSearch()
