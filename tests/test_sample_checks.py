"""A committed run with one number of its output changed, judged as ``OneRun._read_output``
judges a new run's output (the adapter's parse, its foreign-report check, the experiment's
row and its sample check): probe 12's cases where such a run was stored as a sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

from iolab.core import registry, tool_registry
from iolab.core.store import Store, StoredRun
from iolab.errors import ParseError
from iolab.paths import default_data_dir


def judged(tmp_path: Path, experiment: str, environment: str,
           edit: Callable[[Path], None] | None = None) -> str:
    """Why the first committed run of the campaign, copied and edited, makes no sample ("" when
    it makes one)."""
    exp = registry.get(experiment)
    stored = Store(default_data_dir(), experiment, environment).complete_runs()[0]
    run = tmp_path / environment / "runs" / stored.path.name
    shutil.copytree(stored.path, run)
    shutil.copy(stored.path.parent.parent / "host.json", tmp_path / environment / "host.json")
    if edit is not None:
        edit(run)
    adapter = tool_registry.adapter(stored.manifest.tool)
    try:
        metrics = adapter.parse(run)
        if metrics.get("problem"):
            return metrics["problem"]
        foreign = adapter.foreign_report(run, stored.manifest.argv)
        if foreign:
            return foreign
        row = exp.tidy_row(StoredRun(run, stored.manifest))
        return exp.sample_problem(row, 2) or ""
    except ParseError as exc:
        return str(exc)


def edit_json(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(run: Path) -> None:
        doc = json.loads((run / name).read_text())
        change(doc)
        (run / name).write_text(json.dumps(doc))
    return edit


def test_the_committed_runs_used_here_make_samples(tmp_path):
    for experiment, environment in [("smt_thp", "kvm-2vcpu"), ("cpu_search", "kvm-2vcpu"),
                                    ("cpu_search", "xeon-v657"), ("gpu_pcie", "h200-pcie5")]:
        assert judged(tmp_path / experiment / environment, experiment, environment) == ""


@pytest.mark.parametrize("days", [-365, -1, 365])
def test_a_fio_report_stamped_far_from_the_runs_window_is_not_its_report(tmp_path, days):
    """Probe 12 R3: fio's timestamp was checked only against 2005-2100; a report stamped a
    year (or a day) before the run began was stored as its sample."""
    def move(doc: dict) -> None:
        doc["timestamp"] += days * 86400
        doc["timestamp_ms"] += days * 86400 * 1000
    why = judged(tmp_path, "smt_thp", "kvm-2vcpu", edit_json("fio.json", move))
    assert "the tool's report says it measured" in why and "outside the run's window" in why


def _results(change: Callable[[list[dict]], None]) -> Callable[[Path], None]:
    return edit_json("bdevperf-results.json", lambda doc: change(doc["results"]))


def _scaled(jobs: list[dict], factor: float) -> None:
    jobs[0].update(iops=jobs[0]["iops"] * factor, mibps=jobs[0]["mibps"] * factor)


@pytest.mark.parametrize("factor", [2, 1.001])
def test_bdevperf_json_rates_other_than_its_own_tables_are_not_the_runs(tmp_path, factor):
    """Probe 12 R5: the JSON's IOPS and MiB/s doubled (each job's own numbers agreeing) were
    taken over stdout's table of the same jobs, which still says 36,138.96, and stored."""
    why = judged(tmp_path, "cpu_search", "kvm-2vcpu", _results(lambda j: _scaled(j, factor)))
    assert why.startswith("bdevperf-results.json is not this run's report: its job 'aio0' has "
                          "IOPS"), why
    assert "the text table on stdout 36138.96" in why


def test_bdevperf_json_jobs_other_than_its_tables_are_not_the_runs(tmp_path):
    why = judged(tmp_path, "cpu_search", "kvm-2vcpu", _results(lambda jobs: jobs.reverse()))
    assert "its jobs 'aio1, aio0' are not those of the text table on stdout" in why, why


def _taken(tmp_path: Path, edit: Callable[[Path], None]) -> dict:
    """The bdevperf metrics of cpu_search/kvm-2vcpu's first run, edited; the run must make a
    sample (judged as a new run's output is)."""
    assert judged(tmp_path, "cpu_search", "kvm-2vcpu", edit) == ""
    [run] = (tmp_path / "kvm-2vcpu" / "runs").iterdir()
    return tool_registry.adapter("bdevperf").parse(run)


