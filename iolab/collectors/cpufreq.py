"""The CPU frequency collector: ``scaling_cur_freq`` sampled with timestamps, cut to a window.

Responsible for: the sampler (``cpufreq.csv``, ``cpufreq-meta.json``) and its pure parser,
which takes a sample only of a CPU the metadata says was sampled, stamped within
:data:`iolab.tools.base.WINDOW_SLACK_NS` of the driver's window (anything else is another
run's record or an altered one, and fails the run).
Not responsible for: choosing which CPUs to sample (the experiment) or the measurement window
(the tool adapter says when the tool measured).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from iolab.errors import IolabError, ParseError, excerpt
from iolab.host.knobs import SmtKnob, SysRoot, TurboKnob
from iolab.parsers import (CPU_IDS_ALLOWED, is_cpu_ids, is_digits, record_object,
                           record_value)
from iolab.tools.base import Collector, check_within, driver_window

CPUFREQ_HEADER = "cpu,timestamp_ns,khz"
META = "cpufreq-meta.json"
# The frequencies a CPU can run at, in kHz: a sample outside (0 kHz, or 10^23 kHz) is no
# reading of a clock, and would pass into the mean as a good sample
KHZ_LEAST, KHZ_MOST = 1_000, 100_000_000  # 1 MHz and 100 GHz


def _optional_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


class CpufreqSampler(Collector):
    """Samples ``scaling_cur_freq`` of each CPU from a background thread.

    Writes ``cpufreq.csv`` in long format, one line per CPU and sample::

        cpu,timestamp_ns,khz
        0,1732181234000000000,3196599

    with the CPU id explicit, so an offline CPU or an SMT change never shifts a column (the
    AiSIO logger mapped columns to CPUs by position), and a CLOCK_REALTIME stamp taken as
    each value is read, so ``parse_cpufreq_samples`` can cut the samples to the measurement
    window. Samples are taken at start, every ``interval_s`` on a fixed schedule (no drift
    from the time the reads take), and once more at stop. A CPU that cannot be read in one
    sample (offline) is left out of that sample and counted in the metadata.

    ``cpufreq-meta.json`` records, once at start, the governor, ``scaling_driver`` and
    ``cpuinfo_max_freq`` of every sampled CPU and the SMT and turbo state read back, and at
    stop the number of samples and failed reads. Without cpufreq (virtual machines) the CSV
    holds only its header and the metadata says ``{"available": false, "reason": ...}``.
    """

    name = "cpufreq"

    def __init__(self, cpus: list[int] | None = None, interval_s: float = 0.25,
                 root: SysRoot | None = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s!r}")
        self.cpus = sorted(set(cpus)) if cpus is not None else None
        self.interval_s = interval_s
        self.root = root or SysRoot()
        self._files: dict[int, Path] = {}
        self._meta: dict[str, Any] = {}
        self._failed_reads: dict[int, int] = {}
        self._samples = 0
        self._error: str | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def _cpufreq_dirs(self) -> dict[int, Path]:
        dirs = {}
        for cpu_dir in self.root.cpu_dir.glob("cpu[0-9]*"):
            cpu = cpu_dir.name[3:]
            if is_digits(cpu) and (cpu_dir / "cpufreq/scaling_cur_freq").exists():
                dirs[int(cpu)] = cpu_dir / "cpufreq"
        return dict(sorted(dirs.items()))

    def _host_state(self) -> dict[str, Any]:
        state = {}
        for knob in (SmtKnob(self.root), TurboKnob(self.root)):
            try:
                state[knob.name] = knob.read()
            except IolabError:
                state[knob.name] = None
        return state

    def start(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        dirs = self._cpufreq_dirs()
        wanted = dirs if self.cpus is None else {c: d for c, d in dirs.items() if c in self.cpus}
        self._meta = {"available": bool(wanted), "source": "scaling_cur_freq",
                      "interval_s": self.interval_s,
                      "requested_cpus": self.cpus, **self._host_state()}
        if not dirs:
            self._meta["reason"] = (f"no {self.root.cpu_dir}/cpu*/cpufreq/scaling_cur_freq "
                                    f"(virtual machine or no cpufreq driver loaded)")
        elif not wanted:
            self._meta["reason"] = f"none of CPUs {self.cpus} has cpufreq (offline or absent)"
        else:
            self._meta["cpus"] = {str(cpu): {
                "governor": _optional_text(d / "scaling_governor"),
                "scaling_driver": _optional_text(d / "scaling_driver"),
                "cpuinfo_max_freq_khz": _int_or_none(_optional_text(d / "cpuinfo_max_freq")),
            } for cpu, d in wanted.items()}
            if self.cpus is not None:
                self._meta["cpus_without_cpufreq"] = [c for c in self.cpus if c not in wanted]
        self._write_meta(run_dir)
        if not wanted:
            (run_dir / "cpufreq.csv").write_text(CPUFREQ_HEADER + "\n")
            return
        # Closed by the sampling thread when it ends.
        out = open(run_dir / "cpufreq.csv", "w")
        out.write(CPUFREQ_HEADER + "\n")
        self._files = {cpu: d / "scaling_cur_freq" for cpu, d in wanted.items()}
        self._failed_reads = {cpu: 0 for cpu in wanted}
        self._samples = 0
        self._error = None
        self._halt.clear()
        self._sample(out)
        self._thread = threading.Thread(target=self._loop, args=(out,), name="cpufreq-sampler",
                                        daemon=True)
        self._thread.start()

    def _sample(self, out) -> None:
        lines = []
        for cpu, path in self._files.items():
            try:
                khz = int(path.read_text())
            except (OSError, ValueError):
                self._failed_reads[cpu] += 1
                continue
            lines.append(f"{cpu},{time.time_ns()},{khz}\n")
        out.write("".join(lines))
        # Flushed per sample, so a run killed mid-way keeps every sample taken before.
        out.flush()
        self._samples += 1

    def _loop(self, out) -> None:
        next_at = time.monotonic()
        try:
            while True:
                next_at += self.interval_s
                if self._halt.wait(max(0.0, next_at - time.monotonic())):
                    break
                self._sample(out)
            self._sample(out)
        # The run itself is still valid without frequencies: the failure goes into the
        # metadata instead of ending the campaign.
        except Exception as exc:
            self._error = f"sampling stopped: {exc}"
        finally:
            out.close()

    def stop(self, run_dir: Path) -> None:
        if self._thread is None:
            return
        self._halt.set()
        self._thread.join()
        self._thread = None
        self._meta.update(samples=self._samples,
                          failed_reads={str(c): n for c, n in self._failed_reads.items()},
                          error=self._error)
        self._write_meta(Path(run_dir))

    def _write_meta(self, run_dir: Path) -> None:
        (run_dir / META).write_text(json.dumps(self._meta, indent=2) + "\n")


    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        """``mean_khz`` of the samples inside the window (NaN without one, or without cpufreq)."""
        run_dir = Path(run_dir)
        csv = run_dir / "cpufreq.csv"
        if window is None or not csv.exists():
            return {"mean_khz": float("nan")}
        meta = run_dir / META
        sampled = sampled_cpus(meta.read_text(), str(meta)) if meta.exists() else None
        text = csv.read_text()
        if sampled and not any(line.strip() for line in text.splitlines()[1:]) \
                and not _reads_failed(meta.read_text(), str(meta)):
            # the sampler reads every CPU once as it starts and once as it stops: a record
            # of cpufreq that was there with no sample is cut off (its NaN is no reading)
            raise ParseError(csv, f"holds no sample at all, though {META} says cpufreq was "
                                  f"available on CPU(s) {sorted(sampled)} and no read failed "
                                  "(the sampler writes one as it starts and as it stops: cut "
                                  "off?)")
        return {"mean_khz": parse_cpufreq_samples(text, *window, str(csv), sampled,
                                                  driver_window(run_dir))["mean_khz"]}


def _reads_failed(meta_text: str, source: str) -> bool:
    """Whether the sampler's record says why it may hold no sample: sampling stopped with an
    ``error``, or a CPU's ``failed_reads`` reached its ``samples`` (every read of it failed)."""
    meta = record_object(meta_text, source)
    failed = meta.get("failed_reads")
    samples = meta.get("samples")
    if meta.get("error"):
        return True
    return isinstance(failed, dict) and type(samples) is int and any(
        type(n) is int and n >= samples for n in failed.values())


