"""Device-initiated I/O, queue depth scaling: how the queues per device and the queue depth
of each trade off, at a fixed I/O size (``xnvmeperf cuda-run``, upcie-cuda back end).

Variables as in ``cuda_iosize`` (the same invocation); the grids differ: queue depth 1 to
512 for 1, 2, 4, 8 and 16 queues per device, 512-byte reads. The chapter's roofline is the
number of devices times the device capacity of the CPU-initiated search (measured in the same
environment where stored, else AiSIO's published value, labelled so).

Responsible for: the labels and grid of this chapter. Not responsible for: anything shared
with ``cuda_iosize`` (:func:`iolab.experiments.cuda_iosize.cuda_invocation`,
:mod:`iolab.experiments.gpu_io`).
"""

from __future__ import annotations

from typing import Any

from iolab.core.schema import Text
from iolab.experiments import gpu_io
from iolab.experiments.cuda_iosize import ANALYSIS, CudaIosize, cuda_invocation
from iolab.tools.base import Invocation


class CudaQdepth(gpu_io.GpuExperiment):
    name = "cuda_qdepth"
    title = "Device-initiated I/O: queue depth scaling"
    label = "sec-experiments-cuda-qdepth"
    chapter = "experiments/cuda_qdepth"
    variables = CudaIosize.variables
    analysis_fields = {**ANALYSIS,
                       "reference": Text(default="aisio_cuda_qdepth",
                                         help="published values to show beside, "
                                              "data/reference/<name>.yaml")}
    variable_labels = CudaIosize.variable_labels
    value_labels = gpu_io.VALUE_LABELS
    aisio_kinds = CudaIosize.aisio_kinds
    lab_needs = CudaIosize.lab_needs

    def invocation(self, settings: dict[str, Any], point: dict[str, Any]) -> Invocation:
        return cuda_invocation(settings, point)


EXPERIMENT = CudaQdepth()
