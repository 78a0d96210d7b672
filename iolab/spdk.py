"""Inputs for an SPDK bdevperf run: the bdev configuration, the core mask and the option list.

Responsible for: the SPDK JSON subsystem configuration that attaches one NVMe controller per
PCIe address; writing logical CPUs as a hex core mask; checking that a run asks for no more
devices than its environment lists; the bdevperf options of one run. Every check raises :class:`~iolab.errors.InputError` naming the key.

Not responsible for: writing the configuration file or starting bdevperf (the experiment
module and ``scripts/drivers/bdevperf.sh``), binding devices to a user-space driver,
reserving hugepages, choosing CPUs (:func:`iolab.inventory.pick_cpus`; a recorded
``lscpu -e`` is read by :mod:`iolab.parsers.lscpu`), or parsing bdevperf's output
(:mod:`iolab.parsers.bdevperf`).
Apart from the text handed in, nothing here reads or changes the host.
"""

from __future__ import annotations

import re
from typing import Any

from iolab.errors import InputError

# Domain, bus, device, function; SPDK's traddr wants the full form with the domain.
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
_BDF_ALLOWED = "DDDD:BB:DD.F, e.g. 0000:4a:00.0"

# bdevperf's -w values (examples/bdev/bdevperf/bdevperf.c, PATTERN_TYPES_STR).
WORKLOADS = ("read", "write", "randread", "randwrite", "rw", "randrw", "verify", "reset",
             "unmap", "flush", "write_zeroes")
_MIXED = ("rw", "randrw")


def controller_name(index: int) -> str:
    """SPDK controller name of the index-th device: nvme00, nvme01, …; its bdev adds 'n1'."""
    return f"nvme{index:02d}"


def bdev_config(pci_addrs: list[str]) -> dict[str, Any]:
    """The JSON subsystem config (bdevperf ``-c``) attaching one PCIe controller per address.

    The controllers are named in the order given, so the bdevs are nvme00n1, nvme01n1, ….
    Addresses must be full PCIe BDFs, each at most once.
    """
    if not isinstance(pci_addrs, list) or not pci_addrs:
        raise InputError(None, "devices", f"need a non-empty list of PCIe addresses, "
                         f"got {pci_addrs!r}", allowed=_BDF_ALLOWED)
    seen: dict[str, int] = {}
    entries = []
    for i, addr in enumerate(pci_addrs):
        if not isinstance(addr, str) or not _BDF.match(addr):
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not a PCIe address",
                             allowed=_BDF_ALLOWED)
        # 0000:4A:00.0 and 0000:4a:00.0 are the same function.
        key = addr.lower()
        if key in seen:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is listed twice (also "
                             f"devices[{seen[key]}]); each controller can be attached once")
        seen[key] = i
        entries.append({"method": "bdev_nvme_attach_controller",
                        "params": {"name": controller_name(i), "trtype": "PCIe",
                                   "traddr": addr}})
    return {"subsystems": [{"subsystem": "bdev", "config": entries}]}


def check_devices(pci_addrs: list[str], available: list[str]) -> None:
    """Refuse a device list longer than the environment's, or naming a device it lacks."""
    if not available:
        raise InputError(None, "devices", "the environment lists no NVMe devices for SPDK",
                         allowed="PCIe addresses in the params file's devices list")
    if len(pci_addrs) > len(available):
        raise InputError(None, "ndevs", f"asked for {len(pci_addrs)} devices but the "
                         f"environment lists {len(available)}", allowed=f"1..{len(available)}")
    known = {addr.lower() for addr in available}
    for i, addr in enumerate(pci_addrs):
        if str(addr).lower() not in known:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not among the "
                             f"environment's devices", allowed=", ".join(available))


def cpu_mask(cpus: list[int]) -> str:
    """The hex core mask of a set of logical CPUs, as bdevperf's ``-m`` takes it: [0, 1] -> 0x3."""
    if not cpus:
        raise InputError(None, "cpus", "need at least one CPU for a core mask")
    for cpu in cpus:
        if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0:
            raise InputError(None, "cpus", f"CPU ids must be whole numbers >= 0, got {cpu!r}")
    if len(set(cpus)) != len(cpus):
        raise InputError(None, "cpus", f"CPU ids repeat in {sorted(cpus)}")
    return hex(sum(1 << cpu for cpu in cpus))


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(None, key, f"must be a positive whole number, got {value!r}")
    return value


def bdevperf_argv(core_mask: str, queue_depth: int, io_size: int, seconds: int,
                  workload: str = "randread", rwmixread: int | None = None) -> list[str]:
    """bdevperf's options for one run: ``-m MASK -q QD -o BYTES -t S -w WORKLOAD [-M PCT]``.

    ``rwmixread`` (percent reads) is required for rw/randrw and refused for the others,
    because bdevperf only warns and ignores it there.
    """
    if not isinstance(core_mask, str) or not re.fullmatch(r"0x[0-9a-fA-F]+", core_mask) \
            or int(core_mask, 16) == 0:
        raise InputError(None, "core_mask", f"'{core_mask}' is not a non-zero hex core mask",
                         allowed="0x followed by hex digits, e.g. 0x3")
    if workload not in WORKLOADS:
        raise InputError(None, "workload", f"unknown bdevperf workload '{workload}'",
                         allowed=", ".join(WORKLOADS))
    argv = ["-m", core_mask,
            "-q", str(_positive_int("queue_depth", queue_depth)),
            "-o", str(_positive_int("io_size", io_size)),
            "-t", str(_positive_int("seconds", seconds)),
            "-w", workload]
    if workload in _MIXED:
        if isinstance(rwmixread, bool) or not isinstance(rwmixread, int) \
                or not 0 <= rwmixread <= 100:
            raise InputError(None, "rwmixread", f"{workload} needs the percentage of reads, "
                             f"got {rwmixread!r}", allowed="0..100")
        argv += ["-M", str(rwmixread)]
    elif rwmixread is not None:
        raise InputError(None, "rwmixread", f"only applies to rw and randrw, not {workload}")
    return argv
