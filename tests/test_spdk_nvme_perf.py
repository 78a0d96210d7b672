"""The spdk_nvme_perf adapter (iolab.tools.spdk_nvme_perf): argv both ways, checks, metrics.

No SPDK is needed: the report is the synthesised fixture in tests/fixtures/aisio_formats/,
and the program is a fake script in a temporary SPDK tree.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from iolab.core.tool_registry import adapter
from iolab.importers import aisio
from iolab.errors import InputError, ParseError, ToolError
from iolab.tools import spdk_nvme_perf as snp
from iolab.tools.base import CpuRequest, Invocation

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"
OPTIONS = {"spdk_dir": "/root/spdk", "io_depth": 128, "io_size": 512, "io_pattern": "randread",
           "time": 10, "rwmixread": None, "core_mask": [0, 1],
           "devices": ["0000:4a:00.0", "0000:4b:00.0"]}
TOPOLOGY = [{"cpu": cpu, "core": cpu % 4, "package": 0} for cpu in range(8)]


def run_dir(tmp_path: Path, stdout: str) -> Path:
    (tmp_path / "stdout").write_text(stdout)
    return tmp_path


def test_argv_has_one_transport_per_device():
    assert snp.build_argv(OPTIONS) == [
        "/root/spdk/build/bin/spdk_nvme_perf", "-q", "128", "-o", "512", "-w", "randread",
        "-t", "10", "-c", "0x3", "-r", "trtype:PCIe traddr:0000:4a:00.0",
        "-r", "trtype:PCIe traddr:0000:4b:00.0"]


def test_mixed_workloads_carry_the_read_percentage():
    argv = snp.build_argv({**OPTIONS, "io_pattern": "randrw", "rwmixread": 70})
    assert argv[argv.index("-M") + 1] == "70"


@pytest.mark.parametrize("options", [
    OPTIONS,
    {**OPTIONS, "io_pattern": "rw", "rwmixread": 0, "core_mask": [7, 2]},
    {**OPTIONS, "spdk_dir": None},
])
def test_read_argv_gives_back_what_build_argv_wrote(options):
    assert snp.read_argv(snp.build_argv(options)) == snp.check(options)


def test_read_argv_accepts_every_spelling():
    argv = ["spdk/build/bin/spdk_nvme_perf", "-q128", "--io-size=4k", "--io-pattern", "randread",
            "-t", "60", "-c", "[0,2-3]", "--transport", "trtype:pcie traddr:0000:01:00.0",
            "-r", "trtype:PCIe traddr:0000:02:00.0"]
    assert snp.read_argv(argv) == {
        "spdk_dir": "spdk", "io_depth": 128, "io_size": 4096, "io_pattern": "randread",
        "time": 60, "rwmixread": None, "core_mask": [0, 2, 3],
        "devices": ["0000:01:00.0", "0000:02:00.0"]}


@pytest.mark.parametrize("argv, key, message", [
    (["bdevperf", "-q", "1"], "argv", "not a spdk_nvme_perf command line"),
    (["spdk_nvme_perf", "-L"], "-L", "not a spdk_nvme_perf option"),
    (["spdk_nvme_perf", "--warmup-time", "2"], "--warmup-time", "not a spdk_nvme_perf option"),
    (["spdk_nvme_perf", "/dev/nvme0n1"], "/dev/nvme0n1", "positional"),
    (["spdk_nvme_perf", "-q"], "-q", "has no value"),
    (["spdk_nvme_perf", "-t", "10s"], "-t", "not a whole number"),
    (["spdk_nvme_perf", "-q", "4k"], "-q", "not a whole number"),
    (["spdk_nvme_perf", "-c", "0x0"], "core_mask", "non-empty SPDK core mask"),
    (["spdk_nvme_perf", "-r", "trtype:TCP adrfam:IPv4 traddr:10.0.0.1 trsvcid:4420"], "-r",
     "not a local PCIe transport id"),
])
def test_read_argv_refuses_what_it_cannot_read(argv, key, message):
    with pytest.raises(InputError, match=message) as caught:
        snp.read_argv(argv)
    assert caught.value.key == key


@pytest.mark.parametrize("mask, cpus", [("3", [0, 1]), ("0x3", [0, 1]), ("0XF0", [4, 5, 6, 7]),
                                        ("[1]", [1]), ("[0, 4-5]", [0, 4, 5])])
def test_core_masks(mask, cpus):
    assert snp.core_mask_cpus(mask) == cpus


@pytest.mark.parametrize("mask, message", [
    ("", "not a non-empty SPDK core mask"), ("0", "not a non-empty SPDK core mask"),
    ("0xz", "not a non-empty SPDK core mask"), ("[]", "not an SPDK core list"),
    ("[a-2]", "not an SPDK core list"), ("[2-]", "not an SPDK core list"),
    ("[1,1]", "a CPU twice"), ("[3-1]", "lists no CPU")])
def test_bad_core_masks(mask, message):
    with pytest.raises(InputError, match=message) as caught:
        snp.core_mask_cpus(mask)
    assert caught.value.key == "core_mask"


@pytest.mark.parametrize("change, key", [
    ({"io_depth": 0}, "io_depth"),
    ({"io_size": "4k"}, "io_size"),
    ({"time": None}, "time"),
    ({"io_pattern": "verify"}, "io_pattern"),
    ({"io_pattern": "randrw"}, "rwmixread"),
    ({"io_pattern": "rw", "rwmixread": 101}, "rwmixread"),
    ({"rwmixread": 50}, "rwmixread"),
    ({"core_mask": []}, "core_mask"),
    ({"core_mask": "0x3"}, "core_mask"),
    ({"devices": []}, "devices"),
    ({"devices": ["4a:00.0"]}, "devices[0]"),
    ({"devices": ["0000:4a:00.0", "0000:4A:00.0"]}, "devices[1]"),
    ({"spdk_dir": ""}, "spdk_dir"),
    ({"queue_depth": 1}, "queue_depth"),
])
def test_bad_options_name_the_key(change, key):
    with pytest.raises(InputError) as caught:
        snp.build_argv({**OPTIONS, **change})
    assert caught.value.key == key


def test_launch_finds_the_tool_in_the_spdk_tree(tmp_path):
    exe = tmp_path / "spdk" / "build" / "bin" / "spdk_nvme_perf"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    options = {**OPTIONS, "spdk_dir": str(tmp_path / "spdk"), "core_mask": CpuRequest(1, False)}
    launch = snp.SpdkNvmePerf().launch(Invocation("spdk_nvme_perf", options), TOPOLOGY)
    assert launch.argv[0] == str(exe) and launch.cpus == [0]
    assert launch.argv[launch.argv.index("-c") + 1] == "0x1"


def test_launch_without_the_build_says_how_to_get_it(tmp_path):
    no_build = {**OPTIONS, "spdk_dir": str(tmp_path)}
    status = snp.SpdkNvmePerf().program(no_build).status()
    assert not status["found"] and "spdk.io" in status["install"]
    with pytest.raises(ToolError, match="spdk.io"):
        snp.SpdkNvmePerf().program(no_build).require()
    with pytest.raises(InputError, match="spdk_dir"):
        snp.SpdkNvmePerf().launch(Invocation("spdk_nvme_perf", {**OPTIONS, "spdk_dir": None}),
                                  TOPOLOGY)


def test_program_reports_no_version_of_its_own(tmp_path):
    status = snp.SpdkNvmePerf().program({"spdk_dir": str(tmp_path)}).status()
    assert status["found"] is False and status["version"] is None and "spdk.io" in status["install"]


def test_parse_the_total_row(tmp_path):
    metrics = snp.SpdkNvmePerf().parse(run_dir(tmp_path, (FIX / "spdk_nvme_perf.txt").read_text()))
    assert metrics == {"iops": 4093737.12, "mibs": 1998.89, "lat_mean_us": 62.52,
                       "lat_min_us": 50.0, "lat_max_us": 2015.47, "rows": 2, "version": None,
                       "problem": None, "note": None}


def test_parse_reads_the_spdk_version_from_the_start_up_line(tmp_path):
    text = ("[2026-11-22 22:30:57.010834] Starting SPDK v25.09 git sha1 0123abc / DPDK 24.03.0 "
            "initialization...\n" + (FIX / "spdk_nvme_perf.txt").read_text())
    assert snp.SpdkNvmePerf().parse(run_dir(tmp_path, text))["version"] == "v25.09"


def test_a_controller_without_io_is_a_problem(tmp_path):
    text = (FIX / "spdk_nvme_perf.txt").read_text().replace(
        "Initializing NVMe Controllers\n",
        "Initializing NVMe Controllers\nAttached to NVMe Controller at PCIE (0000:03:00.0) "
        "[144d:ac00]\n")
    problem = snp.SpdkNvmePerf().parse(run_dir(tmp_path, text))["problem"]
    assert problem == "controller(s) 0000:03:00.0 attached but completed no I/O"


def test_parse_of_output_without_a_total_names_the_file(tmp_path):
    cut = (FIX / "spdk_nvme_perf.txt").read_text().split("Total")[0]
    with pytest.raises(ParseError, match=str(tmp_path / "stdout")):
        snp.SpdkNvmePerf().parse(run_dir(tmp_path, cut))


# the options of the fixture's run: its two controllers, one core each
FIXTURE_OPTIONS = {**OPTIONS, "devices": ["0000:01:00.0", "0000:02:00.0"]}


def tenfold_mibs() -> str:
    """The fixture with every MiB/s ten times IOPS × its 512 B; rows and Total still agree."""
    return ((FIX / "spdk_nvme_perf.txt").read_text().replace("1022.33", "10223.30")
            .replace("976.56", "9765.60").replace("1998.89", "19988.90", 1))


def test_a_mibs_that_is_not_iops_times_o_is_no_measurement(tmp_path):
    """A measured run whose MiB/s is ten times IOPS × its -o, and an imported one (derive with
    the command's iosize), were good samples (P10 Q11)."""
    folder = run_dir(tmp_path, tenfold_mibs())
    argv = ["/usr/bin/time", "-o", "time.txt", *snp.build_argv(FIXTURE_OPTIONS)]
    assert snp.SpdkNvmePerf().foreign_report(folder, argv).startswith(
        "stdout is not this run's report: line 10: MiB/s 10223.30 is not IOPS 2093737.12 × the "
        "I/O size 512 B")
    with pytest.raises(ParseError, match="line 10: MiB/s 10223.30 is not IOPS"):
        aisio.derive(folder, aisio.SPDK_NVME_PERF, None, None, 512)
    good = run_dir(tmp_path, (FIX / "spdk_nvme_perf.txt").read_text())
    assert snp.SpdkNvmePerf().foreign_report(good, argv) == ""
    assert aisio.derive(good, aisio.SPDK_NVME_PERF, None, None, 512).metrics["mibs"] == 1998.89


def test_registered():
    assert isinstance(adapter("spdk_nvme_perf"), snp.SpdkNvmePerf)


@pytest.mark.parametrize("options, reason", [
    ({**FIXTURE_OPTIONS, "devices": ["0000:01:00.0"]},
     "stdout is not this run's report: its row 'PCIE (0000:02:00.0) [144d:ac00] NSID 1 from "
     "core  1' is of controller 0000:02:00.0, which the run's -r never named (allowed: "
     "0000:01:00.0)"),
    ({**FIXTURE_OPTIONS, "core_mask": [0]},
     "stdout is not this run's report: its row 'PCIE (0000:02:00.0) [144d:ac00] NSID 1 from "
     "core  1' ran on core 1, outside the run's -c (allowed: 0)"),
], ids=["a controller the run never named", "a core outside the mask"])
def test_a_row_of_another_controller_or_core_is_foreign(tmp_path, options, reason):
    """Probe 11's class of Q7 (a bdevperf job of a bdev the run never made): the Total is the
    rows' sum, so a row of a controller or core the run was not given counted I/O it never
    did; only the I/O size was held to the argv."""
    folder = run_dir(tmp_path, (FIX / "spdk_nvme_perf.txt").read_text())
    assert snp.SpdkNvmePerf().foreign_report(folder, snp.build_argv(FIXTURE_OPTIONS)) == ""
    assert snp.SpdkNvmePerf().foreign_report(folder, snp.build_argv(options)) == reason
