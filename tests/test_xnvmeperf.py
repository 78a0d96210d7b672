"""The xnvmeperf adapter (iolab.tools.xnvmeperf) and its driver (scripts/drivers/xnvmeperf.sh):
argv both ways, option checks, provenance lines, metrics.

No xnvmeperf and no GPU are needed: reports come from the synthesised fixtures in
tests/fixtures/aisio_formats/ (see its README), and where a program must be found or run, a
small fake script stands in for it (xnvmeperf, nvidia-smi) on a PATH that holds only the
fakes and the shell, so a real nvidia-smi on the test host cannot answer.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from iolab.core.tool_registry import adapter
from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers.xnvmeperf import parse_xnvmeperf
from iolab.tools import xnvmeperf as xp
from iolab.tools.base import CpuRequest, Invocation, link_gbs

from conftest import drive


@pytest.fixture(autouse=True)
def no_built_tools(tmp_path, monkeypatch):
    """These tests drive fake xnvmeperfs on PATH: keep a build from `make tools` out of sight."""
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path / "no-tools"))

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
DRIVER = Path(__file__).resolve().parents[1] / "scripts" / "drivers" / "xnvmeperf.sh"
DEVICES = ["0000:4a:00.0", "0000:4b:00.0"]
RUN = {"subcommand": "run", "devices": DEVICES, "iopattern": "randread", "qdepth": 128,
       "iosize": 512, "runtime": 10, "nqueues": None, "be": "upcie", "cpumask": [0, 1],
       "gpu_id": None, "direct": None}
CUDA = {"subcommand": "cuda-run", "devices": DEVICES, "iopattern": "randread", "qdepth": 128,
        "iosize": 4096, "runtime": 10, "nqueues": 4, "be": None, "cpumask": None, "gpu_id": 1, "direct": None}
# an 8-CPU host, two threads per core: core k has CPUs k and k + 4
TOPOLOGY = [{"cpu": cpu, "core": cpu % 4, "package": 0} for cpu in range(8)]


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# What the fake nvidia-smi prints: two GPUs, the second on a narrower, older link.
NVIDIA_SMI_QUERY = ("--query-gpu=index,pci.bus_id,name,pcie.link.gen.max,pcie.link.width.max "
                    "--format=csv,noheader")
GPU_LISTING = ["0, 00000000:4B:00.0, NVIDIA H100 PCIe, 5, 16",
               "1, 00000000:CA:00.0, NVIDIA H100 PCIe, 4, 8"]
GEN5_X16_GBS = 32 * 16 * 128 / 130 / 8
GEN4_X8_GBS = 16 * 8 * 128 / 130 / 8


def run_dir(tmp_path: Path, stdout: str, stderr: str | None = None) -> Path:
    (tmp_path / "stdout").write_text(stdout)
    if stderr is not None:
        (tmp_path / "stderr").write_text(stderr)
    return tmp_path


# --- argv both ways ---------------------------------------------------------------------------

def test_run_argv():
    assert xp.build_argv(RUN) == [
        "xnvmeperf", "run", "0000:4a:00.0", "0000:4b:00.0", "--iopattern", "randread",
        "--qdepth", "128", "--iosize", "512", "--runtime", "10", "--be", "upcie",
        "--cpumask", "0x3"]


def test_cuda_run_argv_leaves_out_what_is_not_given():
    assert xp.build_argv(CUDA, "/opt/xnvme/bin/xnvmeperf") == [
        "/opt/xnvme/bin/xnvmeperf", "cuda-run", "0000:4a:00.0", "0000:4b:00.0",
        "--iopattern", "randread", "--qdepth", "128", "--iosize", "4096", "--runtime", "10",
        "--nqueues", "4", "--gpu_id", "1"]


@pytest.mark.parametrize("options", [RUN, CUDA, {**RUN, "cpumask": [5, 2, 40], "nqueues": 2},
                                     {**RUN, "be": None, "devices": ["/dev/nvme0n1"]}])
def test_read_argv_gives_back_what_build_argv_wrote(options):
    assert xp.read_argv(xp.build_argv(options)) == xp.check(options)


def test_check_sorts_cpus_and_fills_absent_options():
    assert xp.check({**RUN, "cpumask": [3, 1]})["cpumask"] == [1, 3]
    partial = {k: v for k, v in CUDA.items() if v is not None}
    assert xp.check(partial) == CUDA


def test_read_argv_of_an_aisio_command_line():
    argv = ["/usr/local/bin/xnvmeperf", "run", "--cpumask", "00f0", "--qdepth=128",
            "--iosize", "512", "--runtime", "10", "--iopattern", "randread", "--be",
            "upcie-cuda", *DEVICES]
    assert xp.read_argv(argv) == {
        "subcommand": "run", "devices": DEVICES, "iopattern": "randread", "qdepth": 128,
        "iosize": 512, "runtime": 10, "nqueues": None, "be": "upcie-cuda",
        "cpumask": [4, 5, 6, 7], "gpu_id": None, "direct": None}


@pytest.mark.parametrize("argv, key, message", [
    (["fio", "run"], "argv", "not an xnvmeperf command line"),
    (["xnvmeperf", "verify", "0000:4a:00.0"], "subcommand", "unknown xnvmeperf subcommand"),
    (["xnvmeperf", "run", "--poll_io", "1", "0000:4a:00.0"], "--poll_io",
     "not an xnvmeperf option"),
    (["xnvmeperf", "run", "-q", "1"], "-q", "not an xnvmeperf option"),
    (["xnvmeperf", "run", "0000:4a:00.0", "--qdepth"], "--qdepth", "has no value"),
    (["xnvmeperf", "run", "--qdepth", "64k"], "--qdepth", "not a whole number"),
    (["xnvmeperf", "run", "--cpumask", "0x0"], "--cpumask", "non-zero hex CPU mask"),
    (["xnvmeperf", "run", "--cpumask=0xg1"], "--cpumask", "non-zero hex CPU mask"),
])
def test_read_argv_refuses_what_it_cannot_read(argv, key, message):
    with pytest.raises(InputError, match=message) as caught:
        xp.read_argv(argv)
    assert caught.value.key == key


# --- option checks ----------------------------------------------------------------------------

@pytest.mark.parametrize("change, key, message", [
    ({"qdepth": 96}, "qdepth", "power of two"),
    ({"qdepth": 2048}, "qdepth", "power of two up to 1024"),
    ({"iosize": 1000}, "iosize", "power of two"),
    ({"be": "spdk"}, "be", "only the upcie-cuda back end"),
    ({"cpumask": [0]}, "cpumask", "takes no CPU mask"),
])
def test_cuda_run_limits_name_the_key(change, key, message):
    with pytest.raises(InputError, match=message) as caught:
        xp.build_argv({**CUDA, **change})
    assert caught.value.key == key and caught.value.allowed


@pytest.mark.parametrize("change, key", [
    ({"subcommand": "verify"}, "subcommand"),
    ({"iopattern": "randrw"}, "iopattern"),
    ({"qdepth": 0}, "qdepth"),
    ({"runtime": True}, "runtime"),
    ({"nqueues": -1}, "nqueues"),
    ({"gpu_id": "0"}, "gpu_id"),
    ({"be": "up cie"}, "be"),
    ({"devices": []}, "devices"),
    ({"devices": ["0000:4a:00.0", "--be=spdk"]}, "devices[1]"),
    ({"devices": ["0000:4a:00.0", "0000:4a:00.0"]}, "devices[1]"),
    ({"cpumask": None}, "cpumask"),
    ({"cpumask": [0, 0]}, "cpumask"),
    ({"cpumask": CpuRequest(1)}, "cpumask"),
    ({"direct": "yes"}, "direct"),
])
def test_bad_options_name_the_key(change, key):
    with pytest.raises(InputError) as caught:
        xp.build_argv({**RUN, **change})
    assert caught.value.key == key


# --- finding the program and launching --------------------------------------------------------

def test_launch_resolves_the_cpu_request_and_finds_xnvmeperf(tmp_path, monkeypatch):
    exe = fake_program(tmp_path / "bin", "xnvmeperf", "exit 0\n")
    monkeypatch.setenv("PATH", str(exe.parent))
    launch = adapter("xnvmeperf").launch(Invocation("xnvmeperf", {**RUN, "cpumask": CpuRequest(2)}),
                                         TOPOLOGY)
    assert launch.argv == [
        str(DRIVER), "--xnvmeperf", str(exe), "--line-times", xp.LINE_TIMES, "--", "run",
        "0000:4a:00.0", "0000:4b:00.0",
        "--iopattern", "randread", "--qdepth", "128", "--iosize", "512", "--runtime", "10",
        "--be", "upcie", "--cpumask", "0x33"]
    assert launch.cpus == [0, 1, 4, 5] and launch.inputs == {}


def test_launch_refuses_cpus_the_host_does_not_have(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(InputError) as exc:
        adapter("xnvmeperf").launch(Invocation("xnvmeperf", {**RUN, "cpumask": [1, 64]}),
                                    TOPOLOGY)
    assert (exc.value.key, exc.value.problem) == ("cpumask", "CPU 64 is not an online CPU of "
                                                             "this host")


def test_launch_copies_the_build_record_of_a_package_built_xnvmeperf(tmp_path, monkeypatch):
    tools = tmp_path / "tools"
    exe = fake_program(tools / "xnvme" / "bin", "xnvmeperf", "exit 0\n")
    (tools / "xnvme" / "iolab-build.json").write_text('{"tool": "xnvme", "version": "0.7.5"}')
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tools))
    monkeypatch.setenv("PATH", str(tmp_path))
    launch = adapter("xnvmeperf").launch(
        Invocation("xnvmeperf", {**RUN, "be": "io_uring_file", "direct": True,
                                 "cpumask": [0]}), TOPOLOGY)
    assert launch.argv[2] == str(exe)
    assert launch.argv[-1] == "--direct"
    assert '"version": "0.7.5"' in launch.inputs[xp.BUILD_RECORD]


def test_the_package_build_serves_only_the_kernel_back_ends(tmp_path, monkeypatch):
    """It is built without uPCIe, SPDK and CUDA: the user's own xnvmeperf on PATH runs those."""
    tools = tmp_path / "tools"
    built = fake_program(tools / "xnvme" / "bin", "xnvmeperf", "exit 0\n")
    (tools / "xnvme" / "iolab-build.json").write_text('{"tool": "xnvme", "key": "feedbeef"}')
    own = fake_program(tmp_path / "bin", "xnvmeperf", "exit 0\n")
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tools))
    monkeypatch.setenv("PATH", str(own.parent))
    tool = adapter("xnvmeperf")
    assert tool.program({**RUN, "be": "libaio_bdev"}).find() == str(built)
    assert tool.program({**RUN, "be": "libaio_bdev"}).build == "feedbeef"
    for options in (RUN, CUDA, {**RUN, "be": "upcie-cuda"}, {**RUN, "be": None}):
        program = tool.program(options)
        assert program.executable == "xnvmeperf" and program.build is None
    assert tool.program({**RUN, "be": "upcie"}).find() == str(own)


