"""CPU-initiated peer-to-peer I/O: how much of a GPU's PCIe link NVMe reads into GPU memory
fill, as payload and as total traffic (``xnvmeperf run --be upcie-cuda``: CPU threads submit,
the SSDs write straight into GPU memory), and the GPU-to-GPU reference of cuda-samples'
p2pBandwidthLatencyTest.

Variables: ``benchmark`` (``nvme_to_gpu``: xnvmeperf; ``gpu_to_gpu``: the p2p test, a grid
of its own with one point, repeated like every point; the other variables then only name
that point), ``iosize``
(bytes), ``qdepth``, ``ncores`` (physical cores submitting, one thread each), ``ndevs`` and
the CPU state (``cpu_governor``, ``turbo``, ``smt``; knobs).

Responsible for: the variables, a point -> the tool's options. Not responsible for: what the
GPU experiments share (:mod:`iolab.shared.gpu_io`) or the chapter's analysis
(``analysis`` beside this file).
"""

from __future__ import annotations

from typing import Any

from iolab.core.schema import Choice, Int, Text
from iolab.importers.aisio import XNVMEPERF_RUN
from iolab.shared import gpu_io
from iolab.tools.base import CpuRequest, Invocation


class PcieSaturation(gpu_io.GpuExperiment):
    name = "pcie_saturation"
    title = "CPU-initiated P2P I/O: PCIe bandwidth saturation"
    label = "sec-experiments-pcie-saturation"
    chapter = "experiments/pcie_saturation"
    settings = {
        **gpu_io.SETTINGS,
        "p2p_executable": Text(default="p2pBandwidthLatencyTest",
                               help="cuda-samples' p2pBandwidthLatencyTest, a path or a name "
                                    "on PATH"),
    }
    variables = {
        "benchmark": Choice("nvme_to_gpu", "gpu_to_gpu"),
        **gpu_io.CPU_VARIABLES,
        "iosize": Int(512, 2 ** 24),
        "qdepth": Int(1, 65536),
        "ncores": Int(1, 4096),
        "ndevs": Int(1, 1024),
    }
    analysis_fields = {
        "reference": Text(default="aisio_pcie_saturation",
                          help="published values to show beside, data/reference/<name>.yaml"),
        "aisio_runs": Text(default="aisio_pcie_saturation_runs",
                           help="AiSIO's own runs, shown where this package has none, "
                                "data/reference/<name>.yaml"),
    }
    metrics = {
        **gpu_io.METRICS,
        "p2p_write_gbs": gpu_io.Metric("GPU-to-GPU P2P write bandwidth, one direction, mean "
                                       "of the GPU pairs", ("p2p_bandwidth.p2p_write_gbs",),
                                       "GB/s"),
        "p2p_write_min_gbs": gpu_io.Metric("GPU-to-GPU P2P write bandwidth, one direction, "
                                           "slowest GPU pair", ("p2p_bandwidth.p2p_write_min_gbs",),
                                           "GB/s"),
        "bidir_p2p_gbs": gpu_io.Metric("GPU-to-GPU P2P bandwidth, both directions together",
                                       ("p2p_bandwidth.bidir_p2p_gbs",), "GB/s"),
    }
    variable_labels = {"benchmark": "benchmark", "cpu_governor": "governor", "turbo": "turbo",
                       "smt": "SMT", "iosize": "I/O size (bytes)", "qdepth": "queue depth",
                       "ncores": "CPU cores submitting", "ndevs": "devices"}
    value_labels = {**gpu_io.VALUE_LABELS,
                    "benchmark": {"nvme_to_gpu": "NVMe to GPU (xnvmeperf)",
                                  "gpu_to_gpu": "GPU to GPU (p2pBandwidthLatencyTest)"}}
    aisio_kinds = (XNVMEPERF_RUN,)
    lab_needs = ("an NVIDIA GPU whose memory NVMe SSDs, bound to a user-space driver, write "
                 "into peer to peer (xnvmeperf run on xNVMe's upcie-cuda back end), with a "
                 "second GPU for the GPU-to-GPU reference")

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        if point["benchmark"] == "gpu_to_gpu":
            return Invocation("p2p_bandwidth", {"executable": settings["p2p_executable"]})
        return Invocation("xnvmeperf", {
            "subcommand": "run", "devices": settings["devices"][:point["ndevs"]],
            "iopattern": settings["iopattern"], "qdepth": point["qdepth"],
            "iosize": point["iosize"], "runtime": settings["runtime_s"], "be": "upcie-cuda",
            "cpumask": CpuRequest(point["ncores"], siblings=False), "gpu_id": settings["gpu"]})

    def collectors(self, settings, point, cpus, topology) -> list:
        if point["benchmark"] == "gpu_to_gpu":
            return []
        return super().collectors(settings, point, cpus, topology)

    def host_block(self, settings: dict[str, Any], point: dict[str, Any],
                   topology: list[dict[str, Any]]) -> str | None:
        cores = {(c["package"], c["core"]) for c in topology}
        if point["ncores"] > len(cores):
            return f"needs {point['ncores']} physical cores, this host has {len(cores)}"
        return super().host_block(settings, point, topology)

    def seconds_per_run(self, settings: dict[str, Any], point: dict[str, Any]) -> float:
        if point["benchmark"] == "gpu_to_gpu":
            # the test copies 160 MB many times between each pair of GPUs in several modes: a
            # minute on two GPUs, an estimate for the plan
            return self.adapter(self.invocation(settings, point)).startup_s + 60.0
        return super().seconds_per_run(settings, point)


EXPERIMENT = PcieSaturation()
