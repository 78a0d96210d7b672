"""Device-initiated I/O, I/O size scaling: GPU threads submit NVMe reads themselves
(``xnvmeperf cuda-run`` on the upcie-cuda back end), and the I/O size and queue depth vary.

Variables (shared with ``cuda_qdepth``, :class:`iolab.shared.cuda_run.CudaRunExperiment`):
``iosize`` (bytes) and ``qdepth`` (commands in flight per queue; both powers of two, which
cuda-run requires and the plan checks), ``nqueues`` (queues per device), ``ndevs`` (the first
devices of the environment's list) and the CPU state (``cpu_governor``, ``turbo``, ``smt``:
knobs set, read back and restored, though the CPU is not in the I/O path). Each queue slot is
one CUDA thread, so a run uses qdepth x nqueues x ndevs threads.

Responsible for: this chapter's name, label and analysis fields. Not responsible for: what
the GPU experiments share (:mod:`iolab.shared.gpu_io`, :mod:`iolab.shared.cuda_run`) or the
saturation and queueing analysis (:mod:`iolab.analysis.saturation`,
:mod:`iolab.analysis.queueing`).
"""

from __future__ import annotations

from iolab.core.schema import Text
from iolab.shared.cuda_run import ANALYSIS, CudaRunExperiment


class CudaIosize(CudaRunExperiment):
    name = "cuda_iosize"
    title = "Device-initiated I/O: I/O size scaling"
    label = "sec-experiments-cuda-iosize"
    chapter = "experiments/cuda_iosize"
    analysis_fields = {**ANALYSIS,
                       "qdepth_reference": Text(help="the published reference of the queue-depth "
                                                     "chapter, for the rate it reports at the "
                                                     "configuration both chapters share")}


EXPERIMENT = CudaIosize()
