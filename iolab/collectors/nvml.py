"""NVML as a collector: the PCIe traffic of one GPU where DCGM does not run.

``NvmlPcie(gpu, interval_ms)`` reads, from ``start`` to ``stop``, two of NVML's interfaces to
the GPU's PCIe traffic (RX is data arriving at the GPU, TX data leaving it):

- the cumulative byte counters, fields ``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` and
  ``..._TX_BYTES`` of ``nvmlDeviceGetFieldValues``, where the driver offers them. They are
  32-bit and wrap ("Value can be wrapped", nvml.h; the committed H200 runs reach 4,294,952,696
  and fall back), so the parser unwraps consecutive readings, which is unambiguous only while
  fewer than 2^32 bytes can pass between two readings: they are read between every two
  throughput calls, about every 20 ms, and a window with a longer gap than ``UNWRAP_GAP_S``
  gives no counter rate;
- the sampled throughput, ``nvmlDeviceGetPcieThroughput``, which NVML documents as a byte
  counter queried over a 20 ms interval, returned in KB/s; the call blocks for that interval.
  The raw number is stored as NVML returned it (``rx_kb_per_s``) and converted to bytes/s by
  the parser.

Each reading is stamped with CLOCK_REALTIME by the collector (a throughput call with its start
and end). ``gpu`` is an NVML index or a PCI address; the GPU's PCI address is recorded, so a
chapter can check it is the GPU the benchmark used, and so is the PCIe capability of its
configuration space where this user may read it (max payload and read request sizes, the read
completion boundary, the link; :func:`pcie_capability`). NVML comes from the ``nvidia-ml-py``
package (``pynvml``); tests give a fake library object.

Files in the run folder: ``nvml.jsonl`` (one JSON object per reading: ``t_ns`` and either the
counters ``rx_bytes`` and ``tx_bytes``, or one throughput ``rx_kb_per_s`` or ``tx_kb_per_s``
with the call's end ``t_end_ns``; None where NVML had none; runs stored before 2026-11-28 hold
one object per round with all four, the throughput already times 1024 as
``rx_bytes_per_s``) and ``nvml.json`` (the GPU's index, PCI address and name, the driver
version, the interval, the PCIe capability, started and stopped times).

Metrics, named like the ``dcgmi`` collector's so that both give one schema:
``rx_mean_bytes_per_s``, ``rx_p50_bytes_per_s``, ``rx_p95_bytes_per_s`` (and ``tx_...``) over
the throughput readings inside the measurement window; ``rx_counter_bytes_per_s`` and
``tx_counter_bytes_per_s`` (the unwrapped counters' increase from the window's first reading
to its last, per second); ``samples`` (RX throughput readings in the window),
``counter_samples`` and ``counter_gap_max_s``; ``window_s`` (the window's length, None
without one); ``gpu_pci`` (lower case, 4-digit domain, as
:func:`~iolab.tools.base.pci_address` spells it); ``max_payload_bytes`` (from the recorded
PCIe capability; None where it was not read).

Responsible for: reading NVML, the files and the metrics. Not responsible for: choosing the GPU
a benchmark uses, judging whether a rate is physically possible (the experiment's metrics
are held to the link's line rate), or DCGM (``iolab.collectors.dcgmi``).
"""


from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

from iolab.errors import InputError, ParseError, ToolError, excerpt
from iolab.parsers import load_json, record_object, record_value, within_float
from iolab.parsers.dcgm_dmon import window_stats
from iolab.tools.base import Collector, check_within, driver_window, pci_address

SAMPLES, RECORD = "nvml.jsonl", "nvml.json"
COUNTER_WRAP = 2**32
# the longest gap between two counter readings that can be unwrapped: 2^32 bytes at 64 GB/s,
# a PCIe 5.0 x16 link's line rate in one direction (63.0 GB/s after 128b/130b)
UNWRAP_GAP_S = COUNTER_WRAP / 64e9
# NVML's "KB" in nvmlDeviceGetPcieThroughput; runs before 2026-11-28 stored it times 1024
KB = 1024
SYSFS_PCI = Path("/sys/bus/pci/devices")
INSTALL = ("NVML comes with the NVIDIA driver; its Python binding is the nvidia-ml-py "
           "package ('pip install -e .[gpu]' in this repository, or 'pip install nvidia-ml-py')")