@pytest.mark.slow
def test_a_real_tiny_xnvmeperf_run_on_a_file(tmp_path, built_xnvmeperf, monkeypatch):
    """The driver, the line stamps and the parser on the real xnvmeperf, reading a file."""
    from iolab.host.inventory import topology

    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(built_xnvmeperf.parents[2]))
    target = tmp_path / "f.dat"
    target.write_bytes(os.urandom(4 * 2**20))
    run = tmp_path / "run"
    tool = adapter("xnvmeperf")
    launch = tool.launch(Invocation("xnvmeperf", {
        "subcommand": "run", "devices": [str(target)], "iopattern": "randread", "qdepth": 8,
        "iosize": 4096, "runtime": 1, "be": "io_uring_file", "direct": True,
        "cpumask": CpuRequest(1, siblings=False)}), topology())
    assert drive(launch, run, timeout=60).returncode == 0, (run / "stderr").read_text()
    metrics = tool.parse(run)
    assert metrics["problem"] is None and metrics["iops"] > 100 and metrics["failed"] == 0
    start, end = tool.window(run)
    assert 0.5e9 < end - start < 2e9


@pytest.mark.slow
def test_a_real_xnvmeperf_that_cannot_start_its_queue_is_no_measurement(tmp_path,
                                                                       built_xnvmeperf):
    """xnvmeperf exits 0 when a back end fails to set up its queue (here the RAM disk back end
    on a file): the report has no result table, so the run is judged from its output."""
    import subprocess

    target = tmp_path / "f.dat"
    target.write_bytes(b"\1" * 2**20)
    run = tmp_path / "run"
    run.mkdir()
    argv = [str(DRIVER), "--xnvmeperf", str(built_xnvmeperf), "--", "run", str(target),
            "--iopattern", "randread", "--qdepth", "4", "--iosize", "4096", "--runtime", "1",
            "--be", "ramdisk", "--cpumask", "0x1"]
    with open(run / "stdout", "wb") as out, open(run / "stderr", "wb") as err:
        subprocess.run(argv, cwd=run, stdout=out, stderr=err, timeout=60,
                       stdin=subprocess.DEVNULL)
    with pytest.raises(ParseError, match="no result table"):
        adapter("xnvmeperf").parse(run)


