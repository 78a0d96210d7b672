"""The set of knobs this package controls, in the order a run applies them.

Responsible for: naming every knob class once and building them for one host root.
Not responsible for: what any knob does (``iolab.host.knobs``, ``iolab.host.binding``).
"""

from __future__ import annotations

from iolab.host.binding import DeviceBindingKnob
from iolab.host.hugepages import HugepagesKnob
from iolab.host.kernel_modules import IrqbalanceKnob, NvmePollQueuesKnob
from iolab.host.knobs import (GovernorKnob, IrqAffinityKnob, Knob, SmtKnob, SysRoot, ThpDefragKnob,
                              ThpKnob, TurboKnob)

# SMT first because it decides which CPUs are online, and the per-CPU knobs (governor, IRQ
# affinity) can only name online CPUs. irqbalance is stopped, and the nvme module reloaded
# (which creates its interrupts anew), before any interrupt affinity is written. A session
# restores in reverse, so per-CPU settings go back while their CPUs are still online. Devices
# are bound last and given back first; the hugepages SPDK's user-space drivers take are reserved
# just before.
KNOB_CLASSES: tuple[type[Knob], ...] = (
    SmtKnob,
    ThpKnob,
    ThpDefragKnob,
    TurboKnob,
    GovernorKnob,
    IrqbalanceKnob,
    NvmePollQueuesKnob,
    IrqAffinityKnob,
    HugepagesKnob,
    DeviceBindingKnob,
)


def make_knobs(root: SysRoot | None = None) -> dict[str, Knob]:
    """Every knob by name, working under ``root`` (the real /sys and /proc by default)."""
    root = root or SysRoot()
    return {cls.name: cls(root) for cls in KNOB_CLASSES}
