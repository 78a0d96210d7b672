"""Device-initiated I/O, queue depth scaling: how the queues per device and the queue depth
of each trade off, at a fixed I/O size (``xnvmeperf cuda-run``, upcie-cuda back end).

Variables as in ``cuda_iosize`` (the same invocation, :mod:`iolab.shared.cuda_run`); the
grids differ: queue depth 1 to 512 for 1, 2, 4, 8 and 16 queues per device, 512-byte reads.
The chapter's roofline is the number of devices times the device capacity of the
CPU-initiated search (measured in the same environment where stored, else AiSIO's published
value, labelled so).

Responsible for: the name, label and analysis fields of this chapter. Not responsible for:
anything shared with ``cuda_iosize`` (:mod:`iolab.shared.cuda_run`,
:mod:`iolab.shared.gpu_io`).
"""

from __future__ import annotations

from iolab.core.schema import Text
from iolab.shared.cuda_run import ANALYSIS, CudaRunExperiment


class CudaQdepth(CudaRunExperiment):
    name = "cuda_qdepth"
    title = "Device-initiated I/O: queue depth scaling"
    label = "sec-experiments-cuda-qdepth"
    chapter = "experiments/cuda_qdepth"
    analysis_fields = {**ANALYSIS,
                       "reference": Text(default="aisio_cuda_qdepth",
                                         help="published values to show beside, "
                                              "data/reference/<name>.yaml")}


EXPERIMENT = CudaQdepth()
