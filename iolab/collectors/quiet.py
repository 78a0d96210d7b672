"""The quiet-machine collector: how much of the host's CPU went to processes outside
iolab's own process tree, and how much the hypervisor stole, around one run.

A measurement is only as good as the machine's quiet: a compile, a test suite or a
neighbour's VM on the same cores lowers a rate without any error. This collector snapshots,
just before and just after the driver (``quiet.before``, ``quiet.after``), the ``cpu``
lines of ``/proc/stat`` (the aggregate and each CPU's) and the CPU ticks of iolab's process
tree (iolab itself, its threads, every live descendant, and what each has reaped: utime +
stime + cutime + cstime of ``/proc/<pid>/stat``). Its pure parser gives, over the snapshots:

- ``foreign_cpu_pct``: the host's busy ticks (user, nice, system, irq, softirq) minus the
  tree's, in % of all CPUs' ticks: CPU that something else used. Interrupt work the run's
  own I/O causes, and kernel threads that complete it, count as foreign, so a quiet machine
  reads a few percent, not zero.
- ``steal_pct``: the steal column, in % of all CPUs' ticks: time the hypervisor gave to
  other guests while this one wanted to run.
- ``foreign_load``: True when either is above its stated share (:data:`FOREIGN_CPU_PCT`,
  :data:`STEAL_PCT`), so that a chapter can show such runs apart.

A pair that is no reading of the run fails it (ParseError), never a NaN share or a
``foreign_load`` of False: snapshots that do not bracket the run's window
(:func:`iolab.tools.base.check_brackets`), no tick between them, more or fewer ticks than
their time stamps allow on the host's CPUs, a cpu line listed twice, per-CPU lines that
are not the host's CPUs or not the aggregate's parts, iowait stepping back by seconds, or a tree that used
more ticks than the host's busy ones beyond :data:`TREE_EXCESS_TICKS` and
:data:`TREE_EXCESS_SHARE`.

Responsible for: the snapshots, their parser, and a live sample of the same quantities over
a short wait (:func:`sample`) with the load average (:func:`load_average`), which
``iolab replicate`` reads before it starts. Not responsible for: refusing to start
(``iolab.execution.replicate``), or host CPU use as a whole (``iolab.collectors.procstat``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from iolab.collectors.hostrec import host_cpus
from iolab.collectors.procstat import check_cpu_lines, check_iowait, check_tick_span, cpu_lines
from iolab.collectors.proctree import children
from iolab.errors import ParseError, excerpt
from iolab.parsers import decimal_within_float, is_digits
from iolab.tools.base import Collector, check_brackets, run_window

# the stated shares: a run with more foreign CPU or steal than these was measured under load
FOREIGN_CPU_PCT = 10.0   # of all CPUs: a fifth of one CPU on a 2-vCPU machine
STEAL_PCT = 5.0          # of all CPUs

# How far the tree's ticks may exceed the host's busy ticks: the host counts a CPU's ticks by
# sampling, the tree its own by accounting, and a child reaped between the snapshots brings
# its whole life into the tree's count, the part before the first snapshot too. 4 of 812 at
# most on the committed runs, but 31 of 810 (3.8 %) on the first run of a fresh clone's
# 'iolab run' on a KVM guest, which a bound of 2 % failed; far more (a snapshot of another
# tree or boot) is orders of magnitude, not a share.
TREE_EXCESS_TICKS = 10
TREE_EXCESS_SHARE = 0.10  # of all CPUs' ticks between the snapshots

BUSY = ("user", "nice", "system", "irq", "softirq")   # of a cpu line (proc(5))
_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
TREE_HEADER = "# tree_ticks"


def tree_ticks(root_pid: int, proc: Path = Path("/proc")) -> int:
    """utime + stime + cutime + cstime of ``root_pid`` and of every live descendant: the CPU
    the tree used so far, processes that ended and were reaped included (their time is in
    their parent's cutime and cstime, and a process is reaped by one parent only)."""
    kids = children(proc)
    todo, total = [root_pid], 0
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            text = (proc / str(pid) / "stat").read_text()
        except OSError:
            continue  # it ended between the listing and the read: its parent's cutime has it
        fields = text.rpartition(")")[2].split()
        total += sum(int(f) for f in fields[11:15])   # utime stime cutime cstime
    return total


def snapshot(root_pid: int, proc: Path = Path("/proc")) -> str:
    """The text of one snapshot: a time stamp, the tree's ticks, and /proc/stat's cpu lines
    (the aggregate and each CPU's: their count bounds the ticks the pair can hold)."""
    ticks = tree_ticks(root_pid, proc)
    stat = (proc / "stat").read_text()
    cpus = "".join(f"{line}\n" for line in stat.splitlines() if line.startswith("cpu"))
    return f"# time_ns {time.time_ns()}\n{TREE_HEADER} {ticks}\n{cpus}"


class Quiet(Collector):
    """Snapshots of the host's CPU ticks and of iolab's process tree's, just before and just
    after the driver (``quiet.before``, ``quiet.after``)."""

    name = "quiet"

    def __init__(self, proc: Path = Path("/proc"), root_pid: int | None = None) -> None:
        self.proc = proc
        self.root_pid = root_pid if root_pid is not None else os.getpid()

    def start(self, run_dir: Path) -> None:
        (Path(run_dir) / "quiet.before").write_text(snapshot(self.root_pid, self.proc))

    def stop(self, run_dir: Path) -> None:
        (Path(run_dir) / "quiet.after").write_text(snapshot(self.root_pid, self.proc))

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        before, after = Path(run_dir) / "quiet.before", Path(run_dir) / "quiet.after"
        return parse_quiet(before.read_text(), after.read_text(), str(Path(run_dir) / "quiet"),
                           run_window(run_dir, window), host_cpus(Path(run_dir)))


def _read(text: str, source: str) -> tuple[int, int, dict[str, list[int]]]:
    """(time_ns, tree ticks, the cpu lines' counters by name) of one snapshot."""
    first, _, rest = text.partition("\n")
    header, _, rest = rest.partition("\n")
    parts = header.split()
    if len(parts) != 3 or " ".join(parts[:2]) != TREE_HEADER or not is_digits(parts[2]):
        raise ParseError(source, f"line 2: expected '{TREE_HEADER}' and a whole number of "
                                 "ticks (digits 0-9)")
    # the tree line kept as a blank one, so that errors name the file's own line numbers
    stamp, cpus = cpu_lines(f"{first}\n\n{rest}", source)
    if len(cpus["cpu"]) < len(_FIELDS):
        raise ParseError(source, f"the aggregate cpu line has {len(cpus['cpu'])} fields "
                                 f"(allowed: {len(_FIELDS)} or more, up to steal)")
    return stamp, int(parts[2]), cpus


def parse_quiet(before: str, after: str, source: str = "quiet",
                window: tuple[int, int] | None = None,
                cpus: int | None = None) -> dict[str, Any]:
    """Foreign CPU and steal between the snapshots, in % of all CPUs' ticks, and whether
    either is above its stated share. ParseError when a counter other than iowait, or the
    tree's ticks, went down between the snapshots (counters only grow: a drop is two
    snapshots of different boots or processes, no share of anything), when the pair does not
    bracket the run's ``window``, when no tick passed between them (a NaN share would read
    as a quiet machine), or when the tree used more ticks than the host's busy ones beyond
    the stated excess (it would read as no foreign CPU at all), or when the ticks between
    them do not fit their time stamps on the host's CPUs
    (:func:`iolab.collectors.procstat.check_tick_span`; the CPUs are counted from the
    snapshots' per-CPU lines, else ``cpus``, the host record's, is used: a pair with neither
    is refused, as nothing bounds its ticks). ParseError too for per-CPU lines that differ
    between the snapshots, are not CPUs of the host record's ``cpus`` or are not the
    aggregate's parts (:func:`iolab.collectors.procstat.check_cpu_lines`), and for iowait
    stepping back by more than a tick or so a CPU
    (:func:`iolab.collectors.procstat.check_iowait`)."""
    t0, tree0, lines0 = _read(before, f"{source}.before")
    t1, tree1, lines1 = _read(after, f"{source}.after")
    a, b = lines0["cpu"], lines1["cpu"]
    delta = {name: b[i] - a[i] for i, name in enumerate(_FIELDS)}
    dropped = [n for n, d in delta.items() if d < 0 and n != "iowait"]
    if t1 < t0 or tree1 < tree0 or dropped:
        what = dropped[0] if dropped else "tree_ticks" if tree1 < tree0 else "time_ns"
        raise ParseError(source, f"{what} went down between the snapshots (allowed: after "
                                 ">= before)")
    check_brackets(t0, t1, window, source)
    total = sum(delta.values())
    if total <= 0:
        raise ParseError(source, "no CPU tick passed between the snapshots: no share of "
                                 "anything (allowed: a pair around a run, over which the "
                                 "CPUs' counters grow)")
    count = check_cpu_lines(lines0, lines1, cpus, source) or cpus
    if not count:
        raise ParseError(f"{source}.after", "no per-CPU line (cpu0, cpu1, ...) and no host "
                                            "record's CPU count: nothing bounds the ticks "
                                            "(allowed: snapshots iolab writes, which keep "
                                            "each CPU's line)")
    check_iowait(a[_FIELDS.index("iowait")], b[_FIELDS.index("iowait")], count, source)
    check_tick_span(total, count, t0, t1, source)
    busy = sum(delta[n] for n in BUSY)
    tree = tree1 - tree0
    excess = max(TREE_EXCESS_TICKS, TREE_EXCESS_SHARE * total)
    if tree > busy + excess:
        raise ParseError(source, f"iolab's tree used {tree} ticks between the snapshots, more "
                                 f"than the host's {busy} busy ticks (allowed: at most "
                                 f"{excess:g} more, the two clocks' difference)")
    # the host counts a CPU's ticks by sampling, the tree its own by accounting: on a quiet
    # host they differ by a tick or two either way, and less than none is none
    foreign = 100.0 * max(0, busy - tree) / total
    steal = 100.0 * delta["steal"] / total
    return {"foreign_cpu_pct": foreign, "steal_pct": steal,
            "foreign_load": bool(foreign > FOREIGN_CPU_PCT or steal > STEAL_PCT)}


def sample(seconds: float, proc: Path = Path("/proc"), root_pid: int | None = None,
           sleep=time.sleep) -> dict[str, Any]:
    """:func:`parse_quiet` of two snapshots ``seconds`` apart, taken now (nothing of iolab's
    runs meanwhile: what is busy is someone else)."""
    pid = root_pid if root_pid is not None else os.getpid()
    before = snapshot(pid, proc)
    sleep(seconds)
    return parse_quiet(before, snapshot(pid, proc), str(Path(proc) / "stat"))


def load_average(proc: Path = Path("/proc")) -> float:
    """The one-minute load average of ``/proc/loadavg``; ParseError naming the file unless it
    is a finite number of 0 or more in ASCII decimals, as the kernel prints it (float()
    would also take nan, inf, -5, '1_0' and other scripts' digits, and a NaN load passes
    every "too busy" comparison, so would read as a quiet machine)."""
    path = Path(proc) / "loadavg"
    words = path.read_text().split()
    value = decimal_within_float(words[0]) if words else None
    if value is None:
        raise ParseError(str(path), f"{excerpt(words[0] if words else '')} is not a load "
                         "average (allowed: the load averages first, decimals of 0 or more in "
                         "digits 0-9, e.g. '0.12 0.30 0.25 1/123 4567')")
    return value