def _load_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise ToolError(f"NVML: the Python binding is not installed; {INSTALL}") from None
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlPcie(Collector):
    name = "nvml"

    def __init__(self, gpu: int | str = 0, interval_ms: int = 100, lib: Any = None):
        if isinstance(gpu, bool) or not isinstance(gpu, (int, str)) or \
                (isinstance(gpu, int) and gpu < 0):
            raise InputError(None, "gpu", f"{gpu!r} is neither a GPU index nor a PCI address")
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or \
                not 20 <= interval_ms <= 60_000:
            raise InputError(None, "interval_ms", f"{interval_ms!r} is out of range",
                             "a whole number of ms from 20 (NVML's own window) to 60000")
        self.gpu = gpu
        self.interval_ms = interval_ms
        self._lib = lib
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._record: dict[str, Any] = {}

    def _open(self) -> tuple[Any, Any]:
        nvml = self._lib or _load_nvml()
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise ToolError(f"NVML cannot start ({exc}): no NVIDIA driver or no GPU here") from None
        try:
            if isinstance(self.gpu, int):
                count = nvml.nvmlDeviceGetCount()
                if self.gpu >= count:
                    raise InputError(None, "gpu", f"no GPU {self.gpu}: NVML sees {count}",
                                     allowed=f"0 to {count - 1}" if count else "none here")
                handle = nvml.nvmlDeviceGetHandleByIndex(self.gpu)
            else:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(self.gpu)
        except nvml.NVMLError as exc:
            nvml.nvmlShutdown()
            raise InputError(None, "gpu", f"NVML has no GPU {self.gpu!r} ({exc})") from None
        except InputError:
            nvml.nvmlShutdown()
            raise
        return nvml, handle

    def start(self, run_dir: Path) -> None:
        nvml, handle = self._open()
        self._record = {
            # in one spelling with the xnvmeperf driver's and dcgmi's, so the three compare
            "gpu": self.gpu, "gpu_pci": pci_address(_text(nvml.nvmlDeviceGetPciInfo(handle).busId)),
            "gpu_name": _text(nvml.nvmlDeviceGetName(handle)),
            "driver": _text(nvml.nvmlSystemGetDriverVersion()),
            "interval_ms": self.interval_ms,
            "pcie": pcie_capability(pci_address(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))),
            "started_ns": time.time_ns()}
        self._stop.clear()
        out = open(Path(run_dir) / SAMPLES, "w")
        self._thread = threading.Thread(target=self._sample, args=(nvml, handle, out),
                                        name="nvml-sampler", daemon=True)
        self._thread.start()

    def _sample(self, nvml: Any, handle: Any, out: Any) -> None:
        fields = [nvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, nvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES]

        def counters() -> dict[str, Any]:
            reading: dict[str, Any] = {"t_ns": time.time_ns()}
            try:
                values = nvml.nvmlDeviceGetFieldValues(handle, fields)
                for key, value in zip(("rx_bytes", "tx_bytes"), values):
                    reading[key] = value.value.ullVal if value.nvmlReturn == 0 else None
            except nvml.NVMLError:
                reading["rx_bytes"] = reading["tx_bytes"] = None
            return reading

        def throughput(key: str, counter: int) -> dict[str, Any]:
            reading: dict[str, Any] = {"t_ns": time.time_ns()}
            try:
                value = nvml.nvmlDeviceGetPcieThroughput(handle, counter)  # blocks ~20 ms
            except nvml.NVMLError:
                value = None
            return {**reading, "t_end_ns": time.time_ns(), key: value}

        def write(reading: dict[str, Any]) -> None:
            out.write(json.dumps(reading) + "\n")
            out.flush()  # what was measured survives a harness that dies mid-run

        with out:
            # the counters between the throughput calls: about 20 ms apart, so that they can
            # be unwrapped
            while True:
                write(counters())
                write(throughput("rx_kb_per_s", nvml.NVML_PCIE_UTIL_RX_BYTES))
                write(counters())
                write(throughput("tx_kb_per_s", nvml.NVML_PCIE_UTIL_TX_BYTES))
                write(counters())
                if self._stop.wait(self.interval_ms / 1000):
                    return

    def stop(self, run_dir: Path) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        nvml = self._lib or _load_nvml()
        nvml.nvmlShutdown()
        self._record["stopped_ns"] = time.time_ns()
        (Path(run_dir) / RECORD).write_text(json.dumps(self._record, indent=1) + "\n")

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        run_dir = Path(run_dir)
        source = str(run_dir / RECORD)
        record = record_object((run_dir / RECORD).read_text(), source)
        gpu_pci = record_value(record, "gpu_pci", source, _is_pci_address,
                               "the GPU's PCI address, such as 0000:4b:00.0")
        pcie = record.get("pcie") if isinstance(record.get("pcie"), dict) else {}
        payload = record_value({"pcie.max_payload_bytes": pcie.get("max_payload_bytes")},
                               "pcie.max_payload_bytes", source,
                               lambda v: v is None or v in PAYLOAD_SIZES,
                               "null or one of " + ", ".join(map(str, PAYLOAD_SIZES)))
        text = (run_dir / SAMPLES).read_text()
        if not text.strip():
            # the sampler writes a whole round of readings before it looks at stop: a file
            # of none is cut off (a window too short for a reading has samples 0 instead)
            raise ParseError(run_dir / SAMPLES, "holds no reading at all (cut off? the "
                                                "sampler writes a round of them as it starts)")
        return {**parse_samples(text, window, str(run_dir / SAMPLES), driver_window(run_dir)),
                "gpu_pci": gpu_pci,
                "max_payload_bytes": payload}