def sampled_cpus(meta_text: str, source: str = META) -> set[int]:
    """The CPUs the sampler read, from its ``cpufreq-meta.json``: none when it says cpufreq
    was not ``available``, else the keys of ``cpus``, each one of ``requested_cpus`` when the
    sampler was given a list. ParseError for a record the sampler did not write."""
    meta = record_object(meta_text, source)
    if not record_value(meta, "available", source, lambda v: isinstance(v, bool),
                        "true or false"):
        return set()
    cpus = record_value(meta, "cpus", source,
                        lambda v: isinstance(v, dict) and bool(v)
                        and all(is_digits(k) and len(k) <= 7 for k in v),
                        "an object keyed by the sampled CPUs' ids, in digits 0-9")
    requested = record_value(meta, "requested_cpus", source,
                             lambda v: v is None or is_cpu_ids(v), f"null or {CPU_IDS_ALLOWED}")
    ids = {int(k) for k in cpus}
    if requested is not None and not ids <= set(requested):
        raise ParseError(source, f"cpus names CPU(s) {sorted(ids - set(requested))} the "
                                 f"sampler was not given (requested_cpus {requested})")
    return ids


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and is_digits(text) and len(text) < 20 else None


def parse_cpufreq_samples(csv_text: str, window_start_ns: int, window_end_ns: int,
                          source: str = "cpufreq.csv", sampled: set[int] | None = None,
                          run: tuple[int, int] | None = None) -> dict[str, Any]:
    """Frequency statistics of the samples taken inside [window_start_ns, window_end_ns].

    Returns ``{"cpus": {"0": {"mean_khz", "min_khz", "max_khz", "n"}, ...}, "mean_khz",
    "n", "window_s"}`` where the overall ``mean_khz`` is the mean over CPUs of each CPU's
    mean (every CPU weighs the same, even one that missed a sample) and is NaN when no sample
    falls inside the window. Both window ends are inclusive.

    ParseError for a sample of a CPU not in ``sampled`` (the CPUs the sampler read,
    :func:`sampled_cpus`: one of CPU 4000 weighed in the mean as much as the run's own), or
    stamped far outside the ``run``'s window (the driver's).
    """
    if window_end_ns < window_start_ns:
        raise ValueError(f"window ends ({window_end_ns}) before it starts ({window_start_ns})")
    lines = csv_text.splitlines()
    if not lines or lines[0].strip() != CPUFREQ_HEADER:
        got = excerpt(lines[0]) if lines else "an empty file"
        raise ParseError(source, f"line 1: expected the header '{CPUFREQ_HEADER}', got {got}")
    per_cpu: dict[int, list[int]] = {}
    for number, line in enumerate(lines[1:], 2):
        fields = line.split(",")
        # digits 0-9 only (isdigit takes '²', which int refuses), and few enough that int
        # reads them (it refuses 4,300 and more)
        if len(fields) != 3 or not all(is_digits(f.strip()) and len(f) <= 40 for f in fields):
            raise ParseError(source, f"line {number}: expected three whole numbers (digits "
                             f"0-9) '{CPUFREQ_HEADER}', got {excerpt(line)}")
        cpu, stamp, khz = (int(f) for f in fields)
        if sampled is not None and cpu not in sampled:
            raise ParseError(source, f"line {number}: a sample of CPU {cpu}, which the sampler "
                             f"was not given (allowed: the CPUs {META} names, "
                             f"{sorted(sampled) or 'none'})")
        check_within(stamp, run, f"line {number}", source)
        if not KHZ_LEAST <= khz <= KHZ_MOST:
            raise ParseError(source, f"line {number}: khz is {khz} (allowed: {KHZ_LEAST} to "
                             f"{KHZ_MOST} kHz, 1 MHz to 100 GHz: no CPU runs outside)")
        if window_start_ns <= stamp <= window_end_ns:
            per_cpu.setdefault(cpu, []).append(khz)
    cpus = {str(cpu): {"mean_khz": sum(v) / len(v), "min_khz": min(v), "max_khz": max(v),
                       "n": len(v)}
            for cpu, v in sorted(per_cpu.items())}
    means = [entry["mean_khz"] for entry in cpus.values()]
    return {"cpus": cpus,
            "mean_khz": sum(means) / len(means) if means else float("nan"),
            "n": sum(entry["n"] for entry in cpus.values()),
            "window_s": (window_end_ns - window_start_ns) / 1e9}
