"""The tool comparison (iolab.experiments.tool_comparison): each tool's options for one point,
the files it lays out, what it refuses, and tiny real campaigns of bdevperf and xnvmeperf (built
by `make tools`) beside fio's, judged from their output."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from iolab.errors import InputError, ParseError
from iolab.execution.campaign import Campaign
from iolab.experiments.tool_comparison import EXPERIMENT as TC
from iolab.shared import tool_ratios as tr
from iolab.experiments.tool_comparison import targets
from iolab.host.scratch import Registry, ScratchFile, lay_out
from iolab.tools.base import CpuCount, CpuRequest

from conftest import drive

FILES = {"runtime_s": 2, "workload": "randread", "targets": "files", "file_dir": "/var/tmp/x",
         "file_size": "16M", "block_size": 512, "spdk_dir": None, "spdk_hugepages": 0,
         "spdk_memory_mib": 256}
BLOCK = {**FILES, "targets": "block_devices", "block_devices": ["/dev/nvme0n1", "/dev/nvme1n1"],
         "spdk_hugepages": 1024}
POINT = {"tool": "fio", "engine": "io_uring", "qdepth": 32, "iosize": 4096, "ncores": 2}
TWO_CORES = [{"cpu": 0, "core": 0, "package": 0, "siblings": [0]},
             {"cpu": 1, "core": 1, "package": 0, "siblings": [1]}]


def test_every_tool_reads_the_same_files_one_per_core():
    files = ["/var/tmp/x/dev00.dat", "/var/tmp/x/dev01.dat"]
    fio = TC.invocation(FILES, POINT)
    assert fio.tool == "fio"
    assert fio.options["filename"] == ":".join(files)
    assert (fio.options["ioengine"], fio.options["iodepth"], fio.options["bs"]) == \
        ("io_uring", 32, 4096)
    assert fio.options["numjobs"] == CpuCount(CpuRequest(2, siblings=False))
    assert fio.options["direct"] == 1 and fio.options["filesize"] == "16M"

    bdev = TC.invocation(FILES, {**POINT, "tool": "bdevperf", "engine": "libaio"})
    assert bdev.tool == "bdevperf"
    assert bdev.options["devices"] == files
    assert (bdev.options["bdev"], bdev.options["queue_depth"], bdev.options["io_size"]) == \
        ("aio", 32, 4096)
    assert bdev.options["memory_mib"] == 256  # no hugepages asked for: --no-huge
    assert "all_cores" not in bdev.options    # one core per bdev, like the other tools

    xnv = TC.invocation(FILES, {**POINT, "tool": "xnvmeperf"})
    assert xnv.options["be"] == "io_uring_file" and xnv.options["direct"] is True
    assert xnv.options["devices"] == files and xnv.options["cpumask"] == CpuRequest(2, False)


def test_block_devices_and_hugepages_on_the_lab_server():
    bdev = TC.invocation(BLOCK, {**POINT, "tool": "bdevperf", "ncores": 1})
    assert bdev.options["devices"] == ["/dev/nvme0n1"]
    assert "memory_mib" not in bdev.options  # hugepages, reserved by the knob
    assert TC.campaign_knobs(BLOCK) == {"hugepages": {"pages": 1024}}
    assert TC.campaign_knobs(FILES) == {}
    assert TC.invocation(BLOCK, {**POINT, "tool": "xnvmeperf", "engine": "libaio"}) \
        .options["be"] == "libaio_bdev"
    assert "filesize" not in TC.invocation(BLOCK, POINT).options
    assert TC.host_block(BLOCK, {**POINT, "ncores": 2}, TWO_CORES) is None
    assert "3 block devices" in TC.host_block({**BLOCK, "block_devices": ["/dev/a", "/dev/b"]},
                                              {**POINT, "ncores": 3},
                                              TWO_CORES + [{**TWO_CORES[0], "cpu": 2,
                                                            "core": 2}])
    assert "needs 4 physical cores" in TC.host_block(FILES, {**POINT, "ncores": 4}, TWO_CORES)


def test_every_point_of_both_params_files_makes_a_valid_invocation():
    for env in ("kvm-2vcpu", "hpc-server"):
        plan = Campaign("tool_comparison", env).design()
        assert len({r.run_id for r in plan.runs}) == len(plan.runs)
        assert {p.params["tool"] for p in plan.points()} == {"fio", "bdevperf", "xnvmeperf"}


def test_the_files_of_the_largest_point_are_the_scratch_files(tmp_path):
    settings = {**FILES, "file_dir": str(tmp_path / "files"), "file_size": "1M"}
    files = TC.scratch_files(settings, [{**POINT, "ncores": 1}, {**POINT, "ncores": 3}])
    assert [(f.key, f.path.name, f.size) for f in files] == [
        ("file_dir", f"dev0{i}.dat", 2**20) for i in range(3)]
    assert TC.scratch_files(BLOCK, [POINT]) == []
    assert targets(settings, 1) == [str(tmp_path / "files" / "dev00.dat")]


def test_a_colon_in_a_path_is_refused_for_fio(tmp_path):
    with pytest.raises(InputError) as exc:
        TC.invocation({**FILES, "file_dir": "/var/tmp/a:b"}, POINT)
    assert exc.value.key == "file_dir" and "separator" in exc.value.problem


def test_a_file_size_the_block_size_does_not_divide_is_refused(tmp_path):
    settings = {**FILES, "file_dir": str(tmp_path), "file_size": 1000}
    with pytest.raises(InputError) as exc:
        TC.check_settings(settings)
    assert exc.value.key == "file_size" and "block size 512" in exc.value.problem


def _root_device() -> str | None:
    """/dev/<name> of the root filesystem's device, when this host has such a node."""
    devno = os.stat("/").st_dev
    for name in os.listdir("/sys/class/block"):
        try:
            text = Path(f"/sys/class/block/{name}/dev").read_text().strip()
        except OSError:
            continue
        if text == f"{os.major(devno)}:{os.minor(devno)}" and Path(f"/dev/{name}").exists():
            return f"/dev/{name}"
    return None


