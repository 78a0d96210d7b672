"""The NVML collector, against a fake NVML library: samples with their times, N/A values,
the window cut, the counters' rate, the GPU's PCI address, and clear errors."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from iolab.collectors.nvml import NvmlPcie, parse_samples
from iolab.errors import InputError, ParseError, ToolError


class FakeNvml:
    """What NvmlPcie uses of pynvml; RX throughput counts up by 1 KB/s per call."""

    class NVMLError(Exception):
        pass

    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES = 0, 1
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 197, 198

    def __init__(self, gpus: int = 2, counters: bool = True, fail_init: bool = False):
        self.gpus, self.counters, self.fail_init = gpus, counters, fail_init
        self.calls = 0
        self.open = 0

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")
        self.open += 1

    def nvmlShutdown(self):
        self.open -= 1

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if bus != "00000000:C1:00.0":
            raise self.NVMLError("Not Found")
        return 0

    def nvmlDeviceGetPciInfo(self, handle):
        return SimpleNamespace(busId=b"00000000:C1:00.0")

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 PCIe"

    def nvmlSystemGetDriverVersion(self):
        return "580.95"

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        if counter == self.NVML_PCIE_UTIL_TX_BYTES:
            raise self.NVMLError("Not Supported")  # shows as N/A
        self.calls += 1
        return self.calls

    def nvmlDeviceGetFieldValues(self, handle, fields):
        if not self.counters:
            raise self.NVMLError("Not Supported")
        value = SimpleNamespace(ullVal=self.calls * 1000)
        return [SimpleNamespace(nvmlReturn=0, value=value) for _ in fields]


def test_samples_are_stamped_and_summarised(tmp_path):
    lib = FakeNvml()
    collector = NvmlPcie(1, interval_ms=20, lib=lib)
    collector.start(tmp_path)
    while lib.calls < 3:
        pass
    collector.stop(tmp_path)
    assert lib.open == 0, "NVML is shut down again"
    record = json.loads((tmp_path / "nvml.json").read_text())
    assert (record["gpu"], record["gpu_pci"], record["gpu_name"]) == (1, "0000:c1:00.0",
                                                                      "NVIDIA H100 PCIe")
    samples = [json.loads(line) for line in (tmp_path / "nvml.jsonl").read_text().splitlines()]
    assert len(samples) >= 3 and all(s["tx_bytes_per_s"] is None for s in samples)
    assert [s["rx_bytes_per_s"] for s in samples] == [1024 * (i + 1) for i in range(len(samples))]
    metrics = NvmlPcie.parse(tmp_path, None)
    assert metrics["samples"] == len(samples) and metrics["gpu_pci"] == "0000:c1:00.0"
    assert metrics["tx_mean_bytes_per_s"] is None and metrics["rx_mean_bytes_per_s"] > 0


def test_the_window_cuts_samples_and_the_counters_give_a_rate():
    lines = [{"t_ns": t * 10**9, "rx_bytes_per_s": v, "tx_bytes_per_s": None,
              "rx_bytes": t * 5000, "tx_bytes": None}
             for t, v in ((1, 100), (2, 200), (3, 300), (4, 400), (5, 10**6))]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    inside = parse_samples(text, (2 * 10**9, 4 * 10**9))
    assert inside["samples"] == 3 and inside["rx_mean_bytes_per_s"] == 300
    assert inside["rx_p50_bytes_per_s"] == 300 and inside["rx_counter_bytes_per_s"] == 5000
    assert inside["tx_counter_bytes_per_s"] is None and inside["tx_p95_bytes_per_s"] is None
    assert parse_samples(text, None)["samples"] == 5


@pytest.mark.parametrize("text, problem", [
    ('{"t_ns": 1, "rx_bytes_per_s": 5}\n{"t_ns": 2, "rx_by', "line 2: not JSON (cut off?)"),
    ('{"rx_bytes_per_s": 5}\n', "line 1: a sample without its time 't_ns'"),
])
def test_malformed_samples_are_refused(text, problem):
    with pytest.raises(ParseError) as info:
        parse_samples(text, None, "nvml.jsonl")
    assert str(info.value) == f"nvml.jsonl: {problem}"


def test_bad_gpus_and_missing_nvml_are_named(tmp_path, monkeypatch):
    with pytest.raises(InputError, match=r"key 'gpu': no GPU 2: NVML sees 2 \(allowed: 0 to 1\)"):
        NvmlPcie(2, lib=FakeNvml()).start(tmp_path)
    with pytest.raises(InputError, match="NVML has no GPU '0000:00:01.0'"):
        NvmlPcie("0000:00:01.0", lib=FakeNvml()).start(tmp_path)
    with pytest.raises(ToolError, match="NVML cannot start .*Driver Not Loaded.*no NVIDIA driver"):
        NvmlPcie(0, lib=FakeNvml(fail_init=True)).start(tmp_path)
    with pytest.raises(InputError, match="interval_ms"):
        NvmlPcie(0, interval_ms=5)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    with pytest.raises(ToolError, match="pip install nvidia-ml-py"):
        NvmlPcie(0).start(tmp_path)
