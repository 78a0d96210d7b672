"""Where a storage device's interrupts land: its vectors, their CPUs, and the split of a CPU
set into interrupt cores and the others.

A device is a block device (``vda``, ``nvme0n1``) or an NVMe controller (``nvme0``). Its
interrupt vectors are the ``msi_irqs`` of the PCI function above it in sysfs (NVMe:
``/sys/class/nvme/<ctrl>/device/msi_irqs``; virtio-blk: the virtio device's PCI function);
where there are none, vectors are matched by the device's name in ``/proc/interrupts``. A
vector is a *queue* vector when it serves I/O completions: not NVMe's admin queue
(``nvme0q0``) and not virtio's configuration vector (``virtio1-config``). Each vector's CPUs
are its ``effective_affinity_list`` (where the kernel delivers it), else its
``smp_affinity_list`` (where it may).

:class:`IrqCpus` names a run's CPUs by their side of that split (``irq_cores`` or
``other_cores``), so that a run's identity does not depend on CPU ids; it is resolved on the
host that runs.

Responsible for: discovery, :func:`placement` and :class:`IrqCpus`. Not responsible for: changing affinities
or queues (knobs in ``iolab.host.knobs``) or counting interrupts (``iolab.parsers.interrupts``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from iolab.errors import InputError, IolabError
from iolab.host.knobs import SysRoot, parse_cpulist
from iolab.parsers.interrupts import parse_interrupts

# vectors that carry no I/O completions
_NOT_QUEUE = re.compile(r"(nvme\d+q0\b|-config\b)")


@dataclass(frozen=True)
class Vector:
    irq: int
    description: str     # the text after the counts in /proc/interrupts
    queue: bool          # serves I/O completions
    cpus: list[int]      # where the kernel delivers it (effective affinity)
    allowed: list[int]   # where it may be delivered (smp_affinity_list)


def devices(root: SysRoot) -> list[str]:
    """Block devices and NVMe controllers this host has (for error messages)."""
    out = []
    for folder in (root.sys / "block", root.sys / "class/nvme"):
        if folder.is_dir():
            out += sorted(p.name for p in folder.iterdir() if not p.name.startswith(("loop", "ram", "zram")))
    return out


def device_path(root: SysRoot, device: str) -> Path:
    """The device's folder in sysfs (symlinks resolved)."""
    if not isinstance(device, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", device):
        raise InputError(None, "device", f"{device!r} is not a device name",
                         allowed=", ".join(devices(root)) or "none found")
    for link in (root.sys / "class/nvme" / device / "device", root.sys / "block" / device / "device"):
        if link.exists():
            return link.resolve()
    raise InputError(None, "device", f"no block device or NVMe controller {device!r} under "
                     f"{root.sys}", allowed=", ".join(devices(root)) or "none found")


def _pci_function(path: Path) -> Path | None:
    for folder in [path, *path.parents]:
        if (folder / "msi_irqs").is_dir():
            return folder
    return None


def _cpus(root: SysRoot, irq: int, name: str) -> list[int]:
    path = root.proc / "irq" / str(irq) / name
    try:
        return parse_cpulist(path.read_text())
    except (OSError, ValueError):
        return []


def numa_node(root: SysRoot, device: str) -> int | None:
    """The device's NUMA node; None where the platform has none (sysfs says -1)."""
    path = device_path(root, device)
    for folder in [path, *path.parents]:
        node = folder / "numa_node"
        if node.is_file():
            value = int(node.read_text().strip())
            return None if value < 0 else value
    return None


def vectors(root: SysRoot, device: str) -> list[Vector]:
    """Every interrupt vector of the device, in IRQ order."""
    path = device_path(root, device)
    table = parse_interrupts((root.proc / "interrupts").read_text(),
                             str(root.proc / "interrupts"))["rows"]
    pci = _pci_function(path)
    if pci is not None:
        irqs = sorted(int(p.name) for p in (pci / "msi_irqs").iterdir() if p.name.isdigit())
    else:
        # no MSI: by name, the controller (nvme0q3) or the virtio device (virtio1-req.0)
        names = [m.group(1) for m in [re.match(r"(nvme\d+)", device)] if m]
        names += [p.name for p in [path, *path.parents] if re.fullmatch(r"virtio\d+", p.name)]
        pattern = re.compile(rf"\b{names[0]}(q\d+|-\S+)") if names else None
        irqs = sorted(int(k) for k, row in table.items()
                      if k.isdigit() and pattern and pattern.search(row["description"]))
    out = []
    for irq in irqs:
        description = table.get(str(irq), {}).get("description", "")
        allowed = _cpus(root, irq, "smp_affinity_list")
        out.append(Vector(irq, description, not _NOT_QUEUE.search(description),
                          _cpus(root, irq, "effective_affinity_list") or allowed, allowed))
    return out


def placement(root: SysRoot, device: str, cpus: list[int]) -> dict[str, Any]:
    """The device's vectors, and ``cpus`` split into ``irq_cpus`` (a queue vector is
    delivered there) and ``other_cpus``; with the device's NUMA node. Stored with each run."""
    online = parse_cpulist((root.cpu_dir / "online").read_text())
    outside = sorted(set(cpus) - set(online))
    if outside:
        raise InputError(None, "cpus", f"CPU(s) {outside} are not online here",
                         allowed=f"a subset of {online}")
    found = vectors(root, device)
    queues = [v for v in found if v.queue]
    if not queues:
        raise IolabError(f"device {device}: no interrupt vector for I/O completions found "
                         f"(vectors: {[v.description for v in found] or 'none'}); a device "
                         f"whose queues are all polled has none")
    delivered = {c for v in queues for c in v.cpus}
    return {"device": device, "numa_node": numa_node(root, device),
            "vectors": [asdict(v) for v in found],
            "irq_cpus": sorted(set(cpus) & delivered),
            "other_cpus": sorted(set(cpus) - delivered)}


SIDES = ("irq_cores", "other_cores")


@dataclass(frozen=True)
class IrqCpus:
    """``count`` CPUs on one side of ``device``'s interrupt split: ``irq_cores`` (a queue
    vector of the device is delivered there) or ``other_cores``; the lowest ids first, taken
    from ``pool`` (a CPU list such as ``10-13``, e.g. the device's NUMA node, or ``all``)."""

    device: str
    side: str
    count: int
    pool: str = "all"

    def cpus(self, root: SysRoot, candidates: list[int]) -> list[int]:
        if self.side not in SIDES:
            raise InputError(None, "placement", f"unknown side {self.side!r}", ", ".join(SIDES))
        device_path(root, self.device)  # the device first: the likeliest thing to be missing
        if self.pool != "all":
            try:
                pool = parse_cpulist(self.pool)
            except ValueError as exc:
                raise InputError(None, "cpu_pool", str(exc), "a CPU list such as 10-13, or all") \
                    from None
            outside = sorted(set(pool) - set(candidates))
            if outside:
                raise InputError(None, "cpu_pool", f"CPU(s) {outside} are not online here",
                                 allowed=f"a subset of {candidates}")
            candidates = pool
        found = placement(root, self.device, candidates)
        side = found["irq_cpus" if self.side == "irq_cores" else "other_cpus"]
        if len(side) < self.count:
            raise IolabError(f"device {self.device}: {self.side} has {len(side)} CPU(s) "
                             f"({side}), {self.count} needed")
        return side[:self.count]

    def resolve(self, topology: list[dict[str, Any]]) -> list[int]:
        return self.cpus(SysRoot(), sorted(entry["cpu"] for entry in topology))

    def canonical(self) -> dict[str, Any]:
        return {"device": self.device, "side": self.side, "count": self.count, "pool": self.pool}
