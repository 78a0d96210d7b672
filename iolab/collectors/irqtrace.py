"""The irqtrace collector: bpftrace counting, per CPU, a device's interrupts, IPIs and io_uring
task work around one run, cut to the measurement window.

Probes are tracepoints, chosen by what the kernel offers (``/sys/kernel/tracing/events``):
``irq:irq_handler_entry`` (filtered to the device's IRQs), ``ipi:ipi_send_cpu`` (a NULL
callback is a reschedule IPI, any other a function call), ``ipi:ipi_send_cpumask`` and
``io_uring:io_uring_task_add``, ``io_uring_task_work_run`` and ``io_uring_local_work_run``.
kprobes are not used: where this was developed, the kernel has no ``kprobe_events``. When
tracefs is not mounted (an empty ``events`` folder), it is mounted for the run and unmounted
after it.

Files in the run folder: ``irqtrace.bt`` (the program that ran), ``irqtrace.json``
(bpftrace's JSON output), ``irqtrace.meta.json`` (probes used and missing, the clock offset,
how bpftrace ended), ``irqtrace.stderr``.

Metrics (per CPU as JSON ``{"cpu": n}``, and totals): ``irqs``/``irqs_total`` (the device's
interrupts handled), ``resched_ipis``, ``call_ipis``, ``call_mask_ipis`` (by sending CPU),
``task_add``, ``task_run``, ``local_run``; ``probes``, ``lost_events``, ``missing_probes``.

Responsible for: the program, running bpftrace beside the driver, the metrics, reading
``irqtrace.meta.json`` back checked (:func:`read_meta`), and refusing counts the program did
not count (:func:`check_counts`: an IRQ it does not trace, a CPU the host record lacks, more
than the ticks' time holds).
Not responsible for: the output format (``iolab.parsers.irqtrace``), or which IRQs a device
has (``iolab.host.irqs``).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from iolab.collectors.hostrec import host_cpus
from iolab.collectors.interrupts import IRQ_MOST
from iolab.errors import InputError, ParseError, ToolError, shortened
from iolab.parsers import CLOCK_NS_ALLOWED, is_clock_ns, record_object, record_value
from iolab.parsers.interrupts import EVENTS_PER_CPU_S, RATE_SLACK_S, most_events
from iolab.parsers.irqtrace import TICK, parse_irqtrace
from iolab.tools import bpftrace
from iolab.tools.base import (Collector, Program, check_within, driver_window,
                              end_process_group)

TRACING = Path("/sys/kernel/tracing")
# the bpftrace adapter's program, needed here to trace beside a benchmark, not as one
BPFTRACE = dataclasses.replace(bpftrace.PROGRAM, role="tracing")
OUTPUT, PROGRAM_FILE, META, STDERR = ("irqtrace.json", "irqtrace.bt", "irqtrace.meta.json",
                                      "irqtrace.stderr")
ATTACH_TIMEOUT_S = 30.0
GRACE_S = 10.0
TICK_MS = 100

# map -> (tracepoint, filter or None, key); the filter may use {irqs}
PROBES = {
    "@irq": ("irq:irq_handler_entry", "{irqs}", "cpu, args->irq"),
    "@resched": ("ipi:ipi_send_cpu", "args->callback == 0", "args->cpu"),
    "@call": ("ipi:ipi_send_cpu", "args->callback != 0", "args->cpu"),
    "@call_mask": ("ipi:ipi_send_cpumask", None, "cpu"),
    "@task_add": ("io_uring:io_uring_task_add", None, "cpu"),
    "@task_run": ("io_uring:io_uring_task_work_run", None, "cpu"),
    "@local_run": ("io_uring:io_uring_local_work_run", None, "cpu"),
}
METRICS = {"@irq": "irqs", "@resched": "resched_ipis", "@call": "call_ipis",
           "@call_mask": "call_mask_ipis", "@task_add": "task_add", "@task_run": "task_run",
           "@local_run": "local_run"}


def available(tracing: Path = TRACING) -> set[str]:
    """The tracepoints (``group:event``) of the PROBES that this kernel offers."""
    return {tp for tp, _, _ in PROBES.values() if (tracing / "events" / tp.replace(":", "/")).is_dir()}


def program(irqs: list[int], tracepoints: set[str]) -> str:
    """The bpftrace program for the device's IRQs and the tracepoints there are."""
    lines = []
    used = []
    for name, (tp, condition, key) in PROBES.items():
        if tp not in tracepoints or (name == "@irq" and not irqs):
            continue
        if condition == "{irqs}":
            condition = " || ".join(f"args->irq == {irq}" for irq in irqs)
        where = f" /{condition}/" if condition else ""
        lines.append(f"tracepoint:{tp}{where} {{ {name}[{key}] = count(); }}")
        used.append(name)
    prints = " ".join(f"print({name});" for name in used)
    tick = f'printf("{TICK}%lld\\n", nsecs); {prints}'
    lines.append(f"interval:ms:{TICK_MS} {{ {tick} }}")
    # the last snapshot when bpftrace is stopped; cleared so that it is not printed twice
    lines.append(f"END {{ {tick} " + " ".join(f"clear({name});" for name in used) + " }")
    return "\n".join(lines) + "\n"


