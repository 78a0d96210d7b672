"""The NVML collector, against a fake NVML library: readings with their times, N/A values,
the window cut, the 32-bit counters unwrapped, NVML's KB/s, the GPU's PCI address and PCIe
capability, and clear errors."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from iolab.collectors.nvml import NvmlPcie, parse_samples, pcie_capability, unwrapped_rate
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
    readings = [json.loads(line) for line in (tmp_path / "nvml.jsonl").read_text().splitlines()]
    rx = [r for r in readings if "rx_kb_per_s" in r]
    tx = [r for r in readings if "tx_kb_per_s" in r]
    counters = [r for r in readings if "rx_bytes" in r]
    assert len(rx) >= 3 and all(r["tx_kb_per_s"] is None for r in tx)
    # NVML's number as it returned it, and the call's end after its start
    assert [r["rx_kb_per_s"] for r in rx] == list(range(1, len(rx) + 1))
    assert all(r["t_end_ns"] >= r["t_ns"] for r in rx + tx)
    # a counter reading before and after every throughput call
    assert len(counters) >= len(rx) + len(tx)
    metrics = NvmlPcie.parse(tmp_path, None)
    assert metrics["samples"] == len(rx) and metrics["gpu_pci"] == "0000:c1:00.0"
    assert metrics["counter_samples"] == len(counters)
    assert metrics["tx_mean_bytes_per_s"] is None
    assert metrics["rx_mean_bytes_per_s"] == 1024 * sum(range(1, len(rx) + 1)) / len(rx)


MS = 10**6


def test_the_window_cuts_legacy_samples_and_the_counters_give_a_rate():
    # the one-object-per-round format of the runs stored before 2026-11-28
    lines = [{"t_ns": t * 10 * MS, "rx_bytes_per_s": v, "tx_bytes_per_s": None,
              "rx_bytes": t * 5000, "tx_bytes": None}
             for t, v in ((1, 100), (2, 200), (3, 300), (4, 400), (5, 10**6))]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    inside = parse_samples(text, (20 * MS, 40 * MS))
    assert inside["samples"] == 3 and inside["rx_mean_bytes_per_s"] == 300
    assert inside["rx_p50_bytes_per_s"] == 300 and inside["rx_counter_bytes_per_s"] == 500_000
    assert inside["tx_counter_bytes_per_s"] is None and inside["tx_p95_bytes_per_s"] is None
    assert parse_samples(text, None)["samples"] == 5


def test_throughput_is_nvmls_kb_per_s_and_a_reading_counts_only_inside_the_window():
    lines = [{"t_ns": 0, "t_end_ns": 20 * MS, "rx_kb_per_s": 1000},
             {"t_ns": 25 * MS, "t_end_ns": 45 * MS, "rx_kb_per_s": 3000},
             {"t_ns": 50 * MS, "t_end_ns": 70 * MS, "rx_kb_per_s": 5000}]
    text = "\n".join(json.dumps(x) for x in lines)
    # the last call ends after the window: its 20 ms are not all inside it
    inside = parse_samples(text, (0, 60 * MS))
    assert inside["samples"] == 2 and inside["rx_mean_bytes_per_s"] == 2000 * 1024


def test_the_32_bit_counters_are_unwrapped():
    wrap = 2**32
    # 1.5e9 bytes every 25 ms (60 GB/s) wraps the counter every third reading
    values = [(4_000_000_000 + k * 1_500_000_000) % wrap for k in range(9)]
    text = "\n".join(json.dumps({"t_ns": k * 25 * MS, "rx_bytes": v, "tx_bytes": None})
                     for k, v in enumerate(values))
    out = parse_samples(text, None)
    assert out["rx_counter_bytes_per_s"] == pytest.approx(60e9)
    assert out["counter_samples"] == 9 and out["counter_gap_max_s"] == pytest.approx(0.025)


def _counter_lines(n: int = 10) -> list[str]:
    return [json.dumps({"t_ns": 10**18 + k * 20 * MS, "rx_bytes": 1_000_000 * k,
                        "tx_bytes": 1_000_000 * k}) for k in range(n)]


@pytest.mark.parametrize("change, problem", [
    # two readings swapped: the step back read as a wrap, 50 MB/s stored as 23.9 GB/s
    (lambda ls: ls[:4] + [ls[5], ls[4]] + ls[6:],
     r"line 6: t_ns 1000000000080000000 is not after the previous reading's "
     r"1000000000100000000 \(allowed: readings in time order"),
    (lambda ls: ls[:5] + [ls[4]] * 3 + ls[5:], "line 6: t_ns .* is not after the previous"),
    (lambda ls: ls + ['{"t_ns": 1000000001000000000, "t_end_ns": 1000000000999999999, '
                      '"rx_kb_per_s": 1}'],
     "line 11: t_end_ns 1000000000999999999 is before its t_ns"),
])
def test_readings_out_of_time_order_are_refused_never_read_as_a_wrap(change, problem):
    lines = _counter_lines()
    assert parse_samples("\n".join(lines), None)["rx_counter_bytes_per_s"] == pytest.approx(5e7)
    with pytest.raises(ParseError, match=f"^nvml.jsonl: {problem}"):
        parse_samples("\n".join(change(lines)), None, "nvml.jsonl")


def test_a_reading_far_outside_the_runs_window_is_refused():
    lines = _counter_lines()
    run = (10**18 - MS, 10**18 + 200 * MS)
    assert parse_samples("\n".join(lines), None, "nvml.jsonl", run)["counter_samples"] == 10
    late = lines + [json.dumps({"t_ns": 10**18 + 3600 * 10**9, "rx_bytes": 10**7})]
    with pytest.raises(ParseError, match=r"^nvml.jsonl: line 11 is stamped .* outside the run's "
                                         r"window .* \(allowed: within 60 s of it\)"):
        parse_samples("\n".join(late), None, "nvml.jsonl", run)


def test_a_gap_that_could_hide_a_wrap_gives_no_counter_rate():
    # 70 ms: at a PCIe 5.0 x16 link's line rate, 2^32 bytes pass in 67 ms
    assert unwrapped_rate([(0, 10), (70 * MS, 20)]) == (None, pytest.approx(0.07))
    assert unwrapped_rate([(0, 10), (60 * MS, 20)])[0] == pytest.approx(10 / 0.06)
    assert unwrapped_rate([(0, 10)]) == (None, 0.0)


def _config_space(control: int, link_control: int, status: int) -> bytes:
    space = bytearray(256)
    space[0x34] = 0x40                      # the capability list starts at 0x40
    space[0x40:0x42] = bytes([0x01, 0x60])  # power management, next at 0x60
    space[0x60:0x62] = bytes([0x10, 0x00])  # PCI Express, the last
    space[0x68:0x6A] = control.to_bytes(2, "little")
    space[0x70:0x72] = link_control.to_bytes(2, "little")
    space[0x72:0x74] = status.to_bytes(2, "little")
    return bytes(space)


def test_the_pcie_capability_is_read_from_the_configuration_space(tmp_path):
    device = tmp_path / "0000:c1:00.0"
    device.mkdir()
    # MPS 256 B (code 1 in bits 5-7), MRRS 512 B (code 2 in bits 12-14), RCB 128 B, Gen5 x16
    (device / "config").write_bytes(_config_space((1 << 5) | (2 << 12), 8, 5 | (16 << 4)))
    assert pcie_capability("0000:c1:00.0", tmp_path) == {
        "max_payload_bytes": 256, "max_read_request_bytes": 512,
        "read_completion_boundary_bytes": 128, "link_speed_code": 5, "link_width": 16}
    # what an unprivileged user reads: the first 64 bytes only
    (device / "config").write_bytes(bytes(64))
    assert pcie_capability("0000:c1:00.0", tmp_path) is None
    assert pcie_capability("0000:c2:00.0", tmp_path) is None


@pytest.mark.parametrize("text, problem", [
    ('{"t_ns": 1, "rx_bytes_per_s": 5}\n{"t_ns": 2, "rx_by', "line 2: not JSON (cut off?)"),
    ('{"rx_bytes_per_s": 5}\n', "line 1: a sample without its time 't_ns' "
     "(allowed: an object whose t_ns is whole nanoseconds)"),
    ('{"t_ns": 1, "rx_bytes": -5}\n',
     "line 1: rx_bytes is -5 (allowed: a finite number of 0 or more, or null)"),
    ('{"t_ns": 1, "rx_kb_per_s": "5"}\n',
     "line 1: rx_kb_per_s is '5' (allowed: a finite number of 0 or more, or null)"),
    # one NaN reading made the window's mean NaN ("no value"); NVML gives none
    ('{"t_ns": 2, "rx_kb_per_s": 1}\n{"t_ns": 1, "rx_kb_per_s": NaN}\n',
     "line 2: rx_kb_per_s is nan (allowed: a finite number of 0 or more, or null)"),
    ('{"t_ns": 1, "tx_kb_per_s": Infinity}\n',
     "line 1: tx_kb_per_s is inf (allowed: a finite number of 0 or more, or null)"),
    ('{"t_ns": 1, "rx_bytes": -Infinity}\n',
     "line 1: rx_bytes is -inf (allowed: a finite number of 0 or more, or null)"),
    ('{"t_ns": true, "rx_bytes": 1}\n', "line 1: a sample without its time 't_ns' "
     "(allowed: an object whose t_ns is whole nanoseconds)"),
    ('{"t_ns": 1}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
     "line 2: arrays or objects nested more than 100 levels deep (at most 100 allowed)"),
    ('{"t_ns": 1, "rx_kb_per_s": 1' + "0" * 400 + "}\n",
     "line 1: rx_kb_per_s: an integer of about 401 digits, beyond the largest number a "
     "measurement can hold (1.8e+308)"),
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


@pytest.mark.parametrize("record, problem", [
    ('{"gpu": 0', "not JSON (cut off?); the collector writes one object"),
    ('[]', "holds list, not the object the collector writes"),
    ('{"gpu": 0}', "has no gpu_pci (allowed: the GPU's PCI address, such as 0000:4b:00.0)"),
    ('{"gpu_pci": 7}', "gpu_pci is 7 (allowed: the GPU's PCI address, such as 0000:4b:00.0)"),
    ('{"gpu_pci": "0000:C1:00.0"}', "gpu_pci is '0000:C1:00.0' (allowed: the GPU's PCI "
     "address, such as 0000:4b:00.0)"),
    ('{"gpu_pci": "0000:c1:00.0", "pcie": {"max_payload_bytes": 8192}}',
     "pcie.max_payload_bytes is 8192 (allowed: null or one of 128, 256, 512, 1024, 2048, 4096)"),
])
def test_a_record_the_collector_did_not_write_fails_the_parse_naming_it(tmp_path, record,
                                                                         problem):
    """The collector's own record is read back like any output: a cut-off or altered one
    gave a KeyError or a JSON error naming no file, which ended the campaign."""
    (tmp_path / "nvml.json").write_text(record)
    (tmp_path / "nvml.jsonl").write_text('{"t_ns": 1, "rx_kb_per_s": 1}\n')
    with pytest.raises(ParseError) as info:
        NvmlPcie.parse(tmp_path, None)
    assert str(info.value) == f"{tmp_path}/nvml.json: {problem}"


def test_a_readings_file_of_no_reading_at_all_fails_the_parse(tmp_path):
    """Probe 11's Q10 class: nvml.jsonl cut to nothing read as samples 0 and None rates, as
    a window too short for a reading does; the sampler writes a round as it starts."""
    (tmp_path / "nvml.json").write_text('{"gpu_pci": "0000:c1:00.0"}')
    (tmp_path / "nvml.jsonl").write_text("\n")
    with pytest.raises(ParseError) as info:
        NvmlPcie.parse(tmp_path, None)
    assert str(info.value) == (f"{tmp_path}/nvml.jsonl: holds no reading at all (cut off? the "
                               "sampler writes a round of them as it starts)")
    (tmp_path / "nvml.jsonl").write_text('{"t_ns": 1, "rx_kb_per_s": 1}\n')
    assert NvmlPcie.parse(tmp_path, (5, 9))["samples"] == 0  # none inside the window
