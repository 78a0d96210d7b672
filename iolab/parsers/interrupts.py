"""Parser of ``/proc/interrupts``: per-CPU interrupt counts by row, and the change between two
snapshots.

The first line names the CPUs (``CPU0 CPU1 ...``; offline CPUs are left out, so the ids need
not be contiguous). Each further line is ``<row>: <count per CPU> <description>``, where a
row is an IRQ number (its description: the chip, the hardware IRQ, the trigger type and the
handlers' names, e.g. ``PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0``) or a mnemonic of an
architecture interrupt (``RES`` rescheduling IPIs, ``CAL`` function-call IPIs, ``LOC`` local
timer, ``NMI``, ...). Some mnemonic rows have one count for the whole system instead of one
per CPU (``ERR``, ``MIS``): they are kept with ``counts`` of length one and ``per_cpu`` False.

Result of :func:`parse_interrupts`: ``{"cpus": [0, 1], "rows": {"36": {"counts": [0, 9205310],
"description": "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0", "per_cpu": True}, "RES": {...}}}``.

Responsible for: the text format, :func:`delta`, and the bound on how many interrupts a CPU
takes in a time (:func:`check_rates`). Not responsible for: which rows belong to
a device (``iolab.host.irqs``) or reading the file (the collector does).
"""

from __future__ import annotations

from typing import Any

from iolab.errors import ParseError, excerpt, shortened
from iolab.parsers import int_within_float, is_digits

SYSTEM_WIDE = ("ERR", "MIS")  # rows with one count for the whole system

# The most interrupts (of one row, or IPIs, or traced events of one kind) one CPU takes in a
# second: one every 100 ns, beyond what any CPU's interrupt entry and exit allow (the
# committed runs reach 5,800 a second). A count above it over the time between two readings
# is no count of that time (10^15 function-call IPIs in 4 s was stored). RATE_SLACK_S is
# added to the time: the readings' own stamps are taken a moment from the counts.
EVENTS_PER_CPU_S = 10**7
RATE_SLACK_S = 1.0


def parse_interrupts(text: str, source: str = "/proc/interrupts") -> dict[str, Any]:
    lines = text.splitlines()
    if not lines or not lines[0].split():
        raise ParseError(source, "empty: no CPU header line")
    header = lines[0].split()
    if not all(h.startswith("CPU") and is_digits(h[3:]) for h in header):
        raise ParseError(source, f"first line is not a CPU header: "
                                 f"{excerpt(lines[0].strip()[:60])}")
    cpus = [int_within_float(h[3:], "CPU header", source) for h in header]
    twice = next((cpu for n, cpu in enumerate(cpus) if cpu in cpus[:n]), None)
    if twice is not None:  # the per-CPU counts are keyed by CPU: the last column was taken
        raise ParseError(source, f"the CPU header names CPU{twice} twice (allowed: each CPU "
                                 "once)")
    rows: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        name, colon, rest = line.partition(":")
        name = name.strip()
        if not colon or not name or " " in name:
            raise ParseError(source, f"line {number}: no '<row>:' at its start: "
                                     f"{excerpt(line.strip()[:60])}")
        fields = rest.split()
        counts = []
        for field in fields[:len(cpus) if name not in SYSTEM_WIDE else 1]:
            if not is_digits(field):
                break
            counts.append(int_within_float(field, f"line {number} ({name})", source))
        if not counts:
            raise ParseError(source, f"line {number} ({shortened(name)}): no count "
                                     "(allowed: whole numbers, digits 0-9)")
        if name in rows:
            raise ParseError(source, f"line {number}: row {shortened(name)} appears twice")
        per_cpu = name not in SYSTEM_WIDE
        if per_cpu and len(counts) != len(cpus):
            raise ParseError(source, f"line {number} ({shortened(name)}): {len(counts)} counts for "
                             f"{len(cpus)} CPUs (cut off?)")
        rows[name] = {"counts": counts, "description": " ".join(fields[len(counts):]),
                      "per_cpu": per_cpu}
    return {"cpus": cpus, "rows": rows}


def delta(before: dict[str, Any], after: dict[str, Any], source: str = "interrupts") \
        -> dict[str, dict[int, int]]:
    """Interrupts per row and CPU between two snapshots: ``{row: {cpu: count}}``.

    IRQ rows present in both snapshots only (a device's vector may be allocated or freed
    while the run runs); a system-wide row has the single key -1. An error (the difference
    would be no count of interrupts, or a missing one would read as a count never taken): a
    count that went down (a CPU went offline and came back), an architecture row (``NMI``,
    ``RES``, …, any row not an IRQ number) in one snapshot only, since the kernel prints each
    of them in every snapshot and they come last (so a snapshot cut off at a line boundary
    lacks them), or a row of another number of counts in each.
    """
    if before["cpus"] != after["cpus"]:
        raise ParseError(source, f"the CPUs changed between the snapshots "
                         f"({excerpt(before['cpus'])} -> {excerpt(after['cpus'])})")
    _check_arch_rows(before, after, source)
    out: dict[str, dict[int, int]] = {}
    for name, row in after["rows"].items():
        old = before["rows"].get(name)
        if old is None:
            continue
        if len(old["counts"]) != len(row["counts"]):
            raise ParseError(source, f"row {shortened(name)} has {len(old['counts'])} counts "
                             f"in {source}.before and {len(row['counts'])} in {source}.after "
                             "(allowed: the same number in both)")
        keys = after["cpus"] if row["per_cpu"] else [-1]
        diff = {cpu: b - a for cpu, a, b in zip(keys, old["counts"], row["counts"])}
        if any(v < 0 for v in diff.values()):
            raise ParseError(source, f"row {shortened(name)}: a count went down between the "
                             f"snapshots")
        out[name] = diff
    return out


def _check_arch_rows(before: dict[str, Any], after: dict[str, Any], source: str) -> None:
    """ParseError naming the snapshot and the row when an architecture row (one not an IRQ
    number) is in one snapshot only: the other is cut off, or is not of the same kernel."""
    for (has, lacks), (rows, other) in {("before", "after"): (before, after),
                                        ("after", "before"): (after, before)}.items():
        for name in rows["rows"]:
            if name not in other["rows"] and not is_digits(name):
                raise ParseError(f"{source}.{lacks}", f"has no row {shortened(name)}, which "
                                 f"{source}.{has} has (cut off? the kernel prints every "
                                 "architecture row in each snapshot)")


def most_events(seconds: float, cpus: int = 1) -> int:
    """The most events ``cpus`` CPUs take in ``seconds`` (:data:`EVENTS_PER_CPU_S`, with
    :data:`RATE_SLACK_S` added to the time)."""
    return int(EVENTS_PER_CPU_S * cpus * (max(0.0, seconds) + RATE_SLACK_S))


def check_rates(change: dict[str, dict[int, int]], seconds: float, cpus: int,
                source: str) -> None:
    """ParseError when a count of :func:`delta` is more than a CPU takes in ``seconds``
    (:func:`most_events`; a system-wide row, key -1, by all ``cpus``)."""
    for name, counts in change.items():
        for cpu, n in counts.items():
            most = most_events(seconds, cpus if cpu == -1 else 1)
            if n > most:
                where = "in all" if cpu == -1 else f"on CPU{cpu}"
                raise ParseError(source, f"row {shortened(name)}: {n} interrupts {where} in "
                                         f"{seconds:g} s between the snapshots (allowed: at most "
                                         f"{most}, {EVENTS_PER_CPU_S:.0e} a CPU a second and "
                                         f"{RATE_SLACK_S:g} s)")