class IrqTrace(Collector):
    """bpftrace beside one run. ``irqs``: the device's IRQ numbers; ``optional``: a run goes
    on without a trace when bpftrace cannot trace (the metrics then say so)."""

    name = "irqtrace"

    def __init__(self, irqs: list[int], optional: bool = False, tracing: Path = TRACING):
        if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in irqs):
            raise InputError(None, "irqs", f"not a list of IRQ numbers: {irqs!r}")
        self.irqs = sorted(set(irqs))
        self.optional = optional
        self.tracing = tracing
        self._proc: subprocess.Popen | None = None
        self._mounted = False
        self._meta: dict[str, Any] = {}

    def programs(self) -> list[Program]:
        return [] if self.optional else [BPFTRACE]

    def _mount(self) -> None:
        events = self.tracing / "events"
        if events.is_dir() and any(events.iterdir()):
            return
        done = subprocess.run(["mount", "-t", "tracefs", "nodev", str(self.tracing)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ToolError(f"tracefs is not mounted at {self.tracing} and mounting it failed: "
                            f"{done.stderr.strip()} (needs root)")
        self._mounted = True

    def _unmount(self) -> None:
        if self._mounted:
            subprocess.run(["umount", str(self.tracing)], capture_output=True)
            self._mounted = False

    def start(self, run_dir: Path) -> None:
        try:
            self._start(Path(run_dir))
        except ToolError as exc:
            self._unmount()
            if not self.optional:
                raise
            self._meta = {"traced": False, "why": str(exc)}
            (Path(run_dir) / META).write_text(json.dumps(self._meta, indent=1) + "\n")

    def _start(self, run_dir: Path) -> None:
        executable = BPFTRACE.require()
        self._mount()
        tracepoints = available(self.tracing)
        text = program(self.irqs, tracepoints)
        (run_dir / PROGRAM_FILE).write_text(text)
        self._meta = {"traced": True, "tracepoints": sorted(tracepoints),
                      "missing": sorted({tp for tp, _, _ in PROBES.values()} - tracepoints),
                      "irqs": self.irqs, "tick_ms": TICK_MS,
                      "offset_ns": time.time_ns() - time.monotonic_ns(),
                      "mounted_tracefs": self._mounted}
        with open(run_dir / STDERR, "wb") as err:
            self._proc = subprocess.Popen([executable, "-f", "json", "-o", str(run_dir / OUTPUT),
                                           str(run_dir / PROGRAM_FILE)],
                                          stdout=subprocess.DEVNULL, stderr=err,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                message = (run_dir / STDERR).read_text(errors="replace").strip()
                self._proc = None
                raise ToolError(f"bpftrace ended before attaching its probes: {message[-300:]}")
            out = run_dir / OUTPUT
            if out.exists() and '"attached_probes"' in out.read_text(errors="replace"):
                return
            time.sleep(0.02)
        end_process_group(self._proc, GRACE_S)
        self._proc = None
        raise ToolError(f"bpftrace did not attach its probes within {ATTACH_TIMEOUT_S:.0f} s")

    def stop(self, run_dir: Path) -> None:
        if self._proc is not None:
            # SIGTERM: bpftrace runs END (the last tick) and exits
            self._meta["ended"] = end_process_group(self._proc, GRACE_S)
            self._proc = None
            (Path(run_dir) / META).write_text(json.dumps(self._meta, indent=1) + "\n")
        self._unmount()

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        run_dir = Path(run_dir)
        meta = read_meta(run_dir)
        out: dict[str, Any] = {"traced": meta["traced"]}
        if not meta["traced"]:
            return {**out, "why_not_traced": meta["why"]}
        trace = parse_irqtrace((run_dir / OUTPUT).read_text(), meta["offset_ns"], window,
                               str(run_dir / OUTPUT))
        run = driver_window(run_dir)  # bpftrace ran from start to stop: its ticks lie around it
        for end, stamp in zip(("first", "last"), trace["traced_ns"]):
            check_within(stamp, run, f"the {end} tick", str(run_dir / OUTPUT))
        check_counts(trace, meta["irqs"], host_cpus(run_dir), str(run_dir / OUTPUT))
        out.update({"probes": trace["probes"], "lost_events": trace["lost_events"],
                    "missing_probes": ",".join(meta["missing"]) or None})
        for name, metric in METRICS.items():
            counts = trace["counts"].get(name)
            if name == "@irq" and counts is not None:  # summed over the device's IRQs
                per_cpu: dict[int, int] = {}
                for (cpu, _irq), n in counts.items():
                    per_cpu[cpu] = per_cpu.get(cpu, 0) + n
                counts = {(cpu,): n for cpu, n in per_cpu.items()}
            if counts is None:  # not traced here (None), or traced and nothing counted
                missing = PROBES[name][0] in meta["missing"]
                out[metric] = None if missing else "{}"
                out[f"{metric}_total"] = None if missing else 0
                continue
            out[metric] = json.dumps({str(key[0]): n for key, n in sorted(counts.items())})
            out[f"{metric}_total"] = sum(counts.values())
        return out


def check_counts(trace: dict[str, Any], irqs: list[int], host: int | None,
                 source: str) -> None:
    """ParseError for a count of ``trace`` (:func:`iolab.parsers.irqtrace.parse_irqtrace`)
    that the program did not count: an ``@irq`` key of an IRQ not in ``irqs`` (the program's
    filter), a key of a CPU the host record's ``host`` logical CPUs do not have, or a count
    (a CPU's, all IRQs of ``@irq`` together) above what a CPU takes in the ticks' time
    (:func:`iolab.parsers.interrupts.most_events`). Each was stored: IRQ 99 counted as the
    device's, CPU 4000 on a 2-CPU host, 10^12 IPIs in 4 s."""
    start, end = trace["window_ns"] or (None, trace["traced_ns"][1])
    # counted from when the probes attached: before the first tick, by at most a tick
    start = start if start is not None else trace["traced_ns"][0] - TICK_MS * 10**6
    seconds = (end - start) / 1e9
    for name, counts in trace["counts"].items():
        per_cpu: dict[int, int] = {}
        for key, n in counts.items():
            cpu = key[0]
            if name == "@irq" and key[1:] and key[1] not in irqs:
                raise ParseError(source, f"map @irq counts IRQ {key[1]} on CPU {cpu}, which "
                                         f"the program does not trace (allowed: the IRQs of "
                                         f"{META}, {irqs})")
            if host is not None and not 0 <= cpu < host:
                raise ParseError(source, f"map {shortened(name)} counts CPU {cpu}, on a host "
                                         f"whose record has {host} logical CPUs (allowed: 0 "
                                         f"to {host - 1})")
            per_cpu[cpu] = per_cpu.get(cpu, 0) + n
        for cpu, n in per_cpu.items():
            if n > most_events(seconds):
                raise ParseError(source, f"map {shortened(name)} counts {n} on CPU {cpu} in "
                                         f"{seconds:g} s of ticks (allowed: at most "
                                         f"{most_events(seconds)}, {EVENTS_PER_CPU_S:.0e} a "
                                         f"CPU a second and {RATE_SLACK_S:g} s)")


TRACEPOINTS = sorted({tp for tp, _, _ in PROBES.values()})


def _is_missing(value: Any) -> bool:
    return (isinstance(value, list) and all(isinstance(v, str) for v in value)
            and value == sorted(set(value)) and set(value) <= set(TRACEPOINTS))


def read_meta(run_dir: Path) -> dict[str, Any]:
    """What :meth:`IrqTrace.parse` takes from ``irqtrace.meta.json``, each key checked. The
    collector's own record is read back as any output is: a cut-off or altered one fails the
    run naming the file and the key (not a KeyError that ends the campaign), and a clock
    offset no clock gives (1e300) never places the ticks, where it would change every count."""
    path = Path(run_dir) / META
    source = str(path)
    meta = record_object(path.read_text(), source)
    traced = record_value(meta, "traced", source, lambda v: isinstance(v, bool), "true or false")
    if not traced:
        return {"traced": False,
                "why": record_value(meta, "why", source, lambda v: isinstance(v, str), "a text")}
    return {"traced": True,
            "offset_ns": record_value(meta, "offset_ns", source, is_clock_ns,
                                      f"CLOCK_REALTIME minus CLOCK_MONOTONIC, {CLOCK_NS_ALLOWED}"),
            "missing": record_value(meta, "missing", source, _is_missing,
                                    "a sorted list, without repeats, of the tracepoints "
                                    + ", ".join(TRACEPOINTS)),
            "irqs": record_value(meta, "irqs", source, _is_irqs,
                                 f"a list, without repeats, of IRQ numbers 0 to {IRQ_MOST}")}


def _is_irqs(value: Any) -> bool:
    return (isinstance(value, list) and all(type(v) is int and 0 <= v <= IRQ_MOST for v in value)
            and len(set(value)) == len(value))
