"""Host inventory, fingerprint, topology and CPU picking, on fake trees and fake commands."""

from __future__ import annotations

import copy
import json
import sys

import pytest

from iolab.errors import InputError, IolabError
from iolab.host.inventory import (collect_inventory, fingerprint, fingerprint_diff,
                                  fingerprint_gaps, pick_cpus, topology)
from iolab.host.knobset import make_knobs
from test_rounds import ENV, FAKE_FIO, campaigns, fake_fio, stored  # noqa: F401  (the fixture)

HOST_DEPENDENT = {"irqbalance", "nvme_poll_queues"}  # controllable where root and systemd are

# The nested form of lscpu -J from util-linux 2.38 and later; only shell builtins, because
# the tests run it with a PATH that holds nothing else.
FAKE_LSCPU_JSON = json.dumps({"lscpu": [
    {"field": "Architecture:", "data": "x86_64"},
    {"field": "CPU(s):", "data": "96"},
    {"field": "Vendor ID:", "data": "GenuineIntel", "children": [
        {"field": "Model name:", "data": "Intel(R) Xeon(R) Gold 6442Y", "children": [
            {"field": "Thread(s) per core:", "data": "2"},
            {"field": "Socket(s):", "data": "2"}]}]},
]})
FAKE_LSCPU = f"""#!/bin/sh
case "$1" in
  -J) printf '%s\\n' '{FAKE_LSCPU_JSON}' ;;
  -e=*) printf 'CPU CORE SOCKET NODE ONLINE\\n  0    0      0    0    yes\\n' ;;
  *) exit 2 ;;
esac
"""


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """A PATH holding only a fake lscpu; lsblk is missing on purpose."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    lscpu = bin_dir / "lscpu"
    lscpu.write_text(FAKE_LSCPU)
    lscpu.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


TOOLS = {
    "python": [sys.executable, "--version"],
    "fio": ["iolab-test-no-such-tool", "--version"],
    "failing": [sys.executable, "-c", "import sys; sys.stderr.write('bad option\\n'); sys.exit(3)"],
}


def test_collect_inventory_on_fake_host(fake_sysroot, lab_topology, fake_path):
    # A different model in /proc/cpuinfo shows that lscpu is preferred when it runs.
    root = fake_sysroot(topology=lab_topology, cpu_model="model from cpuinfo")
    inv = collect_inventory(TOOLS, root=root)
    json.dumps(inv)
    assert inv["cpu"] == {"model_name": "Intel(R) Xeon(R) Gold 6442Y", "logical_cpus": 96,
                          "threads_per_core": 2}
    assert inv["lscpu"]["Socket(s)"] == "2"
    assert inv["lscpu_e"].startswith("CPU CORE SOCKET NODE ONLINE")
    assert inv["mem_total_kib"] == 2_113_871_872
    assert inv["cmdline"].startswith("BOOT_IMAGE=")
    assert inv["kernel_release"] == inv["uname"]["release"]
    assert len(inv["topology"]) == 96
    assert inv["knobs"]["thp"] == "madvise" and inv["knobs"]["smt"]["control"] == "on"
    # the fake host has no PCI bus, so device binding is out of reach; whether the module and
    # service knobs are depends on the real host (root, systemd), so they are set aside
    assert set(inv["knobs_not_controllable"]) - HOST_DEPENDENT == {"device_binding"}
    assert inv["python"] and inv["iolab_version"] and inv["collected_at"] and inv["hostname"]

    assert inv["block_devices"] is None
    assert inv["errors"]["lsblk"] == "command not found: lsblk"
    assert inv["tools"]["python"]["version"].startswith("Python 3.")
    assert inv["tools"]["python"]["error"] is None
    assert inv["tools"]["fio"] == {"argv": TOOLS["fio"], "version": None,
                                   "error": "command not found: iolab-test-no-such-tool"}
    assert inv["tools"]["failing"]["version"] is None
    assert "exited with status 3: bad option" in inv["tools"]["failing"]["error"]


def test_collect_inventory_without_lscpu(fake_sysroot, vm_topology, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    root = fake_sysroot(topology=vm_topology, smt="notsupported", cpufreq=False, turbo=None,
                        cpu_model="Intel(R) Xeon(R) Processor")
    inv = collect_inventory({}, root=root)
    assert inv["cpu"] == {"model_name": "Intel(R) Xeon(R) Processor", "logical_cpus": 2,
                          "threads_per_core": 1}
    assert inv["lscpu"] is None and inv["lscpu_e"] is None
    assert set(inv["errors"]) >= {"lscpu", "lscpu_e", "lsblk"}
    assert inv["knobs"]["governor"] is None
    assert set(inv["knobs_not_controllable"]) - HOST_DEPENDENT == {"smt", "governor", "turbo",
                                                                   "device_binding"}
    assert "notsupported" in inv["knobs_not_controllable"]["smt"]


def test_tool_timeout_is_recorded(fake_sysroot, fake_path):
    inv = collect_inventory({"slow": [sys.executable, "-c", "import time; time.sleep(10)"]},
                            root=fake_sysroot(), knobs={}, timeout=0.5)
    assert inv["tools"]["slow"]["version"] is None
    assert "timed out after 0.5 s" in inv["tools"]["slow"]["error"]


def _inventory() -> dict:
    return {
        "hostname": "lab1", "collected_at": "2025-01-01T00:00:00+00:00",
        "kernel_release": "6.8.0-45-generic", "mem_total_kib": 2_113_871_872,
        "cpu": {"model_name": "Intel(R) Xeon(R) Gold 6442Y", "logical_cpus": 96,
                "threads_per_core": 2},
        "knobs": {"thp": "madvise"},
        "tools": {"fio": {"argv": ["fio", "--version"], "version": "fio-3.36", "error": None}},
    }


def test_fingerprint_ignores_hostname_time_and_knobs():
    a = _inventory()
    b = copy.deepcopy(a)
    b.update(hostname="lab2", collected_at="2026-06-01T12:00:00+00:00", knobs={"thp": "never"})
    b["mem_total_kib"] += 3000  # a few MiB less reserved after a reboot
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint_diff(a, b) == []
    assert len(fingerprint(a)) == 16


def test_fingerprint_changes_with_tool_version_and_kernel():
    a = _inventory()
    b = copy.deepcopy(a)
    b["tools"]["fio"]["version"] = "fio-3.38"
    b["kernel_release"] = "6.11.0-9-generic"
    assert fingerprint(a) != fingerprint(b)
    assert fingerprint_diff(a, b) == [
        "kernel_release: '6.8.0-45-generic' != '6.11.0-9-generic'",
        "tools.fio: 'fio-3.36' != 'fio-3.38'",
    ]


def test_fingerprint_diff_names_an_added_tool():
    a = _inventory()
    b = copy.deepcopy(a)
    b["tools"]["bdevperf"] = {"version": "v25.09"}
    assert fingerprint_diff(a, b) == ["tools.bdevperf: None != 'v25.09'"]


def test_fingerprint_gaps_name_each_missing_field_and_why(fake_sysroot, lab_topology,
                                                         fake_path):
    assert fingerprint_gaps(_inventory(), ["fio"]) == []
    # tools whose version probe could not run or failed, as under a limit on processes
    inv = collect_inventory(TOOLS, root=fake_sysroot(topology=lab_topology))
    assert fingerprint_gaps(inv, ["python", "fio", "failing"]) == [
        "tools.failing (" + inv["tools"]["failing"]["error"] + ")",
        "tools.fio (command not found: iolab-test-no-such-tool)"]
    inv = _inventory()
    inv.update(mem_total_kib=None, cpu={**inv["cpu"], "model_name": None},
               errors={"lscpu": "lscpu -J could not start: Resource temporarily unavailable",
                       "cpuinfo": "cannot read /proc/cpuinfo: Cannot allocate memory"})
    assert fingerprint_gaps(inv, ["fio"]) == [
        "cpu_model (lscpu -J could not start: Resource temporarily unavailable; cannot read "
        "/proc/cpuinfo: Cannot allocate memory)", "mem_total_gib (none of its sources gave it)"]


def test_a_tool_that_prints_no_version_is_no_gap():
    inv = _inventory()
    inv["tools"]["p2pBandwidthLatencyTest"] = {"argv": ["p2pBandwidthLatencyTest", "--help"],
                                               "version": None, "error": "exited with status 1"}
    assert fingerprint_gaps(inv, ["fio"]) == []


TWO_RUNS = """experiment: demo
tool: fio
runtime_s: 1
repetitions: 2
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  one: {vary: {concurrency: [1]}}
"""
FAILING_VERSION = f"""#!{sys.executable}
import sys
if "--version" in sys.argv:
    sys.exit("fio: fork: Resource temporarily unavailable")