# the sizes PCIe's Device Control register can set (128 << 0..5; 6 and 7 are reserved)
PAYLOAD_SIZES = tuple(128 << n for n in range(6))


def _is_pci_address(value: Any) -> bool:
    try:
        return pci_address(value) == value
    except InputError:
        return False


def _throughput(sample: dict[str, Any], name: str) -> float | None:
    if f"{name}_kb_per_s" in sample:
        value = sample[f"{name}_kb_per_s"]
        return None if value is None else value * KB
    return sample.get(f"{name}_bytes_per_s")  # a run stored before 2026-11-28


def unwrapped_rate(readings: list[tuple[int, int]]) -> tuple[float | None, float]:
    """Bytes per second of a 32-bit counter from ``(t_ns, value)`` readings in time order,
    unwrapped, and the longest gap between two readings (s); the rate is None with fewer than
    two readings or a gap longer than ``UNWRAP_GAP_S`` (a whole wrap could hide in it)."""
    if len(readings) < 2:
        return None, 0.0
    gaps = [(b[0] - a[0]) / 1e9 for a, b in zip(readings, readings[1:])]
    span = (readings[-1][0] - readings[0][0]) / 1e9
    if max(gaps) > UNWRAP_GAP_S or span <= 0:
        return None, max(gaps)
    moved = sum((b[1] - a[1]) % COUNTER_WRAP for a, b in zip(readings, readings[1:]))
    return moved / span, max(gaps)


def _check_reading(value: Any, key: str, number: int, source: str) -> None:
    """ParseError unless ``value`` is None or a finite number of 0 or more that a float can
    hold: NVML gives no NaN or infinity (one NaN reading made the window's mean NaN, which
    reads as "no value"), and JSON's true is no number."""
    within_float(value, f"line {number}: {key}", source)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value) or value < 0):
        raise ParseError(source, f"line {number}: {key} is {excerpt(value)} (allowed: a "
                                 "finite number of 0 or more, or null)")


def _check_order(sample: dict[str, Any], before: int | None, number: int, source: str) -> None:
    """ParseError unless a reading is later than the one before it and its throughput call
    ends no earlier than it starts: the collector writes them in time order, and a step back
    read as a 32-bit counter's wrap (50 MB/s was stored as 23.9 GB/s)."""
    t_ns, end = sample["t_ns"], sample.get("t_end_ns")
    if before is not None and t_ns <= before:
        raise ParseError(source, f"line {number}: t_ns {t_ns} is not after the previous "
                                 f"reading's {before} (allowed: readings in time order, each "
                                 "later than the one before)")
    if end is not None and end < t_ns:
        raise ParseError(source, f"line {number}: t_end_ns {end} is before its t_ns {t_ns} "
                                 "(allowed: a call that ends after it starts)")


