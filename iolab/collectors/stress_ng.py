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
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import time
from pathlib import Path

from iolab.errors import InputError, IolabError, ToolError
from iolab.host.knobs import format_cpulist
from iolab.parsers import record_object, record_value
from iolab.tools.base import Collector, Program, end_process_group

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
        """What the load was and whether it lasted the whole run, from ``stress-ng.json``."""
        path = Path(run_dir) / "stress-ng.json"
        record = record_object(path.read_text(), str(path))
        return {key: record_value(record, key, str(path), usable, allowed)
                for key, (usable, allowed) in RECORDED.items()}


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