def test_the_root_device_is_refused_before_anything_runs():
    root = _root_device()
    if root is None:
        pytest.skip("the root filesystem is not on a block device with a /dev node here "
                    "(an overlay or a container)")
    with pytest.raises(InputError, match=f"refusing to benchmark a block device in use: "
                                         f"{root}: .*root filesystem") as exc:
        TC.prepare_host({**BLOCK, "block_devices": [root]})
    assert exc.value.key == "block_devices" and "never the root device" in exc.value.allowed


def test_published_table_keeps_aisio_order_and_labels():
    table = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "reference"
                        / "aisio_tool_comparison.csv")
    wide = tr.published(table)
    assert list(wide.index)[:2] == ["SPDK bdevperf", "SPDK perf"]
    assert list(wide.columns) == ["1 thread", "2 threads", "3 threads", "4 threads"]
    assert wide.loc["SPDK bdevperf", "1 thread"] == 6293659


def test_ratio_to_fio_and_setup_order():
    rows = pd.DataFrame({"tool": ["fio"] * 3 + ["bdevperf"] * 3, "engine": "io_uring",
                         "ncores": 1, "qdepth": 32, "iosize": 4096,
                         "iops": [100.0, 110.0, 90.0, 200.0, 220.0, 180.0]})
    r = tr.ratio_to(rows, "bdevperf", "fio", 0.95, engine="io_uring", ncores=1)
    assert r["ratio"] == pytest.approx(2.0) and r["ci_low"] < 2.0 < r["ci_high"]
    assert tr.ratio_to(rows, "xnvmeperf", "fio", 0.95) is None
    both = pd.concat([rows.assign(engine="libaio", ncores=2), rows])
    assert tr.setups(tr.comparison_rows(both, {"qdepth": 32, "iosize": 4096})) == \
        ["io_uring, 1 core", "libaio, 2 cores"]


# -- real runs ----------------------------------------------------------------------------

def _campaign(tmp_path, grid: str, **settings) -> Campaign:
    overrides = [f"file_dir={tmp_path / 'files'}", "file_size=16M", "runtime_s=1",
                 "repetitions=1", "spdk_memory_mib=512", f"grids={grid}"]
    overrides += [f"{k}={v}" for k, v in settings.items()]
    return Campaign("tool_comparison", "kvm-2vcpu", data_dir=tmp_path / "data",
                    overrides=overrides)


@pytest.mark.slow
def test_real_bdevperf_and_xnvmeperf_runs_are_measured(tmp_path, built_spdk, built_xnvmeperf):
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (apt-get install fio)")
    camp = _campaign(tmp_path, "{t: {vary: {tool: [fio, bdevperf, xnvmeperf], "
                               "engine: [io_uring, libaio]}}}")
    result = camp.run(progress=False)
    assert not result.failed, result.failed
    rows = camp.tidy()
    assert len(rows) == 6
    assert (rows["iops"] > 100).all(), rows[["tool", "engine", "iops"]]
    versions = dict(zip(rows["tool"], rows["run.tool_version"]))
    assert versions["bdevperf"].startswith("SPDK v")
    assert versions["xnvmeperf"].count(".") == 2
    for run_dir in (tmp_path / "data" / "raw" / "tool_comparison" / "kvm-2vcpu" / "runs").iterdir():
        manifest = json.loads((run_dir / "run.json").read_text())
        if manifest["tool"] == "bdevperf":
            assert "-u" in manifest["argv"] and "--no-huge" in manifest["argv"]
            build = json.loads((run_dir / "spdk-build.json").read_text())
            assert build["tool"] == "spdk" and build["source_commit"]
            config = json.loads((run_dir / "bdev.json").read_text())
            method = config["subsystems"][0]["config"][0]["method"]
            assert method in ("bdev_aio_create", "bdev_uring_create")
        elif manifest["tool"] == "xnvmeperf":
            assert "--direct" in manifest["argv"]
            assert json.loads((run_dir / "xnvme-build.json").read_text())["tool"] == "xnvme"