@pytest.mark.parametrize("options", [CUDA, {**RUN, "be": "upcie-cuda"}])
def test_launch_asks_for_the_gpu_listing_when_io_lands_in_gpu_memory(tmp_path, monkeypatch,
                                                                      options):
    monkeypatch.setenv("PATH", str(tmp_path))  # no xnvmeperf: the driver is given its name
    argv = adapter("xnvmeperf").launch(Invocation("xnvmeperf", options), TOPOLOGY).argv
    assert argv[:7] == [str(DRIVER), "--xnvmeperf", "xnvmeperf", "--gpu-info", "--line-times",
                        xp.LINE_TIMES, "--"]
    assert argv[7:] == xp.build_argv(options)[1:]


def test_a_missing_xnvmeperf_is_listed_with_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    status = xp.Xnvmeperf().program(RUN).status()
    assert not status["found"] and "xnvme.io" in status["install"]
    with pytest.raises(ToolError, match="xnvme.io"):
        xp.Xnvmeperf().program(RUN).require()


def test_the_version_comes_from_the_usage_footer(tmp_path, monkeypatch):
    footer = "xnvmeperf - NVMe async IO benchmark -- ver: {major: 0, minor: 7, patch: 5}"
    fake_program(tmp_path, "xnvmeperf", f"echo 'Usage: xnvmeperf <command> [<args>]'\n"
                                        f"echo\necho '{footer}'\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    program = xp.Xnvmeperf().program(RUN)
    assert program.version() == "0.7.5" and program.status()["version"] == "0.7.5"
    assert xp.version_in("no footer here") is None


def test_identity_names_the_driver_and_keeps_the_cpu_request():
    ident = xp.Xnvmeperf().identity(Invocation("xnvmeperf", {**RUN, "cpumask": CpuRequest(2)}))
    assert ident["driver"] == "xnvmeperf.sh" and ident["driver_version"] == "1"
    assert ident["options"]["cpumask"] == {"cores": 2, "siblings": True}
    assert xp.Xnvmeperf().driver_path == DRIVER


@pytest.mark.parametrize("change, key", [
    ({"qdepth": 3}, "qdepth"),
    ({"iosize": 1000}, "iosize"),
    ({"qdepth": 2048}, "qdepth"),
    ({"cpumask": CpuRequest(1)}, "cpumask"),  # cuda-run takes no CPU mask, requested or not
    ({"subcommand": "cuda-verify"}, "subcommand"),
])
def test_a_plan_refuses_options_cuda_run_cannot_take(change, key):
    with pytest.raises(InputError) as caught:
        xp.Xnvmeperf().identity(Invocation("xnvmeperf", {**CUDA, **change}))
    assert caught.value.key == key


def test_a_plan_refuses_a_bad_run_option_with_a_cpu_request():
    with pytest.raises(InputError) as caught:
        xp.Xnvmeperf().identity(Invocation("xnvmeperf", {**RUN, "cpumask": CpuRequest(1),
                                                         "qdepth": 0}))
    assert caught.value.key == "qdepth"


# --- metrics of a stored run ------------------------------------------------------------------

def test_parse_run_report_with_failed_commands(tmp_path):
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, (FIX / "xnvmeperf_run.txt").read_text()))
    assert metrics == {"subcommand": "run", "iops": 3100000.75, "mibs": 1513.67, "failed": 2,
                       "elapsed_s": 5.0, "ndevs": 3, "version": None,
                       "gpu_pci": None, "link_gbs": None,
                       "problem": "2 failed commands", "note": None}


