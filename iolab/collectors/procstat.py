"""The ``/proc/stat`` collector: host CPU use around one run.

Responsible for: snapshots of ``/proc/stat`` with a wall-clock stamp just before and just
after the driver (``procstat.before``, ``procstat.after``) and their pure parser.
Not responsible for: CPU time inside the tool's measurement window (``iolab.collectors.proctree``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.errors import ParseError
from iolab.tools.base import Snapshots, stamped


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
        return parse_procstat(before.read_text(), after.read_text(), str(Path(run_dir) / "procstat"))


def _cpu_lines(text: str, source: str) -> tuple[int, dict[str, list[int]]]:
    stamp, rest = stamped(text, source)
    cpus = {}
    for line in rest.splitlines():
        if line.startswith("cpu"):
            name, *vals = line.split()
            cpus[name] = [int(v) for v in vals]
    if "cpu" not in cpus:
        raise ParseError(source, "no aggregate 'cpu' line")
    return stamp, cpus


def parse_procstat(before: str, after: str, source: str = "procstat") -> dict[str, float]:
    """Busy share of all CPUs between the snapshots, in percent (idle and iowait count as idle)."""
    t0, a = _cpu_lines(before, f"{source}.before")
    t1, b = _cpu_lines(after, f"{source}.after")
    delta = [y - x for x, y in zip(a["cpu"], b["cpu"])]
    if len(delta) < 5:
        raise ParseError(source, "aggregate cpu line has fewer than 5 fields")
    total = sum(delta[:8])  # user nice system idle iowait irq softirq steal; guest is inside user
    idle = delta[3] + delta[4]
    return {
        "host_busy_pct": 100.0 * (total - idle) / total if total else float("nan"),
        "host_window_s": (t1 - t0) / 1e9,
    }
