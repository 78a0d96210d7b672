"""Parser of the irqtrace collector's bpftrace output: counts per CPU, cut to a time window.

The collector's bpftrace program (``iolab.collectors.irqtrace``) keeps cumulative count maps and,
every tick, prints a marker line ``@@tick <ns>`` (bpftrace's ``nsecs``: CLOCK_MONOTONIC) and
then each map; at exit it prints one last tick. So the output (``bpftrace -f json``) is a
series of snapshots of cumulative counts, each stamped. Counts inside a window are the
difference between the last snapshot at or before the window's start and the first at or
after its end (so the window is widened to whole ticks, never narrowed).

Maps: ``@irq[cpu, irq]`` device interrupts handled, ``@resched[cpu]`` and ``@call[cpu]``
reschedule and function-call IPIs sent to a CPU, ``@call_mask[cpu]`` function-call IPIs to a
CPU mask sent from a CPU, ``@task_add[cpu]``, ``@task_run[cpu]`` and ``@local_run[cpu]``
io_uring task work queued and run. A map with nothing counted is never printed by bpftrace;
it counts zero.

Result of :func:`parse_irqtrace`: ``{"probes": N, "lost_events": N, "ticks": N,
"window_ns": [start, end] of the snapshots used (start None: from when the probes attached),
or None without a window, "counts": {"@irq": {(cpu, irq): n}, "@resched": {(cpu,): n},
...}, "traced_ns": [first tick, last tick] (CLOCK_REALTIME)}``. Ticks out of time order are
refused.

Responsible for: the snapshots and the window. Not responsible for: the program or running
it (the collector), or bpftrace's map formats (:mod:`iolab.parsers.bpftrace`).
"""

from __future__ import annotations

import json
from typing import Any

from iolab.errors import ParseError, excerpt, shortened
from iolab.parsers import int_within_float, is_digits
from iolab.parsers.bpftrace import parse_bpftrace_json

TICK = "@@tick "


def _snapshots(text: str, source: str) -> tuple[list[tuple[int, str]], dict[str, Any]]:
    """[(monotonic ns, the JSON lines of that snapshot)], and the whole output's summary."""
    summary = parse_bpftrace_json(text, source)  # validates every line and map
    snaps: list[tuple[int, list[str]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        if event["type"] == "printf" and str(event.get("data", "")).startswith(TICK):
            stamp = event["data"][len(TICK):].strip()
            if not is_digits(stamp):
                raise ParseError(source, f"a tick without a time: {excerpt(event['data'])} "
                                         "(allowed: '@@tick' and whole nanoseconds, 0-9)")
            snaps.append((int_within_float(stamp, "tick", source), []))
        elif event["type"] in ("map", "hist", "stats") and snaps:
            snaps[-1][1].append(line)
    return [(t, "\n".join(lines)) for t, lines in snaps], summary


def parse_irqtrace(text: str, offset_ns: int, window: tuple[int, int] | None,
                   source: str = "irqtrace.json") -> dict[str, Any]:
    """Counts per map and key inside ``window`` (CLOCK_REALTIME ns; None: the whole trace).

    ``offset_ns`` is CLOCK_REALTIME minus CLOCK_MONOTONIC when the trace started (the
    collector records it), to place the ticks on the window's clock.
    """
    snaps, summary = _snapshots(text, source)
    if not snaps:
        raise ParseError(source, "no tick: bpftrace never printed its counts (it ended before "
                         "its first tick, or the output is cut off)")
    for (before, _), (now, _) in zip(snaps, snaps[1:]):
        if now < before:  # bpftrace prints its ticks in time order: a step back is an edit
            raise ParseError(source, f"a tick at {now} ns follows one at {before} ns (allowed: "
                                     "ticks in time order)")
    stamped = [(t + offset_ns, parse_bpftrace_json(body, source)["maps"] if body else {})
               for t, body in snaps]
    if window is None:
        first, last = (None, {}), stamped[-1]
        span = None
    else:
        start, end = window
        before = [s for s in stamped if s[0] <= start]
        after = [s for s in stamped if s[0] >= end]
        if not after:
            raise ParseError(source, "the trace ends before the measurement window does "
                             "(bpftrace was stopped early?)")
        first = before[-1] if before else (None, {})
        last = after[0]
        span = [first[0], last[0]]
    counts: dict[str, dict[tuple, int]] = {}
    for name in set(first[1]) | set(last[1]):
        old, new = first[1].get(name, {}), last[1].get(name, {})
        counts[name] = {key: new.get(key, 0) - old.get(key, 0) for key in set(old) | set(new)}
        if any(v < 0 for v in counts[name].values()):
            raise ParseError(source, f"map {shortened(name)}: a count went down between ticks")
    return {"probes": summary["probes"], "lost_events": summary["lost_events"],
            "ticks": len(snaps), "window_ns": span, "counts": counts,
            "traced_ns": [stamped[0][0], stamped[-1][0]]}
