"""The xnvmeperf adapter (iolab.tools.xnvmeperf): argv both ways, option checks, metrics.

No xnvmeperf is needed: reports come from the synthesised fixtures in
tests/fixtures/aisio_formats/ (see its README), and where a program must be found a small
fake script on PATH stands in for it.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from iolab.errors import InputError, ParseError, ToolError
from iolab.tools import xnvmeperf as xp
from iolab.tools.base import CpuRequest, Invocation
from iolab.tools.registry import adapter

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
DEVICES = ["0000:4a:00.0", "0000:4b:00.0"]
RUN = {"subcommand": "run", "devices": DEVICES, "iopattern": "randread", "qdepth": 128,
       "iosize": 512, "runtime": 10, "nqueues": None, "be": "upcie", "cpumask": [0, 1],
       "gpu_id": None}
CUDA = {"subcommand": "cuda-run", "devices": DEVICES, "iopattern": "randread", "qdepth": 128,
        "iosize": 4096, "runtime": 10, "nqueues": 4, "be": None, "cpumask": None, "gpu_id": 1}
# an 8-CPU host, two threads per core: core k has CPUs k and k + 4
TOPOLOGY = [{"cpu": cpu, "core": cpu % 4, "package": 0} for cpu in range(8)]


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


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
        "cpumask": [4, 5, 6, 7], "gpu_id": None}


@pytest.mark.parametrize("argv, key, message", [
    (["fio", "run"], "argv", "not an xnvmeperf command line"),
    (["xnvmeperf", "verify", "0000:4a:00.0"], "subcommand", "unknown xnvmeperf subcommand"),
    (["xnvmeperf", "run", "--direct", "0000:4a:00.0"], "--direct", "not an xnvmeperf option"),
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
    ({"direct": True}, "direct"),
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
    assert launch.argv[0] == str(exe) and launch.argv[-2:] == ["--cpumask", "0x33"]
    assert launch.cpus == [0, 1, 4, 5] and launch.inputs == {}


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


def test_identity_has_no_driver_yet():
    ident = xp.Xnvmeperf().identity(Invocation("xnvmeperf", {**RUN, "cpumask": CpuRequest(2)}))
    assert ident["driver"] is None and ident["driver_version"] is None
    assert ident["options"]["cpumask"] == {"cores": 2, "siblings": True}
    with pytest.raises(ToolError, match="no driver script"):
        xp.Xnvmeperf().driver_path


# --- metrics of a stored run ------------------------------------------------------------------

def test_parse_run_report_with_failed_commands(tmp_path):
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, (FIX / "xnvmeperf_run.txt").read_text()))
    assert metrics == {"subcommand": "run", "iops": 3100000.75, "mibs": 1513.67, "failed": 2,
                       "elapsed_s": 5.0, "ndevs": 3, "version": None,
                       "problem": "2 failed commands", "note": None}


def test_parse_cuda_run_report(tmp_path):
    metrics = xp.Xnvmeperf().parse(run_dir(tmp_path, (FIX / "xnvmeperf_cuda_run.txt").read_text()))
    assert metrics["subcommand"] == "cuda-run" and metrics["iops"] == 7699999.50
    assert metrics["problem"] is None and metrics["note"] is None


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
