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

Responsible for: the snapshots and their metrics, and reading ``irqs.json`` back checked
(:func:`read_placement`). Not responsible for: the text format
(``iolab.parsers.interrupts``) or which vectors a device has (``iolab.host.irqs``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from iolab.collectors.hostrec import host_cpus
from iolab.errors import ParseError
from iolab.parsers import (CPU_ID_MOST, CPU_IDS_ALLOWED, is_cpu_ids, record_object,
                           record_value)
from iolab.parsers.interrupts import check_rates, delta, parse_interrupts
from iolab.tools.base import Snapshots, check_brackets, run_window, stamped

PLACEMENT_FILE = "irqs.json"
IPI_ROWS = {"res_ipis": "RES", "cal_ipis": "CAL"}


class Interrupts(Snapshots):
    name = "interrupts"
    source = "interrupts"

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        run_dir = Path(run_dir)
        placement = run_dir / PLACEMENT_FILE
        queues = ([str(v["irq"]) for v in read_placement(run_dir)["vectors"] if v["queue"]]
                  if placement.exists() else None)
        return parse_snapshots((run_dir / "interrupts.before").read_text(),
                               (run_dir / "interrupts.after").read_text(), queues,
                               str(run_dir / "interrupts"), run_window(run_dir, window),
                               host_cpus(run_dir))


IRQ_MOST = 2**22 - 1  # far above any kernel's interrupt count (NR_IRQS)
# each key of a stored vector (iolab.host.irqs.Vector), its check and what that allows: those
# this collector counts by, and those the rest of the layout (an experiment's row) shows
COUNTED_KEYS = {
    "irq": (lambda v: type(v) is int and 0 <= v <= IRQ_MOST, f"an IRQ number 0 to {IRQ_MOST}"),
    "queue": (lambda v: isinstance(v, bool), "true or false"),
}
LAYOUT_KEYS = {
    "description": (lambda v: isinstance(v, str) and v.strip() != "",
                    "the vector's text from /proc/interrupts"),
    "cpus": (is_cpu_ids, CPU_IDS_ALLOWED),
    "allowed": (is_cpu_ids, CPU_IDS_ALLOWED),
}


def read_placement(run_dir: Path, layout: bool = False) -> dict[str, Any]:
    """``irqs.json`` (what :func:`iolab.host.irqs.placement` found, stored as a run input),
    its vectors' ``irq`` and ``queue`` checked (with ``layout``, every other key a row shows
    too): a cut-off or altered file fails the run naming the file and the key, never a
    KeyError that ends the campaign, and no IRQ is counted twice. The object is returned as
    stored (its vectors are a column of the tidy table)."""
    path = Path(run_dir) / PLACEMENT_FILE
    source = str(path)
    found = record_object(path.read_text(), source)
    vectors = record_value(found, "vectors", source,
                           lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
                           "a list of objects, one per interrupt vector")
    checks = {**COUNTED_KEYS, **(LAYOUT_KEYS if layout else {})}
    for i, vector in enumerate(vectors):
        named = {f"vectors[{i}].{key}": value for key, value in vector.items()}
        for key, (usable, allowed) in checks.items():
            record_value(named, f"vectors[{i}].{key}", source, usable, allowed)
    irqs = [v["irq"] for v in vectors]
    if len(set(irqs)) != len(irqs):
        raise ParseError(source, f"vectors: an IRQ is listed twice (IRQs {irqs}); discovery "
                                 "lists each once")
    if layout:
        for key in ("irq_cpus", "other_cpus"):
            record_value(found, key, source, is_cpu_ids, CPU_IDS_ALLOWED)
        record_value(found, "numa_node", source,
                     lambda v: v is None or (type(v) is int and 0 <= v <= CPU_ID_MOST),
                     f"null or a NUMA node 0 to {CPU_ID_MOST}")
    return found


def _stamped(text: str, source: str) -> tuple[int, dict[str, Any]]:
    stamp, rest = stamped(text, source)
    return stamp, parse_interrupts(rest, source)


def _per_cpu(counts: dict[int, int]) -> str:
    return json.dumps({str(cpu): n for cpu, n in sorted(counts.items())})


def parse_snapshots(before: str, after: str, queue_irqs: list[str] | None,
                    source: str = "interrupts",
                    window: tuple[int, int] | None = None,
                    host: int | None = None) -> dict[str, Any]:
    """The metrics of two stamped snapshots (see the module docstring); ParseError when they
    are out of order or do not bracket the run's ``window``
    (:func:`iolab.tools.base.check_brackets`), name a CPU the host record's ``host`` logical
    CPUs do not have, or hold a count no CPU takes in the time between them
    (:func:`iolab.parsers.interrupts.check_rates`)."""
    t0, a = _stamped(before, f"{source}.before")
    t1, b = _stamped(after, f"{source}.after")
    check_brackets(t0, t1, window, source)
    if host is not None and b["cpus"] and max(b["cpus"]) >= host:
        raise ParseError(source, f"the snapshots name CPU{max(b['cpus'])}, on a host whose "
                                 f"record has {host} logical CPUs (allowed: CPU0 to "
                                 f"CPU{host - 1})")
    change = delta(a, b, source)
    check_rates(change, (t1 - t0) / 1e9, len(b["cpus"]), source)
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