def test_parse_cuda_run_report(tmp_path):
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, (FIX / "xnvmeperf_cuda_run.txt").read_text()))
    assert metrics["subcommand"] == "cuda-run" and metrics["iops"] == 7699999.50
    assert metrics["problem"] is None and metrics["note"] is None


def test_a_report_whose_echo_lacks_an_option_the_run_gave_is_foreign(tmp_path, monkeypatch):
    """An echo without a key the command gives was never compared (probe 12's I1): the
    command's value stood unchecked. xnvmeperf echoes every argument, so it is foreign."""
    report = xp.read_report(run_dir(tmp_path, (FIX / "xnvmeperf_run.txt").read_text()))
    argv = ["xnvmeperf.sh", "--xnvmeperf", "xnvmeperf", "--", "run",
            "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "--iopattern", "randread",
            "--qdepth", "64", "--iosize", "512", "--runtime", "5", "--nqueues", "1",
            "--cpumask", "0x3"]
    assert xp.Xnvmeperf().foreign_report(tmp_path, argv) == ""
    del report["echo"]["queue_depth"]
    monkeypatch.setattr(xp, "read_report", lambda run: report)
    assert xp.Xnvmeperf().foreign_report(tmp_path, argv) == (
        "stdout is not this run's report: its argument echo has no queue_depth, the run gave "
        "xnvmeperf qdepth 64")


def test_parse_error_lines_on_stderr_are_a_problem(tmp_path):
    stdout = (FIX / "xnvmeperf_cuda_run.txt").read_text()
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, stdout, "Error: device X LBA size mismatch\n"))
    assert metrics["problem"] == "Error: device X LBA size mismatch"


def test_parse_without_a_table_quotes_the_error(tmp_path):
    with pytest.raises(ParseError, match="xnvme_dev_open"):
        xp.Xnvmeperf().parse(run_dir(tmp_path, (FIX / "xnvmeperf_error.txt").read_text()))
    # stdout and stderr kept apart, as the runner keeps them: the parser sees only stdout
    (tmp_path / "split").mkdir()
    echo_only = (FIX / "xnvmeperf_run.txt").read_text().split("\n\n")[0] + "\n"
    folder = run_dir(tmp_path / "split", echo_only,
                     "Failed: xnvme_dev_open(0000:4a:00.0): err(-19)\n")
    with pytest.raises(ParseError, match=r"stdout: .*stderr says: 'Failed: xnvme_dev_open"):
        xp.Xnvmeperf().parse(folder)


def test_parse_of_a_truncated_report_names_the_file(tmp_path):
    cut = (FIX / "xnvmeperf_run.txt").read_text().split(" Total:")[0]
    with pytest.raises(ParseError, match=str(tmp_path / "stdout")):
        xp.Xnvmeperf().parse(run_dir(tmp_path, cut))


def test_registered():
    assert isinstance(adapter("xnvmeperf"), xp.Xnvmeperf)


# --- the driver's provenance lines in a stored run ---------------------------------------------

def provenance(gpu_used: str | None = "1", listing: list[str] = GPU_LISTING) -> str:
    lines = ["xnvmeperf: /opt/xnvme/bin/xnvmeperf", *(f"iolab-gpu: {g}" for g in listing)]
    if gpu_used is not None:
        lines.append(f"iolab-gpu-used: {gpu_used}")
    return "\n".join(lines) + "\n"


def test_the_parser_passes_over_the_provenance_lines():
    report = (FIX / "xnvmeperf_cuda_run.txt").read_text()
    assert parse_xnvmeperf(provenance() + report) == parse_xnvmeperf(report)


