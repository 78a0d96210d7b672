"""The typed checks every layer shares (iolab.checks), and the adapters that use them."""

from __future__ import annotations

import pytest

from iolab.checks import is_positive_int, is_whole_number, positive_int
from iolab.errors import InputError
from iolab.host.inventory import pick_cpus
from iolab.tools import p2p_bandwidth, spdk_nvme_perf, xnvmeperf
from iolab.tools.bdevperf import bdevperf_argv


@pytest.mark.parametrize("value", [1, 2, 2**70])
def test_a_positive_whole_number_passes(value):
    assert is_positive_int(value) and positive_int(value, "qdepth") == value


@pytest.mark.parametrize("value", [0, -1, True, False, 1.0, "1", None, [1]])
def test_anything_else_is_refused_naming_the_file_the_key_and_what_is_allowed(value):
    assert not is_positive_int(value)
    with pytest.raises(InputError) as info:
        positive_int(value, "qdepth", "params/x.yaml")
    assert info.value.path == "params/x.yaml" and info.value.key == "qdepth"
    assert info.value.allowed == "a whole number >=1"
    assert str(info.value) == (f"params/x.yaml: key 'qdepth': must be a positive whole number, "
                               f"got {value!r} (allowed: a whole number >=1)")


def test_a_huge_negative_number_is_quoted_short():
    """repr of an int of more than 4,300 digits raises ValueError; the message quotes an
    excerpt instead."""
    with pytest.raises(InputError, match="must be a positive whole number") as info:
        positive_int(-10**5000, "qdepth")
    assert len(str(info.value)) < 400


def test_the_unit_may_be_named():
    with pytest.raises(InputError, match="must be whole milliseconds >= 1, got 0"):
        positive_int(0, "interval_ms", what="whole milliseconds >= 1")


def test_a_whole_number_has_a_least_value():
    assert is_whole_number(0) and not is_whole_number(-1) and not is_whole_number(True)
    assert not is_whole_number(2, least=3) and is_whole_number(3, least=3)


XNVME = {"subcommand": "run", "devices": ["0000:4a:00.0"], "iopattern": "randread",
         "qdepth": 1, "iosize": 512, "runtime": 1, "cpumask": [0]}
SPDK = {"io_depth": 1, "io_size": 512, "time": 1, "io_pattern": "randread", "core_mask": [0],
        "devices": ["0000:4a:00.0"]}


@pytest.mark.parametrize("refuse, key", [
    (lambda: xnvmeperf.check({**XNVME, "qdepth": True}), "qdepth"),
    (lambda: xnvmeperf.check({**XNVME, "nqueues": 0}), "nqueues"),
    (lambda: spdk_nvme_perf.check({**SPDK, "time": True}), "time"),
    (lambda: p2p_bandwidth.check({"num_elems": 0}), "num_elems"),
    (lambda: bdevperf_argv("0x1", True, 512, 1), "queue_depth"),
    (lambda: pick_cpus([{"cpu": 0, "core": 0, "package": 0}], True, False), "n_cores"),
])
def test_each_adapter_refuses_a_boolean_or_zero_through_the_shared_check(refuse, key):
    with pytest.raises(InputError, match="must be a positive whole number") as info:
        refuse()
    assert info.value.key == key and info.value.allowed == "a whole number >=1"
