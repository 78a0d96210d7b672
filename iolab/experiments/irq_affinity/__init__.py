"""IRQ affinity and io_uring task work: reads on the CPUs that take a device's completion
interrupts, or beside them, with io_uring's task-run modes.

Variables: ``placement`` (``irq_cores``: the reader's threads run where a queue vector of the
device is delivered; ``other_cores``: where none is), ``taskrun`` (``default``: completions
arriving on another CPU interrupt the submitter with an IPI; ``coop``:
``IORING_SETUP_COOP_TASKRUN``, task work waits for the submitter's next kernel entry;
``defer``: ``SINGLE_ISSUER`` and ``DEFER_TASKRUN``, task work runs only when the submitter
waits for completions), ``completion`` (``interrupt``, or ``polled`` with
``IORING_SETUP_IOPOLL``, which needs a device with poll queues), ``bs`` and ``qdepth``.

Every run is the project's io_uring reader (``iolab.tools.uring_reader``; fio cannot set the
task-run flags), one thread per CPU, ``cpus_per_side`` CPUs. Every run stores the device's
interrupt discovery (``irqs.json``: vectors, their CPUs, the split, the NUMA node), the
``interrupts`` collector's snapshots and, unless ``trace: off``, the ``irqtrace`` collector's
bpftrace counts.

Responsible for: the spec's fields, a point -> the reader's options and collectors, and the
metrics of the chapter. Not responsible for: discovery (``iolab.host.irqs``), statistics and
figures (``analysis`` and the notebook).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iolab.collectors.interrupts import PLACEMENT_FILE, Interrupts, read_placement
from iolab.collectors.irqtrace import BPFTRACE, IrqTrace
from iolab.core.experiment import Experiment, Metric
from iolab.core.schema import Choice, Flag, Int, ListOf, Size, Text, size_bytes
from iolab.errors import IolabError
from iolab.host.irqs import SIDES, IrqCpus, placement, vectors
from iolab.host.knobs import SysRoot
from iolab.host.knobset import make_knobs
from iolab.host.scratch import ScratchFile
from iolab.tools.base import Collector, Invocation, Launch, Program, ToolAdapter

TASKRUN_FLAGS = {"default": {}, "coop": {"coop_taskrun": True},
                 "defer": {"single_issuer": True, "defer_taskrun": True}}


class IrqAffinity(Experiment):
    name = "irq_affinity"
    title = "IRQ affinity and io_uring task work"
    label = "sec-experiments-irq-affinity"
    chapter = "experiments/irq_affinity"
    operation_size = "bs"  # the reader's bs: the bytes of each operation
    settings = {
        "tool": Choice("uring_reader", default="uring_reader", help="the benchmark tool"),
        "device": Text(pattern=r"[A-Za-z0-9._-]+", pattern_help="a block device or NVMe "
                       "controller name such as nvme0 or vda",
                       help="the device whose completion interrupts are studied"),
        "target_path": Text(help="what the reader reads: a file on the device, or the device"),
        "target_size": Size(default="1G", help="the size of the file, written once with random "
                            "data (ignored for a block device)"),
        "cpu_pool": Text(default="all", pattern=r"all|[0-9][0-9,-]*", pattern_help="a CPU list "
                         "such as 10-13, or all", help="the CPUs the reader threads are chosen "
                         "from, e.g. those of the device's NUMA node"),
        "runtime_s": Int(1, 86400, help="measured seconds per run"),
        "ramp_s": Int(0, 3600, default=0, help="seconds of reads before the measurement"),
        "cpus_per_side": Int(1, 4096, default=1, help="reader threads, one per CPU"),
        "trace": Choice("required", "optional", "off", default="optional",
                        help="bpftrace counts of interrupts, IPIs and task work"),
        "poll_queues": Int(0, 4096, default=None, help="reload the nvme module with this many "
                           "poll queues for the campaign (absent: leave it as loaded)"),
        "stop_irqbalance": Flag(default=False, help="stop irqbalance for the campaign"),
        "irq_cpus": ListOf(Int(0, 8191), default=None, help="deliver the device's completion "
                           "vectors to these CPUs for the campaign, through smp_affinity where "
                           "it is writable (NVMe queue vectors are kernel-managed and refuse; "
                           "absent: as found)"),
    }
    analysis_fields = {
        "show_repetitions": Flag(default=True, help="draw every repetition beside the means"),
    }
    variables = {
        "placement": Choice(*SIDES),
        "taskrun": Choice(*TASKRUN_FLAGS),
        "completion": Choice("interrupt", "polled"),
        "bs": Int(512, 2**20),
        "qdepth": Int(1, 4096),
    }
    metrics = {
        "iops": Metric("IOPS", ("uring_reader.iops",)),
        "clat_mean_us": Metric("mean completion latency", ("uring_reader.clat_mean_us",), "µs",
                               "lognormal"),
        "clat_p99_us": Metric("completion latency p99", ("uring_reader.clat_p99_us",), "µs",
                              "lognormal"),
        # events per completed read: bpftrace's counts and the reader's I/Os share the
        # reader's measurement window (see derive)
        "irqs_per_io": Metric("device interrupts per read", ("irqtrace.irqs_total",)),
        "call_ipis_per_io": Metric("function-call IPIs per read", ("irqtrace.call_ipis_total",)),
        "resched_ipis_per_io": Metric("reschedule IPIs per read",
                                      ("irqtrace.resched_ipis_total",)),
        "task_run_per_io": Metric("task-work runs per read", ("irqtrace.task_run_total",)),
        "local_run_per_io": Metric("deferred task-work runs per read",
                                   ("irqtrace.local_run_total",)),
    }
    variable_labels = {"placement": "reader CPUs", "taskrun": "task-run mode",
                       "completion": "completions", "bs": "read size (bytes)",
                       "qdepth": "queue depth"}
    value_labels = {
        "placement": {"irq_cores": "on IRQ CPUs", "other_cores": "beside IRQ CPUs"},
        "taskrun": {"default": "default", "coop": "COOP_TASKRUN", "defer": "DEFER_TASKRUN"},
    }

    def derive(self, row: dict[str, Any]) -> dict[str, Any]:
        out = super().derive(row)
        ios = row.get("uring_reader.ios")
        for name in ("irqs_per_io", "call_ipis_per_io", "resched_ipis_per_io", "task_run_per_io",
                     "local_run_per_io"):
            out[name] = out[name] / ios if ios else float("nan")
        return out

    def tidy_row(self, run) -> dict[str, Any]:
        """The standard row, and the device's interrupt layout the run recorded."""
        row = super().tidy_row(run)
        found = read_placement(run.path, layout=True)
        row.update({"layout.irq_cpus": ",".join(map(str, found["irq_cpus"])),
                    "layout.other_cpus": ",".join(map(str, found["other_cpus"])),
                    "layout.numa_node": found["numa_node"],
                    "layout.vectors": json.dumps(found["vectors"])})
        return row

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        options: dict[str, Any] = {
            "file": settings["target_path"], "bs": point["bs"], "qdepth": point["qdepth"],
            "runtime": settings["runtime_s"], "ramp": settings["ramp_s"],
            "cpus": IrqCpus(settings["device"], point["placement"], settings["cpus_per_side"],
                            settings["cpu_pool"]),
            "direct": True, **TASKRUN_FLAGS[point["taskrun"]],
            "iopoll": point["completion"] == "polled",
        }
        return Invocation("uring_reader", options)

    def launch(self, settings: dict[str, Any], point: dict[str, Any],
               topology: list[dict[str, Any]]) -> tuple[Launch, list[Collector], ToolAdapter]:
        launch, collectors, adapter = super().launch(settings, point, topology)
        found = placement(SysRoot(), settings["device"], sorted(c["cpu"] for c in topology))
        launch.inputs[PLACEMENT_FILE] = json.dumps(found, indent=1) + "\n"
        return launch, collectors, adapter

    def collectors(self, settings, point, cpus, topology) -> list[Collector]:
        out: list[Collector] = [Interrupts()]
        if settings["trace"] != "off":
            vectors = placement(SysRoot(), settings["device"],
                                sorted(c["cpu"] for c in topology))["vectors"]
            out.append(IrqTrace([v["irq"] for v in vectors],
                                optional=settings["trace"] == "optional"))
        return out

    def programs(self, settings: dict[str, Any], point: dict[str, Any],
                 topology: list[dict[str, Any]] | None = None) -> list[Program]:
        # by the settings alone: discovering the device's vectors is the run's business, and
        # a book replayed on another host must not need its device
        invocation = self.invocation(settings, point)
        out = [self.adapter(invocation).program(invocation.options)]
        return out + ([BPFTRACE] if settings["trace"] == "required" else [])

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        reasons = []
        knobs = make_knobs()
        for name, value in self.campaign_knobs(settings).items():
            ok, why = knobs[name].available()
            if not ok:
                reasons.append(f"needs knob {name}={value} for the campaign, which this host "
                               f"cannot control ({why})")
        try:
            IrqCpus(settings["device"], point["placement"], settings["cpus_per_side"],
                    settings["cpu_pool"]).cpus(SysRoot(), sorted(c["cpu"] for c in topology))
        except IolabError as exc:
            reasons.append(str(exc))
        if point["completion"] == "polled" and settings["poll_queues"] is None \
                and not _has_poll_queues(settings["device"]):
            reasons.append(f"polled completions need poll queues, and device "
                           f"{settings['device']} has none (set poll_queues to reload nvme "
                           f"with some)")
        return "; ".join(reasons) or None

    def identity(self, environment: str, settings: dict[str, Any],
                 point: dict[str, Any]) -> dict[str, Any]:
        """Also the campaign's system settings, when it asks for any: a run made with the
        module reloaded or the interrupts moved is not the run made without."""
        ident = super().identity(environment, settings, point)
        asked = {key: settings[key] for key in ("poll_queues", "irq_cpus")
                 if settings[key] is not None}
        if settings["stop_irqbalance"]:
            asked["stop_irqbalance"] = True
        return {**ident, "campaign": asked} if asked else ident

    def campaign_knobs(self, settings: dict[str, Any]) -> dict[str, Any]:
        """The module reload and irqbalance, once per campaign, journaled and restored."""
        knobs: dict[str, Any] = {}
        if settings["stop_irqbalance"]:
            knobs["irqbalance"] = "stopped"
        if settings["poll_queues"] is not None:
            knobs["nvme_poll_queues"] = settings["poll_queues"]
        if settings["irq_cpus"] is not None:
            knobs["irq_affinity"] = {"irqs": _queue_irqs(settings["device"]),
                                     "cpus": settings["irq_cpus"]}
        return knobs

    def scratch_files(self, settings: dict[str, Any],
                      points: list[dict[str, Any]]) -> list[ScratchFile]:
        """The target file, written once with random data (zeros or preallocated space would
        let the file system answer without reading the device); a device is read as it is."""
        path = Path(settings["target_path"])
        if _is_device(path):
            return []
        return [ScratchFile("target_path", path, size_bytes(settings["target_size"]))]


def _queue_irqs(device: str) -> list[int] | str:
    """The device's completion vectors; where the device is not here, a pattern that matches
    nothing, so that the knob's refusal (not a discovery error) is what the plan shows."""
    try:
        return [v.irq for v in vectors(SysRoot(), device) if v.queue]
    except IolabError:
        return f"^{device} is not on this host$"


def _is_device(path: Path) -> bool:
    """A device node is read as it is; anything else is a file the campaign writes."""
    return path.is_block_device() or path.parts[:2] == ("/", "dev")


def _has_poll_queues(device: str) -> bool:
    """Whether the block device (or an NVMe controller's first namespace) polls."""
    candidates = [device] if not device.startswith("nvme") or "n" in device[4:] else \
        sorted(p.name for p in Path("/sys/block").glob(f"{device}n*"))
    for name in candidates:
        try:
            return Path(f"/sys/block/{name}/queue/io_poll").read_text().strip() == "1"
        except OSError:
            continue
    return False


EXPERIMENT = IrqAffinity()
