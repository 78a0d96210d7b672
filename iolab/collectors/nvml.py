"""NVML as a collector: the PCIe traffic of one GPU where DCGM does not run.

``NvmlPcie(gpu, interval_ms)`` samples, from ``start`` to ``stop``, NVML's PCIe throughput of
the GPU (``nvmlDeviceGetPcieThroughput``, KB/s over NVML's own 20 ms window, converted to
bytes/s: RX is data arriving at the GPU, TX data leaving it) and, where the driver offers
them, its cumulative PCIe byte counters (fields ``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` and
``..._TX_BYTES``), each sample stamped with CLOCK_REALTIME by the collector. ``gpu`` is an NVML
index or a PCI address; the GPU's PCI address is recorded, so a chapter can check it is the
GPU the benchmark used. NVML comes from the ``nvidia-ml-py`` package (``pynvml``); tests give a
fake library object.

Files in the run folder: ``nvml.jsonl`` (one JSON object per sample: ``t_ns``,
``rx_bytes_per_s``, ``tx_bytes_per_s``, ``rx_bytes``, ``tx_bytes``; None where NVML had
none) and ``nvml.json`` (the GPU's index, PCI address and name, the driver version, the
interval, started and stopped times).

Metrics, named like the ``dcgmi`` collector's so that both give one schema:
``rx_mean_bytes_per_s``, ``rx_p50_bytes_per_s``, ``rx_p95_bytes_per_s`` (and ``tx_...``) over
the samples inside the measurement window; ``rx_counter_bytes_per_s`` and
``tx_counter_bytes_per_s`` (the counters' increase over the window's first and last sample,
per second); ``samples``; ``gpu_pci`` (lower case, 4-digit domain, as
:func:`~iolab.tools.base.pci_address` spells it).

Responsible for: sampling, the files and the metrics. Not responsible for: choosing the GPU
a benchmark uses, or DCGM (``iolab.collectors.dcgmi``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers.dcgm_dmon import window_stats
from iolab.tools.base import Collector, pci_address

SAMPLES, RECORD = "nvml.jsonl", "nvml.json"
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
            "interval_ms": self.interval_ms, "started_ns": time.time_ns()}
        self._stop.clear()
        out = open(Path(run_dir) / SAMPLES, "w")
        self._thread = threading.Thread(target=self._sample, args=(nvml, handle, out),
                                        name="nvml-sampler", daemon=True)
        self._thread.start()

    def _sample(self, nvml: Any, handle: Any, out: Any) -> None:
        fields = [nvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, nvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES]
        with out:
            while True:
                sample = {"t_ns": time.time_ns()}
                for key, counter in (("rx_bytes_per_s", nvml.NVML_PCIE_UTIL_RX_BYTES),
                                     ("tx_bytes_per_s", nvml.NVML_PCIE_UTIL_TX_BYTES)):
                    try:
                        sample[key] = nvml.nvmlDeviceGetPcieThroughput(handle, counter) * 1024
                    except nvml.NVMLError:
                        sample[key] = None
                try:
                    values = nvml.nvmlDeviceGetFieldValues(handle, fields)
                    for key, value in zip(("rx_bytes", "tx_bytes"), values):
                        sample[key] = value.value.ullVal if value.nvmlReturn == 0 else None
                except nvml.NVMLError:
                    sample["rx_bytes"] = sample["tx_bytes"] = None
                out.write(json.dumps(sample) + "\n")
                out.flush()  # what was measured survives a harness that dies mid-run
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
        record = json.loads((run_dir / RECORD).read_text())
        return {**parse_samples((run_dir / SAMPLES).read_text(), window,
                                str(run_dir / SAMPLES)), "gpu_pci": record["gpu_pci"]}


def parse_samples(text: str, window: tuple[int, int] | None,
                  source: str = SAMPLES) -> dict[str, Any]:
    """The metrics of ``nvml.jsonl`` inside ``window`` (every sample when None)."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except ValueError:
            raise ParseError(source, f"line {number}: not JSON (cut off?)") from None
        if not isinstance(sample, dict) or not isinstance(sample.get("t_ns"), int):
            raise ParseError(source, f"line {number}: a sample without its time 't_ns'")
        samples.append(sample)
    inside = [s for s in samples if window is None or window[0] <= s["t_ns"] <= window[1]]
    out: dict[str, Any] = {"samples": len(inside)}
    for name in ("rx", "tx"):
        stats = window_stats([s.get(f"{name}_bytes_per_s") for s in inside])
        out.update({f"{name}_{stat}_bytes_per_s": stats[stat] for stat in ("mean", "p50", "p95")})
        counted = [s for s in inside if s.get(f"{name}_bytes") is not None]
        span = (counted[-1]["t_ns"] - counted[0]["t_ns"]) / 1e9 if len(counted) >= 2 else 0
        out[f"{name}_counter_bytes_per_s"] = \
            (counted[-1][f"{name}_bytes"] - counted[0][f"{name}_bytes"]) / span if span else None
    return out
