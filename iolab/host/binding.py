"""Binding NVMe controllers to a user-space driver, as a journaled knob.

SPDK and xNVMe drive an NVMe controller from user space, which needs the controller taken
from the kernel's ``nvme`` driver and given to ``uio_pci_generic`` or ``vfio-pci``.
``DeviceBindingKnob`` does that through sysfs and gives the devices back afterwards, so a
``KnobSession`` journals and restores it like any other knob.

Responsible for: checking that a device may be taken from the kernel, and refusing, before
anything is written, a device whose namespaces (or their partitions) hold the root
filesystem, any mounted filesystem or active swap, or are held by device-mapper or md; the
unbind / driver_override / bind writes; reading back which driver each device has.
Not responsible for: loading driver modules (``modprobe`` is the operator's step, and
``available`` says which one is missing), hugepages, IOMMU settings, or devices that are
not NVMe controllers.

Value and state:

===============  ==============================================  ===========================
knob             value                                           state
===============  ==============================================  ===========================
device_binding   {"devices": ["0000:4a:00.0", ...],              {"0000:4a:00.0": "nvme",
                  "driver": "uio_pci_generic" | "vfio-pci"}        "0000:4b:00.0": None, ...}
===============  ==============================================  ===========================

The state covers the devices this knob has bound so far, or, before it has bound any, every
NVMe-class PCI device (class 0x010802); ``None`` means no driver is bound. Restoring puts each
device back to its recorded driver: for ``nvme`` (or no driver) ``driver_override`` is
cleared, for any other driver it is set to that driver, which is the only way such a driver
accepts a device it has no ID table entry for.

How "in use" is decided, per block device of the controller (namespaces, native-multipath
namespace heads, and their partitions):

- its major:minor equals that of ``/`` in ``/proc/self/mountinfo`` (the root filesystem;
  the source name alone is not trusted, since the root mount often reads ``/dev/root``);
- its major:minor, or its name after resolving the mount source (btrfs shows an anonymous
  device number), appears in any line of mountinfo (mounted filesystem);
- it is listed in ``/proc/swaps``, by name or by device number (active swap);
- ``holders/`` in its sysfs folder is not empty (device-mapper, LVM, md RAID);
- on the real host, opening ``/dev/<name>`` with ``O_EXCL`` fails with EBUSY: some kernel
  user holds it exclusively (this also catches ZFS, multi-device btrfs and mounts made in
  another mount namespace, none of which show up in the files above).

When any of this cannot be read, the device is refused rather than assumed free.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Any

from iolab.errors import InputError, IolabError
from iolab.host.knobs import Knob, SysRoot, read_sysfs, sysfs_writable, write_sysfs

USER_SPACE_DRIVERS = ("uio_pci_generic", "vfio-pci")
NVME_CLASS = 0x010802

# Domain, bus, device (0x00-0x1f), function (0-7). The domain is at least four hex digits;
# Intel VMD puts its devices in domains such as 10000, so longer ones are accepted too.
_BDF = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")
_DISK = re.compile(r"nvme\d+n\d+")
# A native-multipath path device: nvme<subsystem>c<controller>n<namespace>; its block device
# node is the namespace head nvme<subsystem>n<namespace>.
_PATH_DISK = re.compile(r"nvme(\d+)c\d+n(\d+)")

_MODPROBE_HINT = {
    "vfio-pci": "modprobe vfio-pci (needs the IOMMU enabled)",
    "uio_pci_generic": "modprobe uio_pci_generic",
}


def _modprobe_hint(driver: str) -> str:
    return _MODPROBE_HINT.get(driver, f"modprobe {driver}")


def _unescape(field: str) -> str:
    """Mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _dev_name(path: str) -> str | None:
    """The kernel name of a /dev path (symlinks such as /dev/disk/by-uuid/... resolved)."""
    if not path.startswith("/dev/"):
        return None
    return os.path.basename(os.path.realpath(path))


