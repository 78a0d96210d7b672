"""The p2pBandwidthLatencyTest adapter (iolab.tools.p2p_bandwidth): argv, checks, metrics.

No GPU is needed: the report is the synthesised fixture in tests/fixtures/aisio_formats/
(two GPUs; GPU 1 cannot access GPU 0 as a peer), and the program a fake script.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.tools import p2p_bandwidth as p2p
from iolab.tools.base import Invocation
from iolab.tools.registry import adapter

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
REPORT = (FIX / "p2p_bandwidth.txt").read_text()


def run_dir(tmp_path: Path, stdout: str) -> Path:
    (tmp_path / "stdout").write_text(stdout)
    return tmp_path


def test_argv_defaults_and_flags():
    assert p2p.build_argv({}) == ["p2pBandwidthLatencyTest"]
    assert p2p.build_argv({"executable": "/opt/cuda-samples/p2p", "p2p_read": True,
                           "sm_copy": True, "num_elems": 1000}) == [
        "/opt/cuda-samples/p2p", "--p2p_read", "--sm_copy", "--numElems=1000"]


@pytest.mark.parametrize("options, key", [
    ({"p2p_read": 1}, "p2p_read"),
    ({"sm_copy": "yes"}, "sm_copy"),
    ({"num_elems": 0}, "num_elems"),
    ({"num_elems": True}, "num_elems"),
    ({"executable": ""}, "executable"),
    ({"executable": "--help"}, "executable"),
    ({"numElems": 5}, "numElems"),
])
def test_bad_options_name_the_key(options, key):
    with pytest.raises(InputError) as caught:
        p2p.build_argv(options)
    assert caught.value.key == key


def test_launch_finds_the_executable(tmp_path):
    exe = tmp_path / "p2pBandwidthLatencyTest"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    launch = p2p.P2pBandwidth().launch(Invocation("p2p_bandwidth", {"executable": str(exe),
                                                                    "p2p_read": True}), [])
    assert launch.argv == [str(exe), "--p2p_read"] and launch.cpus is None
    assert p2p.P2pBandwidth().program({"executable": str(exe)}).status()["version"] is None


def test_launch_without_the_test_says_how_to_build_it(tmp_path):
    status = p2p.P2pBandwidth().program({"executable": str(tmp_path / "missing")}).status()
    assert not status["found"] and "cuda-samples" in status["install"]
    with pytest.raises(ToolError, match="cuda-samples"):
        p2p.P2pBandwidth().program({"executable": str(tmp_path / "missing")}).require()


def test_parse_means_over_gpu_pairs(tmp_path):
    metrics = p2p.P2pBandwidth().parse(run_dir(tmp_path, REPORT))
    assert metrics == {
        "gpus": 2,
        "p2p_write_gbs": (25.0 + 26.0) / 2,
        "p2p_read_gbs": None,  # only with --p2p_read
        "staged_gbs": (20.5 + 21.25) / 2,
        "bidir_p2p_gbs": (50.0 + 51.0) / 2,
        "p2p_write_latency_us": (1.5 + 1.6) / 2,
        "peer_access_denied": 1,
        "problem": None,
        "note": "no peer access from GPU 1 to GPU 0: those P2P=Enabled figures are "
                "host-staged copies"}


def test_aisio_reference_is_the_mean_of_cells_01_and_10():
    assert p2p.aisio_reference(parse_p2p_bandwidth(REPORT)) == 50.5


def test_one_gpu_has_no_pairs(tmp_path):
    one = "\n".join(
        ["Device: 0, NVIDIA Example GPU, pciBusID: 1a, pciDeviceID: 0, pciDomainID:0"]
        + [block for title in (p2p.UNIDIR_STAGED, p2p.UNIDIR_WRITE, p2p.BIDIR_P2P)
           for block in (title, "   D\\D     0", "     0 1000.00")]
        + ["P2P=Enabled Latency (P2P Writes) Matrix (us)", "   GPU     0", "     0   2.40", "",
           "   CPU     0", "     0   2.60"]) + "\n"
    metrics = p2p.P2pBandwidth().parse(run_dir(tmp_path, one))
    assert metrics["gpus"] == 1 and metrics["bidir_p2p_gbs"] is None
    assert metrics["problem"] == "1 GPU(s): peer-to-peer figures need at least two"
    assert p2p.aisio_reference(parse_p2p_bandwidth(one)) is None


def test_a_report_cut_before_the_bidirectional_matrices_names_the_file(tmp_path):
    cut = REPORT.split("Bidirectional P2P=Disabled")[0]
    with pytest.raises(ParseError, match=rf"{tmp_path / 'stdout'}: no section "
                                         r"'Bidirectional P2P=Enabled"):
        p2p.P2pBandwidth().parse(run_dir(tmp_path, cut))


def test_malformed_report_names_the_file(tmp_path):
    with pytest.raises(ParseError, match=str(tmp_path / "stdout")):
        p2p.P2pBandwidth().parse(run_dir(tmp_path, "CUDA error: no device\n"))


def test_registered():
    assert isinstance(adapter("p2p_bandwidth"), p2p.P2pBandwidth)
