"""Runs disturbed while they measured: stopped, suspended, overlong, or with a knob changed
under them.

A run whose processes were stopped (SIGSTOP or Ctrl-Z, a debugger, a suspended Slurm job),
whose campaign did not run for a while (it was stopped itself, or the machine slept), that
took far longer than its tool runs, or at whose end a knob no longer reads as it did when it
was set, measured something other than its point. The runner stores it as *failed* with the
reason, so that it is never a sample and the repetition rule asks for another.

How each is seen:

* **Stopped.** While the driver runs, every ``WATCH_S`` the state of each process of its tree
  (the driver and its descendants, read from ``/proc/<pid>/task/<tid>/children``) is read;
  ``T`` (stopped) or ``t`` (stopped by a tracer) marks the run. A stop shorter than
  ``WATCH_S`` between two looks is not seen this way; the wall-time bound still catches a
  long one.
* **Suspended.** Between two looks, ``CLOCK_BOOTTIME`` may advance by at most ``WATCH_S +
  GAP_S``: more means the campaign itself was not running (stopped, or the machine
  suspended, which ``CLOCK_BOOTTIME`` counts and ``CLOCK_MONOTONIC`` does not; a growth of
  their difference by more than a second is reported as a suspension of the machine).
* **Overlong.** The run's wall time (``CLOCK_BOOTTIME``) may exceed the time the tool is
  expected to take (its runtime, warm-up and start-up, or the mean duration of the
  campaign's stored runs where that is longer) by at most ``MARGIN_S`` plus ``MARGIN_SHARE``
  of it. Only for experiments whose runs last a set time (``Experiment.timed``): a run that
  moves a fixed amount of data takes as long as it takes.
* **Knob changed.** After the driver exits, every knob the run recorded is read again and
  must be in the state read back when it was set (``Knob.same_state``).

Responsible for: these checks and their reasons in words. Not responsible for: running the
driver or storing the run (``iolab.execution.one_run``), or reading knobs (``iolab.host.knobs``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

WATCH_S = 1.0        # between two looks at the run's processes
GAP_S = 5.0          # more than this beyond WATCH_S between two looks: the campaign was held
SLEEP_S = 1.0        # growth of BOOTTIME - MONOTONIC that means the machine slept
MARGIN_S = 10.0      # a run may take this long beyond its expected time ...
MARGIN_SHARE = 0.10  # ... plus this share of it
STOPPED = {"T": "stopped", "t": "stopped by a tracer (a debugger)"}
PROC = Path("/proc")


def _boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _sleep_clock() -> float:
    """Time the machine spent suspended, up to a constant."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC)


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants alive now (a daemon that left the tree is not among them).

    Read from the kernel's children lists rather than by ``iolab.procs.find``, whose
    scan of every process's environment takes tens of milliseconds: once a second, beside a
    measurement, that would be a few percent of a core. ``procs.find`` still ends a run's
    processes, a daemon that left the tree included."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            tasks = list((PROC / str(current) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
    return out


def state_of(pid: int) -> tuple[str, str] | None:
    """(state letter, command) of a process, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return rest.split()[0], head.partition("(")[2]


def allowed_seconds(expected_s: float) -> float:
    """The longest a run expected to take ``expected_s`` may take."""
    return expected_s * (1 + MARGIN_SHARE) + MARGIN_S


class Watch:
    """Watches one run from its driver's start to its end; ``reasons`` says what disturbed
    it (empty: nothing seen)."""

    def __init__(self, expected_s: float | None):
        self.expected_s = expected_s  # None: the run's length is its result, not bounded
        self.started = self.last = _boottime()
        self.slept = _sleep_clock()
        self.reasons: list[str] = []

    def _note(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def look(self, pid: int) -> None:
        """One look at the driver's tree and at the campaign's own clock."""
        now = _boottime()
        held = now - self.last - WATCH_S
        if held > GAP_S:
            self._note(f"the campaign did not run for {held:.0f} s during the run (it was "
                       "stopped, or the machine was)")
        self.last = now
        for child in tree(pid):
            found = state_of(child)
            if found and found[0] in STOPPED:
                self._note(f"process {child} ({found[1]}) was {STOPPED[found[0]]} during the "
                           "run")

    def finish(self) -> list[str]:
        """The reasons, with the run's wall time and the machine's sleep added."""
        now = _boottime()
        slept = _sleep_clock() - self.slept
        if slept > SLEEP_S:
            self._note(f"the machine was suspended for {slept:.0f} s during the run")
        if self.expected_s is None:
            return self.reasons
        took, allowed = now - self.started, allowed_seconds(self.expected_s)
        if took > allowed:
            self._note(f"the run took {took:.1f} s, more than the {allowed:.1f} s allowed for "
                       f"a run expected to take {self.expected_s:.1f} s")
        return self.reasons


def changed_knobs(knobs: dict[str, Any], record: dict[str, dict[str, Any]]) -> list[str]:
    """Each knob of a run's record that no longer reads as it did when it was set."""
    out = []
    for name, rec in record.items():
        knob, then = knobs.get(name), rec.get("after")
        if knob is None or then is None:
            continue
        try:
            now = knob.read()
        except Exception as exc:  # a knob that cannot be read now is not as it was
            out.append(f"knob {name} could not be read at the run's end ({exc})")
            continue
        if not knob.same_state(then, now):
            out.append(f"knob {name} changed during the run: it read {then!r} when set and "
                       f"{now!r} at the end")
    return out


def reason(reasons: list[str]) -> str:
    """The failure reason of a disturbed run."""
    return "disturbed: " + "; ".join(reasons) + " (kept as failed, never a sample)"
