"""The p2pBandwidthLatencyTest adapter (iolab.tools.p2p_bandwidth) and its driver
(scripts/drivers/p2p_bandwidth.sh): argv, checks, provenance lines, metrics.

No GPU is needed: the report is the synthesised fixture in tests/fixtures/aisio_formats/
(two GPUs; GPU 1 cannot access GPU 0 as a peer), and the programs (the test, nvidia-smi) fake
scripts on a PATH that holds only the fakes and the shell, so a real nvidia-smi cannot answer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_xnvmeperf import fake_program

from iolab.core.tool_registry import adapter
from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.tools import p2p_bandwidth as p2p
from iolab.tools.base import Invocation

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
REPORT = (FIX / "p2p_bandwidth.txt").read_text()
DRIVER = Path(__file__).resolve().parents[1] / "scripts" / "drivers" / "p2p_bandwidth.sh"
GPU_LISTING = ["0, 00000000:1A:00.0, NVIDIA Example GPU, 4, 16",
               "1, 00000000:B5:00.0, NVIDIA Example GPU, 4, 16"]
PROVENANCE = "\n".join(["p2pBandwidthLatencyTest: /opt/cuda-samples/p2pBandwidthLatencyTest",
                        *(f"iolab-gpu: {line}" for line in GPU_LISTING)]) + "\n"


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
    exe = fake_program(tmp_path, "p2pBandwidthLatencyTest", "exit 0\n")
    launch = p2p.P2pBandwidth().launch(Invocation("p2p_bandwidth", {"executable": str(exe),
                                                                    "p2p_read": True}), [])
    assert launch.argv == [str(DRIVER), "--executable", str(exe), "--", "--p2p_read"]
    assert launch.cpus is None
    assert p2p.P2pBandwidth().program({"executable": str(exe)}).status()["version"] is None


def test_launch_finds_the_test_on_path_or_passes_the_option_on(tmp_path, monkeypatch):
    exe = fake_program(tmp_path / "bin", "p2pBandwidthLatencyTest", "exit 0\n")
    monkeypatch.setenv("PATH", str(exe.parent))
    launch = p2p.P2pBandwidth().launch(Invocation("p2p_bandwidth", {"num_elems": 10}), [])
    assert launch.argv == [str(DRIVER), "--executable", str(exe), "--", "--numElems=10"]
    monkeypatch.setenv("PATH", str(tmp_path))
    launch = p2p.P2pBandwidth().launch(Invocation("p2p_bandwidth", {}), [])
    assert launch.argv == [str(DRIVER), "--executable", "p2pBandwidthLatencyTest", "--"]


def test_identity_names_the_driver():
    ident = p2p.P2pBandwidth().identity(Invocation("p2p_bandwidth", {"p2p_read": True}))
    assert ident["driver"] == "p2p_bandwidth.sh" and ident["driver_version"] == "1"


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
        "p2p_write_min_gbs": 25.0,  # the slower direction of the one pair
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
    assert metrics["p2p_write_min_gbs"] is None
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


def test_the_minimum_is_over_every_ordered_pair():
    parsed = parse_p2p_bandwidth(REPORT)
    parsed["matrices"][p2p.UNIDIR_WRITE] = {
        "unit": "GB/s", "row_ids": [0, 1, 2], "col_ids": [0, 1, 2],
        "values": [[1000.0, 25.0, 24.5], [26.0, 1000.0, 23.75], [30.0, 22.0, 1000.0]]}
    assert p2p.metrics(parsed, "x")["p2p_write_min_gbs"] == 22.0


# --- the driver's provenance lines in a stored run ---------------------------------------------

def test_parse_blanks_the_provenance_lines(tmp_path):
    with_lines = p2p.P2pBandwidth().parse(run_dir(tmp_path, PROVENANCE + REPORT))
    assert with_lines == p2p.P2pBandwidth().parse(run_dir(tmp_path, REPORT))
    unavailable = "p2pBandwidthLatencyTest: /x\niolab-gpu: unavailable (nvidia-smi not found)\n"
    assert p2p.P2pBandwidth().parse(run_dir(tmp_path, unavailable + REPORT)) == with_lines


def test_blanking_keeps_the_line_numbers_of_errors(tmp_path):
    assert p2p.without_provenance(PROVENANCE + REPORT) == "\n" * 3 + REPORT
    bad = REPORT.replace("     0 1000.00  20.50 ", "     0 1000.00  2x.50 ")
    with pytest.raises(ParseError, match=r"line 16: .*non-numeric"):
        p2p.P2pBandwidth().parse(run_dir(tmp_path, bad))
    with pytest.raises(ParseError, match=r"line 19: .*non-numeric"):
        p2p.P2pBandwidth().parse(run_dir(tmp_path, PROVENANCE + bad))


# --- the driver, run for real with fakes --------------------------------------------------------

NVIDIA_SMI_QUERY = ("--query-gpu=index,pci.bus_id,name,pcie.link.gen.max,pcie.link.width.max "
                    "--format=csv,noheader")
FAKE_NVIDIA_SMI = f"""\
if [ "$*" != "{NVIDIA_SMI_QUERY}" ]; then echo "unexpected arguments: $*"; exit 9; fi
""" + "".join(f"echo '{line}'\n" for line in GPU_LISTING)
# prints each argument it was given, then exits with a status of its own
FAKE_TEST = """\
for arg in "$@"; do printf 'arg [%s]\\n' "$arg"; done
exit 4
"""


def fake_path(tmp_path: Path, programs: dict[str, str]) -> str:
    """A PATH with only the given fake programs (name -> sh script body) and bash and cat."""
    fakes, system = tmp_path / "fakes", tmp_path / "system"
    system.mkdir(parents=True, exist_ok=True)
    for tool in ("bash", "cat"):
        (system / tool).symlink_to(shutil.which(tool))
    fakes.mkdir(exist_ok=True)
    for name, script in programs.items():
        fake_program(fakes, name, script)
    return f"{fakes}{os.pathsep}{system}"


def run_driver(*args: str, path: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(DRIVER), *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": path}, timeout=60)


def test_driver_declares_its_version_and_strict_mode():
    text = DRIVER.read_text()
    assert "\n# iolab-driver-version: 1\n" in text and "\nset -euo pipefail\n" in text
    assert "eval" not in text and os.access(DRIVER, os.X_OK)


@pytest.mark.parametrize("args, message", [
    ([], "--executable PATH is required"),
    (["--", "--p2p_read"], "--executable PATH is required"),
    (["--executable"], "--executable needs a path"),
    (["--executable", "--", "--p2p_read"], "--executable needs a path, got option '--'"),
    (["--executable", "p2pBandwidthLatencyTest", "--p2p_read"],
     "unknown option '--p2p_read' (the test's own options go after --)"),
])
def test_driver_usage_errors_exit_2(tmp_path, args, message):
    proc = run_driver(*args, path=fake_path(tmp_path, {"p2pBandwidthLatencyTest": FAKE_TEST}))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "usage: p2p_bandwidth.sh --executable PATH -- [test options...]",
        f"p2p_bandwidth.sh: {message}"]


def test_driver_without_an_executable_test_exits_127(tmp_path):
    path = fake_path(tmp_path, {})
    proc = run_driver("--executable", "p2pBandwidthLatencyTest", "--", path=path)
    assert proc.returncode == 127 and proc.stdout == ""
    assert proc.stderr.startswith("p2p_bandwidth.sh: 'p2pBandwidthLatencyTest' not found on "
                                  "PATH; build cuda-samples")
    not_executable = tmp_path / "p2p"
    not_executable.write_text("#!/bin/sh\necho ran\n")
    for given in (not_executable, tmp_path / "missing"):
        proc = run_driver("--executable", str(given), "--", path=path)
        assert proc.returncode == 127 and proc.stdout == ""
        assert proc.stderr.startswith(f"p2p_bandwidth.sh: '{given}' is not an executable file")


def test_driver_lists_the_gpus_and_passes_the_options_through(tmp_path):
    path = fake_path(tmp_path, {"p2pBandwidthLatencyTest": FAKE_TEST,
                                "nvidia-smi": FAKE_NVIDIA_SMI})
    options = ["--p2p_read", "--numElems=1000", "a b", "$(touch pwned)", ""]
    proc = run_driver("--executable", "p2pBandwidthLatencyTest", "--", *options, path=path,
                      cwd=tmp_path)
    assert proc.returncode == 4  # the test's own status
    assert proc.stdout.splitlines() == [
        f"p2pBandwidthLatencyTest: {tmp_path / 'fakes' / 'p2pBandwidthLatencyTest'}",
        *(f"iolab-gpu: {line}" for line in GPU_LISTING), *(f"arg [{o}]" for o in options)]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("nvidia_smi, why", [
    (None, "nvidia-smi not found"),
    ("echo 'NVIDIA-SMI has failed'\nexit 9\n", "nvidia-smi failed with status 9: "
                                                 "NVIDIA-SMI has failed"),
    ("exit 0\n", "nvidia-smi listed no GPU"),
])
def test_driver_runs_the_test_without_a_gpu_listing(tmp_path, nvidia_smi, why):
    fakes = {"p2pBandwidthLatencyTest": FAKE_TEST}
    if nvidia_smi is not None:
        fakes["nvidia-smi"] = nvidia_smi
    exe = tmp_path / "fakes" / "p2pBandwidthLatencyTest"
    proc = run_driver("--executable", str(exe), "--", "--sm_copy",
                      path=fake_path(tmp_path, fakes))
    assert proc.returncode == 4
    assert proc.stdout.splitlines() == [f"p2pBandwidthLatencyTest: {exe}",
                                        f"iolab-gpu: unavailable ({why})", "arg [--sm_copy]"]


def test_a_driven_run_parses(tmp_path, monkeypatch):
    path = fake_path(tmp_path, {"p2pBandwidthLatencyTest": f"cat '{FIX / 'p2p_bandwidth.txt'}'\n",
                                "nvidia-smi": FAKE_NVIDIA_SMI})
    monkeypatch.setenv("PATH", path)
    launch = p2p.P2pBandwidth().launch(Invocation("p2p_bandwidth", {}), [])
    folder = tmp_path / "run"
    folder.mkdir()
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        done = subprocess.run(launch.argv, cwd=folder, stdout=out, stderr=err,
                              env={"PATH": path}, timeout=60, check=False)
    assert done.returncode == 0, (folder / "stderr").read_text()
    assert (folder / "stdout").read_text().startswith("p2pBandwidthLatencyTest: ")
    metrics = p2p.P2pBandwidth().parse(folder)
    assert metrics["gpus"] == 2 and metrics["p2p_write_min_gbs"] == 25.0


def test_a_report_with_read_matrices_the_run_did_not_ask_for_is_foreign(tmp_path):
    """Only fio's and the uring reader's reports were set against the run's argv: a report
    without the P2P read matrices was stored as a run given --p2p_read."""
    folder = run_dir(tmp_path, (FIX / "p2p_bandwidth.txt").read_text())
    argv = ["p2p_bandwidth.sh", "--executable", "p2pBandwidthLatencyTest", "--"]
    assert adapter("p2p_bandwidth").foreign_report(folder, argv) == ""
    assert adapter("p2p_bandwidth").foreign_report(folder, [*argv, "--p2p_read"]) == (
        "stdout is not this run's report: it lacks the section 'Unidirectional P2P=Enabled "
        "Bandwidth (P2P Reads) Matrix (GB/s)', and the run gave the test --p2p_read, which "
        "prints it")
