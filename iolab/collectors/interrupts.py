"""The ``/proc/interrupts`` collector: interrupts and IPIs per CPU around one run.

It snapshots ``/proc/interrupts`` just before and just after the driver
(``interrupts.before``, ``interrupts.after``, each with a wall-clock stamp), so that every run
counts its device's interrupts per CPU even where bpftrace is absent. Which vectors are the
device's is read from ``irqs.json`` in the run folder (the discovery result an experiment
stores as a run input, see :func:`iolab.host.irqs.placement`); without it only the IPI rows
are counted.

Metrics (per CPU as a JSON object ``{"cpu": count}``, and totals):
``device_irqs`` and ``device_irqs_total`` (the device's queue vectors), ``res_ipis`` and
``res_ipis_total`` (rescheduling IPIs, ``RES``), ``cal_ipis`` and ``cal_ipis_total``
(function-call IPIs, ``CAL``), ``window_s`` (between the snapshots: the driver's whole
lifetime, not only the measurement window).

Responsible for: the snapshots and their metrics. Not responsible for: the text format
(``iolab.parsers.interrupts``) or which vectors a device has (``iolab.host.irqs``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iolab.errors import ParseError
from iolab.parsers.interrupts import delta, parse_interrupts
from iolab.tools.base import Snapshots, stamped

PLACEMENT_FILE = "irqs.json"
IPI_ROWS = {"res_ipis": "RES", "cal_ipis": "CAL"}


class Interrupts(Snapshots):
    name = "interrupts"
    source = "interrupts"

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        run_dir = Path(run_dir)
        placement = run_dir / PLACEMENT_FILE
        queues = ([str(v["irq"]) for v in json.loads(placement.read_text())["vectors"] if v["queue"]]
                  if placement.exists() else None)
        return parse_snapshots((run_dir / "interrupts.before").read_text(),
                               (run_dir / "interrupts.after").read_text(), queues,
                               str(run_dir / "interrupts"))


def _stamped(text: str, source: str) -> tuple[int, dict[str, Any]]:
    stamp, rest = stamped(text, source)
    return stamp, parse_interrupts(rest, source)


def _per_cpu(counts: dict[int, int]) -> str:
    return json.dumps({str(cpu): n for cpu, n in sorted(counts.items())})


def parse_snapshots(before: str, after: str, queue_irqs: list[str] | None,
                    source: str = "interrupts") -> dict[str, Any]:
    """The metrics of two stamped snapshots (see the module docstring)."""
    t0, a = _stamped(before, f"{source}.before")
    t1, b = _stamped(after, f"{source}.after")
    change = delta(a, b, source)
    out: dict[str, Any] = {"window_s": (t1 - t0) / 1e9}
    for metric, row in IPI_ROWS.items():
        counts = change.get(row)
        out[metric] = _per_cpu(counts) if counts is not None else None
        out[f"{metric}_total"] = sum(counts.values()) if counts is not None else None
    if queue_irqs is None:
        out["device_irqs"] = out["device_irqs_total"] = None
        return out
    missing = [irq for irq in queue_irqs if irq not in change]
    if missing:
        raise ParseError(source, f"IRQ(s) {', '.join(missing)} of the device are not in both "
                         "snapshots")
    device = {cpu: sum(change[irq][cpu] for irq in queue_irqs) for cpu in b["cpus"]}
    out["device_irqs"] = _per_cpu(device)
    out["device_irqs_total"] = sum(device.values())
    return out
