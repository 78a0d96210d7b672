"""The link's own counters (iolab.experiments.gpu_pcie.counters): the framing model's ratios
from the PCIe packet sizes, the table of counted runs beside it, the TLP size the read requests
imply, and ``iolab verify`` listing the rates above the recorded link's line rate."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from iolab.cli import main
from iolab.experiments.gpu_pcie import counters as cn


@pytest.mark.parametrize("mode, direction, tlp, along, against", [
    # a completion: 12 B header + 8 B framing; asked for by a 16 + 8 B read request
    ("copy", "h2d", 256, 1 + 20 / 256, 24 / 256),
    ("read", "none", 128, 1 + 20 / 128, 24 / 128),
    # a posted write: 16 B header + 8 B framing, and nothing answers it
    ("copy", "d2h", 256, 1 + 24 / 256, 0.0),
    ("write", "none", 128, 1.1875, 0.0),
])
def test_the_framing_model_from_the_packet_size(mode, direction, tlp, along, against):
    assert cn.framing(mode, direction, tlp) == (pytest.approx(along), pytest.approx(against))


def test_an_unknown_packet_size_gives_no_model():
    assert all(math.isnan(v) for v in cn.framing("copy", "h2d", float("nan")))


def _run(mode, direction, size, along, against, samples=100, mps=256.0):
    return {"mode": mode, "direction": direction, "bytes": size, "iosize": size,
            "gbs": 50.0, "total_over_payload": along, "requests_over_payload": against,
            "nvml.counter_samples": samples, "nvml.max_payload_bytes": mps,
            "nvml.rx_mean_bytes_per_s": 60e9, "nvml.rx_counter_bytes_per_s": 50e9,
            "nvml.tx_mean_bytes_per_s": 60e9, "nvml.tx_counter_bytes_per_s": 50e9}


def test_the_table_groups_counted_runs_and_sets_the_model_beside_them():
    rows = pd.DataFrame(
        [_run("copy", "h2d", 2**26, v, 0.09375) for v in (1.077, 1.078, 1.079)]
        + [_run("read", "none", 4096, v, 0.1875) for v in (1.155, 1.156, 1.157)]
        # too few counter readings in its window: left out
        + [_run("read", "none", 4096, 1.5, 0.5, samples=5)])
    shown = cn.table(rows, min_samples=20, sm_tlp_bytes=128)
    assert list(shown["n"]) == [3, 3]
    copy, read = shown.iloc[0], shown.iloc[1]
    assert (copy["tlp_bytes"], read["tlp_bytes"]) == (256, 128)
    assert copy["along"] == pytest.approx(1.078) and copy["along_low"] < 1.078 < copy["along_high"]
    assert read["model_along"] == pytest.approx(1.15625)
    assert copy["throughput_over_counter"] == pytest.approx(1.2)
    # the reads' request traffic gives the packet size back
    assert cn.implied_tlp(shown) == {("copy", "h2d", 2**26): pytest.approx(256),
                                     ("read", "none", 4096): pytest.approx(128)}
    assert cn.model_error(shown) == pytest.approx(abs(1.156 / 1.15625 - 1), abs=1e-9)
    ends = cn.summary(shown)
    assert ends["low"]["mode"] == "copy" and ends["high"]["mode"] == "read"


def test_runs_without_counters_give_an_empty_table():
    assert cn.table(pd.DataFrame(), 20, 128).empty
    rows = pd.DataFrame([_run("copy", "h2d", 2**26, float("nan"), float("nan"))])
    assert cn.table(rows, 20, 128).empty


def test_verify_lists_the_rates_above_the_recorded_link(capsys):
    assert main(["verify", "gpu_pcie", "--env", "h200-pcie5", "--fast"]) == 0
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if line.startswith("  implausible: run ")]
    assert len(listed) == 13
    assert any("114.4 GB/s is above the 63.0 GB/s line rate" in line for line in listed)
    assert "13 runs with a value above its ceiling, left out of the tidy table" in out
