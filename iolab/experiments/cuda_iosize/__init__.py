"""Device-initiated I/O, I/O size scaling: GPU threads submit NVMe reads themselves
(``xnvmeperf cuda-run`` on the upcie-cuda back end), and the I/O size and queue depth vary.

Variables: ``iosize`` (bytes) and ``qdepth`` (commands in flight per queue; both powers of
two, which cuda-run requires and the plan checks), ``nqueues`` (queues per device),
``ndevs`` (the first devices of the environment's list) and the CPU state (``cpu_governor``,
``turbo``, ``smt``: knobs set, read back and restored, though the CPU is not in the I/O
path). Each queue slot is one CUDA thread, so a run uses qdepth x nqueues x ndevs threads.

Responsible for: the variables, a point -> xnvmeperf's options, the labels. Not responsible
for: what the GPU experiments share (:mod:`iolab.experiments.gpu_io`) or the saturation and
queueing analysis (:mod:`iolab.analysis.saturation`, :mod:`iolab.analysis.queueing`).
"""

from __future__ import annotations

from typing import Any

from iolab.core.schema import Int, Number, Text
from iolab.experiments import gpu_io
from iolab.importers.aisio import XNVMEPERF_CUDA_RUN
from iolab.tools.base import Invocation


def cuda_invocation(settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
    """xnvmeperf cuda-run for one point (shared with ``cuda_qdepth``)."""
    return Invocation("xnvmeperf", {
        "subcommand": "cuda-run", "devices": settings["devices"][:point["ndevs"]],
        "iopattern": settings["iopattern"], "qdepth": point["qdepth"],
        "iosize": point["iosize"], "runtime": settings["runtime_s"],
        "nqueues": point["nqueues"], "be": "upcie-cuda", "gpu_id": settings["gpu"]})


ANALYSIS = {
    "saturation_tolerance": Number(0.001, 0.5, default=0.05,
                                   help="a point is saturated when its mean is within this "
                                        "fraction of the highest mean of its curve"),
    "reference": Text(default="aisio_cuda_iosize",
                      help="published values to show beside, data/reference/<name>.yaml"),
    # where the chapter takes its device capacity and its GPU-to-GPU reference from, named in
    # the params file so that no code outside an experiment names another
    "capacity_experiment": Text(help="the experiment whose single-device runs give the "
                                     "device capacity (the CPU-initiated search)"),
    "capacity_reference": Text(help="the published reference with its device capacity "
                                    "(device_capacity_iops), used where that experiment has "
                                    "no runs stored"),
    "p2p_experiment": Text(help="the experiment whose p2pBandwidthLatencyTest runs (or AiSIO "
                                "import) give the GPU-to-GPU reference"),
    "link_experiment": Text(default="cuda_iosize",
                            help="the experiment whose highest mean payload is the model's link "
                                 "term (the I/O-size scan, which reaches the link's plateau)"),
    "link_reference": Text(default="aisio_cuda_iosize",
                           help="the published reference whose payload plateau "
                                "(plateau_gbs_high) is the link term where that experiment has "
                                "no runs stored"),
}


class CudaIosize(gpu_io.GpuExperiment):
    name = "cuda_iosize"
    title = "Device-initiated I/O: I/O size scaling"
    label = "sec-experiments-cuda-iosize"
    chapter = "experiments/cuda_iosize"
    variables = {
        **gpu_io.CPU_VARIABLES,
        "iosize": Int(512, 2 ** 24),
        "qdepth": Int(1, 1024),
        "nqueues": Int(1, 1024),
        "ndevs": Int(1, 1024),
    }
    analysis_fields = {**ANALYSIS,
                       "qdepth_reference": Text(help="the published reference of the queue-depth "
                                                     "chapter, for the rate it reports at the "
                                                     "configuration both chapters share")}
    variable_labels = {"cpu_governor": "governor", "turbo": "turbo", "smt": "SMT",
                       "iosize": "I/O size (bytes)", "qdepth": "queue depth",
                       "nqueues": "queues per device", "ndevs": "devices"}
    value_labels = gpu_io.VALUE_LABELS
    aisio_kinds = (XNVMEPERF_CUDA_RUN,)
    lab_needs = ("an NVIDIA GPU whose threads submit NVMe commands themselves (xnvmeperf "
                 "cuda-run on xNVMe's upcie-cuda back end) and NVMe SSDs, bound to a user-space "
                 "driver, that read into the GPU's memory")

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        return cuda_invocation(settings, point)


EXPERIMENT = CudaIosize()
