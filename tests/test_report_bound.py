"""Every tool's report file is read with a bound and never through a link
(:func:`iolab.parsers.read_report`), as fio.json is: a report of gigabytes fails its run with a
parse error naming the file and the bound instead of being read whole into memory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from iolab.errors import ParseError
from iolab.parsers import REPORT_MOST
from iolab.safefiles import NotOurs
from iolab.tools.bdevperf import JSON_RESULTS, Bdevperf
from iolab.tools.bpftrace import Bpftrace
from iolab.tools.gpu_pcie_probe import GpuPcieProbe
from iolab.tools.p2p_bandwidth import P2pBandwidth
from iolab.tools.spdk_nvme_perf import SpdkNvmePerf
from iolab.tools.uring_reader import UringReader
from iolab.tools.xnvmeperf import LINE_TIMES, Xnvmeperf

BDEVPERF_TABLE = Path(__file__).parent / "fixtures" / "bdevperf" / "v25.09_rpc_mode_stdout.txt"
# a table without SPDK's start-up line: its version is then read from stderr
UNVERSIONED = b"".join(line for line in BDEVPERF_TABLE.read_bytes().splitlines(keepends=True)
                       if b"Starting SPDK" not in line)

# (tool, the adapter's reading call, the report file made too large, files beside it)
CASES = [
    ("bpftrace", lambda d: Bpftrace().parse(d), "bpftrace.json", {}),
    ("bdevperf", lambda d: Bdevperf().parse(d), "stdout", {}),
    ("bdevperf", lambda d: Bdevperf().parse(d), "stderr", {"stdout": UNVERSIONED}),
    ("xnvmeperf", lambda d: Xnvmeperf().parse(d), "stdout", {}),
    ("xnvmeperf", lambda d: Xnvmeperf().parse(d), "stderr", {"stdout": b""}),
    ("xnvmeperf", lambda d: Xnvmeperf().window(d), LINE_TIMES, {"stdout": b""}),
    ("p2p_bandwidth", lambda d: P2pBandwidth().parse(d), "stdout", {}),
    ("gpu_pcie_probe", lambda d: GpuPcieProbe().parse(d), "probe.json", {}),
    ("uring_reader", lambda d: UringReader().parse(d), "uring.json", {}),
    ("spdk_nvme_perf", lambda d: SpdkNvmePerf().parse(d), "stdout", {}),
]


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes with nothing of it on disk (nothing of it is read)."""
    with open(path, "wb") as fh:
        os.truncate(fh.fileno(), size)


@pytest.mark.parametrize("tool,read,name,beside", CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_report_beyond_the_bound_is_refused_unread(tmp_path, tool, read, name, beside):
    """Only fio.json had a bound: every other tool's report (bpftrace's JSON, bdevperf's and
    xnvmeperf's stdout and stderr, the line times, p2p_bandwidth's table, the probes' JSON,
    spdk_nvme_perf's table) was read whole, a sparse file of gigabytes into as much memory.
    Now one of more than REPORT_MOST bytes is a ParseError naming the file and the bound."""
    for other, data in beside.items():
        (tmp_path / other).write_bytes(data)
    path = tmp_path / name
    _sparse(path, REPORT_MOST + 1)
    with pytest.raises(ParseError) as info:
        read(tmp_path)
    assert str(info.value) == (
        f"{path}: holds more than 134,217,728 bytes, more than any report of {tool}'s "
        "(allowed: at most 134,217,728 bytes); it is not read")


@pytest.mark.parametrize("tool,read,name,beside", CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_a_report_that_is_a_link_is_never_followed(tmp_path, tool, read, name, beside):
    """A report file that is a symbolic link (to a file of another user's) is refused, not
    read through."""
    for other, data in beside.items():
        (tmp_path / other).write_bytes(data)
    target = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    target.write_text("{}\n")
    (tmp_path / name).symlink_to(target)
    with pytest.raises(NotOurs, match="is a symbolic link"):
        read(tmp_path)


def test_bdevperf_json_beyond_the_bound_is_not_taken(tmp_path):
    """perform_tests' JSON beyond the bound is not read; the text table decides and the note
    says why the JSON was not taken."""
    shutil.copy(BDEVPERF_TABLE, tmp_path / "stdout")
    _sparse(tmp_path / JSON_RESULTS, REPORT_MOST + 1)
    note = Bdevperf().parse(tmp_path)["note"]
    assert note == (f"{JSON_RESULTS} was not taken (holds more than 134,217,728 bytes, more "
                    "than any report of bdevperf's (allowed: at most 134,217,728 bytes); it is "
                    f"not read): results are read from bdevperf's text table")