def test_read_report_gives_the_gpu_listing(tmp_path):
    stdout = provenance() + (FIX / "xnvmeperf_cuda_run.txt").read_text()
    report = xp.read_report(run_dir(tmp_path, stdout))
    assert report["gpus"] == [
        {"index": 0, "pci": "0000:4b:00.0", "name": "NVIDIA H100 PCIe", "link_gen": 5,
         "link_width": 16},
        {"index": 1, "pci": "0000:ca:00.0", "name": "NVIDIA H100 PCIe", "link_gen": 4,
         "link_width": 8}]
    assert report["gpu_used"] == 1 and report["errors"] == []


@pytest.mark.parametrize("gpu_used, pci, gbs", [
    ("1", "0000:ca:00.0", GEN4_X8_GBS),
    ("0", "0000:4b:00.0", GEN5_X16_GBS),
    (None, "0000:4b:00.0", GEN5_X16_GBS),  # a listing without the line: xnvmeperf's default 0
    ("7", None, None),                     # no such GPU listed
    ("unknown (CUDA_VISIBLE_DEVICES is set)", None, None),
])
def test_metrics_name_the_gpu_the_run_used(tmp_path, gpu_used, pci, gbs):
    stdout = provenance(gpu_used) + (FIX / "xnvmeperf_cuda_run.txt").read_text()
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, stdout))
    assert metrics["gpu_pci"] == pci
    assert metrics["link_gbs"] == (pytest.approx(gbs) if gbs else None)
    assert metrics["iops"] == 7699999.50 and metrics["problem"] is None


def test_a_gen5_x16_link_carries_63_gbs_one_way():
    assert link_gbs(5, 16) == pytest.approx(63.01538, abs=1e-5)


@pytest.mark.parametrize("gen, width, gbs", [
    (1, 1, 2.5 * 0.8 / 8), (2, 16, 8.0), (3, 16, 8 * 16 * 128 / 130 / 8),
    (4, 4, 16 * 4 * 128 / 130 / 8), (6, 16, 128.0),  # Gen 6 flit mode: no line coding
    (7, 16, None), (None, 16, None), (5, None, None), (0, 16, None),
])
def test_link_rate_by_generation_and_width(gen, width, gbs):
    assert link_gbs(gen, width) == (pytest.approx(gbs) if gbs else None)


def test_a_link_nvidia_smi_cannot_read_has_no_rate(tmp_path):
    listing = ["0, 00000000:4B:00.0, NVIDIA A100-SXM4-80GB, [N/A], [Not Supported]"]
    stdout = provenance("0", listing) + (FIX / "xnvmeperf_cuda_run.txt").read_text()
    report = xp.read_report(run_dir(tmp_path, stdout))
    assert report["gpus"][0]["link_gen"] is None and report["gpus"][0]["link_width"] is None
    metrics = xp.metrics(report)
    assert metrics["gpu_pci"] == "0000:4b:00.0" and metrics["link_gbs"] is None


def test_a_gpu_name_with_a_comma_keeps_it():
    gpus = xp.read_gpus("iolab-gpu: 2, 0000:17:00.0, Some GPU, rev B, 3, 8\n", "out")
    assert gpus == {"gpus": [{"index": 2, "pci": "0000:17:00.0", "name": "Some GPU, rev B",
                              "link_gen": 3, "link_width": 8}], "gpu_used": 0}


@pytest.mark.parametrize("line, message", [
    ("iolab-gpu: 0, 00000000:4B:00.0, NVIDIA H100 PCIe", "line 2: expected 'iolab-gpu: <index>"),
    ("iolab-gpu: GPU 0, 00000000:4B:00.0, NVIDIA H100 PCIe, 5, 16", "line 2: expected"),
    ("iolab-gpu: 0, 4B:00.0, NVIDIA H100 PCIe, 5, 16", "line 2: '4B:00.0' is not a PCI address"),
])
def test_a_gpu_line_that_cannot_be_read_names_the_file_and_line(tmp_path, line, message):
    stdout = f"xnvmeperf: /x\n{line}\n" + (FIX / "xnvmeperf_cuda_run.txt").read_text()
    with pytest.raises(ParseError, match=f"{tmp_path / 'stdout'}: {message}"):
        xp.Xnvmeperf().parse(run_dir(tmp_path, stdout))


def test_archived_outputs_have_no_gpu_fields(tmp_path):
    # AiSIO's archives (iolab.importers.aisio) have no provenance lines
    report = xp.read_report(run_dir(tmp_path, (FIX / "xnvmeperf_run.txt").read_text()))
    assert report["gpus"] == [] and report["gpu_used"] is None
    assert xp.metrics(report)["gpu_pci"] is None and xp.metrics(report)["link_gbs"] is None


# --- the driver, run for real with fakes --------------------------------------------------------

def fake_path(tmp_path: Path, programs: dict[str, str]) -> str:
    """A PATH with only the given fake programs (name -> sh script body) and bash and cat."""
    fakes, system = tmp_path / "fakes", tmp_path / "system"
    system.mkdir(parents=True, exist_ok=True)
    for tool in ("bash", "cat"):
        (system / tool).symlink_to(shutil.which(tool))
    for name, script in programs.items():
        fake_program(fakes, name, script)
    fakes.mkdir(exist_ok=True)
    return f"{fakes}{os.pathsep}{system}"


