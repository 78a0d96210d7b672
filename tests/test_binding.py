"""DeviceBindingKnob on a fake PCI tree whose sysfs writes are acted out by a small fake kernel.

The fake kernel does what the real one does with the three files the knob writes:
``driver/unbind`` removes the ``driver`` link (and, for nvme, the namespaces), writing
``driver_override`` stores it (empty reads back as "(null)"), and ``drivers/<d>/bind``
links the device only if the override names <d>, or, without an override, if <d> is nvme
(the only driver with an ID-table entry for the NVMe class). Every write is logged, so a
refusal can be shown to have written nothing.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from iolab.host import binding
from iolab.host.binding import DeviceBindingKnob
from iolab.errors import InputError, IolabError
from iolab.host.journal import KnobSession, restore_from_journal
from iolab.host.knobs import SysRoot

FREE = "0000:4a:00.0"
OTHER = "0000:4b:00.0"
ROOT_MOUNT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw"


class FakePci:
    """A fake /sys/bus/pci plus mountinfo and swaps under a SysRoot."""

    def __init__(self, root: SysRoot) -> None:
        self.root = root
        self.pci = root.sys / "bus/pci"
        self.writes: list[tuple[str, str]] = []
        self.mountinfo = [ROOT_MOUNT]
        self.swaps: list[str] = []
        self._stash = root.sys.parent / "stash"
        for driver in ("nvme", "vfio-pci", "uio_pci_generic"):
            (self.pci / "drivers" / driver).mkdir(parents=True, exist_ok=True)
            for name in ("bind", "unbind"):
                (self.pci / "drivers" / driver / name).touch()
        self._sync()

    def _sync(self) -> None:
        (self.root.proc / "self").mkdir(parents=True, exist_ok=True)
        (self.root.proc / "self/mountinfo").write_text("\n".join(self.mountinfo) + "\n")
        (self.root.proc / "swaps").write_text(
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
            + "".join(f"{path}\tpartition\t8388604\t\t0\t\t-2\n" for path in self.swaps))

    def device(self, bdf: str) -> Path:
        return self.pci / "devices" / bdf

    def add_controller(self, bdf: str, *, ctrl: str = "nvme0", driver: str | None = "nvme",
                       namespaces: dict[str, str] | None = None,
                       partitions: dict[str, dict[str, str]] | None = None,
                       klass: str = "0x010802") -> None:
        """A controller; ``namespaces`` maps name to major:minor, ``partitions`` likewise."""
        dev = self.device(bdf)
        dev.mkdir(parents=True)
        (dev / "class").write_text(klass + "\n")
        (dev / "driver_override").write_text("(null)\n")
        if driver:
            os.symlink(f"../../drivers/{driver}", dev / "driver")
        for ns, devno in (namespaces or {}).items():
            folder = dev / "nvme" / ctrl / ns
            (folder / "holders").mkdir(parents=True)
            (folder / "dev").write_text(devno + "\n")
            for part, part_devno in (partitions or {}).get(ns, {}).items():
                (folder / part / "holders").mkdir(parents=True)
                (folder / part / "dev").write_text(part_devno + "\n")
                (folder / part / "partition").write_text(part[-1] + "\n")
        if not namespaces:
            (dev / "nvme" / ctrl).mkdir(parents=True)

    def mount(self, devno: str, mountpoint: str, source: str) -> None:
        self.mountinfo.append(f"{40 + len(self.mountinfo)} 27 {devno} / {mountpoint} "
                              f"rw,relatime shared:1 - ext4 {source} rw")
        self._sync()

    def swap(self, path: str) -> None:
        self.swaps.append(path)
        self._sync()

    def override(self, bdf: str) -> str:
        return (self.device(bdf) / "driver_override").read_text().strip()

    # -- the fake kernel -------------------------------------------------------------------

    def write(self, path: Path, text: str) -> None:
        self.writes.append((str(Path(path).relative_to(self.root.sys)), text))
        try:
            self._act(Path(path), text.strip())
        except OSError as exc:
            raise IolabError(f"cannot write '{text}' to {path}: {exc.strerror}") from exc

    def _act(self, path: Path, text: str) -> None:
        if path.name == "driver_override":
            path.write_text((text or "(null)") + "\n")
        elif path.name == "unbind":
            dev = self.device(text)
            driver = os.path.basename(os.readlink(dev / "driver"))
            assert path.parent.resolve() == (self.pci / "drivers" / driver).resolve()
            (dev / "driver").unlink()
            if driver == "nvme" and (dev / "nvme").exists():
                shutil.move(dev / "nvme", self._stash / text)
        elif path.name == "bind":
            driver, dev = path.parent.name, self.device(text)
            if (dev / "driver").is_symlink():
                raise OSError(errno.EBUSY, "Device or resource busy")
            override = self.override(text)
            if (override != "(null)" and override != driver) or \
                    (override == "(null)" and driver != "nvme"):
                raise OSError(errno.ENODEV, "No such device")
            os.symlink(f"../../drivers/{driver}", dev / "driver")
            if driver == "nvme" and (self._stash / text).exists():
                shutil.move(self._stash / text, dev / "nvme")
        else:
            raise AssertionError(f"unexpected sysfs write to {path}")


@pytest.fixture
def pci(fake_sysroot, monkeypatch, tmp_path):
    """(knob, fake) on a host with one free NVMe controller, FREE, bound to nvme."""
    root = fake_sysroot()
    fake = FakePci(root)
    fake.add_controller(FREE, namespaces={"nvme0n1": "259:0"},
                        partitions={"nvme0n1": {"nvme0n1p1": "259:1"}})
    monkeypatch.setattr(binding, "write_sysfs", fake.write)
    return DeviceBindingKnob(root, dev_dir=tmp_path / "no-dev"), fake


def _bind(knob: DeviceBindingKnob, *devices: str) -> None:
    knob.apply({"devices": list(devices), "driver": "vfio-pci"})


# --- a free device ---------------------------------------------------------------------------

def test_free_device_binds_and_reads_back(pci):
    knob, fake = pci
    assert knob.available() == (True, "")
    before = knob.read()
    assert before == {FREE: "nvme"}
    _bind(knob, FREE)
    assert knob.read() == {FREE: "vfio-pci"}
    assert knob.matches({"devices": [FREE], "driver": "vfio-pci"}, knob.read())
    assert fake.override(FREE) == "vfio-pci"
    assert fake.writes == [
        (f"bus/pci/devices/{FREE}/driver/unbind", FREE),
        (f"bus/pci/devices/{FREE}/driver_override", "vfio-pci"),
        ("bus/pci/drivers/vfio-pci/bind", FREE),
    ]
    # Binding again changes nothing.
    _bind(knob, FREE)
    assert len(fake.writes) == 3


def test_restore_returns_the_device_to_nvme_and_clears_the_override(pci):
    knob, fake = pci
    before = knob.read()
    _bind(knob, FREE)
    knob.restore(before)
    assert knob.read() == {FREE: "nvme"}
    assert fake.override(FREE) == "(null)"
    assert (fake.device(FREE) / "nvme/nvme0/nvme0n1").is_dir()
    assert fake.writes[-3:] == [
        (f"bus/pci/devices/{FREE}/driver/unbind", FREE),
        (f"bus/pci/devices/{FREE}/driver_override", ""),
        ("bus/pci/drivers/nvme/bind", FREE),
    ]
    # Restoring what is already in place writes nothing.
    knob.restore(before)
    assert len(fake.writes) == 6


def test_restore_to_another_user_space_driver_sets_its_override(pci):
    knob, fake = pci
    # The device was with uio_pci_generic before (bound by someone else, e.g. SPDK setup.sh).
    _bind(knob, FREE)
    knob.restore({FREE: "uio_pci_generic"})
    assert knob.read() == {FREE: "uio_pci_generic"}
    assert fake.override(FREE) == "uio_pci_generic"


def test_session_restores_binding_on_an_exception(pci, tmp_path):
    knob, fake = pci
    journal = tmp_path / "journal.json"
    with pytest.raises(RuntimeError, match="driver crashed"):
        with KnobSession({"device_binding": knob}, journal) as session:
            record = session.set("device_binding", {"devices": [FREE], "driver": "vfio-pci"})
            assert record["before"] == {FREE: "nvme"}
            assert record["after"] == {FREE: "vfio-pci"} and record["matches"]
            assert json.loads(journal.read_text())["changes"] == [
                {"knob": "device_binding", "before": {FREE: "nvme"}}]
            raise RuntimeError("driver crashed")
    assert knob.read() == {FREE: "nvme"}
    assert fake.override(FREE) == "(null)"
    assert not journal.exists()


def test_restore_from_journal_after_a_crash(pci, tmp_path):
    knob, fake = pci
    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"schema_version": 1, "pid": None, "changes": [
        {"knob": "device_binding", "before": {FREE: "nvme"}}]}))
    _bind(knob, FREE)
    # A new process knows nothing of what the crashed one bound; the journal says it all.
    fresh = DeviceBindingKnob(knob.root, dev_dir=knob.dev_dir)
    lines = restore_from_journal(journal, {"device_binding": fresh})
    assert fresh.read() == {FREE: "nvme"} and not journal.exists()
    assert any("restored" in line for line in lines)


# --- refusals: each checked before any write -------------------------------------------------

def _refused(knob, fake, devices, *fragments):
    with pytest.raises(IolabError) as info:
        _bind(knob, *devices)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message
    assert fake.writes == []
    return message


def test_mounted_namespace_is_refused(pci):
    knob, fake = pci
    fake.mount("259:0", "/data", "/dev/nvme0n1")
    _refused(knob, fake, [FREE], FREE, "nvme0n1 (259:0) is mounted on /data")


def test_mounted_partition_is_refused_by_device_number(pci):
    knob, fake = pci
    # The source name says nothing useful; the device number does.
    fake.mount("259:1", "/scratch space", "/dev/disk/by-label/scratch")
    fake.mountinfo[-1] = fake.mountinfo[-1].replace("/scratch space", "/scratch\\040space")
    fake._sync()
    _refused(knob, fake, [FREE], "nvme0n1p1 (259:1) is mounted on /scratch space")


def test_root_device_is_refused_by_device_number_not_name(pci):
    knob, fake = pci
    # The kernel often shows the root mount's source as /dev/root, which names nothing.
    fake.mountinfo[0] = "27 1 259:1 / / rw,relatime - ext4 /dev/root rw"
    fake._sync()
    message = _refused(knob, fake, [FREE], "nvme0n1p1 (259:1) holds the root filesystem /")
    assert "mounted on" not in message


def test_btrfs_root_is_refused_by_its_source(pci):
    knob, fake = pci
    # btrfs shows an anonymous device number; only the source names the partition.
    fake.mountinfo[0] = "27 1 0:31 / / rw,relatime - btrfs /dev/nvme0n1p1 rw"
    fake._sync()
    _refused(knob, fake, [FREE], "nvme0n1p1 (259:1) holds the root filesystem /")


def test_active_swap_is_refused(pci):
    knob, fake = pci
    fake.swap("/dev/nvme0n1p1")
    _refused(knob, fake, [FREE], "nvme0n1p1 (259:1) is active swap (/dev/nvme0n1p1)")


@pytest.mark.parametrize("holder", ["dm-0", "md127"])
def test_device_mapper_or_md_holder_is_refused(pci, holder):
    knob, fake = pci
    (fake.device(FREE) / f"nvme/nvme0/nvme0n1/nvme0n1p1/holders/{holder}").mkdir()
    _refused(knob, fake, [FREE], f"nvme0n1p1 (259:1) is held by {holder}")


def test_multipath_namespace_head_is_checked(pci):
    knob, fake = pci
    # Native NVMe multipath: the controller holds path device nvme1c1n1, whose block
    # device is the namespace head nvme1n1 in the subsystem's folder.
    fake.add_controller(OTHER, ctrl="nvme1")
    (fake.device(OTHER) / "nvme/nvme1/nvme1c1n1").mkdir()
    head = knob.root.sys / "devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1"
    (head / "holders").mkdir(parents=True)
    (head / "dev").write_text("259:5\n")
    (knob.root.sys / "class/block").mkdir(parents=True)
    os.symlink(head, knob.root.sys / "class/block/nvme1n1")
    fake.mount("259:5", "/mnt/mp", "/dev/nvme1n1")
    _refused(knob, fake, [OTHER], f"{OTHER}: nvme1n1 (259:5) is mounted on /mnt/mp")


def test_one_refused_device_stops_all_of_them(pci):
    knob, fake = pci
    fake.add_controller(OTHER, ctrl="nvme1", namespaces={"nvme1n1": "259:2"})
    fake.mount("259:2", "/home", "/dev/nvme1n1")
    _refused(knob, fake, [FREE, OTHER], f"{OTHER}: nvme1n1 (259:2) is mounted on /home")
    assert knob.read() == {FREE: "nvme", OTHER: "nvme"}


def test_missing_device_is_refused(pci):
    knob, fake = pci
    _refused(knob, fake, ["0000:99:00.0"], "0000:99:00.0: no such PCI device")


def test_non_nvme_device_is_refused(pci):
    knob, fake = pci
    fake.add_controller("0000:00:03.0", driver="virtio-pci", klass="0x020000")
    _refused(knob, fake, ["0000:00:03.0"], "not an NVMe controller")


@pytest.mark.parametrize("bdf", ["4a:00.0", "0000:4a:00", "0000:4a:20.0", "0000:4a:00.8",
                                 "0000:4a:00.0; reboot", "../../../0000:4a:00.0", 17])
def test_malformed_address_is_refused(pci, bdf):
    knob, fake = pci
    with pytest.raises(InputError, match="not a full PCI address"):
        _bind(knob, bdf)
    assert fake.writes == []


def test_upper_case_address_is_normalised(pci):
    knob, _ = pci
    assert knob.validate({"devices": ["0000:4A:00.0"], "driver": "vfio-pci"}) == \
        {"devices": [FREE], "driver": "vfio-pci"}


@pytest.mark.parametrize("value", [
    {"devices": [FREE], "driver": "nvme"},
    {"devices": [], "driver": "vfio-pci"},
    {"devices": FREE, "driver": "vfio-pci"},
    {"devices": [FREE]},
])
def test_invalid_values_are_refused(pci, value):
    knob, _ = pci
    with pytest.raises(InputError):
        knob.validate(value)


def test_restore_refuses_to_unbind_a_device_mounted_since(pci):
    knob, fake = pci
    # The journal says the device had no driver; since then it was given to nvme and mounted.
    fake.mount("259:0", "/data", "/dev/nvme0n1")
    with pytest.raises(IolabError, match="is mounted on /data"):
        knob.restore({FREE: None})
    assert fake.writes == [] and knob.read() == {FREE: "nvme"}


def test_restore_refuses_before_unbinding_when_the_old_driver_is_gone(pci):
    knob, fake = pci
    _bind(knob, FREE)
    shutil.rmtree(knob.root.sys / "bus/pci/drivers/nvme")
    with pytest.raises(IolabError, match="modprobe nvme"):
        knob.restore({FREE: "nvme"})
    assert knob.read() == {FREE: "vfio-pci"} and len(fake.writes) == 3


# --- availability ----------------------------------------------------------------------------

def test_unavailable_without_the_driver(pci):
    knob, _ = pci
    shutil.rmtree(knob.root.sys / "bus/pci/drivers/vfio-pci")
    ok, why = knob.available("vfio-pci")
    assert not ok and "modprobe vfio-pci" in why
    assert knob.available("uio_pci_generic") == (True, "")
    with pytest.raises(IolabError, match="modprobe vfio-pci"):
        _bind(knob, FREE)


def test_unavailable_without_nvme_or_pci(fake_sysroot):
    knob = DeviceBindingKnob(fake_sysroot())
    assert knob.read() == {}
    ok, why = knob.available()
    assert not ok and "no PCI bus" in why


def test_this_host(tmp_path):
    """Whatever the host, availability is a verdict with a reason, and read() is JSON."""
    knob = DeviceBindingKnob()
    ok, why = knob.available()
    assert ok or why
    json.dumps(knob.read())


def _root_block_device() -> tuple[str, str] | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            devno = fields[2]
            uevent = Path(f"/sys/dev/block/{devno}/uevent")
            if uevent.exists():
                name = dict(kv.split("=", 1) for kv in uevent.read_text().split())["DEVNAME"]
                return name, devno
    return None


@pytest.mark.skipif(_root_block_device() is None,
                    reason="needs a root filesystem on a block device")
def test_exclusive_open_never_finds_the_mounted_root_device_free():
    # EBUSY on a normal host; where the node cannot even be opened (this sandboxed VM says
    # EPERM), the device counts as unchecked, which refuses it just the same.
    name, devno = _root_block_device()
    reason = DeviceBindingKnob()._exclusive_holder(name, devno)
    assert reason and ("held open exclusively" in reason or "cannot be checked" in reason)
