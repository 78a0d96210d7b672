"""Every tool adapter and collector by name, for the runner, the planner and the tidy table.

Responsible for: the lookup by name. Not responsible for: what any tool does.
"""

from __future__ import annotations

from iolab.collectors.cpufreq import CpufreqSampler
from iolab.collectors.dcgmi import DcgmDmon
from iolab.collectors.gnu_time import GnuTime
from iolab.collectors.hugepages import Hugepages
from iolab.collectors.interrupts import Interrupts
from iolab.collectors.irqtrace import IrqTrace
from iolab.collectors.nvml import NvmlPcie
from iolab.collectors.procstat import ProcStat
from iolab.collectors.proctree import ProcTreeCpu
from iolab.collectors.quiet import Quiet
from iolab.collectors.stress_ng import StressNg
from iolab.errors import InputError
from iolab.tools.base import Collector, ToolAdapter
from iolab.tools.bdevperf import Bdevperf
from iolab.tools.bpftrace import Bpftrace
from iolab.tools.fio import Fio
from iolab.tools.gpu_pcie_probe import GpuPcieProbe
from iolab.tools.marker import OutputMarker
from iolab.tools.p2p_bandwidth import P2pBandwidth
from iolab.tools.spdk_nvme_perf import SpdkNvmePerf
from iolab.tools.uring_reader import UringReader
from iolab.tools.xnvmeperf import Xnvmeperf

ADAPTERS: dict[str, ToolAdapter] = {a.name: a for a in (
    Fio(), Bdevperf(), Xnvmeperf(), SpdkNvmePerf(), P2pBandwidth(), Bpftrace(), UringReader(),
    GpuPcieProbe())}
COLLECTORS: dict[str, type[Collector]] = {c.name: c for c in (
    ProcStat, CpufreqSampler, ProcTreeCpu, OutputMarker, Hugepages, GnuTime, StressNg, DcgmDmon,
    Interrupts, IrqTrace, NvmlPcie, Quiet)}


def adapter(name: str) -> ToolAdapter:
    try:
        return ADAPTERS[name]
    except KeyError:
        raise InputError(None, "tool", f"no adapter for tool '{name}'",
                         allowed=", ".join(sorted(ADAPTERS))) from None


def collector(name: str) -> type[Collector]:
    try:
        return COLLECTORS[name]
    except KeyError:
        raise InputError(None, "collector", f"no collector named '{name}'",
                         allowed=", ".join(sorted(COLLECTORS))) from None
