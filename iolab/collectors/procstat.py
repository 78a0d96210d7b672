"""The ``/proc/stat`` collector: host CPU use around one run.

Responsible for: snapshots of ``/proc/stat`` with a wall-clock stamp just before and just
after the driver (``procstat.before``, ``procstat.after``) and their pure parser.
Not responsible for: CPU time inside the tool's measurement window (``iolab.collectors.proctree``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.errors import ParseError, excerpt, shortened
from iolab.parsers import int_within_float, is_digits
from iolab.tools.base import Snapshots, check_brackets, run_window, stamped


class ProcStat(Snapshots):
    """Snapshots of ``/proc/stat`` with a wall-clock stamp, just before and just after the driver.

    The delta covers the driver's whole lifetime (set-up, ramp and measurement), so it is
    reported as host CPU use *around* the run, not inside the tool's measurement window.
    """

    name = "procstat"
    source = "stat"

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        before, after = Path(run_dir) / "procstat.before", Path(run_dir) / "procstat.after"
        return parse_procstat(before.read_text(), after.read_text(), str(Path(run_dir) / "procstat"),
                              run_window(run_dir, window))


FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
          "guest_nice")  # of a cpu line, in order (proc(5))
IOWAIT = FIELDS.index("iowait")


def _cpu_lines(text: str, source: str) -> tuple[int, dict[str, list[int]]]:
    stamp, rest = stamped(text, source)
    cpus = {}
    for number, line in enumerate(rest.splitlines(), 2):
        if line.startswith("cpu"):
            name, *vals = line.split()
            if not all(is_digits(v) for v in vals):
                raise ParseError(source, f"line {number} ({shortened(name)}): expected whole "
                                         f"numbers of ticks (digits 0-9), got {excerpt(line)}")
            cpus[name] = [int_within_float(v, f"line {number} ({shortened(name)})", source)
                          for v in vals]
    if "cpu" not in cpus:
        raise ParseError(source, "no aggregate 'cpu' line")
    return stamp, cpus


def parse_procstat(before: str, after: str, source: str = "procstat",
                   window: tuple[int, int] | None = None) -> dict[str, float]:
    """Busy share of all CPUs between the snapshots, in percent (idle and iowait count as idle).

    ParseError when the after snapshot is stamped before the before one, when the pair does
    not bracket the run's ``window`` (:func:`iolab.tools.base.check_brackets`: a pair an hour
    apart around a 4 s run gave that hour's 0.02 % as the run's), when no tick passed between
    them (no share of anything), or when a counter of the aggregate ``cpu`` line other than
    iowait went down between them: those counters only grow, so a drop (a snapshot of another
    boot, or the two swapped) gives a share of nothing (it gave a plausible 75 %). The kernel
    documents that iowait may decrease."""
    t0, a = _cpu_lines(before, f"{source}.before")
    t1, b = _cpu_lines(after, f"{source}.after")
    check_brackets(t0, t1, window, source)
    delta = [y - x for x, y in zip(a["cpu"], b["cpu"])]
    if len(delta) < 5:
        raise ParseError(source, "aggregate cpu line has fewer than 5 fields")
    # iowait (field 5) is the one counter the kernel says may decrease (proc.rst, /proc/stat)
    dropped = [i for i, d in enumerate(delta) if d < 0 and i != IOWAIT]
    if dropped:
        field = dropped[0] + 1
        name = f" ({FIELDS[field - 1]})" if field <= len(FIELDS) else ""
        raise ParseError(source, f"field {field}{name} of the aggregate cpu line went down between "
                                 f"the snapshots ({a['cpu'][field - 1]} -> "
                                 f"{b['cpu'][field - 1]}; allowed: counters that never decrease)")
    total = sum(delta[:8])  # user nice system idle iowait irq softirq steal; guest is inside user
    if total <= 0:
        raise ParseError(source, "no CPU tick passed between the snapshots (allowed: a pair "
                                 "around a run, over which the CPUs' counters grow)")
    idle = delta[3] + delta[4]
    return {
        "host_busy_pct": 100.0 * (total - idle) / total,
        "host_window_s": (t1 - t0) / 1e9,
    }
