"""The CPU-search experiment module: points to argv/config, host blocking, and the metrics of
bdevperf runs rebuilt from the golden samples in tests/fixtures/bdevperf/."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from iolab.experiments import cpu_search as cs

BDEVPERF = Path(__file__).parent / "fixtures" / "bdevperf"
SETTINGS = {"tool": "bdevperf", "spdk_dir": "/opt/spdk", "bdevperf_json": True, "runtime_s": 10,
            "ramp_s": 0, "workload": "randread", "user_space_driver": "uio_pci_generic",
            "devices": ["0000:4a:00.0", "0000:4b:00.0", "0000:4c:00.0"],
            "file_dir": "/tmp/x", "file_size": "1G", "fio_ioengine": "io_uring", "fio_hipri": False}
POINT = {"cpu_governor": "performance", "turbo": "on", "smt": "on", "thr_sib": True, "stress": False,
         "qdepth": 128, "iosize": 512, "ncores": 2, "ndevs": 2}


def smt_topology(cores: int = 4):
    """cores x 2 threads; the sibling of CPU k is k + cores, as on many two-thread hosts."""
    topo = []
    for cpu in range(2 * cores):
        core = cpu % cores
        topo.append({"cpu": cpu, "core": core, "package": 0, "siblings": [core, core + cores]})
    return topo


def test_bdevperf_argv_and_config(tmp_path):
    topo = smt_topology()
    argv = cs.build_argv(SETTINGS, POINT, topo)
    assert argv[:2] == ["/usr/bin/time", "-o"]
    i = argv.index(str(cs.tool(SETTINGS).driver_path))
    assert argv[i + 1:i + 8] == ["--spdk-dir", "/opt/spdk", "--config", "bdev.json",
                                 "--json-results", "bdevperf-results.json", "--"]
    # two cores with siblings: CPUs 0, 4 (core 0) and 1, 5 (core 1) -> mask 0x33
    assert argv[argv.index("-m") + 1] == "0x33" and argv[argv.index("-q") + 1] == "128"
    cs.prepare(tmp_path, SETTINGS, POINT, topo)
    config = json.loads((tmp_path / "bdev.json").read_text())
    attached = [c["params"]["traddr"] for c in config["subsystems"][0]["config"]]
    assert attached == ["0000:4a:00.0", "0000:4b:00.0"]
    assert json.loads((tmp_path / "cpus.json").read_text()) == {"cpus": [0, 1, 4, 5], "mask": "0x33"}
    assert cs.campaign_knobs(SETTINGS) == {"device_binding": {"devices": SETTINGS["devices"],
                                                              "driver": "uio_pci_generic"}}


def test_host_block_reasons():
    topo = smt_topology(2)
    assert cs.host_block(SETTINGS, POINT, topo) is None
    assert "3 physical cores" in cs.host_block(SETTINGS, {**POINT, "ncores": 3}, topo)
    assert "4 devices" in cs.host_block(SETTINGS, {**POINT, "ndevs": 4}, topo)
    assert "every CPU" in cs.host_block(SETTINGS, {**POINT, "stress": True}, topo)
    no_smt = [{"cpu": c, "core": c, "package": 0, "siblings": [c]} for c in range(4)]
    assert "one hardware thread" in cs.host_block(SETTINGS, POINT, no_smt)


def bdevperf_run(tmp_path, stdout: str, results: str | None) -> Path:
    shutil.copy(BDEVPERF / stdout, tmp_path / "stdout")
    if results is not None:
        target = tmp_path / cs.BDEVPERF_JSON
        if results:
            shutil.copy(BDEVPERF / results, target)
        else:
            target.write_text("")
    (tmp_path / "cpus.json").write_text('{"cpus": [0, 1], "mask": "0x3"}')
    return tmp_path


def test_text_table_run(tmp_path):
    m = cs.parse_run(bdevperf_run(tmp_path, "v25.09_randread_4jobs.txt", None))
    assert m["iops"] == pytest.approx(4515975.66) and m["mibs"] == pytest.approx(2205.07)
    assert m["results_from"] == "text table" and m["note"] is None and m["run_problem"] is None
    assert m["tool_version"] == "v25.09" and m["cpus"] == "0,1"


def test_json_results_are_preferred_and_gate_failed_jobs(tmp_path):
    m = cs.parse_run(bdevperf_run(tmp_path, "v25.09_randread_4jobs.txt", "perform_tests_2jobs.json"))
    assert m["results_from"] == "perform_tests JSON"
    assert m["iops"] == pytest.approx(1125214.3152 + 1121395.6124)
    assert m["run_problem"]  # one job of the JSON sample failed


def test_old_spdk_falls_back_to_the_text_table_and_says_so(tmp_path):
    m = cs.parse_run(bdevperf_run(tmp_path, "v22.09_no_latency.txt", ""))
    assert m["results_from"] == "text table" and m["iops"] == pytest.approx(799985.80)
    assert "v22.09" in m["note"] and "24.09" in m["note"]
    assert m["clat_mean_us"] is None or math.isnan(m["clat_mean_us"])


def test_failed_job_in_the_text_table_rejects_the_run(tmp_path):
    m = cs.parse_run(bdevperf_run(tmp_path, "v25.09_failed_job.txt", None))
    assert m["run_problem"] and m["fail_per_s"] > 0


def test_missing_bdevperf_is_reported_before_anything_runs(tmp_path):
    from iolab.errors import ToolError
    from iolab.runner import run_campaign
    from iolab import spec as specmod

    spec = specmod.load("cpu_search", "hpc-server")
    spec.values["spdk_dir"] = str(tmp_path / "no-spdk")
    with pytest.raises(ToolError, match=r"bdevperf not found at .*no-spdk/build/examples/bdevperf.*SPDK"):
        run_campaign(spec, tmp_path / "data", progress=False)
    assert not (tmp_path / "data").exists()
