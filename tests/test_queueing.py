"""The Little's-law bound and its latency estimate, on constructed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iolab.analysis.queueing import LittleBound, latency_from
from iolab.errors import InputError

MODEL = LittleBound(latency_s=50e-6, device_iops=4e6, link_bytes_per_s=45e9, ndevs=16)


def test_each_term_binds_where_it_is_smallest():
    # 16 commands at 50 us: 320,000 IOPS, far below the devices (64 M) and the link
    assert MODEL.iops(16, 512) == pytest.approx(16 / 50e-6)
    assert MODEL.binding(16, 512) == "latency"
    # 8192 commands at 512 B: the devices' 64 M IOPS bind before the link's 87.9 M
    assert MODEL.iops(8192, 512) == pytest.approx(64e6)
    assert MODEL.binding(8192, 512) == "devices"
    # at 64 KiB the link binds: 45 GB/s / 65536 B
    assert MODEL.bytes_per_s(8192, 65536) == pytest.approx(45e9)
    assert MODEL.binding(8192, 65536) == "link"


def test_arrays_broadcast():
    out = MODEL.bytes_per_s(np.array([16, 2048]), np.array([[512], [65536]]))
    assert out.shape == (2, 2)
    assert out[1, 1] == pytest.approx(45e9)


def test_latency_is_the_smallest_response_time():
    points = pd.DataFrame({"outstanding": [16, 2048, 32], "iops": [636_000, 42e6, 700_000]})
    latency, at = latency_from(points, "outstanding", "iops")
    assert latency == pytest.approx(16 / 636_000)
    assert at["outstanding"] == 16


def test_latency_needs_a_usable_point():
    points = pd.DataFrame({"outstanding": [16, None], "iops": [0.0, 1e6]})
    with pytest.raises(InputError, match="latency"):
        latency_from(points, "outstanding", "iops")


@pytest.mark.parametrize("field, value", [("latency_s", 0), ("device_iops", float("nan")),
                                          ("link_bytes_per_s", -1.0), ("ndevs", 0)])
def test_parameters_must_be_positive(field, value):
    kwargs = dict(latency_s=1e-5, device_iops=1e6, link_bytes_per_s=1e9, ndevs=1)
    kwargs[field] = value
    with pytest.raises(InputError, match=field):
        LittleBound(**kwargs)


def test_without_devices_the_bound_is_latency_or_link():
    model = LittleBound(latency_s=2e-6, device_iops=float("inf"), link_bytes_per_s=50e9, ndevs=1)
    assert model.iops(32, 512) == pytest.approx(32 / 2e-6)
    assert model.bytes_per_s(32768, 4096) == pytest.approx(50e9)
    assert model.binding(32768, 4096) == "link"