def parse_samples(text: str, window: tuple[int, int] | None,
                  source: str = SAMPLES, run: tuple[int, int] | None = None) -> dict[str, Any]:
    """The metrics of ``nvml.jsonl`` inside ``window`` (every reading when None).

    ParseError for a reading out of time order (:func:`_check_order`) or, given the ``run``'s
    window (the driver's), stamped far outside it (:func:`iolab.tools.base.check_within`)."""
    samples: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:  # depth-checked: a line nested 100,000 deep raised RecursionError
            sample = load_json(line, source)
        except ValueError:
            raise ParseError(source, f"line {number}: not JSON (cut off?)") from None
        except ParseError as exc:  # its line is 1, of the one line it was given
            raise ParseError(source, f"line {number}: "
                                     f"{exc.problem.removeprefix('line 1: ')}") from None
        t_ns = sample.get("t_ns") if isinstance(sample, dict) else None
        if isinstance(t_ns, bool) or not isinstance(t_ns, int) or t_ns < 0:
            raise ParseError(source, f"line {number}: a sample without its time 't_ns' "
                                     "(allowed: an object whose t_ns is whole nanoseconds)")
        for key in ("t_ns", "rx_bytes", "tx_bytes", "rx_kb_per_s", "tx_kb_per_s",
                    "rx_bytes_per_s", "tx_bytes_per_s", "t_end_ns"):
            _check_reading(sample.get(key), key, number, source)
        _check_order(sample, samples[-1]["t_ns"] if samples else None, number, source)
        check_within(sample["t_ns"], run, f"line {number}", source)
        samples.append(sample)

    def inside(s: dict[str, Any]) -> bool:
        end = s.get("t_end_ns", s["t_ns"])
        return window is None or (window[0] <= s["t_ns"] and end <= window[1])

    kept = [s for s in samples if inside(s)]
    out: dict[str, Any] = {}
    gap_most = 0.0
    for name in ("rx", "tx"):
        readings = [s for s in kept if any(k.startswith(name + "_") and k != f"{name}_bytes"
                                           for k in s)]
        values = [_throughput(s, name) for s in readings]
        if name == "rx":
            out["samples"] = len(readings)
        stats = window_stats(values)
        out.update({f"{name}_{stat}_bytes_per_s": stats[stat] for stat in ("mean", "p50", "p95")})
        counted = [(s["t_ns"], s[f"{name}_bytes"]) for s in kept
                   if s.get(f"{name}_bytes") is not None]
        rate, gap = unwrapped_rate(counted)
        out[f"{name}_counter_bytes_per_s"] = rate
        gap_most = max(gap_most, gap)
        if name == "rx":
            out["counter_samples"] = len(counted)
    out["counter_gap_max_s"] = gap_most
    out["window_s"] = (window[1] - window[0]) / 1e9 if window else None
    return out


def pcie_capability(pci: str, root: Path = SYSFS_PCI) -> dict[str, Any] | None:
    """From the PCI Express capability of ``pci``'s configuration space: the max payload and
    max read request sizes set in Device Control, the read completion boundary in Link
    Control, and the link's current speed code and width in Link Status; None where the
    space cannot be read that far (an unprivileged user sees its first 64 bytes only)."""
    try:
        space = (Path(root) / pci / "config").read_bytes()[:4096]
    except OSError:
        return None
    if len(space) < 256:
        return None
    offset, seen = space[0x34] & 0xFC, set()
    while offset and offset not in seen and offset + 0x14 <= len(space):
        seen.add(offset)
        if space[offset] == 0x10:
            control = int.from_bytes(space[offset + 8:offset + 10], "little")
            link_control = int.from_bytes(space[offset + 0x10:offset + 0x12], "little")
            status = int.from_bytes(space[offset + 0x12:offset + 0x14], "little")
            return {"max_payload_bytes": 128 << ((control >> 5) & 7),
                    "max_read_request_bytes": 128 << ((control >> 12) & 7),
                    "read_completion_boundary_bytes": 128 if link_control & 8 else 64,
                    "link_speed_code": status & 0xF, "link_width": (status >> 4) & 0x3F}
        offset = space[offset + 1] & 0xFC
    return None