@pytest.mark.slow
def test_a_bdev_file_that_does_not_exist_fails_the_run_with_spdks_reason(tmp_path, built_spdk):
    from iolab.tools.base import Invocation
    from iolab.core.tool_registry import adapter

    tool = adapter("bdevperf")
    invocation = Invocation("bdevperf", {
        "spdk_dir": None, "devices": [str(tmp_path / "missing.dat")], "json_results": False,
        "core_mask": CpuRequest(1, siblings=False), "queue_depth": 4, "io_size": 4096,
        "seconds": 1, "workload": "randread", "bdev": "aio", "block_size": 512,
        "memory_mib": 512})
    done = _drive(tool, invocation, tmp_path)
    assert done.returncode != 0
    assert "missing.dat" in done.stdout + done.stderr


@pytest.mark.slow
def test_spdk_without_hugepages_refuses_to_start_and_says_so(tmp_path, built_spdk):
    vm = Path("/proc/sys/vm")
    if any((vm / f).exists() and (vm / f).read_text().strip() != "0"
           for f in ("nr_hugepages", "nr_overcommit_hugepages")):
        pytest.skip("this host has hugepages reserved or overcommitted, so SPDK would start")
    from iolab.tools.base import Invocation
    from iolab.core.tool_registry import adapter

    lay_out(ScratchFile("file_dir", tmp_path / "f.dat", 2**20), Registry(), by="test")
    invocation = Invocation("bdevperf", {
        "spdk_dir": None, "devices": [str(tmp_path / "f.dat")], "json_results": False,
        "core_mask": CpuRequest(1, siblings=False), "queue_depth": 4, "io_size": 4096,
        "seconds": 1, "workload": "randread", "bdev": "aio", "block_size": 512})
    done = _drive(tool := adapter("bdevperf"), invocation, tmp_path)
    assert done.returncode != 0
    text = (done.stdout + done.stderr).lower()
    assert "huge" in text or "memory" in text
    with pytest.raises(ParseError):
        tool.parse(tmp_path / "run")  # no results table: the run is no measurement


def _drive(tool, invocation, tmp_path: Path):
    """One run of ``invocation`` on this host, in tmp_path/run (see conftest.drive), with its
    output as text."""
    from iolab.host.inventory import topology
    done = drive(tool.launch(invocation, topology()), tmp_path / "run")
    done.stdout, done.stderr = (done.stdout.decode(errors="replace"),
                                done.stderr.decode(errors="replace"))
    return done


def test_the_ratio_sentences_name_the_set_ups_a_partial_design_did_not_measure():
    """Constructed texts (not measurements): a replication pack measures fio on one core only,
    and its page says which set-ups have no ratio rather than quoting "n/a"."""
    from iolab.experiments.tool_comparison.page import ratios_sentence

    T = {"bdevperf_io_uring_1": "58,904", "xnvmeperf_io_uring_1": "91,564",
         "fio_io_uring_1": "88,676", "ratio_bdevperf_io_uring_1": "0.66",
         "ratio_bdevperf_io_uring_1_ci": "0.41 – 1.08", "ratio_xnvmeperf_io_uring_1": "1.03",
         "ratio_xnvmeperf_io_uring_1_ci": "0.88 – 1.22"}
    said = ratios_sentence(T, "95 %")
    assert said.startswith("Through io_uring on one core, bdevperf completes 58,904 reads")
    assert "ratios to fio of 0.66 (95 % CI 0.41 – 1.08) and 1.03 (0.88 – 1.22)." in said
    assert said.endswith("did not measure libaio on one core, io_uring on two cores and libaio "
                         "on two cores with all three tools, so those set-ups have no ratio to "
                         "fio here.")
    full = dict(T)
    for engine in ("io_uring", "libaio"):
        for n in (1, 2):
            for tool in ("bdevperf", "xnvmeperf"):
                full.setdefault(f"ratio_{tool}_{engine}_{n}", "1.00")
                full.setdefault(f"ratio_{tool}_{engine}_{n}_ci", "0.90 – 1.10")
    said = ratios_sentence(full, "95 %")
    assert "n/a" not in said and "did not measure" not in said
    assert said.endswith("On two cores (two files) the ratios are 1.00 and 1.00 with io_uring, "
                         "1.00 and 1.00 with libaio.")
