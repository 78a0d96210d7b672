"""A GPU's PCIe link, measured: copy-engine transfers, and GPU warps reading and writing pinned
host memory (zero-copy), with the project's CUDA probe (``scripts/src/gpu_pcie_probe.cu``).

What bounds device-initiated I/O is the GPU's link in one direction and how many small
requests GPU threads must keep in flight to fill it; this experiment measures both on a real
GPU, with no SSD in the path. Variables: ``mode`` (copy | read | write), ``direction`` (h2d |
d2h for copy; none otherwise), ``bytes`` (per copy), ``iosize`` (bytes per request) and
``inflight`` (warps, one request each in flight). A point of one mode carries the base values
of the other mode's variables, which then only name it.

The metrics that are rates over the link (payload, NVML's traffic) are held to the line rate of
the link the run recorded (``link_columns``): a value above it is left out of the tidy table
with the reason. The protocol overhead (``total_over_payload``, ``requests_over_payload``)
comes from NVML's byte counters only; its sampled throughput exceeded the line rate.

Responsible for: the variables, a point -> the probe's options, the metrics. Not responsible
for: the probe, the analysis (``analysis`` and ``counters`` beside this file) or what the GPU
experiments of the lab server share (:mod:`iolab.shared.gpu_io`, whose host check this
reuses).
"""

from __future__ import annotations

import math
from typing import Any

from iolab.collectors.nvml import NvmlPcie
from iolab.core.experiment import Experiment, Metric
from iolab.core.schema import Choice, Int, Number, Text
from iolab.shared.gpu_io import check_gpu_host
from iolab.tools.base import Invocation

TO_GPU = ("copy/h2d", "read")  # the points whose payload arrives at the GPU (PCIe RX)


def requests_per_warp(bytes_per_launch: int, inflight: int, iosize: int) -> int:
    """Requests each warp makes so that one launch moves about ``bytes_per_launch``."""
    return max(1, math.ceil(bytes_per_launch / (inflight * iosize)))


def copies_per_iteration(bytes_per_iteration: int, copy_bytes: int) -> int:
    """Copies of ``copy_bytes`` that one timed operation queues to move about
    ``bytes_per_iteration``."""
    return max(1, math.ceil(bytes_per_iteration / copy_bytes))