"""


def test_a_host_record_without_a_tools_version_is_refused_and_not_stored(demo, params_dir,
                                                                         tmp_path, fake_fio):
    """A campaign started while a limit stops fio's version probe: its record would make
    every later run another host's, so it is refused before the first run, and nothing is
    stored; once the probe works, the campaign runs."""
    camp = campaigns(demo, params_dir, tmp_path, TWO_RUNS)("data")
    fake_fio(camp, {1: [1000, 1000]})
    exe = tmp_path / "bin" / "fio"
    working = exe.read_text()
    exe.write_text(FAILING_VERSION)
    with pytest.raises(IolabError, match=r"this host's record lacks what its fingerprint is "
                                         r"made of: tools\.fio \(fio --version exited with "
                                         r"status 1: fio: fork: Resource temporarily "
                                         r"unavailable\)\. .* the record is not stored, and "
                                         "nothing was run"):
        camp.run(progress=False, knobs={})
    assert not camp.store.root.exists()
    exe.write_text(working)
    assert camp.run(progress=False, knobs={}).completed == 2
    assert json.loads(camp.store.host_path.read_text())["tools"]["fio"]["version"] == "fio-3.33"


def test_topology_of_the_lab_server(fake_sysroot, lab_topology):
    topo = topology(fake_sysroot(topology=lab_topology))
    assert [entry["cpu"] for entry in topo] == list(range(96))
    assert topo[0] == {"cpu": 0, "core": 0, "package": 0, "siblings": [0, 48]}
    assert topo[1] == {"cpu": 1, "core": 0, "package": 1, "siblings": [1, 49]}
    assert topo[95] == {"cpu": 95, "core": 23, "package": 1, "siblings": [47, 95]}


def test_pick_cpus_on_the_lab_server(fake_sysroot, lab_topology):
    topo = topology(fake_sysroot(topology=lab_topology))
    assert pick_cpus(topo, 4, use_siblings=False) == [0, 1, 2, 3]
    assert pick_cpus(topo, 4, use_siblings=True) == [0, 1, 2, 3, 48, 49, 50, 51]
    assert pick_cpus(topo, 48, use_siblings=False) == list(range(48))
    assert pick_cpus(topo, 48, use_siblings=True) == list(range(96))
    with pytest.raises(InputError) as info:
        pick_cpus(topo, 49, use_siblings=False)
    assert "49 physical cores requested" in str(info.value)
    assert "48 physical cores (96 logical CPUs" in str(info.value)


def test_pick_cpus_with_smt_off(fake_sysroot, lab_topology):
    online = [(cpu, core, package) for cpu, core, package in lab_topology if cpu < 48]
    topo = topology(fake_sysroot(topology=online))
    assert pick_cpus(topo, 3, use_siblings=True) == [0, 1, 2]


def test_pick_cpus_on_a_two_cpu_vm(fake_sysroot, vm_topology):
    topo = topology(fake_sysroot(topology=vm_topology, smt="notsupported"))
    assert topo == [{"cpu": 0, "core": 0, "package": 0, "siblings": [0]},
                    {"cpu": 1, "core": 1, "package": 0, "siblings": [1]}]
    assert pick_cpus(topo, 1, use_siblings=True) == [0]
    assert pick_cpus(topo, 2, use_siblings=False) == [0, 1]
    assert pick_cpus(topo, 2, use_siblings=True) == [0, 1]
    with pytest.raises(InputError, match="3 physical cores requested, but the host has 2"):
        pick_cpus(topo, 3, use_siblings=False)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_pick_cpus_rejects_non_counts(vm_topology, bad):
    topo = [{"cpu": c, "core": k, "package": p, "siblings": [c]} for c, k, p in vm_topology]
    with pytest.raises(InputError) as info:
        pick_cpus(topo, bad, use_siblings=False)
    assert info.value.key == "n_cores"


def test_real_host_inventory_is_json():
    """The real host: every source is optional, so this must work on any Linux machine."""
    inv = collect_inventory({"python": [sys.executable, "--version"]}, knobs=make_knobs())
    json.dumps(inv)
    assert inv["cpu"]["logical_cpus"] >= 1
    assert inv["topology"]


def test_tool_argv_must_be_a_list(fake_sysroot):
    with pytest.raises(InputError) as info:
        collect_inventory({"fio": "fio --version"}, root=fake_sysroot(), knobs={})
    assert info.value.key == "tools.fio"


def test_a_failed_tool_is_quoted_from_both_ends_and_bounded():
    """A build failure's first line names what failed and its last line says why (the compiler's
    error): both reach the record's error, on one line, however long the compiler's log."""
    from iolab.host.inventory import _said

    assert _said("") == ""
    assert _said("building x failed; nvcc said:\n\nnvcc: error: planted failure\n") == (
        ": building x failed; nvcc said: / nvcc: error: planted failure")
    said = _said("\n".join(f"line {i} " + "x" * 1000 for i in range(1000)))
    assert said.startswith(": line 0 ") and " / ... / " in said and "line 999 " in said
    assert "line 500 " not in said and len(said) < 2000 and "\n" not in said


def test_a_tool_that_prints_megabytes_at_version_is_recorded_cut(tmp_path):
    from iolab.host.inventory import VERSION_MOST, _tool_versions

    loud = tmp_path / "loud"
    loud.write_text("#!/bin/sh\nprintf 'loud 1.0'; yes V | head -c 10000000 | tr -d '\\n'\n")
    loud.chmod(0o755)
    version = _tool_versions({"loud": [str(loud), "--version"]}, 30)["loud"]["version"]
    assert version.startswith("loud 1.0VVV") and len(version) == VERSION_MOST
    assert version.endswith("…")
