"""The CPU-search experiment: points to the tool's options and argv (bdevperf and fio),
host blocking, collectors, and the metrics of bdevperf runs rebuilt from the golden samples in
tests/fixtures/bdevperf/ by the bdevperf adapter."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from iolab.collectors.gnu_time import GNU_TIME
from iolab.core.registry import get
from iolab.errors import InputError
from iolab.host.scratch import ScratchFile
from iolab.tools import bdevperf

BDEVPERF = Path(__file__).parent / "fixtures" / "bdevperf"
CS = get("cpu_search")
SETTINGS = {"tool": "bdevperf", "spdk_dir": "/opt/spdk", "bdevperf_json": True, "runtime_s": 10,
            "ramp_s": 0, "workload": "randread", "user_space_driver": "uio_pci_generic",
            "devices": ["0000:4a:00.0", "0000:4b:00.0", "0000:4c:00.0"]}
FIO = {"tool": "fio", "runtime_s": 2, "ramp_s": 1, "workload": "randread", "file_dir": "/tmp/x",
       "file_size": "1G", "fio_ioengine": "io_uring", "fio_hipri": False}
POINT = {"cpu_governor": "performance", "turbo": "on", "smt": "on", "thr_sib": True,
         "stress": False, "qdepth": 128, "iosize": 512, "ncores": 2, "ndevs": 2}


def smt_topology(cores: int = 4):
    """cores x 2 threads; the sibling of CPU k is k + cores, as on many two-thread hosts."""
    topo = []
    for cpu in range(2 * cores):
        core = cpu % cores
        topo.append({"cpu": cpu, "core": core, "package": 0, "siblings": [core, core + cores]})
    return topo


def test_bdevperf_argv_config_and_cpus():
    launch, collectors, adapter = CS.launch(SETTINGS, POINT, smt_topology())
    argv = launch.argv
    assert argv[:2] == [GNU_TIME, "-o"], "GNU time wraps the driver"
    i = argv.index(str(adapter.driver_path))
    assert argv[i + 1:i + 8] == ["--spdk-dir", "/opt/spdk", "--config", "bdev.json",
                                 "--json-results", "bdevperf-results.json", "--"]
    # two cores with siblings: CPUs 0, 4 (core 0) and 1, 5 (core 1) -> mask 0x33
    assert argv[argv.index("-m") + 1] == "0x33" and argv[argv.index("-q") + 1] == "128"
    assert launch.cpus == [0, 1, 4, 5]
    config = json.loads(launch.inputs["bdev.json"])
    attached = [c["params"]["traddr"] for c in config["subsystems"][0]["config"]]
    assert attached == ["0000:4a:00.0", "0000:4b:00.0"]
    assert [c.name for c in collectors] == ["procstat", "cpufreq", "hugepages", "proctree",
                                            "gnu_time", "marker", "quiet"]
    assert CS.campaign_knobs(SETTINGS) == {"device_binding": {"devices": SETTINGS["devices"],
                                                              "driver": "uio_pci_generic"}}


FILES = {**SETTINGS, "spdk_dir": None, "bdev": "aio", "block_size": 512, "file_dir": "/tmp/x",
         "file_size": "16M", "spdk_memory_mib": 512, "spdk_hugepages": None}


def test_bdevperf_on_files_reads_one_file_per_device_without_pci_or_hugepages():
    invocation = CS.invocation(FILES, POINT)
    o = invocation.options
    assert o["devices"] == ["/tmp/x/dev00.dat", "/tmp/x/dev01.dat"]
    assert (o["bdev"], o["block_size"], o["memory_mib"]) == ("aio", 512, 512)
    assert CS.campaign_knobs(FILES) == {}  # nothing to bind, no hugepages to reserve
    assert CS.campaign_knobs({**FILES, "spdk_hugepages": 1024}) == {
        "hugepages": {"pages": 1024}}
    assert CS.host_block(FILES, {**POINT, "ndevs": 8, "thr_sib": False}, smt_topology()) is None
    assert CS.scratch_files(FILES, [POINT]) == [
        ScratchFile("file_dir", Path(f"/tmp/x/dev0{i}.dat"), 16 << 20) for i in range(2)]


def test_runs_on_nvme_keep_their_options_and_so_their_identity():
    """Settings added for file bdevs must not enter the options of NVMe runs: a stored lab
    server run would otherwise look unstored."""
    assert set(CS.invocation(SETTINGS, POINT).options) == {
        "spdk_dir", "devices", "json_results", "core_mask", "queue_depth", "io_size",
        "seconds", "workload"}


def test_files_need_a_folder_and_a_size():
    with pytest.raises(InputError) as exc:
        CS.invocation({**FILES, "file_dir": None}, POINT)
    assert exc.value.key == "file_dir" and "bdevperf with bdev aio or uring" in exc.value.problem


def test_the_files_of_the_largest_point_are_the_scratch_files_for_both_tools():
    points = [{**POINT, "ndevs": 1}, {**POINT, "ndevs": 3}]
    for settings in (FILES, FIO):  # fio's too: the package writes them, fio reuses them
        files = CS.scratch_files(settings, points)
        assert [f.path.name for f in files] == ["dev00.dat", "dev01.dat", "dev02.dat"]
        assert {f.key for f in files} == {"file_dir"}
    assert CS.scratch_files(SETTINGS, points) == []  # NVMe devices are no files


def test_fio_argv_has_one_job_per_cpu_and_no_output_format():
    launch, collectors, adapter = CS.launch(FIO, {**POINT, "thr_sib": False}, smt_topology())
    assert "--numjobs=2" in launch.argv and "--cpus_allowed=0,1" in launch.argv
    assert [a for a in launch.argv if a.startswith("--output")] == [
        "--output-format=json+", "--output=fio.json"], "the adapter alone chooses the report"


def test_the_identity_names_cpus_by_cores_not_ids():
    a = CS.identity("e", FIO, {**POINT, "thr_sib": False})
    options = a["invocation"]["options"]
    assert options["cpus_allowed"] == {"cores": 2, "siblings": False}
    assert options["numjobs"] == {"cpus_of": {"cores": 2, "siblings": False}}


def test_stress_collector_takes_the_idle_cpus():
    _, collectors, _ = CS.launch(FIO, {**POINT, "thr_sib": False, "stress": True}, smt_topology())
    stress = [c for c in collectors if c.name == "stress_ng"][0]
    assert stress.cpus == [2, 3, 4, 5, 6, 7]


def test_host_block_reasons():
    topo = smt_topology(2)
    assert CS.host_block(SETTINGS, POINT, topo) is None
    assert "3 physical cores" in CS.host_block(SETTINGS, {**POINT, "ncores": 3}, topo)
    assert "4 devices" in CS.host_block(SETTINGS, {**POINT, "ndevs": 4}, topo)
    assert "every CPU" in CS.host_block(SETTINGS, {**POINT, "stress": True}, topo)
    no_smt = [{"cpu": c, "core": c, "package": 0, "siblings": [c]} for c in range(4)]
    assert "one hardware thread" in CS.host_block(SETTINGS, POINT, no_smt)


def bdevperf_run(tmp_path, stdout: str, results: str | None) -> Path:
    shutil.copy(BDEVPERF / stdout, tmp_path / "stdout")
    if results is not None:
        target = tmp_path / bdevperf.JSON_RESULTS
        if results:
            shutil.copy(BDEVPERF / results, target)
        else:
            target.write_text("")
    return tmp_path


ADAPTER = bdevperf.Bdevperf()


def test_text_table_run(tmp_path):
    m = ADAPTER.parse(bdevperf_run(tmp_path, "v25.09_randread_4jobs.txt", None))
    assert m["iops"] == pytest.approx(4515975.66) and m["mibs"] == pytest.approx(2205.07)
    assert m["results_from"] == "text table" and m["note"] is None and m["problem"] is None
    assert m["version"] == "v25.09"


def test_json_results_are_preferred_and_gate_failed_jobs(tmp_path):
    m = ADAPTER.parse(bdevperf_run(tmp_path, "v25.09_randread_4jobs.txt", "perform_tests_2jobs.json"))
    assert m["results_from"] == "perform_tests JSON"
    assert m["iops"] == pytest.approx(1125214.3152 + 1121395.6124)
    assert m["problem"]  # one job of the JSON sample failed


def test_old_spdk_falls_back_to_the_text_table_and_says_so(tmp_path):
    m = ADAPTER.parse(bdevperf_run(tmp_path, "v22.09_no_latency.txt", ""))
    assert m["results_from"] == "text table" and m["iops"] == pytest.approx(799985.80)
    assert "v22.09" in m["note"] and "24.09" in m["note"]
    assert m["lat_mean_us"] is None or math.isnan(m["lat_mean_us"])


def test_a_json_it_cannot_read_falls_back_saying_why(tmp_path):
    # a key given twice is no error perform_tests returned: the note says what happened
    run = bdevperf_run(tmp_path, "v25.09_randread_4jobs.txt", "perform_tests_2jobs.json")
    target = run / bdevperf.JSON_RESULTS
    target.write_text(target.read_text().replace('"iops": ', '"iops": 1e9, "iops": ', 1))
    m = ADAPTER.parse(run)
    assert m["results_from"] == "text table" and m["iops"] == pytest.approx(4515975.66)
    assert m["note"].startswith(f"{bdevperf.JSON_RESULTS} was not taken (")
    assert "'iops'" in m["note"] and "twice" in m["note"] and "returned an error" not in m["note"]
    assert m["note"].endswith("): results are read from bdevperf's text table")
    shutil.copy(BDEVPERF / "bad/rpc_error.txt", target)  # what perform_tests answers a failure
    assert "perform_tests returned an error" in ADAPTER.parse(run)["note"]


def test_failed_job_in_the_text_table_rejects_the_run(tmp_path):
    m = ADAPTER.parse(bdevperf_run(tmp_path, "v25.09_failed_job.txt", None))
    assert m["problem"] and m["fail_per_s"] > 0


def test_the_experiment_metrics_take_the_tool_that_ran():
    row = {"bdevperf.iops": 5.0, "bdevperf.lat_mean_us": 2.0, "gnu_time.cpu_pct": 99}
    derived = CS.derive(row)
    assert derived["iops"] == 5.0 and derived["clat_mean_us"] == 2.0
    assert derived["cpu_usage_lifetime_pct"] == 99 and math.isnan(derived["clat_p99_us"])


def test_missing_bdevperf_is_reported_before_anything_runs(tmp_path):
    from iolab.execution.campaign import Campaign
    from iolab.errors import ToolError

    camp = Campaign("cpu_search", "hpc-server", data_dir=tmp_path / "data",
                    overrides=[f"spdk_dir={tmp_path / 'no-spdk'}", "base.ncores=1",
                               "base.ndevs=1", "base.cpu_governor=asis", "base.turbo=asis",
                               "base.smt=asis", "grids={one: {vary: {qdepth: [4]}}}", "search="])
    with pytest.raises(ToolError, match=r"bdevperf cannot run here without \S*no-spdk/build/"
                                        r"examples/bdevperf .*no SPDK build at .*make tools"):
        camp.run(progress=False)
    assert not (tmp_path / "data").exists()


def test_lab_server_runs_keep_their_run_ids_and_configuration():
    """Pinned from the loaded hpc-server params: file bdevs and hugepage settings came later
    and must not make runs stored on the lab server look unstored or of another
    configuration (the ids here are those of commit 1b085f1)."""
    from iolab.execution.campaign import Campaign
    from iolab.core.identity import config_id, run_id
    camp = Campaign("cpu_search", "hpc-server")
    settings = camp.spec.settings
    assert run_id(CS.identity("hpc-server", settings, camp.spec.base), 0) == "256e10c06b9d-r0"
    assert config_id("cpu_search", "hpc-server", CS.config_settings(settings)) == "b9dd2558"
    # a setting that is used changes the configuration, as it must
    changed = {**settings, "spdk_hugepages": 4096}
    assert config_id("cpu_search", "hpc-server", CS.config_settings(changed)) != "b9dd2558"


def test_settings_that_do_not_go_together_name_the_params_file(tmp_path):
    from iolab.execution.campaign import Campaign
    with pytest.raises(InputError) as exc:
        Campaign("cpu_search", "kvm-2vcpu", overrides=["file_size=1000"])
    assert exc.value.key == "file_size" and "kvm-2vcpu/cpu_search.yaml" in str(exc.value)
    assert "multiple of 512" in exc.value.allowed
    with pytest.raises(InputError) as exc:
        Campaign("cpu_search", "kvm-2vcpu", overrides=["spdk_hugepages=512"])
    assert exc.value.key == "spdk_memory_mib" and exc.value.allowed == "one of the two"
    live = CS.params_dir / "kvm-2vcpu" / "cpu_search.yaml"
    (tmp_path / "kvm-2vcpu").mkdir()
    mine = tmp_path / "kvm-2vcpu" / "cpu_search.yaml"
    mine.write_text("".join(line for line in live.read_text().splitlines(keepends=True)
                            if not line.startswith("file_dir:")))
    with pytest.raises(InputError) as exc:
        Campaign("cpu_search", "kvm-2vcpu", params_dir=tmp_path)
    assert exc.value.key == "file_dir" and str(mine) in str(exc.value)
    assert "bdevperf with bdev aio or uring" in exc.value.problem
