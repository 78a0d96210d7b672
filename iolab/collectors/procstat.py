"""The ``/proc/stat`` collector: host CPU use around one run.

Responsible for: snapshots of ``/proc/stat`` with a wall-clock stamp just before and just
after the driver (``procstat.before``, ``procstat.after``) and their pure parser.
Not responsible for: CPU time inside the tool's measurement window (``iolab.collectors.proctree``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.collectors.hostrec import host_cpus
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
                              run_window(run_dir, window), host_cpus(Path(run_dir)))


FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
          "guest_nice")  # of a cpu line, in order (proc(5))
IOWAIT = FIELDS.index("iowait")

# /proc/stat counts in USER_HZ ticks, 100 a second on every Linux ABI iolab runs on
# (sysconf(_SC_CLK_TCK)); fixed here, as the snapshots may come from another host.
USER_HZ = 100
# How far the ticks between two snapshots may stray from what their time stamps allow
# (CPUs x elapsed x USER_HZ): the committed runs read 0.85 to 1.11 of it (a guest's
# unreported steal below, a stamp written just before its read above); more is a counter
# that no clock behind it could have grown, and its shares dilute toward 0 or 100 %.
TICKS_OVER = 0.25     # share of the allowed ticks, above
TICKS_UNDER = 0.5     # share of the allowed ticks, below
TICKS_SLACK = 5       # ticks per CPU either way: a tick's sampling at each snapshot


def cpu_lines(text: str, source: str) -> tuple[int, dict[str, list[int]]]:
    """(time stamp, counters by name: ``cpu`` the aggregate, ``cpuN`` each CPU's) of one
    snapshot. ParseError for a name listed twice: which of the two is the reading is
    unknowable (the last one used to be taken without a word)."""
    stamp, rest = stamped(text, source)
    cpus: dict[str, list[int]] = {}
    first: dict[str, int] = {}
    for number, line in enumerate(rest.splitlines(), 2):
        if line.startswith("cpu"):
            name, *vals = line.split()
            if name in first:
                raise ParseError(source, f"line {number}: {shortened(name)!r} listed twice "
                                         f"(first on line {first[name]}; allowed: the "
                                         "aggregate line and each CPU once)")
            first[name] = number
            if not all(is_digits(v) for v in vals):
                raise ParseError(source, f"line {number} ({shortened(name)}): expected whole "
                                         f"numbers of ticks (digits 0-9), got {excerpt(line)}")
            cpus[name] = [int_within_float(v, f"line {number} ({shortened(name)})", source)
                          for v in vals]
    if "cpu" not in cpus:
        raise ParseError(source, "no aggregate 'cpu' line")
    return stamp, cpus


def cpu_count(cpus: dict[str, list[int]]) -> int:
    """How many per-CPU lines (``cpu0``, ``cpu1``, ...) a snapshot has."""
    return sum(1 for name in cpus if name != "cpu" and is_digits(name[3:]))


def check_cpu_lines(a: dict[str, list[int]], b: dict[str, list[int]], host: int | None,
                    source: str) -> int:
    """How many per-CPU lines the pair ``a``, ``b`` (of :func:`cpu_lines`) has, once both
    list the same CPUs, each a CPU of the host record's ``host`` logical CPUs (when there is
    one), and each counter of their aggregate line grew by what the CPUs' lines grew, within
    :data:`TICKS_SLACK` ticks a CPU (the kernel reads the two a moment apart). ParseError
    otherwise: their count bounds the ticks the pair may hold (:func:`check_tick_span`), so
    998 added lines of zeros widened the bound and 400,000 idle ticks added to the aggregate
    read a 18 % busy host as 0.04 %."""
    odd = next((n for n in (*a, *b) if n != "cpu" and not is_digits(n[3:])), None)
    if odd is not None:
        raise ParseError(source, f"a cpu line named {shortened(odd)!r} (allowed: 'cpu', the "
                                 "aggregate, and 'cpuN', one CPU's)")
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b), key=lambda n: (len(n), n))
        shown = ", ".join(shortened(n) for n in only[:4]) + (", ..." if len(only) > 4 else "")
        raise ParseError(source, f"the snapshots list different CPUs ({shown} in one only; "
                                 "allowed: the same CPUs in both, as a host whose CPUs stay "
                                 "online lists them)")
    ids = sorted(int(n[3:]) for n in a if n != "cpu")
    if host is not None and ids and (len(ids) > host or ids[-1] >= host):
        raise ParseError(source, f"{len(ids)} per-CPU lines, up to cpu{ids[-1]}, on a host whose "
                                 f"record has {host} logical CPUs (allowed: cpu0 to "
                                 f"cpu{host - 1}, each at most once)")
    if ids:
        fields = min(len(values) for values in (*a.values(), *b.values()))
        for i in range(min(fields, len(FIELDS))):
            whole = b["cpu"][i] - a["cpu"][i]
            parts = sum(b[n][i] - a[n][i] for n in a if n != "cpu")
            if abs(whole - parts) > TICKS_SLACK * len(ids):
                raise ParseError(source, f"{FIELDS[i]} of the aggregate cpu line changed by "
                                         f"{whole} ticks between the snapshots, its "
                                         f"{len(ids)} CPUs' lines by {parts} (allowed: the "
                                         f"CPUs' sum, within {TICKS_SLACK} ticks a CPU)")
    return len(ids)


def check_iowait(before: int, after: int, cpus: int, source: str) -> None:
    """ParseError when the aggregate iowait went down by more than :data:`TICKS_SLACK` ticks a
    CPU: the kernel lets it step back by a tick or so (proc(5)), never by seconds (300 ticks
    taken off read a host 18 % busy as 30 %)."""
    if before - after > TICKS_SLACK * cpus:
        raise ParseError(source, f"iowait of the aggregate cpu line went down by "
                                 f"{before - after} ticks between the snapshots ({before} -> "
                                 f"{after}; allowed: at most {TICKS_SLACK} ticks a CPU, "
                                 f"{TICKS_SLACK * cpus} on {cpus} CPUs)")


def check_tick_span(total: int, cpus: int, t0: int, t1: int, source: str) -> None:
    """ParseError unless ``total`` ticks of ``cpus`` CPUs fit the ``t0``..``t1`` nanoseconds
    between two snapshots, within the stated tolerance (:data:`TICKS_OVER`,
    :data:`TICKS_UNDER`, :data:`TICKS_SLACK`): 10⁹ idle ticks added to a pair 3.7 s apart
    gave a busy share of 0.00001 %, a machine read as idle."""
    allowed = cpus * (t1 - t0) / 1e9 * USER_HZ
    high = allowed * (1 + TICKS_OVER) + TICKS_SLACK * cpus
    low = allowed * (1 - TICKS_UNDER) - TICKS_SLACK * cpus
    if not low <= total <= high:
        raise ParseError(source, f"{total} CPU ticks between snapshots {(t1 - t0) / 1e9:g} s "
                                 f"apart on {cpus} CPUs (allowed: {max(0.0, low):.0f} to "
                                 f"{high:.0f}, {cpus} x the time x {USER_HZ} ticks a second, "
                                 f"-{TICKS_UNDER:.0%}/+{TICKS_OVER:.0%} and {TICKS_SLACK} "
                                 "ticks a CPU)")


def parse_procstat(before: str, after: str, source: str = "procstat",
                   window: tuple[int, int] | None = None,
                   host: int | None = None) -> dict[str, float]:
    """Busy share of all CPUs between the snapshots, in percent (idle and iowait count as idle).

    ParseError when the after snapshot is stamped before the before one, when the pair does
    not bracket the run's ``window`` (:func:`iolab.tools.base.check_brackets`: a pair an hour
    apart around a 4 s run gave that hour's 0.02 % as the run's), when no tick passed between
    them (no share of anything), or when a counter of the aggregate ``cpu`` line other than
    iowait went down between them: those counters only grow, so a drop (a snapshot of another
    boot, or the two swapped) gives a share of nothing (it gave a plausible 75 %). The kernel
    documents that iowait may decrease, by a tick or so (:func:`check_iowait`). ParseError
    too for a snapshot naming a cpu line twice, for per-CPU lines that are not the same in
    both, not CPUs of the host record's ``host`` logical CPUs or not the aggregate's parts
    (:func:`check_cpu_lines`), and for ticks that the time between the stamps cannot hold
    (:func:`check_tick_span`)."""
    t0, a = cpu_lines(before, f"{source}.before")
    t1, b = cpu_lines(after, f"{source}.after")
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
    cpus = check_cpu_lines(a, b, host, source) or host
    if not cpus:
        raise ParseError(f"{source}.after", "no per-CPU line (cpu0, cpu1, ...; allowed: a "
                                            "whole /proc/stat, which lists each online CPU)")
    check_iowait(a["cpu"][IOWAIT], b["cpu"][IOWAIT], cpus, source)
    check_tick_span(total, cpus, t0, t1, source)
    idle = delta[3] + delta[4]
    return {
        "host_busy_pct": 100.0 * (total - idle) / total,
        "host_window_s": (t1 - t0) / 1e9,
    }
