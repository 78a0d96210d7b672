"""The environments page's table of which experiments each machine measured."""

from __future__ import annotations

import json
import shutil

import pytest

from iolab.host.inventory import SUMMARY, fingerprint, shape_problem, summary_row
from iolab.paths import default_data_dir
from iolab.report.machines import measured_by_machine, stored_by_experiment

RAW = default_data_dir() / "raw"


def test_campaigns_are_grouped_by_machine_not_by_fingerprint(tmp_path):
    # two experiments of one machine (whose fingerprints differ by their tools), one other
    for exp, env, runs in [("smt_thp", "kvm-2vcpu", 2), ("irq_affinity", "kvm-2vcpu", 1),
                           ("gpu_pcie", "h200-pcie5", 3)]:
        folder = tmp_path / "raw" / exp / env
        (folder / "runs").mkdir(parents=True)
        shutil.copy(RAW / exp / env / "host.json", folder / "host.json")
        for i in range(runs):
            (folder / "runs" / f"r{i}").mkdir()
    (tmp_path / "raw" / "cpu_search" / "nowhere").mkdir(parents=True)  # no host: not shown
    table = measured_by_machine(tmp_path)
    assert len(table) == 2
    amd = table[table["environment"] == "kvm-2vcpu"].iloc[0]
    assert amd["experiments measured (runs)"] == "irq_affinity (1); smt_thp (2)"
    host = json.loads((RAW / "smt_thp" / "kvm-2vcpu" / "host.json").read_text())
    assert amd["machine (as recorded)"].startswith(f"{host['cpu']['model_name']}, 2 logical CPUs")
    assert host["kernel_release"] in amd["machine (as recorded)"]
    assert "gpu_pcie (3)" in set(table["experiments measured (runs)"])


def test_no_campaign_gives_an_empty_table_with_its_columns(tmp_path):
    table = measured_by_machine(tmp_path)
    assert table.empty and "machine (as recorded)" in table.columns


def test_each_experiment_s_stored_runs_are_counted_in_words(tmp_path):
    from iolab.core import registry
    from iolab.report.machines import stored_by_experiment

    for exp, env, runs in [("smt_thp", "kvm-2vcpu", 2), ("smt_thp", "other", 1),
                           ("gpu_pcie", "h200-pcie5", 3), ("irq_affinity", "empty", 0)]:
        folder = tmp_path / "raw" / exp / env
        (folder / "runs").mkdir(parents=True)
        shutil.copy(RAW / exp / ("kvm-2vcpu" if env == "other" else
                                 "kvm-2vcpu" if env == "empty" else env) / "host.json",
                    folder / "host.json")
        for i in range(runs):
            (folder / "runs" / f"r{i}").mkdir()
    (tmp_path / "raw" / "aisio-import" / "x" / "runs" / "r0").mkdir(parents=True)  # an import
    said = stored_by_experiment(tmp_path)
    assert set(said) == set(registry.names())
    assert said["smt_thp"] == "3 runs in 2 environments on 1 host: kvm-2vcpu (2), other (1)"
    assert said["gpu_pcie"] == "3 runs in h200-pcie5 (1 host)"
    assert said["irq_affinity"] == said["cpu_search"] == "no runs stored"


@pytest.mark.parametrize("key, value, why", [
    ("mem_total_kib", "lots", "key mem_total_kib: 'lots' is not integer or null"),
    ("block_devices", ["x"], "key block_devices[0]: 'x' is not an object"),
    ("cpu", "AMD", "key cpu: 'AMD' is not object"),
])
def test_a_host_record_of_another_shape_is_shown_unreadable_naming_file_and_key(
        tmp_path, key, value, why):
    """Probe 7, H2: a host.json with mem_total_kib "lots" (or block_devices ["x"]) stopped
    the inventory page with a TypeError (AttributeError) in summary_row and machine_words:
    verify names the schema problem, but the page reads the record without that check."""
    host = json.loads((RAW / "smt_thp" / "kvm-2vcpu" / "host.json").read_text())
    host[key] = value
    summary = summary_row(host)
    assert list(summary) == list(SUMMARY)
    assert summary["CPU model"].startswith(f"unreadable: host.json, {why}")
    assert set(list(summary.values())[1:]) == {"unreadable"}
    folder = tmp_path / "raw" / "smt_thp" / "kvm-2vcpu"
    (folder / "runs" / "r0").mkdir(parents=True)
    (folder / "host.json").write_text(json.dumps(host))
    table = measured_by_machine(tmp_path)
    said = f"unreadable host record: {folder / 'host.json'}: key {key}"
    assert [m.startswith(said) for m in table["machine (as recorded)"]] == [True]
    assert table["experiments measured (runs)"].tolist() == ["smt_thp (1)"]


@pytest.mark.parametrize("edit, key", [
    ({"mem_total_kib": 10**400}, "mem_total_kib"),
    ({"mem_total_kib": -4096}, "mem_total_kib"),
    ({"mem_total_kib": 2**50 + 1}, "mem_total_kib"),
    ({"cpu": {"model_name": "AMD EPYC", "logical_cpus": 0, "threads_per_core": 1}},
     "cpu.logical_cpus"),
    ({"cpu": {"model_name": "AMD EPYC", "logical_cpus": 65537, "threads_per_core": 1}},
     "cpu.logical_cpus"),
    ({"cpu": {"model_name": ["<b>x</b>"], "logical_cpus": 2, "threads_per_core": 1}},
     "cpu.model_name"),
    ({"cpu": {"model_name": "AMD EPYC", "logical_cpus": 2, "threads_per_core": 0}},
     "cpu.threads_per_core"),
])
def test_a_host_record_of_values_no_host_has_is_named_not_drawn(tmp_path, edit, key):
    """Probe 10, Q17/Q18: a memory of 10**400 KiB stopped the environments page with an
    OverflowError (no float holds it); -4096 KiB, 0 CPUs or a list for a CPU model were
    drawn as a machine ("0 logical CPUs, -0.0 GiB")."""
    host = {**json.loads((RAW / "smt_thp" / "kvm-2vcpu" / "host.json").read_text()), **edit}
    assert shape_problem(host)[0] == key
    if edit.get("mem_total_kib") != 10**400:  # no float holds it: no fingerprint either
        host["fingerprint"] = fingerprint(host)  # the record as written, values and all
    folder = tmp_path / "raw" / "smt_thp" / "kvm-2vcpu"
    (folder / "runs" / "r0").mkdir(parents=True)
    (folder / "host.json").write_text(json.dumps(host))
    [machine] = measured_by_machine(tmp_path)["machine (as recorded)"].tolist()
    assert machine.startswith(f"unreadable host record: {folder / 'host.json'}: key {key}: ")
    assert summary_row(host)["CPU model"].startswith(f"unreadable: host.json, key {key}: ")


def test_a_host_record_that_is_not_json_is_shown_unreadable(tmp_path):
    folder = tmp_path / "raw" / "smt_thp" / "kvm-2vcpu"
    (folder / "runs" / "r0").mkdir(parents=True)
    (folder / "host.json").write_text("{not json")
    machine = measured_by_machine(tmp_path)["machine (as recorded)"].tolist()
    assert len(machine) == 1 and machine[0].startswith(
        f"unreadable host record: {folder / 'host.json'}: not valid JSON")
    assert "1 host" in stored_by_experiment(tmp_path)["smt_thp"]


def test_every_committed_host_record_is_summarised_as_recorded():
    for path in RAW.glob("*/*/host.json"):
        host = json.loads(path.read_text())
        assert shape_problem(host) is None, path
        assert not summary_row(host)["CPU model"].startswith("unreadable"), path
