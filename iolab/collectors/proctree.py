"""The process-tree CPU collector: utime and stime of the driver and its descendants.

Responsible for: sampling ``/proc/<pid>/stat`` of the driver's tree (``proctree-cpu.csv``,
``proctree-cpu.json``) and the pure parser that cuts the samples to the tool's measurement
window. Not responsible for: the window itself (the tool adapter says when it measured).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from iolab.errors import ParseError, excerpt
from iolab.parsers import is_digits, load_json
from iolab.tools.base import Collector, check_within, driver_window

PROCTREE_HEADER = "timestamp_ns,pid,comm,utime,stime"


def children(proc: Path) -> dict[int, list[int]]:
    """{parent pid: [child pids]} of every process now listed under ``proc``."""
    kids: dict[int, list[int]] = {}
    for stat in proc.glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended between the listing and the read
        fields = text.rpartition(")")[2].split()
        kids.setdefault(int(fields[1]), []).append(int(text.split(" (", 1)[0]))
    return kids


class ProcTreeCpu(Collector):
    """Samples utime and stime of the spawned process and all its descendants.

    GNU time reports CPU over the tool's whole life, start-up and teardown included, which
    made AiSIO's CPU figures incomparable across tools. This sampler writes, every
    ``interval_s`` from ``attach(pid)`` until ``stop``, one line per process of the tree to
    ``proctree-cpu.csv``::

        timestamp_ns,pid,comm,utime,stime

    (utime and stime in clock ticks, ``clk_tck`` in ``proctree-cpu.json``), so that
    ``parse_proctree_cpu`` can cut the samples to the measurement window the tool itself
    reports. Descendants matter: with GNU time in front, the tool is GNU time's child, and a
    driver script may start it in the background.
    """

    name = "proctree"

    def __init__(self, interval_s: float = 0.2, proc: Path = Path("/proc")) -> None:
        self.interval_s = interval_s
        self.proc = proc
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._out = None

    def start(self, run_dir: Path) -> None:
        self._out = open(Path(run_dir) / "proctree-cpu.csv", "w")
        self._out.write(PROCTREE_HEADER + "\n")
        (Path(run_dir) / "proctree-cpu.json").write_text(
            json.dumps({"clk_tck": os.sysconf("SC_CLK_TCK"), "interval_s": self.interval_s}) + "\n")

    def attach(self, pid: int) -> None:
        self._thread = threading.Thread(target=self._loop, args=(pid,), daemon=True)
        self._thread.start()

    def _sample(self, root_pid: int) -> None:
        kids = children(self.proc)
        todo, seen = [root_pid], []
        while todo:
            pid = todo.pop()
            seen.append(pid)
            todo += kids.get(pid, [])
        stamp = time.time_ns()
        for pid in seen:
            try:
                text = (self.proc / str(pid) / "stat").read_text()
            except OSError:
                continue
            comm = text.split(" (", 1)[1].rpartition(")")[0].replace(",", "_")
            fields = text.rpartition(")")[2].split()
            self._out.write(f"{stamp},{pid},{comm},{fields[11]},{fields[12]}\n")

    def _loop(self, pid: int) -> None:
        while not self._stop.is_set():
            self._sample(pid)
            self._stop.wait(self.interval_s)

    def stop(self, run_dir: Path) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._out is not None:
            self._out.close()


    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        """CPU use of the tree inside the window, in % of one CPU (NaN without a window)."""
        csv = Path(run_dir) / "proctree-cpu.csv"
        if window is None or not csv.exists():
            return {"cpu_pct": float("nan")}
        meta = Path(run_dir) / "proctree-cpu.json"
        cpu = parse_proctree_cpu(csv.read_text(), meta.read_text(), *window, str(csv), str(meta),
                                 driver_window(run_dir))
        return {"cpu_pct": cpu["cpu_pct"], "utime_s": cpu["utime_s"], "stime_s": cpu["stime_s"]}


# The ticks per second /proc's utime and stime count in (``sysconf(_SC_CLK_TCK)``): Linux's
# USER_HZ, 100 on every architecture it runs on (every committed record says 100). The
# times are divided by it, so any other value (100000 gave 0.19 % where the run used 187 %)
# is a record this collector did not write.
USER_HZ = 100


def clock_ticks(meta_text: str, source: str = "proctree-cpu.json") -> int:
    """``clk_tck`` of the collector's record: :data:`USER_HZ`; ParseError naming ``source``
    and the key otherwise (the CPU times are divided by it)."""
    try:
        meta = load_json(meta_text, source)
    except ValueError:
        raise ParseError(source, "not JSON (cut off?); the collector writes an object with "
                                 "'clk_tck'") from None
    ticks = meta.get("clk_tck") if isinstance(meta, dict) else None
    if isinstance(ticks, bool) or not isinstance(ticks, int) or ticks != USER_HZ:
        got = excerpt(ticks) if isinstance(meta, dict) else f"a JSON {type(meta).__name__}"
        raise ParseError(source, f"clk_tck is {got} (allowed: an object whose clk_tck is "
                                 f"{USER_HZ}, Linux's USER_HZ, the ticks per second of /proc's "
                                 "utime and stime)")
    return ticks


def parse_proctree_cpu(csv_text: str, meta_text: str, window_start_ns: int, window_end_ns: int,
                       source: str = "proctree-cpu.csv",
                       meta_source: str = "proctree-cpu.json",
                       run: tuple[int, int] | None = None) -> dict[str, Any]:
    """CPU use of the process tree inside [window_start_ns, window_end_ns], in % of one CPU.

    For every process, the growth of utime + stime between its first and last sample inside
    the window; the sum over processes is divided by the span of those samples. Returns
    ``{"cpu_pct", "utime_s", "stime_s", "span_s", "processes"}``; ``cpu_pct`` is NaN when
    fewer than two samples fall inside the window. ParseError for a record of no sample at
    all (the sampler writes one as soon as it is attached: such a record is cut off), for a record without a usable
    ``clk_tck`` (:func:`clock_ticks`) and for CPU times that go down, or a time that goes
    back, between a process's samples: utime and stime only grow, so a drop is no share of a
    CPU (it gave negative percentages). ParseError too for a sample stamped far outside the
    ``run``'s window (the driver's; :func:`iolab.tools.base.check_within`): the sampler runs
    only around the run.
    """
    ticks = clock_ticks(meta_text, meta_source)
    lines = csv_text.splitlines()
    if not lines or lines[0].strip() != PROCTREE_HEADER:
        raise ParseError(source, f"line 1: expected the header '{PROCTREE_HEADER}'")
    if not any(line.strip() for line in lines[1:]):
        # the sampler reads the tree as soon as the driver is attached: a record of no
        # sample at all is cut off, not a run too short to sample (that gives NaN below)
        raise ParseError(source, "holds the header and no sample at all (cut off? the sampler "
                                 "writes the driver's tree from its start)")
    first: dict[int, tuple[int, int, int]] = {}
    last: dict[int, tuple[int, int, int]] = {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split(",")
        if len(fields) != 5:
            raise ParseError(source, f"line {number}: expected 5 fields, got {excerpt(line)}")
        numbers = (fields[0], fields[1], fields[3], fields[4])
        # digits 0-9, few enough for int (int() also takes '+1', '1_000' and any script's
        # digits, and refuses 4,300 digits with a ValueError naming no file)
        if not all(is_digits(f) and len(f) <= 40 for f in numbers):
            raise ParseError(source, f"line {number}: expected whole numbers (digits 0-9), got "
                                     f"{excerpt(line)}")
        stamp, pid, utime, stime = (int(f) for f in numbers)
        check_within(stamp, run, f"line {number}", source)
        if window_start_ns <= stamp <= window_end_ns:
            _check_growth(last.get(pid), (stamp, utime, stime), pid, number, source)
            first.setdefault(pid, (stamp, utime, stime))
            last[pid] = (stamp, utime, stime)
    stamps = sorted({v[0] for v in first.values()} | {v[0] for v in last.values()})
    if len(stamps) < 2:
        return {"cpu_pct": float("nan"), "utime_s": float("nan"), "stime_s": float("nan"),
                "span_s": 0.0, "processes": len(first)}
    span_s = (stamps[-1] - stamps[0]) / 1e9
    utime_s = sum(last[p][1] - first[p][1] for p in first) / ticks
    stime_s = sum(last[p][2] - first[p][2] for p in first) / ticks
    return {"cpu_pct": 100.0 * (utime_s + stime_s) / span_s, "utime_s": utime_s,
            "stime_s": stime_s, "span_s": span_s, "processes": len(first)}


def _check_growth(before: tuple[int, int, int] | None, now: tuple[int, int, int], pid: int,
                  number: int, source: str) -> None:
    """ParseError when a process's sample has an earlier time, or a smaller utime or stime,
    than its sample before (a pid reused by a new process, or samples out of order)."""
    if before is None:
        return
    for index, key in enumerate(("timestamp_ns", "utime", "stime")):
        if now[index] < before[index]:
            raise ParseError(source, f"line {number}: pid {pid}'s {key} went down from "
                                     f"{before[index]} to {now[index]} (allowed: a value that "
                                     f"never decreases between a process's samples)")
