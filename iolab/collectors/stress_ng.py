"""Background CPU load with stress-ng on the CPUs a run leaves idle (a collector-like load).

The AiSIO CPU experiment loads every CPU the tool does not use, to see how the I/O path
behaves on a busy host. ``StressNg`` does that around one driver run, like a collector:
``start(run_dir)`` before the driver, ``stop(run_dir)`` after it.

Responsible for: choosing the idle CPUs (``unused_cpus``), starting stress-ng pinned to them
with an argv list, stopping it (SIGTERM to its process group, SIGKILL after a grace period),
and recording what ran and how it ended.
Not responsible for: deciding whether a point wants stress (the experiment module does) or
parsing stress-ng's metrics (its raw output is kept for that).

Files in the run folder:

- ``stress-ng.out``: stress-ng's stdout and stderr together (``--metrics-brief`` table).
- ``stress-ng.json``: ``{"argv": [...], "cpus": [1], "cpulist": "1", "seconds": 10.0,
  "pid": 4242, "started_ns": ..., "stopped_ns": ..., "exit_status": 0, "signal": null,
  "ended_before_stop": false, "killed": false}``. ``exit_status`` is null and ``signal`` set
  when a signal ended it; ``ended_before_stop`` true means the load did not last the whole
  run (stress-ng failed or its timeout passed); ``killed`` true means SIGTERM was not enough.
  Times are CLOCK_REALTIME nanoseconds.

The parser reads the record back checked against itself: its ``cpulist`` is its ``cpus``,
its ``argv`` the one this collector builds for them (a ``--taskset`` of another CPU was
stored as stress on the CPUs the record names), and none of them is a CPU the run's tool
was pinned to (the runner's ``cpus.json``). The load must have lasted the whole run: a record
whose stress-ng ended before the stop, reported a failure (exit status other than 0) or does
not span the driver's window is no stressed sample. Anything else fails the run.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from pathlib import Path

from iolab.errors import InputError, IolabError, ParseError, ToolError, excerpt
from iolab.host.knobs import format_cpulist
from iolab.parsers import (CLOCK_NS_ALLOWED, CPU_IDS_ALLOWED, is_clock_ns, is_cpu_ids,
                           record_object, record_value)
from iolab.tools.base import (CPUS_FILE, Collector, Program, check_brackets, end_process_group,
                              run_window)

# stress-ng prints its metrics on SIGTERM; this is how long it gets before SIGKILL.
GRACE_S = 5.0
# The timeout is a safety net should stop() never come; the margin keeps it from ending
# the load before the driver has finished.
TIMEOUT_MARGIN_S = 5.0


def unused_cpus(all_cpus: list[int], used: list[int]) -> list[int]:
    """The CPUs of ``all_cpus`` that a run does not use, in ascending order."""
    return sorted(set(all_cpus) - set(used))


PROGRAM = Program("stress-ng", "stress-ng", ("--version",),
                  install="install it with 'apt-get install stress-ng'", role="background load")


class StressNg(Collector):
    """One stress-ng CPU worker per CPU in ``cpus``, pinned to those CPUs for one run."""

    name = "stress_ng"

    def __init__(self, cpus: list[int], seconds: float) -> None:
        if not cpus:
            raise InputError(None, "stress_cpus", "the CPU list is empty: every CPU is used "
                             "by the run, so there is nothing left to stress",
                             "at least one CPU the run does not use")
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
            raise InputError(None, "stress_cpus", f"not a list of CPU ids: {cpus!r}")
        if not seconds > 0:
            raise InputError(None, "stress_seconds", f"must be positive, got {seconds!r}")
        self.cpus = sorted(set(cpus))
        self.seconds = float(seconds)
        self._proc: subprocess.Popen | None = None
        self._argv: list[str] = []
        self._started_ns = 0

    def programs(self) -> list[Program]:
        return [PROGRAM]

    def argv(self, executable: str = "stress-ng") -> list[str]:
        timeout = math.ceil(self.seconds + TIMEOUT_MARGIN_S)
        return [executable, "--cpu", str(len(self.cpus)),
                "--taskset", format_cpulist(self.cpus),
                "--timeout", f"{timeout}s", "--metrics-brief"]

    def start(self, run_dir: Path) -> None:
        executable = PROGRAM.find()
        if executable is None:
            raise ToolError(f"stress-ng not found on PATH; {PROGRAM.install}. Nothing was started.")
        # stress-ng would fail on its own, but only after the driver had started unloaded.
        allowed = os.sched_getaffinity(0)
        outside = [cpu for cpu in self.cpus if cpu not in allowed]
        if outside:
            raise InputError(None, "stress_cpus",
                             f"CPU(s) {format_cpulist(outside)} are offline or outside this "
                             f"process's CPU set", f"CPUs {format_cpulist(allowed)}")
        self._argv = self.argv(executable)
        with open(Path(run_dir) / "stress-ng.out", "wb") as out:
            # Its own session, so stop() can signal stress-ng and every worker it forked.
            self._proc = subprocess.Popen(self._argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        self._started_ns = time.time_ns()

    def stop(self, run_dir: Path) -> None:
        proc = self._proc
        if proc is None:
            raise IolabError("StressNg.stop() called without a start()")
        # the whole group, so no worker outlives stress-ng and loads the next run's CPUs
        ended = end_process_group(proc, GRACE_S)
        record = {
            "argv": self._argv, "cpus": self.cpus, "cpulist": format_cpulist(self.cpus),
            "seconds": self.seconds, "pid": proc.pid,
            "started_ns": self._started_ns, "stopped_ns": time.time_ns(), **ended,
        }
        (Path(run_dir) / "stress-ng.json").write_text(json.dumps(record, indent=2) + "\n")
        self._proc = None

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict:
        """What the load was, from ``stress-ng.json`` (checked against itself and the run's
        CPUs, and that it lasted the whole run: see the module docstring)."""
        run_dir = Path(run_dir)
        path = run_dir / "stress-ng.json"
        record = record_object(path.read_text(), str(path))
        out = {key: record_value(record, key, str(path), usable, allowed)
               for key, (usable, allowed) in RECORDED.items()}
        cpus = check_record(record, str(path))
        check_lasted(record, out, run_window(run_dir, window), str(path))
        pinned = run_dir / CPUS_FILE
        if pinned.exists():
            tool = record_value(record_object(pinned.read_text(), str(pinned)), "cpus",
                                str(pinned), is_cpu_ids, CPU_IDS_ALLOWED)
            shared = sorted(set(cpus) & set(tool))
            if shared:
                raise ParseError(str(path), f"the load ran on CPU(s) {format_cpulist(shared)}, "
                                 f"which the run's tool was pinned to ({CPUS_FILE}: "
                                 f"{format_cpulist(tool)}; allowed: CPUs the run leaves idle)")
        return out


def check_record(record: dict, source: str) -> list[int]:
    """The record's ``cpus``, once its ``cpulist`` is shown to be those CPUs and its ``argv``
    the one :meth:`StressNg.argv` builds for them and its ``seconds``; ParseError otherwise."""
    cpus = record_value(record, "cpus", source, lambda v: is_cpu_ids(v) and bool(v),
                        CPU_IDS_ALLOWED + ", at least one")
    seconds = record_value(record, "seconds", source,
                           lambda v: type(v) in (int, float) and 0 < v < 10**9,
                           "a number of seconds above 0")
    argv = record_value(record, "argv", source,
                        lambda v: isinstance(v, list) and bool(v)
                        and all(isinstance(w, str) for w in v),
                        "the stress-ng command line, a list of texts")
    cpulist = format_cpulist(sorted(cpus))
    if record["cpulist"] != cpulist:
        raise ParseError(source, f"cpulist {excerpt(record['cpulist'])} is not the record's "
                                 f"cpus {cpus} (allowed: {cpulist!r})")
    expected = StressNg(cpus, seconds).argv(argv[0])
    if argv != expected:
        raise ParseError(source, f"argv {excerpt(' '.join(argv))} is not the load of the "
                                 f"record's cpus and seconds (allowed: "
                                 f"{excerpt(' '.join(expected))})")
    return cpus


def check_lasted(record: dict, out: dict, window: tuple[int, int] | None, source: str) -> None:
    """ParseError unless the load ran the whole run: it did not end before the stop
    (``ended_before_stop``), stress-ng did not report a failure (an ``exit_status`` other
    than 0), and its ``started_ns`` .. ``stopped_ns`` bracket the driver's ``window``. A
    stressor that exited with status 2 10 ms after it started was stored as a stressed
    sample of a machine that was not under load."""
    if out["ended_before_stop"]:
        raise ParseError(source, f"ended_before_stop is true: the load ended by itself during "
                                 f"the run (exit_status {out['exit_status']!r}; allowed: a load "
                                 "that lasts until stopped, as a stressed sample needs)")
    if out["exit_status"] not in (0, None):
        raise ParseError(source, f"exit_status is {out['exit_status']}: stress-ng reported a "
                                 "failure, so its load is not the one the point names "
                                 "(allowed: 0, or null when the stop's signal ended it)")
    started, stopped = (record_value(record, key, source, is_clock_ns, CLOCK_NS_ALLOWED)
                        for key in ("started_ns", "stopped_ns"))
    check_brackets(started, stopped, window, source)


# a kernel CPU list in ASCII digits; read by its form, not expanded (0-999999999 would be a
# billion CPUs)
_CPULIST = re.compile(r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*")


def _is_cpulist(value: object) -> bool:
    return isinstance(value, str) and _CPULIST.fullmatch(value) is not None


def _is_status(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool)
                             and 0 <= value <= 255)


# what a run takes from the record, each with the check it must pass and what that allows
RECORDED = {
    "cpulist": (_is_cpulist, "a CPU list such as 1,3-5"),
    "ended_before_stop": (lambda v: isinstance(v, bool), "true or false"),
    "killed": (lambda v: isinstance(v, bool), "true or false"),
    "exit_status": (_is_status, "null or a whole number 0 to 255"),
}
