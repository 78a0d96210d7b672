"""Discovery of a device's interrupt vectors and the split into interrupt and other cores,
on fake sysfs trees of an NVMe controller (the lab server's kind) and a virtio disk (this
machine class's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.errors import InputError, IolabError
from iolab.host import irqs
from iolab.host.knobs import SysRoot


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def tree(tmp_path: Path, *, kind: str, vectors: dict[int, tuple[str, str]], msi: bool = True,
         numa: str = "1", online: str = "0-3") -> SysRoot:
    """``vectors``: IRQ -> (description after the counts, effective CPU list)."""
    root = SysRoot(sys=tmp_path / "sys", proc=tmp_path / "proc")
    pci = root.sys / "devices/pci0000:c0/0000:c1:00.0"
    _put(pci / "numa_node", numa)
    if msi:
        for irq in vectors:
            _put(pci / "msi_irqs" / str(irq), "msix")
    if kind == "nvme":
        ctrl = pci / "nvme/nvme0"
        ctrl.mkdir(parents=True)
        for link, target in ((root.sys / "class/nvme/nvme0", ctrl),
                             (root.sys / "block/nvme0n1", ctrl / "nvme0n1")):
            (target / "device").parent.mkdir(parents=True, exist_ok=True)
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
        (ctrl / "nvme0n1").mkdir(exist_ok=True)
        os.symlink(ctrl, ctrl / "nvme0n1" / "device")
        os.symlink(pci, ctrl / "device")
    else:
        virtio = pci / "virtio1"
        virtio.mkdir(parents=True)
        (root.sys / "block/vda").mkdir(parents=True)
        os.symlink(virtio, root.sys / "block/vda/device")
    _put(root.cpu_dir / "online", online)
    lines = ["      CPU0  CPU1  CPU2  CPU3"]
    for irq, (description, cpus) in vectors.items():
        lines.append(f" {irq}:  1  2  3  4  {description}")
        _put(root.proc / f"irq/{irq}/effective_affinity_list", cpus)
        _put(root.proc / f"irq/{irq}/smp_affinity_list", "0-3")
    lines.append("RES:  1  1  1  1  Rescheduling interrupts")
    _put(root.proc / "interrupts", "\n".join(lines))
    return root


NVME = {40: ("PCI-MSIX-0000:c1:00.0 0-edge nvme0q0", "0"),
        41: ("PCI-MSIX-0000:c1:00.0 1-edge nvme0q1", "0"),
        42: ("PCI-MSIX-0000:c1:00.0 2-edge nvme0q2", "2")}


@pytest.mark.parametrize("device", ["nvme0", "nvme0n1"])
def test_nvme_queue_vectors_split_the_cpus(tmp_path, device):
    root = tree(tmp_path, kind="nvme", vectors=NVME)
    found = irqs.vectors(root, device)
    assert [(v.irq, v.queue, v.cpus) for v in found] == [(40, False, [0]), (41, True, [0]),
                                                         (42, True, [2])]
    p = irqs.placement(root, device, [0, 1, 2, 3])
    # CPU 0 takes the admin queue's interrupts too, but that queue carries no I/O
    assert (p["irq_cpus"], p["other_cpus"], p["numa_node"]) == ([0, 2], [1, 3], 1)
    assert p["vectors"][1] == {"irq": 41, "description": "PCI-MSIX-0000:c1:00.0 1-edge nvme0q1",
                               "queue": True, "cpus": [0], "allowed": [0, 1, 2, 3]}


def test_a_virtio_disk_and_a_platform_without_numa(tmp_path):
    root = tree(tmp_path, kind="virtio", numa="-1", vectors={
        35: ("PCI-MSIX-0000:00:02.0 0-edge virtio1-config", "1"),
        36: ("PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0", "1")})
    p = irqs.placement(root, "vda", [0, 1])
    assert (p["irq_cpus"], p["other_cpus"], p["numa_node"]) == ([1], [0], None)


def test_without_msi_the_vectors_are_found_by_name(tmp_path):
    vectors = {**NVME, 50: ("IO-APIC 5-edge nvme10q1", "3")}  # another controller's
    root = tree(tmp_path, kind="nvme", msi=False, vectors=vectors)
    assert [v.irq for v in irqs.vectors(root, "nvme0")] == [40, 41, 42]


def test_the_real_disk_of_this_machine_when_there_is_one():
    root = SysRoot()
    disks = [d for d in irqs.devices(root) if d.startswith(("vd", "nvme", "sd"))]
    if not disks:
        pytest.skip("no virtio, NVMe or SCSI disk here")
    try:
        p = irqs.placement(root, disks[0], [0])
    except IolabError as exc:
        pytest.skip(f"{disks[0]}: {exc}")
    assert set(p["irq_cpus"]) | set(p["other_cpus"]) == {0}


def test_bad_input_is_named(tmp_path):
    root = tree(tmp_path, kind="nvme", vectors=NVME)
    with pytest.raises(InputError) as info:
        irqs.placement(root, "sdz", [0])
    assert str(info.value) == (f"key 'device': no block device or NVMe controller 'sdz' under "
                               f"{root.sys} (allowed: nvme0n1, nvme0)")
    with pytest.raises(InputError, match=r"key 'device': '../x' is not a device name"):
        irqs.placement(root, "../x", [0])
    with pytest.raises(InputError, match=r"key 'cpus': CPU\(s\) \[7\] are not online here "
                                         r"\(allowed: a subset of \[0, 1, 2, 3\]\)"):
        irqs.placement(root, "nvme0", [0, 7])


def test_a_device_with_only_polled_queues_has_no_interrupt_cores(tmp_path):
    root = tree(tmp_path, kind="nvme", vectors={40: NVME[40]})
    with pytest.raises(IolabError, match="device nvme0: no interrupt vector for I/O completions"):
        irqs.placement(root, "nvme0", [0, 1])