def test_bdevperf_json_rates_beside_a_runtime_of_0_are_not_taken(tmp_path):
    """Probe 12 R6: a runtime of 0.0 beside the jobs' rates was taken, its latency mean a
    NaN (weighed by runtime). Such a JSON contradicts itself; as for any JSON that cannot be
    read, the run's own text table on stdout gives the numbers, and the note says why."""
    def zero(jobs: list[dict]) -> None:
        for job in jobs:
            job["runtime"] = 0.0
    m = _taken(tmp_path, _results(zero))
    assert (m["results_from"], m["iops"], m["lat_mean_us"]) == ("text table", 74619.21, 3426.63)
    assert m["note"].startswith("bdevperf-results.json was not taken (results[0]: runtime is "
                                "0, but iops is 36139 and mibps 141.168 (a rate is I/Os over a "
                                "runtime; allowed: a runtime above 0 beside a rate): the "
                                "report contradicts itself)")


@pytest.mark.parametrize("key, value", [("min_latency_us", 20000.0),
                                        ("avg_latency_us", 20000.0),
                                        ("max_latency_us", 3000.0)])
def test_bdevperf_json_latencies_out_of_order_are_not_taken(tmp_path, key, value):
    """Probe 12 R7: aio0's min latency 20,000 us, above its average 3,537 and its max
    18,350, was taken: each value was held only to 0 or more."""
    m = _taken(tmp_path, _results(lambda jobs: jobs[0].update({key: value})))
    assert (m["results_from"], m["iops"], m["lat_mean_us"]) == ("text table", 74619.21, 3426.63)
    assert m["note"].startswith("bdevperf-results.json was not taken (results[0]: latencies "
                                "min"), m["note"]
    assert "are out of order (allowed: min <= average <= max)" in m["note"]


def test_bdevperf_table_latencies_out_of_order_make_no_sample(tmp_path):
    """The text table's rows are held to the same order, with the 0.01 us of its printing."""
    def edit(run: Path) -> None:
        (run / "bdevperf-results.json").unlink()
        text = (run / "stdout").read_text()
        (run / "stdout").write_text(text.replace("3537.17     734.13", "3537.17    3600.00"))
    why = judged(tmp_path, "cpu_search", "kvm-2vcpu", edit)
    assert "stdout: line" in why and "latencies min 3600, average 3537.17" in why, why


@pytest.mark.parametrize("pci", ["0000:99:00.0", "0000:00:07.0"])
def test_nvml_readings_of_another_gpu_than_the_probes_make_no_sample(tmp_path, pci):
    """Probe 12 G2: nvml.json's gpu_pci was checked for its shape only, so the PCIe counters
    of another GPU were stored as the traffic of the probe's (CUDA's and NVML's orders of
    the GPUs differ on hosts with several)."""
    why = judged(tmp_path, "gpu_pcie", "h200-pcie5", edit_json("nvml.json",
                                                               lambda d: d.update(gpu_pci=pci)))
    assert why == (f"nvml.gpu_pci is '{pci}', but the tool ran on gpu_pci '0000:00:06.0' "
                   "(gpu_pcie_probe.gpu_pci): the collector sampled another device"), why


@pytest.mark.parametrize("ticks", [1, 1000, 100_000])
def test_a_process_tree_record_of_another_clock_rate_makes_no_sample(tmp_path, ticks):
    """Probe 12 Q1: clk_tck 100000 (1 to 1,000,000 were allowed) made the tree's CPU 0.187 %
    beside GNU time's 170 %; /proc counts utime and stime in Linux's USER_HZ, 100."""
    why = judged(tmp_path, "cpu_search", "xeon-v657",
                 edit_json("proctree-cpu.json", lambda d: d.update(clk_tck=ticks)))
    assert why.endswith(f"proctree-cpu.json: clk_tck is {ticks} (allowed: an object whose "
                        "clk_tck is 100, Linux's USER_HZ, the ticks per second of /proc's "
                        "utime and stime)"), why