# prints what the driver ran it with: its environment's CUDA settings and each argument
FAKE_XNVMEPERF = """\
echo "env CUDA_DEVICE_ORDER=${CUDA_DEVICE_ORDER-unset}"
for arg in "$@"; do printf 'arg [%s]\\n' "$arg"; done
exit 3
"""
FAKE_NVIDIA_SMI = f"""\
if [ "$*" != "{NVIDIA_SMI_QUERY}" ]; then echo "unexpected arguments: $*"; exit 9; fi
""" + "".join(f"echo '{line}'\n" for line in GPU_LISTING)
BROKEN_NVIDIA_SMI = """\
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
exit 9
"""


def run_driver(*args: str, path: str, cwd: Path | None = None, env: dict | None = None,
               **files) -> subprocess.CompletedProcess:
    return subprocess.run([str(DRIVER), *args], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": path, **(env or {})}, timeout=60, **files)


def test_driver_declares_its_version_and_strict_mode():
    text = DRIVER.read_text()
    assert "\n# iolab-driver-version: 1\n" in text and "\nset -euo pipefail\n" in text
    assert "eval" not in text and os.access(DRIVER, os.X_OK)
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in text and "nvidia-smi's indices" in text


USAGE = ("usage: xnvmeperf.sh --xnvmeperf PATH [--gpu-info] [--line-times FILE] -- "
         "<xnvmeperf arguments, subcommand first>")


@pytest.mark.parametrize("args, message", [
    ([], "--xnvmeperf PATH is required"),
    (["--gpu-info", "--", "run"], "--xnvmeperf PATH is required"),
    (["--xnvmeperf"], "--xnvmeperf needs a path"),
    (["--xnvmeperf", ""], "--xnvmeperf needs a path"),
    (["--xnvmeperf", "--gpu-info", "--", "run"], "--xnvmeperf needs a path, got option "
                                                 "'--gpu-info'"),
    (["--xnvmeperf", "xnvmeperf"], "xnvmeperf's arguments are missing after --"),
    (["--xnvmeperf", "xnvmeperf", "--"], "xnvmeperf's arguments are missing after --"),
    (["--xnvmeperf", "xnvmeperf", "--", "--qdepth", "1"],
     "xnvmeperf's arguments must start with the subcommand, got '--qdepth'"),
    (["--xnvmeperf", "xnvmeperf", "run"], "unknown option 'run' (xnvmeperf's own arguments go "
                                          "after --)"),
    (["--xnvmeperf", "xnvmeperf", "--line-times", "--", "run"],
     "--line-times needs a file name, got option '--'"),
])
def test_driver_usage_errors_exit_2(tmp_path, args, message):
    proc = run_driver(*args, path=fake_path(tmp_path, {"xnvmeperf": FAKE_XNVMEPERF}))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [USAGE, f"xnvmeperf.sh: {message}"]
    assert proc.stdout == ""


def test_driver_without_an_executable_xnvmeperf_exits_127(tmp_path):
    path = fake_path(tmp_path, {})
    proc = run_driver("--xnvmeperf", "xnvmeperf", "--", "run", path=path)
    assert proc.returncode == 127 and proc.stdout == ""
    assert proc.stderr.startswith("xnvmeperf.sh: 'xnvmeperf' not found on PATH; build and "
                                  "install xNVMe")
    not_executable = tmp_path / "xnvmeperf"
    not_executable.write_text("#!/bin/sh\necho ran\n")
    for given in (not_executable, tmp_path / "missing", tmp_path):
        proc = run_driver("--xnvmeperf", str(given), "--", "run", path=path)
        assert proc.returncode == 127 and proc.stdout == ""
        assert proc.stderr.startswith(f"xnvmeperf.sh: '{given}' is not an executable file")


TRICKY = ["cuda-run", "0000:4a:00.0", "a b", "$(touch pwned)", "*", "", "--gpu_id=2", "x;y"]


def test_driver_passes_the_arguments_through_unchanged(tmp_path):
    path = fake_path(tmp_path, {"xnvmeperf": FAKE_XNVMEPERF, "nvidia-smi": FAKE_NVIDIA_SMI})
    proc = run_driver("--xnvmeperf", "xnvmeperf", "--", *TRICKY, path=path, cwd=tmp_path)
    assert proc.returncode == 3  # xnvmeperf's own status
    assert proc.stdout.splitlines() == [
        f"xnvmeperf: {tmp_path / 'fakes' / 'xnvmeperf'}", "env CUDA_DEVICE_ORDER=unset",
        *(f"arg [{arg}]" for arg in TRICKY)]
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("args, used", [
    (["--gpu_id", "1"], "1"),
    (["--gpu_id=1"], "1"),
    (["--gpu_id", "0", "--gpu_id", "1"], "1"),
    ([], "0"),
])
def test_driver_lists_the_gpus_and_the_one_used(tmp_path, args, used):
    path = fake_path(tmp_path, {"xnvmeperf": FAKE_XNVMEPERF, "nvidia-smi": FAKE_NVIDIA_SMI})
    exe = tmp_path / "fakes" / "xnvmeperf"
    argv = ["cuda-run", "0000:4a:00.0", "--qdepth", "64", *args]
    # CUDA's default order would put the fastest GPU first; the driver overrides it
    proc = run_driver("--xnvmeperf", str(exe), "--gpu-info", "--", *argv, path=path,
                      env={"CUDA_DEVICE_ORDER": "FASTEST_FIRST"})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines() == [
        f"xnvmeperf: {exe}", *(f"iolab-gpu: {line}" for line in GPU_LISTING),
        f"iolab-gpu-used: {used}", "env CUDA_DEVICE_ORDER=PCI_BUS_ID",
        *(f"arg [{arg}]" for arg in argv)]


def test_driver_cannot_tell_the_gpu_under_cuda_visible_devices(tmp_path):
    path = fake_path(tmp_path, {"xnvmeperf": FAKE_XNVMEPERF, "nvidia-smi": FAKE_NVIDIA_SMI})
    proc = run_driver("--xnvmeperf", "xnvmeperf", "--gpu-info", "--", "cuda-run", "--gpu_id",
                      "0", path=path, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert "iolab-gpu-used: unknown (CUDA_VISIBLE_DEVICES is set)" in proc.stdout.splitlines()


@pytest.mark.parametrize("nvidia_smi, message", [
    (None, "nvidia-smi not found on PATH: the GPU this run uses cannot be recorded"),
    (BROKEN_NVIDIA_SMI, "nvidia-smi failed with status 9 (NVIDIA-SMI has failed because it "
                        "couldn't communicate with the NVIDIA driver.): the GPU this run uses "
                        "cannot be recorded"),
    ("exit 0\n", "nvidia-smi listed no GPU: the GPU this run uses cannot be recorded"),
])
def test_driver_without_a_gpu_listing_runs_nothing(tmp_path, nvidia_smi, message):
    fakes = {"xnvmeperf": "echo ran > ran\n"}
    if nvidia_smi is not None:
        fakes["nvidia-smi"] = nvidia_smi
    proc = run_driver("--xnvmeperf", "xnvmeperf", "--gpu-info", "--", "cuda-run",
                      path=fake_path(tmp_path, fakes), cwd=tmp_path)
    assert proc.returncode == 127 and proc.stdout == ""
    assert proc.stderr.startswith(f"xnvmeperf.sh: {message}")
    assert not (tmp_path / "ran").exists()


def stored_run(tmp_path: Path, monkeypatch, options: dict, xnvmeperf: str) -> Path:
    """Launch ``options`` as the runner would (driver in the run folder, stdout and stderr
    kept apart) with fake xnvmeperf and nvidia-smi; the run folder."""
    path = fake_path(tmp_path, {"xnvmeperf": xnvmeperf, "nvidia-smi": FAKE_NVIDIA_SMI})
    monkeypatch.setenv("PATH", path)
    launch = adapter("xnvmeperf").launch(Invocation("xnvmeperf", options), TOPOLOGY)
    folder = tmp_path / "run"
    folder.mkdir()
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        subprocess.run(launch.argv, cwd=folder, stdout=out, stderr=err, env={"PATH": path},
                       timeout=60, check=False)
    return folder


def test_a_driven_cuda_run_names_its_gpu(tmp_path, monkeypatch):
    report = FIX / "xnvmeperf_cuda_run.txt"
    folder = stored_run(tmp_path, monkeypatch, CUDA, f"cat '{report}'\n")
    metrics = xp.Xnvmeperf().parse(folder)
    assert metrics["gpu_pci"] == "0000:ca:00.0"  # CUDA's gpu_id is 1
    assert metrics["link_gbs"] == pytest.approx(GEN4_X8_GBS)
    assert metrics["iops"] == 7699999.50 and metrics["problem"] is None


def test_a_driven_cpu_run_without_a_gpu_has_no_gpu_fields(tmp_path, monkeypatch):
    report = FIX / "xnvmeperf_run.txt"
    folder = stored_run(tmp_path, monkeypatch, RUN, f"cat '{report}'\n")
    assert "iolab-gpu" not in (folder / "stdout").read_text()
    metrics = xp.Xnvmeperf().parse(folder)
    assert metrics["gpu_pci"] is None and metrics["link_gbs"] is None
    assert metrics["iops"] == 3100000.75


def test_a_cuda_run_that_fails_quotes_its_error(tmp_path, monkeypatch):
    echo = (FIX / "xnvmeperf_cuda_run.txt").read_text().split("\n\n")[0]
    failing = (f"cat <<'EOF'\n{echo}\nEOF\n"
               "echo 'Error: device 0000:4b:00.0 LBA size mismatch' >&2\nexit 1\n")
    folder = stored_run(tmp_path, monkeypatch, CUDA, failing)
    assert (folder / "stdout").read_text().startswith("xnvmeperf: ")
    with pytest.raises(ParseError, match=r"no result table.*stderr says: 'Error: device "
                                         r"0000:4b:00.0 LBA size mismatch'"):
        xp.Xnvmeperf().parse(folder)
    # with nothing but the provenance lines on stdout, too
    (folder / "stdout").write_text(provenance())
    with pytest.raises(ParseError, match=r"stderr says: 'Error: device 0000:4b:00.0 LBA size "
                                         r"mismatch'"):
        xp.Xnvmeperf().parse(folder)


# --- the measurement window -------------------------------------------------------------------

def test_driver_stamps_each_line_of_xnvmeperf_and_keeps_its_status(tmp_path):
    report = (FIX / "xnvmeperf_cuda_run.txt").read_text()
    (tmp_path / "report.txt").write_text(report)
    path = fake_path(tmp_path, {"xnvmeperf": f"cat {tmp_path / 'report.txt'}\nexit 5\n"})
    proc = run_driver("--xnvmeperf", "xnvmeperf", "--line-times", "times.txt", "--",
                      "cuda-run", "0000:01:00.0", path=path, cwd=tmp_path)
    assert proc.returncode == 5
    assert proc.stdout == f"xnvmeperf: {tmp_path / 'fakes' / 'xnvmeperf'}\n" + report
    stamps = [int(t) for t in (tmp_path / "times.txt").read_text().split()]
    assert len(stamps) == len(report.splitlines()) and stamps == sorted(stamps)
    start, end = xp.measurement_window(proc.stdout, (tmp_path / "times.txt").read_text(), "t")
    title = next(i for i, line in enumerate(report.splitlines()) if "(elapsed:" in line)
    assert end == stamps[title] and end - start == 10 * 10**9


def test_window_of_a_stored_run(tmp_path):
    stdout = "xnvmeperf: /bin/x\niolab-gpu: 0, 00000000:4B:00.0, H100, 5, 16\n" + \
        (FIX / "xnvmeperf_run.txt").read_text()
    own = len(stdout.splitlines()) - 2
    stamps = [1_000_000_000_000 + i for i in range(own)]
    run = run_dir(tmp_path, stdout)
    assert xp.Xnvmeperf().window(run) is None, "no stamps (AiSIO's archives): no window"
    (run / xp.LINE_TIMES).write_text("".join(f"{t}\n" for t in stamps))
    start, end = xp.Xnvmeperf().window(run)
    lines = (FIX / "xnvmeperf_run.txt").read_text().splitlines()
    title = next(i for i, line in enumerate(lines) if "(elapsed:" in line)
    elapsed = float(lines[title].split("elapsed:")[1].strip(" s)"))
    assert end == stamps[title] and end - start == round(elapsed * 1e9)


@pytest.mark.parametrize("stamps, message", [
    ("1\n2\n", "stamps for the"),
    ("x\n" * 30, "stamps for the"),
])
def test_window_refuses_stamps_that_do_not_match(tmp_path, stamps, message):
    stdout = (FIX / "xnvmeperf_run.txt").read_text()
    if stamps.startswith("x"):
        stamps = "x\n" * len(stdout.splitlines())
    with pytest.raises(ParseError, match=message):
        xp.measurement_window(stdout, stamps, "times")


def test_window_needs_the_title(tmp_path):
    with pytest.raises(ParseError, match="no result title"):
        xp.measurement_window("Error: no device\n", "123\n", "times")


def test_runs_into_gpu_memory_need_nvidia_smi():
    assert xp.Xnvmeperf().program(CUDA).needs == ("nvidia-smi",)
    assert "nvidia-smi" in xp.Xnvmeperf().program(CUDA).install
    assert xp.Xnvmeperf().program({**RUN, "be": "upcie-cuda"}).needs == ("nvidia-smi",)
    assert xp.Xnvmeperf().program(RUN).needs == ()


RUN_ARGV = ["xnvmeperf.sh", "--xnvmeperf", "xnvmeperf", "--", "run", "0000:01:00.0",
            "0000:02:00.0", "0000:03:00.0", "--iopattern", "randread", "--qdepth", "64",
            "--iosize", "512", "--runtime", "5", "--cpumask", "0x3"]


@pytest.mark.parametrize("argv, reason", [
    ([*RUN_ARGV[:-5], "4096", *RUN_ARGV[-4:]],
     "its argument echo has io_size 512, the run gave xnvmeperf iosize 4096"),
    ([*RUN_ARGV[:-2], "--cpumask", "0x1"],
     "its argument echo has cpus [0, 1], the run gave xnvmeperf cpumask [0]"),
    ([*RUN_ARGV[:4], "cuda-run", *RUN_ARGV[5:-2]],
     "it is of xnvmeperf run, the run gave xnvmeperf cuda-run"),
], ids=["another io size", "other CPUs", "another subcommand"])
def test_a_report_of_other_options_is_foreign(tmp_path, argv, reason):
    """No adapter but fio's and the uring reader's set the report against the run's argv: an
    xnvmeperf report of another io size was stored as this run's."""
    folder = run_dir(tmp_path, (FIX / "xnvmeperf_run.txt").read_text())
    assert xp.Xnvmeperf().foreign_report(folder, RUN_ARGV) == ""
    assert xp.Xnvmeperf().foreign_report(folder, argv) == (
        f"stdout is not this run's report: {reason}")