class GpuPcie(Experiment):
    timed = False  # a run moves a fixed amount of data; how long it takes is the result
    name = "gpu_pcie"
    title = "A GPU's PCIe link: copy engine and GPU-initiated requests"
    label = "sec-experiments-gpu-pcie"
    chapter = "experiments/gpu_pcie"
    needs_gpu = True
    settings = {
        "gpu": Int(0, 63, default=0, help="the GPU measured (CUDA ordinal)"),
        "iterations": Int(1, 1000, default=5, help="timed iterations per run"),
        "warmup": Int(0, 100, default=2, help="untimed iterations before them"),
        "bytes_per_launch": Int(2**20, 2**34, default=2**28,
                                help="bytes one kernel launch moves (read and write): sets "
                                     "how many requests each warp makes"),
        "buffer_bytes": Int(2**20, 2**40, default=2**30,
                            help="pinned host memory the requests spread over"),
        "seed": Int(0, 2**32 - 1, default=1, help="seed of the requests' random offsets"),
        "gpu_counter": Choice("nvml", "none", default="nvml",
                              help="NVML samples the GPU's PCIe traffic (nvidia-ml-py), or none"),
        "sample_interval_ms": Int(20, 10_000, default=20, help="NVML sampling interval"),
        "copy_bytes_per_iteration": Int(0, 2**40, default=0,
                                        help="bytes one timed copy operation moves, as copies "
                                             "of the point's size queued back to back (a "
                                             "window long enough for the link's counters); 0: "
                                             "one copy"),
    }
    variables = {
        "mode": Choice("copy", "read", "write"),
        "direction": Choice("h2d", "d2h", "none"),
        "bytes": Int(4096, 2**30),
        "iosize": Int(512, 2**20),
        "inflight": Int(32, 2**20),
    }
    analysis_fields = {
        "saturation_tolerance": Number(0.001, 0.5, default=0.05,
                                       help="a point is saturated when its mean is within "
                                            "this fraction of the highest mean of its curve"),
        "reference": Text(default="aisio_pcie_saturation",
                          help="the published PCIe reference whose total/payload ratio is set "
                               "beside the measured one, data/reference/<name>.yaml"),
        "counter_environment": Text(default="", help="the environment whose long-window runs "
                                    "measure the link's own counters for the chapter's "
                                    "protocol overhead (empty: this one)"),
        "counter_min_samples": Int(2, 10_000, default=20,
                                   help="the fewest readings of NVML's byte counters a run's "
                                        "window must hold for its overhead to count"),
        "sm_tlp_bytes": Int(32, 4096, default=128,
                            help="bytes of payload the framing model takes per PCIe packet "
                                 "of the GPU's multiprocessors (a 128-byte line; the copy "
                                 "engine's is the recorded max payload size): an assumption "
                                 "the request traffic checks"),
        "link_gen": Int(1, 6, help="the PCIe generation the environment's description gives "
                                   "the GPU's link (drawn only while no run recorded one)"),
        "link_width": Int(1, 32, help="its width in lanes, likewise"),
    }
    link_columns = ("gpu_pcie_probe.link_gen", "gpu_pcie_probe.link_width")
    metrics = {
        "gbs": Metric("payload bandwidth", ("gpu_pcie_probe.gbs",), "GB/s", ceiling="link"),
        "latency_us": Metric("response time of one request (Little's law)",
                             ("gpu_pcie_probe.latency_us",), "µs", "lognormal"),
        "requests_per_s": Metric("requests per second", ("gpu_pcie_probe.requests_per_s",)),
        # NVML's two interfaces, each direction: the sampled throughput and the byte counter
        **{f"gpu_pcie_{d}_{kind}_bytes_per_s": Metric(
            f"GPU PCIe {'receive' if d == 'rx' else 'transmit'} traffic, {what}",
            (f"nvml.{d}_{kind}_bytes_per_s",), "B/s", ceiling="link")
           for kind, what in (("mean", "NVML's throughput readings in the measurement window "
                                       "(mean)"),
                              ("counter", "NVML's byte counter over the measurement window"))
           for d in ("rx", "tx")},
        "total_over_payload": Metric("PCIe traffic in the payload's direction (NVML's byte "
                                     "counter) over payload", (), ""),
        "requests_over_payload": Metric("PCIe traffic against the payload's direction (NVML's "
                                        "byte counter) over payload: read requests, or "
                                        "acknowledgements of writes", (), ""),
    }
    variable_labels = {"mode": "mode", "direction": "direction", "bytes": "bytes per copy",
                       "iosize": "request size (bytes)", "inflight": "warps in flight"}
    value_labels = {
        "mode": {"copy": "copy engine", "read": "GPU-initiated reads",
                 "write": "GPU-initiated writes"},
        "direction": {"h2d": "host to device", "d2h": "device to host", "none": "(requests)"},
    }

    def config_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        # the earlier campaigns ran without it (one copy per timed operation)
        if not settings.get("copy_bytes_per_iteration"):
            return {k: v for k, v in settings.items() if k != "copy_bytes_per_iteration"}
        return settings

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        common = {"mode": point["mode"], "iterations": settings["iterations"],
                  "warmup": settings["warmup"], "device": settings["gpu"]}
        if point["mode"] == "copy":
            options = {**common, "direction": point["direction"], "bytes": point["bytes"]}
            if settings.get("copy_bytes_per_iteration"):
                options["copies"] = copies_per_iteration(settings["copy_bytes_per_iteration"],
                                                         point["bytes"])
            return Invocation("gpu_pcie_probe", options)
        return Invocation("gpu_pcie_probe", {
            **common, "iosize": point["iosize"], "inflight": point["inflight"],
            "requests_per_warp": requests_per_warp(settings["bytes_per_launch"],
                                                   point["inflight"], point["iosize"]),
            "buffer": settings["buffer_bytes"], "seed": settings["seed"]})

    def collectors(self, settings, point, cpus, topology) -> list:
        if settings["gpu_counter"] == "nvml":
            return [NvmlPcie(settings["gpu"], settings["sample_interval_ms"])]
        return []

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        if (point["mode"] == "copy") != (point["direction"] != "none"):
            return "direction applies to copies only (h2d or d2h), and requests take 'none'"
        return None

    def prepare_host(self, settings: dict[str, Any]) -> None:
        check_gpu_host(self.name, settings["gpu"], settings["gpu_counter"])

    def seconds_per_run(self, settings: dict[str, Any], point: dict[str, Any]) -> float:
        # at an assumed 10 GB/s: an estimate for the plan, not a figure of the chapter
        moved = settings["bytes_per_launch"]
        if point["mode"] == "copy":
            moved = point["bytes"] * copies_per_iteration(
                settings.get("copy_bytes_per_iteration") or point["bytes"], point["bytes"])
        launches = settings["iterations"] + settings["warmup"]
        return self.adapter(self.invocation(settings, point)).startup_s + launches * moved / 10e9

    def derive(self, row: dict[str, Any]) -> dict[str, Any]:
        out = super().derive(row)
        key = row.get("mode") + ("/" + row["direction"] if row.get("mode") == "copy" else "")
        along, against = ("rx", "tx") if key in TO_GPU else ("tx", "rx")
        payload = out["gbs"] * 1e9 if out["gbs"] else float("nan")
        out["total_over_payload"] = out[f"gpu_pcie_{along}_counter_bytes_per_s"] / payload
        out["requests_over_payload"] = out[f"gpu_pcie_{against}_counter_bytes_per_s"] / payload
        return out


EXPERIMENT = GpuPcie()
