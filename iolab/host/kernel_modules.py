"""Knobs that reload a kernel module or stop a service: NVMe poll queues, and irqbalance.

``nvme_poll_queues`` reloads the ``nvme`` module with ``poll_queues=N``: N of each
controller's I/O queues become polled queues without an interrupt, and the interrupt-driven
queues that remain are spread over fewer CPUs (the lab notes' route to CPUs that take no NVMe
interrupts; the driver has no parameter for affinities). Reloading takes every NVMe
namespace away for a moment, so before anything runs the knob refuses when any controller
bound to ``nvme`` has a namespace (or partition) that holds the root file system, any
mounted file system or active swap, or is held by device-mapper or md, with the same checks
as device binding (``iolab.host.binding``). It restores by reloading with the previous value.

``irqbalance`` stops the irqbalance service for a campaign (it would move the interrupts the
experiment placed) and starts it again afterwards, through ``systemctl``; its state is whether
an ``irqbalance`` process runs (``/proc/<pid>/comm``).

Commands are argv lists run through ``run`` (tests give a fake); each knob reads back what
the kernel or service reports.

Responsible for: those two knobs, their refusals and their commands. Not responsible for:
journaling (``iolab.host.journal``) or choosing values (the experiments).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from iolab.errors import IolabError
from iolab.host.binding import DeviceBindingKnob
from iolab.host.knobs import Knob, SysRoot, read_sysfs

Runner = Callable[[list[str]], subprocess.CompletedProcess]
SETTLE_S = 30.0  # how long the controllers may take to come back after a reload


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


class NvmePollQueuesKnob(Knob):
    name = "nvme_poll_queues"
    allowed = "a whole number of poll queues per controller, 0 or more"

    def __init__(self, root: SysRoot | None = None, run: Runner = _run,
                 is_root: Callable[[], bool] = lambda: os.geteuid() == 0) -> None:
        super().__init__(root)
        self.run = run
        self.is_root = is_root

    @property
    def parameter(self) -> Path:
        return self.root.sys / "module/nvme/parameters/poll_queues"

    def controllers(self) -> list[str]:
        """PCI addresses of the controllers bound to the nvme driver."""
        driver = self.root.sys / "bus/pci/drivers/nvme"
        return sorted(p.name for p in driver.iterdir() if ":" in p.name) if driver.is_dir() else []

    def refusals(self) -> list[str]:
        binding = DeviceBindingKnob(self.root)
        return [f"{bdf}: {why}" for bdf in self.controllers() for why in binding.refusals(bdf)]

    def available(self) -> tuple[bool, str]:
        if not self.parameter.exists():
            return False, f"the nvme module is not loaded ({self.parameter} is missing)"
        if not self.is_root():
            return False, "reloading the nvme module needs root"
        if self.run is _run and shutil.which("modprobe") is None:
            return False, "modprobe is not on PATH"
        refused = self.refusals()
        if refused:
            return False, ("reloading nvme would take away devices in use: " + "; ".join(refused))
        return True, ""

    def read(self) -> int:
        return int(read_sysfs(self.parameter))

    def validate(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._invalid(f"invalid value {value!r}")
        return value

    def _write(self, value: int) -> None:
        before = self.controllers()
        for argv in (["modprobe", "-r", "nvme"], ["modprobe", "nvme", f"poll_queues={value}"]):
            done = self.run(argv)
            if done.returncode != 0:
                raise IolabError(f"knob '{self.name}': {' '.join(argv)} failed: "
                                 f"{(done.stderr or done.stdout).strip()}")
        # the controllers come back asynchronously; a campaign must not start without them
        deadline = time.monotonic() + SETTLE_S
        while set(self.controllers()) != set(before) and time.monotonic() < deadline:
            time.sleep(0.1)
        missing = sorted(set(before) - set(self.controllers()))
        if missing:
            raise IolabError(f"knob '{self.name}': controller(s) {missing} did not come back "
                             f"within {SETTLE_S:.0f} s of reloading nvme")


class IrqbalanceKnob(Knob):
    name = "irqbalance"
    allowed = "'running' or 'stopped'"

    def __init__(self, root: SysRoot | None = None, run: Runner = _run) -> None:
        super().__init__(root)
        self.run = run

    def available(self) -> tuple[bool, str]:
        if self.run is _run and shutil.which("systemctl") is None:
            return False, "systemctl is not on PATH (no systemd)"
        if not self._loaded():
            return False, "the irqbalance service is not installed"
        return True, ""

    def _loaded(self) -> bool:
        """Whether systemd knows the irqbalance service."""
        try:
            done = self.run(["systemctl", "show", "--property=LoadState", "irqbalance"])
        except OSError:  # no systemctl at all
            return False
        fields = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        return done.returncode == 0 and fields.get("LoadState") == "loaded"

    def read(self) -> str:
        for comm in self.root.proc.glob("[0-9]*/comm"):
            try:
                if comm.read_text().strip() == "irqbalance":
                    return "running"
            except OSError:  # the process ended while we looked
                continue
        return "stopped"

    def validate(self, value: Any) -> str:
        if value not in ("running", "stopped"):
            raise self._invalid(f"invalid value {value!r}")
        return value

    def _write(self, value: str) -> None:
        argv = ["systemctl", "start" if value == "running" else "stop", "irqbalance"]
        done = self.run(argv)
        if done.returncode != 0:
            raise IolabError(f"knob 'irqbalance': {' '.join(argv)} failed: "
                             f"{(done.stderr or done.stdout).strip()}")
