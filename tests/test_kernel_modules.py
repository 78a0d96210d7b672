"""Knobs that reload the nvme module (poll queues) or stop irqbalance: commands as argv lists
through a fake runner, read-back, journaled restore, and the refusals that come before any
command runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from iolab.errors import InputError, IolabError
from iolab.host.journal import KnobSession
from iolab.host.kernel_modules import IrqbalanceKnob, NvmePollQueuesKnob
from iolab.host.knobs import SysRoot

BDF = "0000:c1:00.0"


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


class FakeModules:
    """A host with one NVMe controller under the nvme driver, a mountinfo, and a fake
    ``modprobe`` / ``systemctl`` that change the fake tree as the real ones would."""

    def __init__(self, tmp_path: Path, poll_queues: int = 0):
        self.root = SysRoot(sys=tmp_path / "sys", proc=tmp_path / "proc")
        self.calls: list[list[str]] = []
        _put(self.root.proc / "4242/comm", "irqbalance")
        self.fail: str | None = None
        _put(self.param, str(poll_queues))
        dev = self.root.sys / "bus/pci/devices" / BDF
        _put(dev / "class", "0x010802")
        _put(dev / "nvme/nvme0/nvme0n1/dev", "259:0")
        (dev / "nvme/nvme0/nvme0n1/holders").mkdir(parents=True)
        (self.root.sys / "bus/pci/drivers/nvme" / BDF).mkdir(parents=True)
        self.mountinfo = ["27 1 254:0 / / rw,relatime - ext4 /dev/vda rw"]
        self._sync()

    @property
    def param(self) -> Path:
        return self.root.sys / "module/nvme/parameters/poll_queues"

    def _sync(self) -> None:
        _put(self.root.proc / "self/mountinfo", "\n".join(self.mountinfo))
        _put(self.root.proc / "swaps", "Filename\tType\tSize\tUsed\tPriority")

    def mount(self, devno: str, where: str) -> None:
        self.mountinfo.append(f"40 27 {devno} / {where} rw shared:1 - ext4 /dev/nvme0n1 rw")
        self._sync()

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        self.calls.append(argv)
        if self.fail and " ".join(argv).startswith(self.fail):
            return subprocess.CompletedProcess(argv, 1, "", "modprobe: FATAL: in use")
        if argv[:2] == ["modprobe", "-r"]:
            self.param.unlink()
        elif argv[0] == "modprobe":
            _put(self.param, argv[2].split("=")[1] if len(argv) > 2 else "0")
        elif argv[:2] == ["systemctl", "show"]:
            return subprocess.CompletedProcess(argv, 0, "LoadState=loaded\n", "")
        elif argv[0] == "systemctl":  # the service's process comes and goes
            comm = self.root.proc / "4242/comm"
            if argv[1] == "start":
                _put(comm, "irqbalance")
            else:
                comm.unlink()
        return subprocess.CompletedProcess(argv, 0, "", "")

    def poll_knob(self, is_root: bool = True) -> NvmePollQueuesKnob:
        return NvmePollQueuesKnob(self.root, run=self.run, is_root=lambda: is_root)


@pytest.fixture
def host(tmp_path) -> FakeModules:
    return FakeModules(tmp_path)


def test_a_reload_sets_poll_queues_and_a_session_restores_the_old_value(host, tmp_path):
    knob = host.poll_knob()
    assert knob.available() == (True, "") and knob.read() == 0
    with KnobSession({knob.name: knob}, tmp_path / "journal.json") as session:
        record = session.set("nvme_poll_queues", 20)
        assert record == {"requested": 20, "before": 0, "after": 20, "matches": True}
    assert knob.read() == 0
    assert host.calls == [["modprobe", "-r", "nvme"], ["modprobe", "nvme", "poll_queues=20"],
                          ["modprobe", "-r", "nvme"], ["modprobe", "nvme", "poll_queues=0"]]
    assert not (tmp_path / "journal.json").exists()


def test_a_mounted_namespace_refuses_the_reload_before_any_command(host):
    host.mount("259:0", "/data")
    knob = host.poll_knob()
    ok, why = knob.available()
    assert not ok and why == ("reloading nvme would take away devices in use: "
                              f"{BDF}: nvme0n1 (259:0) is mounted on /data")
    with pytest.raises(IolabError, match="cannot be set on this host: reloading nvme would"):
        knob.apply(20)
    assert host.calls == []


def test_the_root_device_unloaded_module_and_no_root_are_refused(host, tmp_path):
    host.mountinfo = ["27 1 259:0 / / rw,relatime - ext4 /dev/root rw"]
    host._sync()
    assert "nvme0n1 (259:0) holds the root filesystem /" in host.poll_knob().available()[1]
    assert host.poll_knob(is_root=False).available() == (False, "reloading the nvme module "
                                                                "needs root")
    other = FakeModules(tmp_path / "other")
    other.param.unlink()
    assert other.poll_knob().available()[1].startswith("the nvme module is not loaded")


def test_a_failing_modprobe_and_bad_values_are_named(host):
    knob = host.poll_knob()
    host.fail = "modprobe -r"
    with pytest.raises(IolabError, match="modprobe -r nvme failed: modprobe: FATAL: in use"):
        knob.apply(4)
    for bad in (-1, "20", True, 2.5):
        with pytest.raises(InputError, match="key 'nvme_poll_queues': invalid value"):
            knob.validate(bad)


def test_irqbalance_is_stopped_and_started_again(host, tmp_path):
    knob = IrqbalanceKnob(host.root, run=host.run)
    assert knob.available() == (True, "") and knob.read() == "running"
    with KnobSession({knob.name: knob}, tmp_path / "journal.json") as session:
        assert session.set("irqbalance", "stopped")["after"] == "stopped"
    assert knob.read() == "running"
    assert ["systemctl", "stop", "irqbalance"] in host.calls
    assert ["systemctl", "start", "irqbalance"] in host.calls
    with pytest.raises(InputError, match="allowed: 'running' or 'stopped'"):
        knob.validate("off")


def test_irqbalance_without_the_service(tmp_path):
    def missing(argv):
        return subprocess.CompletedProcess(argv, 0, "LoadState=not-found\n", "")

    knob = IrqbalanceKnob(SysRoot(sys=tmp_path, proc=tmp_path), run=missing)
    assert knob.available() == (False, "the irqbalance service is not installed")
    assert knob.read() == "stopped"