def _rdev(path: str) -> str | None:
    """major:minor of a block device node, or None when the path is no block device here."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


class DeviceBindingKnob(Knob):
    """Which driver owns each NVMe controller; see the module docstring."""

    name = "device_binding"
    allowed = ("{'devices': ['DDDD:BB:DD.F', ...] (NVMe controllers, full PCI addresses), "
               "'driver': " + " | ".join(USER_SPACE_DRIVERS) + "}")

    def __init__(self, root: SysRoot | None = None, dev_dir: Path = Path("/dev")) -> None:
        super().__init__(root)
        # Device nodes for the O_EXCL check; tests point this at a folder without nodes.
        self.dev_dir = dev_dir
        self._managed: set[str] = set()

    # -- sysfs paths and reads -------------------------------------------------------------

    @property
    def pci(self) -> Path:
        return self.root.sys / "bus/pci"

    def _device(self, bdf: str) -> Path:
        return self.pci / "devices" / bdf

    def driver_of(self, bdf: str) -> str | None:
        """The driver bound to a device, or None."""
        link = self._device(bdf) / "driver"
        return os.path.basename(os.readlink(link)) if link.is_symlink() else None

    def _is_nvme(self, bdf: str) -> bool:
        try:
            return int(read_sysfs(self._device(bdf) / "class"), 16) == NVME_CLASS
        except (IolabError, ValueError):
            return False

    def nvme_devices(self) -> list[str]:
        """Every NVMe-class PCI device, whatever driver it has now."""
        devices = self.pci / "devices"
        if not devices.is_dir():
            return []
        return sorted(d.name for d in devices.iterdir() if self._is_nvme(d.name))

    # -- Knob interface --------------------------------------------------------------------

    def available(self, driver: str | None = None) -> tuple[bool, str]:
        """Whether devices can be bound here, to ``driver`` or else to either supported driver.

        Never loads a module: a missing driver is reported with the modprobe line to run.
        """
        if not (self.pci / "devices").is_dir():
            return False, f"no PCI bus in sysfs ({self.pci / 'devices'} is missing)"
        if not self.nvme_devices():
            return False, (f"no NVMe controller (PCI class 0x{NVME_CLASS:06x}) under "
                           f"{self.pci / 'devices'}")
        candidates = [driver] if driver else list(USER_SPACE_DRIVERS)
        loaded = [d for d in candidates if (self.pci / "drivers" / d).is_dir()]
        if not loaded:
            return False, ("driver not loaded: no " + " or ".join(
                str(self.pci / "drivers" / d) for d in candidates) + "; run "
                + " or ".join(_modprobe_hint(d) for d in candidates))
        # The bind file is root-only on a real sysfs, so this is also the "are we root" test.
        return sysfs_writable(self.pci / "drivers" / loaded[0] / "bind")

    def read(self) -> dict[str, str | None]:
        devices = sorted(self._managed) if self._managed else self.nvme_devices()
        return {bdf: self.driver_of(bdf) for bdf in devices}

    def validate(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict) or set(value) != {"devices", "driver"}:
            raise self._invalid(f"invalid value {value!r}: needs exactly the keys 'devices' "
                                f"and 'driver'")
        if value["driver"] not in USER_SPACE_DRIVERS:
            raise self._invalid(f"'driver' must be a user-space driver, got {value['driver']!r}")
        devices = value["devices"]
        if not isinstance(devices, list) or not devices:
            raise self._invalid(f"'devices' must be a non-empty list of PCI addresses, "
                                f"got {devices!r}")
        return {"devices": sorted({self._check_bdf(bdf) for bdf in devices}),
                "driver": value["driver"]}

    def _check_bdf(self, bdf: Any) -> str:
        # sysfs names use lower-case hex; an address copied from elsewhere may not.
        if not isinstance(bdf, str) or not _BDF.fullmatch(bdf.lower()):
            raise self._invalid(f"device {bdf!r} is not a full PCI address "
                                f"(domain:bus:device.function, e.g. 0000:4a:00.0)")
        return bdf.lower()

    def apply(self, value: Any) -> None:
        value = self.validate(value)
        ok, why = self.available(value["driver"])
        if not ok:
            raise IolabError(f"knob '{self.name}' cannot bind to {value['driver']} on this "
                             f"host: {why}")
        self._write(value)

    def _write(self, value: dict[str, Any]) -> None:
        driver = value["driver"]
        # Every device is checked before the first write, so a refusal changes nothing.
        self.check_devices(value["devices"])
        self._managed.update(value["devices"])
        for bdf in value["devices"]:
            if self.driver_of(bdf) != driver:
                self._bind(bdf, driver, override=driver)

    def matches(self, value: Any, state: Any) -> bool:
        value = self.validate(value)
        return all(state.get(bdf) == value["driver"] for bdf in value["devices"])

    def same_state(self, expected: Any, actual: Any) -> bool:
        # ``read`` covers only the devices this knob has bound once it has bound any; the
        # others were never touched, so only devices in both states are compared.
        return all(actual[bdf] == driver for bdf, driver in expected.items() if bdf in actual)

    def _restore(self, state: dict[str, str | None]) -> None:
        for bdf in state:
            self._check_bdf(bdf)
        moves = {bdf: driver for bdf, driver in state.items() if self.driver_of(bdf) != driver}
        # Giving a device back means unbinding it from whatever has it now, and that may be
        # the kernel's nvme driver with a filesystem mounted since: the same check applies.
        self.check_devices(list(moves))
        # A device unbound for a driver that is not there would be left with none.
        missing = sorted({driver for driver in moves.values()
                          if driver and not (self.pci / "drivers" / driver).is_dir()})
        if missing:
            raise IolabError(f"knob '{self.name}': cannot give devices back to "
                             f"{', '.join(missing)}: not loaded (no "
                             f"{self.pci / 'drivers' / missing[0]}); run "
                             f"'{_modprobe_hint(missing[0])}', then `iolab restore`")
        for bdf, driver in moves.items():
            self._bind(bdf, driver, override=None if driver in (None, "nvme") else driver)

    # -- safety ----------------------------------------------------------------------------

    def check_devices(self, devices: list[str]) -> None:
        """Raise naming every device that must not be unbound, and why; write nothing."""
        problems = []
        for bdf in devices:
            problems += [f"{bdf}: {reason}" for reason in self.refusals(bdf)]
        if problems:
            raise IolabError(f"knob '{self.name}': refusing to touch any device: "
                             + "; ".join(problems))

    def refusals(self, bdf: str) -> list[str]:
        """Why ``bdf`` must not be taken from its driver; empty when it is free."""
        if not _BDF.fullmatch(bdf):
            return ["not a full PCI address (domain:bus:device.function)"]
        if not self._device(bdf).is_dir():
            return [f"no such PCI device ({self._device(bdf)} is missing)"]
        if not self._is_nvme(bdf):
            return [f"not an NVMe controller (PCI class is not 0x{NVME_CLASS:06x})"]
        try:
            blocks = self._block_devices(bdf)
            mounts = self._mounts()
            swaps = self._swaps()
        except (IolabError, OSError) as exc:
            return [f"cannot tell whether it is in use ({exc})"]
        return self._in_use(blocks, mounts, swaps)

    def block_refusals(self, path: str) -> list[str]:
        """Why the block device at ``path`` must not be benchmarked (it, or a partition of
        it, holds the root or another mounted filesystem, swap, or a holder); empty for a
        free device and for anything that is not a block device (a regular file)."""
        devno = _rdev(path)
        if devno is None:
            return []
        name = Path(os.path.realpath(path)).name
        folder = self.root.sys / "class/block" / name
        if not folder.is_dir():
            return [f"{path}: no {folder} to tell whether it is in use"]
        try:
            blocks = [(name, folder)] + [(p.name, p) for p in sorted(folder.iterdir())
                                         if (p / "partition").exists()]
            return [f"{path}: {reason}" for reason in
                    self._in_use(blocks, self._mounts(), self._swaps())]
        except (IolabError, OSError) as exc:
            return [f"{path}: cannot tell whether it is in use ({exc})"]

    def _in_use(self, blocks: list[tuple[str, Path]], mounts: list[tuple[str, str, str]],
                swaps: list[str]) -> list[str]:
        reasons = []
        for name, folder in blocks:
            try:
                devno = read_sysfs(folder / "dev")
            except IolabError as exc:
                reasons.append(f"cannot tell whether {name} is in use ({exc})")
                continue
            what = f"{name} ({devno})"
            for dev, mountpoint, source in mounts:
                # The source name is a second chance for filesystems whose mountinfo shows
                # an anonymous device number (btrfs reads 0:NN).
                if dev == devno or _dev_name(source) == name:
                    reasons.append(f"{what} holds the root filesystem /" if mountpoint == "/"
                                   else f"{what} is mounted on {mountpoint}")
            for swap in swaps:
                if _dev_name(swap) == name or _rdev(swap) == devno:
                    reasons.append(f"{what} is active swap ({swap})")
            holders = sorted(h.name for h in (folder / "holders").glob("*"))
            if holders:
                reasons.append(f"{what} is held by {', '.join(holders)} "
                               f"(device-mapper, LVM or md RAID)")
            held = self._exclusive_holder(name, devno)
            if held:
                reasons.append(f"{what} {held}")
        # A device mounted twice at the same place (overmounts) is named once.
        return list(dict.fromkeys(reasons))

    def _block_devices(self, bdf: str) -> list[tuple[str, Path]]:
        """(name, sysfs folder) of every namespace of the controller and of its partitions."""
        disks: dict[str, Path] = {}
        for ctrl in sorted((self._device(bdf) / "nvme").glob("nvme*")):
            for entry in sorted(ctrl.iterdir()):
                if _DISK.fullmatch(entry.name):
                    disks[entry.name] = entry
                elif path := _PATH_DISK.fullmatch(entry.name):
                    head = f"nvme{path.group(1)}n{path.group(2)}"
                    folder = self.root.sys / "class/block" / head
                    if not folder.is_dir():
                        raise IolabError(f"namespace path {entry.name} has no head {folder}")
                    disks[head] = folder
        blocks = []
        for name, folder in disks.items():
            blocks.append((name, folder))
            blocks += [(p.name, p) for p in sorted(folder.iterdir())
                       if (p / "partition").exists()]
        return blocks

    def _mounts(self) -> list[tuple[str, str, str]]:
        """(major:minor, mount point, source) of every line of /proc/self/mountinfo."""
        path = self.root.proc / "self/mountinfo"
        mounts = []
        for number, line in enumerate(read_sysfs(path).splitlines(), 1):
            fields = line.split()
            # Optional fields vary in number; " - " separates them from fstype and source.
            if len(fields) < 10 or "-" not in fields[6:]:
                raise IolabError(f"{path} line {number} is not a mountinfo line: {line!r}")
            after = fields.index("-", 6)
            source = _unescape(fields[after + 2]) if len(fields) > after + 2 else ""
            mounts.append((fields[2], _unescape(fields[4]), source))
        return mounts

    def _swaps(self) -> list[str]:
        path = self.root.proc / "swaps"
        # A kernel built without swap has no /proc/swaps, and then nothing can be swap.
        if not path.exists():
            return []
        return [_unescape(line.split()[0]) for line in read_sysfs(path).splitlines()[1:]
                if line.strip()]

    def _exclusive_holder(self, name: str, devno: str) -> str | None:
        """Why the O_EXCL open of /dev/<name> says the device is not free; None if it is."""
        node = self.dev_dir / name
        # Only a node that really is this device is opened; fake trees have none.
        if _rdev(str(node)) != devno:
            return None
        try:
            fd = os.open(node, os.O_RDONLY | os.O_EXCL)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return ("is held open exclusively by a kernel user (a mounted filesystem, "
                        "swap, RAID/LVM or a ZFS pool)")
            return f"cannot be checked: opening {node} failed ({exc.strerror})"
        os.close(fd)
        return None

    # -- writes ----------------------------------------------------------------------------

    def _bind(self, bdf: str, driver: str | None, override: str | None) -> None:
        """Unbind ``bdf``, set or clear its driver_override, bind it to ``driver``, read back."""
        device = self._device(bdf)
        if self.driver_of(bdf) is not None:
            write_sysfs(device / "driver/unbind", bdf)
        # An empty write clears the override (reading it then gives "(null)").
        write_sysfs(device / "driver_override", override or "")
        if driver is None:
            return
        bind = self.pci / "drivers" / driver / "bind"
        write_sysfs(bind, bdf)
        now = self.driver_of(bdf)
        if now != driver:
            raise IolabError(f"knob '{self.name}': {bdf} has driver {now!r} after writing it "
                             f"to {bind}, not {driver!r}; the kernel log (dmesg) says why")


def check_free(paths: list[str], key: str = "devices", root: SysRoot | None = None) -> None:
    """Refuse, naming each and why, block devices among ``paths`` that are in use (the root
    device, a mounted filesystem, swap, a holder): InputError naming ``key``, the params key
    that listed them. Files and free devices pass. For the tools that read block devices
    directly (bdevperf's AIO and io_uring bdevs, xnvmeperf's *_bdev back ends)."""
    knob = DeviceBindingKnob(root)
    problems = [reason for path in paths for reason in knob.block_refusals(path)]
    if problems:
        raise InputError(None, key, "refusing to benchmark a block device in use: "
                         + "; ".join(problems),
                         allowed="files, or whole block devices that hold no mounted "
                                 "filesystem, no swap and no holder (never the root device)")
