"""What the two device-initiated experiments (``cuda_iosize``, ``cuda_qdepth``) share: GPU
threads submit NVMe reads themselves (``xnvmeperf cuda-run`` on the upcie-cuda back end).

:class:`CudaRunExperiment` holds their variables (``iosize`` and ``qdepth``, both powers of
two, which cuda-run requires and the plan checks; ``nqueues``; ``ndevs``, the first devices
of the environment's list; the CPU state, set though the CPU is not in the I/O path), their
labels, the AiSIO benchmark they import and the invocation of one point. Each queue slot is
one CUDA thread, so a run uses qdepth x nqueues x ndevs threads. :data:`ANALYSIS` is the
analysis fields both chapters read: where the device capacity, the GPU-to-GPU reference and
the link term come from (:mod:`iolab.shared.gpu_sources`), named in the params so that no
experiment names another in code.

Responsible for: those shared variables, labels, fields and the cuda-run invocation.
Not responsible for: what every GPU experiment shares (:mod:`iolab.shared.gpu_io`), an
experiment's name, grid or chapter (its package), or the xnvmeperf command line
(``iolab.tools.xnvmeperf``).
"""

from __future__ import annotations

from typing import Any

from iolab.core.schema import Int, Number, Text
from iolab.importers.aisio import XNVMEPERF_CUDA_RUN
from iolab.shared import gpu_io
from iolab.tools.base import Invocation


def cuda_invocation(settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
    """xnvmeperf cuda-run for one point."""
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
    "link_experiment": Text(help="the experiment whose highest mean payload is the model's link "
                                 "term (the I/O-size scan, which reaches the link's plateau)"),
    "link_reference": Text(default="aisio_cuda_iosize",
                           help="the published reference whose payload plateau "
                                "(plateau_gbs_high) is the link term where that experiment has "
                                "no runs stored"),
}


class CudaRunExperiment(gpu_io.GpuExperiment):
    """The shared part of the device-initiated experiments; subclasses add their name,
    chapter and analysis fields."""
    variables = {
        **gpu_io.CPU_VARIABLES,
        "iosize": Int(512, 2 ** 24),
        "qdepth": Int(1, 1024),
        "nqueues": Int(1, 1024),
        "ndevs": Int(1, 1024),
    }
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
