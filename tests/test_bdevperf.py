"""SPDK bdevperf support: iolab.tools.bdevperf, iolab.parsers.bdevperf and scripts/drivers/bdevperf.sh.

The parsers are tested on synthesised golden samples (see tests/fixtures/bdevperf/README.md)
and the driver on a fake SPDK tree whose bdevperf, rpc.py and bdevperf.py record what they
were given; where `make tools` built SPDK, a tiny real run on a RAM bdev checks the driver,
the library path and the parser against the real bdevperf. CPU masks are also checked on the lab
server's real ``lscpu -e``, read from the AiSIO archives in ../shared/aisio when present.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from iolab.errors import InputError, ParseError, ToolError
from iolab.host.inventory import pick_cpus, topology
from iolab.parsers.bdevperf import parse_bdevperf_json, parse_bdevperf_text, spdk_supports_json
from iolab.parsers.lscpu import parse_lscpu_e
from iolab.tools.base import CpuRequest, Invocation, cpu_mask
from iolab.tools import bdevperf
from iolab.tools.bdevperf import (Bdevperf, bdev_config, bdevperf_argv, check_devices, config_for,
                                  file_bdev_config, malloc_bdev_config)

from conftest import drive

ROOT = Path(__file__).resolve().parents[1]
FIX = Path(__file__).parent / "fixtures" / "bdevperf"
BAD = FIX / "bad"
DRIVER = ROOT / "scripts" / "drivers" / "bdevperf.sh"
AISIO = Path(os.environ.get("IOLAB_AISIO_DIR", ROOT.parent / "shared" / "aisio"))

RESULT_KEYS = ["format", "spdk_version", "spdk_git_sha1", "dpdk_version", "jobs", "njobs",
               "core_count", "iops", "mibs", "fail_per_s", "timeout_per_s", "avg_latency_us",
               "min_latency_us", "max_latency_us", "tables_found", "shutdown_signal",
               "shutdown_after_s", "ok", "problems", "warnings"]
JOB_KEYS = ["name", "core_mask", "workload", "percentage", "queue_depth", "io_size",
            "runtime_s", "iops", "mibs", "fail_per_s", "timeout_per_s", "avg_latency_us",
            "min_latency_us", "max_latency_us", "io_failed", "io_timeout", "failed"]


def read(path: Path) -> str:
    # newline="" keeps every \r as written, the way the runner reads a capture.
    with open(path, newline="") as fh:
        return fh.read()


def parse_text(name: str) -> dict:
    path = FIX / name
    return parse_bdevperf_text(read(path), source=str(path))


# --- bdev configuration and device checks -----------------------------------------------------

def test_bdev_config_names_controllers_in_order():
    conf = bdev_config(["0000:4a:00.0", "0000:4B:00.0", "0001:c1:1f.7"])
    assert json.loads(json.dumps(conf)) == conf
    assert conf == {"subsystems": [{"subsystem": "bdev", "config": [
        {"method": "bdev_nvme_attach_controller",
         "params": {"name": "nvme00", "trtype": "PCIe", "traddr": "0000:4a:00.0"}},
        {"method": "bdev_nvme_attach_controller",
         "params": {"name": "nvme01", "trtype": "PCIe", "traddr": "0000:4B:00.0"}},
        {"method": "bdev_nvme_attach_controller",
         "params": {"name": "nvme02", "trtype": "PCIe", "traddr": "0001:c1:1f.7"}},
    ]}]}


def test_bdev_config_sixteen_devices_give_two_digit_names():
    addrs = [f"0000:{bus:02x}:00.0" for bus in range(0x40, 0x50)]
    names = [e["params"]["name"] for e in bdev_config(addrs)["subsystems"][0]["config"]]
    assert names == [f"nvme{i:02d}" for i in range(16)]
    assert names[-1] == "nvme15"


@pytest.mark.parametrize("bad", ["4a:00.0", "0000:4a:00", "0000:4a:20.0", "0000:4g:00.0",
                                 "0000:4a:00.8", "000:4a:00.0", " 0000:4a:00.0", "", 17])
def test_bdev_config_refuses_a_non_bdf(bad):
    with pytest.raises(InputError) as exc:
        bdev_config(["0000:01:00.0", bad])
    assert exc.value.key == "devices[1]"
    assert exc.value.problem == f"'{bad}' is not a PCIe address"
    assert exc.value.allowed == "DDDD:BB:DD.F, e.g. 0000:4a:00.0"


def test_bdev_config_refuses_duplicates_in_any_case():
    with pytest.raises(InputError) as exc:
        bdev_config(["0000:4a:00.0", "0000:4b:00.0", "0000:4A:00.0"])
    assert exc.value.key == "devices[2]"
    assert "listed twice (also devices[0])" in exc.value.problem


@pytest.mark.parametrize("bad", [[], None, "0000:4a:00.0"])
def test_bdev_config_needs_a_list(bad):
    with pytest.raises(InputError, match="non-empty list of PCIe addresses"):
        bdev_config(bad)


def test_check_devices():
    env = ["0000:4a:00.0", "0000:4b:00.0", "0000:4c:00.0"]
    check_devices(env[:2], env)
    check_devices(["0000:4C:00.0"], env)
    with pytest.raises(InputError) as exc:
        check_devices(env + ["0000:4d:00.0"], env)
    assert (exc.value.key, exc.value.problem, exc.value.allowed) == (
        "ndevs", "asked for 4 devices but the environment lists 3", "1..3")
    with pytest.raises(InputError) as exc:
        check_devices(["0000:4a:00.0", "0000:99:00.0"], env)
    assert exc.value.key == "devices[1]"
    assert "not among the environment's devices" in exc.value.problem
    with pytest.raises(InputError, match="lists no NVMe devices"):
        check_devices(["0000:4a:00.0"], [])


# --- CPUs and masks ---------------------------------------------------------------------------

def test_cpu_mask():
    assert cpu_mask([0]) == "0x1"
    assert cpu_mask([0, 1]) == "0x3"
    assert cpu_mask([1, 0, 3]) == "0xb"
    assert cpu_mask([0, 82]) == hex(1 | 1 << 82) == "0x400000000000000000001"
    for bad in ([], [-1], [0, 0], [True], ["1"]):
        with pytest.raises(InputError):
            cpu_mask(bad)


def test_masks_on_a_two_cpu_vm_without_smt(fake_sysroot, vm_topology):
    topo = topology(fake_sysroot(topology=vm_topology, smt="notsupported"))
    assert pick_cpus(topo, 1, False) == pick_cpus(topo, 1, True) == [0]
    assert cpu_mask(pick_cpus(topo, 1, False)) == "0x1"
    assert cpu_mask(pick_cpus(topo, 2, False)) == cpu_mask(pick_cpus(topo, 2, True)) == "0x3"
    with pytest.raises(InputError) as exc:
        pick_cpus(topo, 3, False)
    assert exc.value.key == "n_cores" and exc.value.allowed == "1..2"


def lscpu_e_text(topo: list[tuple[int, int, int]], offline: tuple[int, ...] = ()) -> str:
    """lscpu -e text for (cpu, core, socket) tuples, with columns in lscpu's usual order."""
    lines = ["CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ"]
    for cpu, core, socket in topo:
        if cpu in offline:
            lines.append(f"{cpu:3d}    -      -    - -                 no         -        -")
        else:
            lines.append(f"{cpu:3d} {socket:4d} {socket:6d} {core:4d} {core}:{core}:{core}:{socket}"
                         f"          yes 4000.0000 800.0000")
    return "\n".join(lines) + "\n"


def test_parse_lscpu_e_matches_the_sysfs_topology(fake_sysroot, lab_topology):
    from_sysfs = topology(fake_sysroot(topology=lab_topology))
    assert parse_lscpu_e(lscpu_e_text(lab_topology)) == from_sysfs


def test_parse_lscpu_e_any_column_order_and_offline_cpus():
    text = textwrap.dedent("""\
        ONLINE CORE CPU SOCKET
           yes    0   0      0
           yes    1   1      1
            no    -   2      -
           yes    0   3      0
           yes    5   4      1
            no    5   5      1
        """)
    assert parse_lscpu_e(text) == [
        {"cpu": 0, "core": 0, "package": 0, "siblings": [0, 3]},
        {"cpu": 1, "core": 1, "package": 1, "siblings": [1]},
        {"cpu": 3, "core": 0, "package": 0, "siblings": [0, 3]},
        {"cpu": 4, "core": 5, "package": 1, "siblings": [4]},
    ]


@pytest.mark.parametrize("text, problem", [
    ("", "empty input"),
    ("CPU NODE CORE\n0 0 0\n", "no SOCKET column"),
    ("CPU CORE SOCKET\n0 0\n", "line 2: 2 fields for 3 columns"),
    ("CPU CORE SOCKET\n0 x 0\n", "must be whole numbers"),
    ("CPU CORE SOCKET ONLINE\n0 - - no\n", "no online CPU"),
    # a CPU listed twice was two entries (and its own sibling); a column named twice was
    # read from its first place only
    ("CPU NODE SOCKET CORE ONLINE\n0 0 0 0 yes\n0 0 0 1 yes\n1 0 0 1 yes\n",
     r"line 3: CPU 0 listed twice \(first on line 2; allowed: each CPU once\)"),
    ("CPU SOCKET CORE ONLINE\n0 - - no\n0 0 0 yes\n", "line 3: CPU 0 listed twice"),
    ("CPU CPU SOCKET CORE\n0 5 0 0\n1 6 0 1\n",
     r"the header names the 'CPU' column twice \(allowed: each column once"),
])
def test_parse_lscpu_e_rejects_malformed_tables(text, problem):
    with pytest.raises(ParseError, match=problem) as exc:
        parse_lscpu_e(text, source="host.json:lscpu_e")
    assert exc.value.source == "host.json:lscpu_e"


@pytest.fixture(scope="module")
def lscpu_captures() -> list[tuple[str, str]]:
    """(where, text) of every `lscpu -e` capture in the AiSIO archives (CIJOE layout)."""
    if not AISIO.is_dir() or not sorted(AISIO.glob("*.tar.gz")):
        pytest.skip(f"the AiSIO archives are not in {AISIO} (set IOLAB_AISIO_DIR to read them)")
    found = []
    for archive in sorted(AISIO.glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            members = {m.name: m for m in tar.getmembers() if m.isfile()}
            for name, member in members.items():
                if not name.endswith(".state"):
                    continue
                raw = tar.extractfile(member).read()
                if b"lscpu" not in raw:
                    continue
                state = yaml.safe_load(raw)
                output = name[:-len(".state")] + ".output"
                if (isinstance(state, dict) and str(state.get("cmd", "")).split()[:2]
                        == ["lscpu", "-e"] and output in members):
                    text = tar.extractfile(members[output]).read().decode()
                    found.append((f"{archive.name}:{output}", text))
    if not found:
        pytest.skip(f"no `lscpu -e` capture in the archives in {AISIO}")
    return found


def independent_topology(text: str) -> dict[int, tuple[str, str]]:
    """{cpu: (socket, core)} of the online CPUs, read without iolab code."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    col = {name: i for i, name in enumerate(rows[0])}
    return {int(r[col["CPU"]]): (r[col["SOCKET"]], r[col["CORE"]])
            for r in rows[1:] if r[col["ONLINE"]] == "yes"}


def expected_cpus(online: dict[int, tuple[str, str]], n: int, siblings: bool) -> list[int]:
    """The first n CPU ids on distinct cores; with siblings, plus every CPU on those cores."""
    chosen, seen = [], set()
    for cpu in sorted(online):
        if online[cpu] not in seen and len(chosen) < n:
            seen.add(online[cpu])
            chosen.append(cpu)
    if siblings:
        return sorted(cpu for cpu in online if online[cpu] in seen)
    return chosen


def test_masks_on_the_lab_servers_recorded_lscpu(lscpu_captures):
    smt_on = [(where, text) for where, text in lscpu_captures if len(independent_topology(text)) == 96]
    assert smt_on, "expected a capture with all 96 CPUs online (SMT on)"
    where, text = smt_on[0]
    topo = parse_lscpu_e(text, source=where)
    online = independent_topology(text)
    assert [e["cpu"] for e in topo] == list(range(96))
    # CPU ids alternate between the two sockets.
    assert all(e["package"] == e["cpu"] % 2 for e in topo)
    # Two threads per core; the sibling is usually k + 48, but not for CPUs 0 and 34.
    sibling = {e["cpu"]: next(c for c in e["siblings"] if c != e["cpu"]) for e in topo}
    assert all(len(e["siblings"]) == 2 for e in topo)
    assert sibling[0] == 82 and sibling[82] == 0
    assert sibling[34] == 48 and sibling[48] == 34
    assert all(sibling[k] == k + 48 for k in range(48) if k not in (0, 34))

    for n in (1, 2, 4, 8):
        for siblings in (False, True):
            cpus = pick_cpus(topo, n, siblings)
            assert cpus == expected_cpus(online, n, siblings), (n, siblings)
            assert cpu_mask(cpus) == hex(sum(1 << c for c in cpus))
    assert cpu_mask(pick_cpus(topo, 1, False)) == "0x1"
    assert cpu_mask(pick_cpus(topo, 1, True)) == "0x400000000000000000001"  # CPUs 0 and 82
    assert cpu_mask(pick_cpus(topo, 8, False)) == "0xff"
    # Two "cores" are already on two sockets: core counts mix NUMA nodes.
    assert {e["package"] for e in topo if e["cpu"] in pick_cpus(topo, 2, False)} == {0, 1}


def test_masks_on_the_lab_servers_recorded_lscpu_with_smt_off(lscpu_captures):
    smt_off = [(w, t) for w, t in lscpu_captures if len(independent_topology(t)) == 48]
    if not smt_off:
        pytest.skip("no capture with SMT off (48 CPUs online) in the archives")
    where, text = smt_off[0]
    topo = parse_lscpu_e(text, source=where)
    assert [e["cpu"] for e in topo] == list(range(48))  # 48..95 are offline
    assert all(e["siblings"] == [e["cpu"]] for e in topo)
    for n in (1, 2, 4, 8):
        assert pick_cpus(topo, n, True) == pick_cpus(topo, n, False) == list(range(n))


# --- bdevperf options -------------------------------------------------------------------------

def test_bdevperf_argv():
    assert bdevperf_argv("0xff", 128, 512, 10) == [
        "-m", "0xff", "-q", "128", "-o", "512", "-t", "10", "-w", "randread"]
    assert bdevperf_argv("0x3", 8, 4096, 5, workload="randrw", rwmixread=70)[-4:] == [
        "-w", "randrw", "-M", "70"]


@pytest.mark.parametrize("kwargs, key", [
    ({"core_mask": "ff"}, "core_mask"), ({"core_mask": "0x0"}, "core_mask"),
    ({"queue_depth": 0}, "queue_depth"), ({"io_size": "512"}, "io_size"),
    ({"seconds": True}, "seconds"), ({"workload": "randomread"}, "workload"),
    ({"workload": "randrw"}, "rwmixread"), ({"workload": "rw", "rwmixread": 101}, "rwmixread"),
    ({"rwmixread": 50}, "rwmixread"),
])
def test_bdevperf_argv_refuses_bad_values(kwargs, key):
    args = {"core_mask": "0x1", "queue_depth": 128, "io_size": 512, "seconds": 10, **kwargs}
    with pytest.raises(InputError) as exc:
        bdevperf_argv(**args)
    assert exc.value.key == key


# --- text parser: golden samples --------------------------------------------------------------

def job(name, mask, qd, size, runtime, iops, mibs, fail, to, avg, mn, mx, failed=False,
        workload="randread"):
    return {"name": name, "core_mask": mask, "workload": workload, "percentage": None,
            "queue_depth": qd, "io_size": size, "runtime_s": runtime, "iops": iops,
            "mibs": mibs, "fail_per_s": fail, "timeout_per_s": to, "avg_latency_us": avg,
            "min_latency_us": mn, "max_latency_us": mx, "io_failed": None, "io_timeout": None,
            "failed": failed}


V25 = {"format": "text", "spdk_version": "v25.09", "spdk_git_sha1": "5c1b7e4f0",
       "dpdk_version": "25.07.0"}


def totals(iops, mibs, fail, to, avg, mn, mx):
    return {"iops": iops, "mibs": mibs, "fail_per_s": fail, "timeout_per_s": to,
            "avg_latency_us": avg, "min_latency_us": mn, "max_latency_us": mx}


def test_v25_four_jobs_with_startup_log_progress_and_notices():
    r = parse_text("v25.09_randread_4jobs.txt")
    assert list(r) == RESULT_KEYS
    assert all(list(j) == JOB_KEYS for j in r["jobs"])
    assert r == {
        **V25,
        "jobs": [
            job("nvme00n1", "0x1", 128, 512, 10.0, 1128364.81, 550.96, 0.0, 0.0, 113.41, 61.87, 307.55),
            job("nvme01n1", "0x2", 128, 512, 10.0, 1130145.72, 551.83, 0.0, 0.0, 113.23, 60.12, 298.04),
            job("nvme02n1", "0x4", 128, 512, 10.0, 1127908.32, 550.74, 0.0, 0.0, 113.46, 62.40, 312.91),
            job("nvme03n1", "0x8", 128, 512, 10.0, 1129556.80, 551.54, 0.0, 0.0, 113.30, 61.05, 301.18),
        ],
        "njobs": 4, "core_count": 4,
        **totals(4515975.66, 2205.07, 0.0, 0.0, 113.35, 60.12, 312.91),
        "tables_found": 1, "shutdown_signal": False, "shutdown_after_s": None,
        "ok": True, "problems": [], "warnings": [],
    }
    # The "Total cores available: 4" notice and the progress line did not make rows.
    assert sum(j["iops"] for j in r["jobs"]) == pytest.approx(r["iops"], abs=0.02)


def test_crlf_and_lf_captures_parse_alike():
    text = read(FIX / "v25.09_randread_4jobs.txt")
    crlf = text.replace("\r", "").replace("\n", "\r\n")
    assert parse_bdevperf_text(crlf, "crlf") == parse_bdevperf_text(text, "raw")


def test_periodic_tables_only_the_last_counts():
    r = parse_text("v25.09_periodic_S1.txt")
    assert r["tables_found"] == 3
    assert r["jobs"] == [
        job("nvme00n1", "0x1", 64, 4096, 3.0, 666033.93, 2601.70, 0.0, 0.0, 96.08, 70.33, 811.20),
        job("nvme01n1", "0x2", 64, 4096, 3.0, 659631.05, 2576.68, 0.0, 0.0, 97.01, 70.91, 802.47),
    ]
    assert {k: r[k] for k in totals(*[0] * 7)} == totals(
        1325664.98, 5178.38, 0.0, 0.0, 96.54, 70.33, 811.20)
    assert (r["ok"], r["problems"], r["warnings"]) == (True, [], [])


def test_failed_job_is_marked_and_rejects_the_run():
    r = parse_text("v25.09_failed_job.txt")
    assert r["jobs"] == [
        job("nvme00n1", "0x1", 128, 512, 3.21, 1125214.32, 549.42, 0.0, 0.0, 113.70, 62.11, 295.40),
        job("nvme01n1", "0x2", 128, 512, 3.21, 1121395.05, 547.56, 0.31, 0.0, 114.05, 61.94,
            30412.77, failed=True),
    ]
    assert {k: r[k] for k in totals(*[0] * 7)} == totals(
        2246609.37, 1096.98, 0.31, 0.0, 113.87, 61.94, 30412.77)
    assert r["ok"] is False
    assert r["problems"] == ["job nvme01n1 ended with an error after about 3.21 s",
                             "job nvme01n1: Fail/s = 0.31"]


def test_timeouts_reject_the_run():
    r = parse_text("v25.09_timeouts.txt")
    assert [j["timeout_per_s"] for j in r["jobs"]] == [0.0, 0.40]
    assert [j["io_size"] for j in r["jobs"]] == [4096, 4096]
    assert (r["iops"], r["mibs"], r["timeout_per_s"], r["max_latency_us"]) == (
        1200803.77, 4690.64, 0.40, 2461873.58)
    assert not any(j["failed"] for j in r["jobs"])
    assert (r["ok"], r["problems"]) == (False, ["job nvme01n1: TO/s = 0.4"])


def test_sigint_marks_a_cut_short_run():
    r = parse_text("v25.09_sigint.txt")
    assert (r["shutdown_signal"], r["shutdown_after_s"]) == (True, 12.345678)
    assert [j["runtime_s"] for j in r["jobs"]] == [12.35, 12.35]
    assert (r["iops"], r["mibs"], r["avg_latency_us"]) == (2260711.62, 1103.86, 113.23)
    assert (r["ok"], r["problems"]) == (
        False, ["bdevperf received a shutdown signal; the test ran only about 12.345678 s"])


def test_v22_table_without_latency_columns_and_short_job_lines():
    r = parse_text("v22.09_no_latency.txt")
    short = {"workload": None, "queue_depth": None, "io_size": None}
    latency = {"avg_latency_us": None, "min_latency_us": None, "max_latency_us": None}
    assert r["jobs"] == [
        {**job("Nvme0n1", "0x1", 0, 0, 5.0, 401236.68, 1567.33, 0.0, 0.0, 0, 0, 0), **short, **latency},
        {**job("Nvme1n1", "0x2", 0, 0, 5.0, 398749.12, 1557.61, 0.0, 0.0, 0, 0, 0), **short, **latency},
    ]
    assert (r["spdk_version"], r["spdk_git_sha1"], r["dpdk_version"]) == (
        "v22.09", "aed4ece61", "22.07.0")
    assert {k: r[k] for k in totals(*[0] * 7)} == totals(
        799985.80, 3124.94, 0.0, 0.0, None, None, None)
    assert (r["njobs"], r["core_count"], r["tables_found"], r["ok"]) == (2, 2, 1, True)


def test_rpc_mode_stdout_skips_the_empty_table_printed_at_shutdown():
    r = parse_text("v25.09_rpc_mode_stdout.txt")
    assert [j["iops"] for j in r["jobs"]] == [1129000.78, 1128729.17]
    assert (r["iops"], r["tables_found"]) == (2257729.95, 2)
    # The shutdown that follows the report is the driver stopping bdevperf, not a cut run.
    assert (r["shutdown_signal"], r["ok"], r["problems"]) == (False, True, [])
    assert r["warnings"] == ["ignored the empty results table at line 24 (printed when "
                             "bdevperf is stopped after it has reported)"]


# --- text parser: edge cases on small inline outputs ------------------------------------------

HEADER = ("\r Device Information          : runtime(s)       IOPS      MiB/s     Fail/s"
          "     TO/s    Average        min        max\n")


def row(name, *values):
    return "\t %-20s: %10.2f %10.2f %10.2f %10.2f %8.2f %10.2f %10.2f %10.2f\n" % (name, *values)


def total_row(*values):
    return "\r %-28s: %10s %10.2f %10.2f %10.2f %8.2f %10.2f %10.2f %10.2f\n" % ("Total", "", *values)


def test_randrw_percentage_long_names_and_colons_in_names():
    long_name = "lvs_with_a_long_name/lvol_0"
    text = (HEADER
            + "Job: raid:0 (Core Mask 0x1, workload: randrw, percentage: 70, depth: 8, IO size: 4096)\n"
            + row("raid:0", 5, 1000, 3.91, 0, 0, 8, 1, 20)
            + f"Job: {long_name} (Core Mask 0x30, workload: write, depth: 8, IO size: 4096)\n"
            + row(long_name, 5, 2000, 7.81, 0, 0, 4, 1, 30)
            + "\r " + "=" * 115 + "\n" + total_row(3000, 11.72, 0, 0, 5.33, 1, 30))
    r = parse_bdevperf_text(text, "inline")
    assert [(j["name"], j["workload"], j["percentage"], j["queue_depth"], j["io_size"])
            for j in r["jobs"]] == [("raid:0", "randrw", 70, 8, 4096),
                                    (long_name, "write", None, 8, 4096)]
    assert r["core_count"] == 3 and r["spdk_version"] is None
    assert r["iops"] == 3000


def test_latency_summary_and_stray_log_lines_do_not_disturb_the_table():
    text = ("[2026-05-04 14:02:11.4] app.c: 919:spdk_app_start: *NOTICE*: Total cores available: 1\n"
            + HEADER
            + "  reactor 0: 1 2 3 4 5 6 7 8\n"  # indented, colon, numbers, but no Job line before
            + "Job: nvme00n1 (Core Mask 0x1, workload: randread, depth: 1, IO size: 512)\n"
            + "\t Verification LBA range: start 0x0 length 0x1000\n"
            + row("nvme00n1", 1, 100, 0.05, 0, 0, 10, 9, 11)
            + "\r " + "=" * 115 + "\n" + total_row(100, 0.05, 0, 0, 10, 9, 11)
            + "\n Latency summary\n\r " + "=" * 45 + "\n\r Job: nvme00n1 (Core Mask 0x1)\n"
            + "  1.00000% :     9.120us\n 50.00000% :    10.010us\n")
    r = parse_bdevperf_text(text, "inline")
    assert r["njobs"] == 1 and r["iops"] == 100 and r["ok"]


def test_no_completed_io_is_not_ok():
    text = (HEADER + "Job: n (Core Mask 0x1, workload: randread, depth: 1, IO size: 512)\n"
            + row("n", 1, 0, 0, 0, 0, 0, 0, 0) + total_row(0, 0, 0, 0, 0, 0, 0))
    r = parse_bdevperf_text(text, "inline")
    assert (r["ok"], r["problems"]) == (False, ["no I/O completed (Total IOPS is 0)"])


@pytest.mark.parametrize("text, problem", [
    (HEADER.replace("TO/s", "Timeouts"), "unknown table columns"),
    (HEADER + "Job: n (Core Mask 1)\n", "unrecognised Job line"),
    (HEADER + "Job: n ended in about 1.00 seconds with error\n", "does not follow the Job line"),
    (HEADER + "Job: a (Core Mask 0x1)\nJob: b (Core Mask 0x2)\n", "job 'a' has no data row"),
    (HEADER + "Job: a (Core Mask 0x1)\n" + total_row(1, 1, 0, 0, 1, 1, 1), "before the Total"),
    (HEADER + "Job: a (Core Mask 0x1)\n\t a : 1 2 x 0 0 1 1 1\n", "'x' is no measurement"),
    (HEADER + "Job: a (Core Mask 0x1)\n\t a : 1 2 3 0 0 1 1 -1\n", "'-1' is no measurement"),
    (HEADER + "Job: a (Core Mask 0x1)\n\t a : 1 nan 3 0 0 1 1 1\n", "'nan' is no measurement"),
    (HEADER + "\r Total : 1 2 3\n", "the Total row has 3 numbers, expected 7"),
    (HEADER + "Job: a (Core Mask 0x1, workload: read, depth: deep, IO size: 1)\n",
     "'depth' is not a whole number"),
    (HEADER, "truncated output: the results table at line 1 has no Total row (0 job rows"),
    (HEADER + total_row(0, 0, 0, 0, 0, 0, 0), "lists no job"),
])
def test_malformed_tables_raise(text, problem):
    with pytest.raises(ParseError, match=re.escape(problem)) as exc:
        parse_bdevperf_text(text, "inline.txt")
    assert exc.value.source == "inline.txt"


# --- JSON parser ------------------------------------------------------------------------------

JSON_SAMPLE = FIX / "perform_tests_2jobs.json"


def test_json_two_jobs_one_failed():
    raw = json.loads(read(JSON_SAMPLE))["results"]
    r = parse_bdevperf_json(read(JSON_SAMPLE), source=str(JSON_SAMPLE))
    assert list(r) == RESULT_KEYS
    assert all(list(j) == JOB_KEYS for j in r["jobs"])
    assert r["jobs"][1] == {
        "name": "nvme01n1", "core_mask": "0x2", "workload": "randread", "percentage": None,
        "queue_depth": 128, "io_size": 512, "runtime_s": 3.214851, "iops": 1121395.6124,
        "mibs": 547.5564514, "fail_per_s": 1 / 3.214851, "timeout_per_s": 0.0,
        "avg_latency_us": 114.0533, "min_latency_us": 61.9387, "max_latency_us": 30412.7704,
        "io_failed": 1, "io_timeout": 0, "failed": True}
    assert r["jobs"][0]["failed"] is False
    weights = [j["iops"] * j["runtime"] for j in raw]
    assert r["iops"] == pytest.approx(1125214.3152 + 1121395.6124)
    assert r["mibs"] == pytest.approx(549.4210523 + 547.5564514)
    assert r["avg_latency_us"] == pytest.approx(
        sum(j["avg_latency_us"] * w for j, w in zip(raw, weights)) / sum(weights))
    assert (r["min_latency_us"], r["max_latency_us"]) == (61.9387, 30412.7704)
    assert r["fail_per_s"] == pytest.approx(1 / 3.214851)
    assert (r["format"], r["spdk_version"], r["tables_found"], r["core_count"]) == (
        "json", None, None, 2)
    assert (r["shutdown_signal"], r["ok"]) == (False, False)
    assert r["problems"] == ["job nvme01n1 ended with an error after about 3.21 s",
                             "job nvme01n1: io_failed = 1"]


def json_doc(**changes) -> dict:
    doc = json.loads(read(JSON_SAMPLE))
    for entry in doc["results"]:
        entry.update(changes)
    return doc


def test_json_clean_and_terminated_runs():
    clean = parse_bdevperf_json(json.dumps(json_doc(status="finished", io_failed=0)), "x")
    assert (clean["ok"], clean["problems"], clean["shutdown_signal"]) == (True, [], False)
    cut = parse_bdevperf_json(json.dumps(json_doc(status="terminated", io_failed=0)), "x")
    assert (cut["ok"], cut["shutdown_signal"]) == (False, True)
    assert cut["problems"] == ["bdevperf received a shutdown signal; status 'terminated' "
                               "for nvme00n1, nvme01n1"]
    odd = parse_bdevperf_json(json.dumps(json_doc(status="paused", io_failed=0)), "x")
    assert "job nvme00n1: unknown status 'paused'" in odd["problems"]


def test_json_without_io_or_runtime():
    doc = json_doc(status="finished", io_failed=0, iops=0, mibps=0, runtime=0)
    r = parse_bdevperf_json(json.dumps(doc), "x")
    assert (r["avg_latency_us"], r["fail_per_s"], r["jobs"][0]["fail_per_s"]) == (None, None, None)
    assert r["problems"] == ["no I/O completed (the jobs' IOPS sum to 0)"]
    del doc["core_count"]
    doc["results"][1]["core_mask"] = "0x6"
    assert parse_bdevperf_json(json.dumps(doc), "x")["core_count"] == 3


@pytest.mark.parametrize("change, problem", [
    (lambda d: d["results"][0].pop("iops"), "results[0]: missing key 'iops'"),
    (lambda d: d["results"][1].update(io_failed=True), "results[1].io_failed must be an integer"),
    (lambda d: d["results"][0].update(runtime="3.2"), "results[0].runtime must be a number"),
    (lambda d: d["results"][0].update(percentage=7.5), "percentage must be an integer"),
    (lambda d: d.update(results=[]), "'results' is empty"),
    (lambda d: d.pop("results"), "no 'results' array"),
    (lambda d: d.update(core_count="2"), "'core_count' must be an integer"),
    (lambda d: d["results"].append(3), "results[2] must be an object"),
    # json reads NaN and Infinity, which no rate or latency is ('< 0' let them through)
    (lambda d: d["results"][0].update(iops=float("nan")), "results[0].iops is nan; allowed"),
    (lambda d: d["results"][0].update(max_latency_us=float("inf")),
     "results[0].max_latency_us is inf; allowed"),
    (lambda d: d["results"][0].update(mibps=-1.5), "results[0].mibps is -1.5; allowed"),
])
def test_json_malformed_results_raise(change, problem):
    doc = copy.deepcopy(json_doc())
    change(doc)
    with pytest.raises(ParseError, match=re.escape(problem)):
        parse_bdevperf_json(json.dumps(doc), "resp.json")


def test_json_rpc_client_timeout_is_reported():
    with pytest.raises(ParseError, match="the RPC client gave up: Timeout while waiting"):
        parse_bdevperf_json("Timeout while waiting for response:\n\n", "resp.json")


@pytest.mark.parametrize("version, supported", [
    ("v25.09", True), ("v24.09", True), ("24.09.1", True), ("v24.09.1-pre", True),
    ("v26.01-pre", True), ("v24.09-pre", False), ("v24.05", False), ("v22.09", False),
    ("v23.01.1", False), (None, False), ("", False), ("unknown", False),
])
def test_spdk_supports_json(version, supported):
    assert spdk_supports_json(version) is supported


# --- bad samples ------------------------------------------------------------------------------

BAD_TEXT = ["empty.txt", "garbage.txt", "truncated.txt", "total_mismatch.txt", "short_row.txt",
            "periodic_without_final.txt"]
BAD_JSON = ["empty.txt", "garbage.txt", "rpc_error.txt", "truncated.json"]


@pytest.mark.parametrize("parse, name", [(parse_bdevperf_text, n) for n in BAD_TEXT]
                         + [(parse_bdevperf_json, n) for n in BAD_JSON])
def test_bad_samples_raise_naming_the_file(parse, name):
    path = BAD / name
    with pytest.raises(ParseError) as exc:
        parse(read(path), source=str(path))
    assert exc.value.source == str(path) and str(exc.value).startswith(f"{path}: ")


def test_bad_samples_say_what_is_wrong():
    def problem(name, parse=parse_bdevperf_text):
        with pytest.raises(ParseError) as exc:
            parse(read(BAD / name), source=name)
        return exc.value.problem

    assert problem("truncated.txt") == ("truncated output: the results table at line 14 has "
                                        "no Total row (1 job row read)")
    assert problem("total_mismatch.txt") == ("the table at line 14 is inconsistent: the jobs' "
                                             "IOPS sum to 2257729.95 but Total says 2280307.24")
    assert problem("short_row.txt").startswith("line 18: the row of 'nvme01n1' has 7 numbers, "
                                               "expected 8")
    assert "2 periodic (-S) results but no final table" in problem("periodic_without_final.txt")
    assert problem("garbage.txt").startswith("no results table")
    assert problem("empty.txt").startswith("empty input")
    assert problem("rpc_error.txt", parse_bdevperf_json) == (
        "perform_tests returned an error: bdevperf failed with error Input/output error "
        "(JSON-RPC code -32603)")
    assert problem("truncated.json", parse_bdevperf_json).startswith("not a JSON document")


def test_every_fixture_is_covered():
    covered = {"v25.09_randread_4jobs.txt", "v25.09_periodic_S1.txt", "v25.09_failed_job.txt",
               "v25.09_timeouts.txt", "v25.09_sigint.txt", "v22.09_no_latency.txt",
               "v25.09_rpc_mode_stdout.txt", "perform_tests_2jobs.json", "README.md"}
    assert {p.name for p in FIX.iterdir() if p.is_file()} == covered
    assert {p.name for p in BAD.iterdir()} == set(BAD_TEXT) | set(BAD_JSON)


# --- the driver -------------------------------------------------------------------------------

def run_driver(*args: str, env: dict | None = None, timeout: float = 60
               ) -> subprocess.CompletedProcess:
    return subprocess.run([str(DRIVER), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_driver_declares_its_version_strict_mode_and_trap():
    text = DRIVER.read_text()
    assert "\n# iolab-driver-version: 2\n" in text
    assert "\nset -euo pipefail\n" in text
    assert "\ntrap cleanup EXIT\n" in text
    assert "eval" not in text
    assert os.access(DRIVER, os.X_OK)


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "bdev.json"
    path.write_text(json.dumps(bdev_config(["0000:4a:00.0"])))
    return path


@pytest.mark.parametrize("args, message", [
    ([], "--spdk-dir DIR is required"),
    (["--spdk-dir"], "--spdk-dir needs a value"),
    (["--spdk-dir", ""], "--spdk-dir needs a value"),
    (["--spdk-dir", "--config", "x"], "--spdk-dir needs a value, got option '--config'"),
    (["--spdk-dir", "/opt/spdk"], "--config FILE is required"),
    (["--config", "c.json"], "--spdk-dir DIR is required"),
    (["--spdk-dir", "/opt/spdk", "--config", "c.json", "-q", "1"],
     "unknown option '-q' (bdevperf's own options go after --)"),
])
def test_driver_usage_errors_exit_2(args, message):
    proc = run_driver(*args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "usage: bdevperf.sh --spdk-dir DIR --config FILE [--json-results FILE] -- "
        "[bdevperf options...]", f"bdevperf.sh: {message}"]
    assert proc.stdout == ""


def test_driver_without_bdevperf_exits_127(tmp_path, config):
    spdk = tmp_path / "spdk"
    spdk.mkdir()
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--", "-t", "1")
    assert proc.returncode == 127
    assert proc.stderr.strip() == (
        f"bdevperf.sh: bdevperf not found under {spdk}/build/examples; build SPDK ('make "
        f"tools') or set spdk_dir in the params file")
    assert proc.stdout == ""


# A fake SPDK tree. bdevperf records its argv; with -z it serves a Unix socket at -r until
# SIGINT, then prints the shutdown line. rpc.py and bdevperf.py record their argv and
# PYTHONPATH; bdevperf.py prints the golden JSON (or fails when FAKE_RPC_FAIL is set).
FAKE_BDEVPERF = """\
#!/usr/bin/env python3
import json, os, signal, socket, sys, time
log = os.environ["FAKE_LOG"]
with open(log, "a") as fh:
    fh.write(json.dumps({"prog": "bdevperf", "argv": sys.argv[1:]}) + "\\n")
print("Starting SPDK v25.09 git sha1 5c1b7e4f0 / DPDK 25.07.0 initialization...", flush=True)
if "FAKE_EXIT" in os.environ:
    sys.exit(int(os.environ["FAKE_EXIT"]))
if "-z" not in sys.argv:
    print("Running I/O for 1 seconds...")
    sys.exit(0)
stop = []
signal.signal(signal.SIGINT, lambda *_: stop.append(1))
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[sys.argv.index("-r") + 1])
server.listen()
while not stop:
    time.sleep(0.05)
print("Received shutdown signal, test time was about 1.000000 seconds", flush=True)
with open(log, "a") as fh:
    fh.write(json.dumps({"prog": "bdevperf", "stopped": "SIGINT"}) + "\\n")
"""
FAKE_CLIENT = """\
#!/usr/bin/env python3
import json, os, sys
with open(os.environ["FAKE_LOG"], "a") as fh:
    fh.write(json.dumps({"prog": "%s", "argv": sys.argv[1:], "pid": os.getpid(),
                         "pythonpath": os.environ.get("PYTHONPATH")}) + "\\n")
%s
"""


@pytest.fixture
def fake_spdk(tmp_path):
    spdk = tmp_path / "spdk tree"  # a space, to catch missing quotes
    files = {
        "build/examples/bdevperf": FAKE_BDEVPERF,
        "scripts/rpc.py": FAKE_CLIENT % ("rpc.py", ""),
        "examples/bdev/bdevperf/bdevperf.py": FAKE_CLIENT % ("bdevperf.py", textwrap.dedent(f"""\
            if os.environ.get("FAKE_RPC_HANG"):
                import time
                time.sleep(60)
            if os.environ.get("FAKE_RPC_FAIL"):
                print("Got JSON-RPC error response")
                sys.exit(1)
            sys.stdout.write(open({str(JSON_SAMPLE)!r}).read())
            """)),
    }
    for rel, text in files.items():
        path = spdk / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, "FAKE_LOG": str(log), "TMPDIR": str(tmp_path)}
    env.pop("PYTHONPATH", None)

    def calls() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()]

    return spdk, env, calls


def test_driver_text_mode_passes_argv_unchanged(tmp_path, config, fake_spdk):
    spdk, env, calls = fake_spdk
    marker = tmp_path / "injected"
    odd = f"a b;$(touch {marker})"
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--",
                      "-m", "0x3", "-t", "1", "-w", odd, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"bdevperf: {spdk}/build/examples/bdevperf"
    assert "Starting SPDK v25.09" in proc.stdout
    assert calls() == [{"prog": "bdevperf",
                        "argv": ["-c", str(config), "-m", "0x3", "-t", "1", "-w", odd]}]
    assert not marker.exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_driver_prints_the_spdk_checkouts_git_describe(config, fake_spdk):
    spdk, env, _ = fake_spdk
    git = ["git", "-C", str(spdk), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"], ["tag", "v25.09"]):
        subprocess.run(git + args, check=True, capture_output=True)
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--", "-t", "1",
                      env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == [f"bdevperf: {spdk}/build/examples/bdevperf",
                                            "spdk source: v25.09"]


def test_driver_text_mode_returns_bdevperfs_status(config, fake_spdk):
    spdk, env, _ = fake_spdk
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--", "-t", "1",
                      env={**env, "FAKE_EXIT": "3"})
    assert proc.returncode == 3


def test_driver_json_mode_runs_perform_tests_and_stops_bdevperf(tmp_path, config, fake_spdk):
    spdk, env, calls = fake_spdk
    out = tmp_path / "results.json"
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--json-results",
                      str(out), "--", "-m", "0x3", "-q", "128", "-t", "10", env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == read(JSON_SAMPLE)
    assert parse_bdevperf_json(out.read_text(), str(out))["njobs"] == 2

    started, wait_init, perform, stopped = calls()
    for call in (wait_init, perform):
        del call["pid"]
    sock = started["argv"][started["argv"].index("-r") + 1]
    assert started["argv"] == ["-c", str(config), "-z", "-r", sock,
                               "-m", "0x3", "-q", "128", "-t", "10"]
    assert wait_init["prog"] == "rpc.py"
    assert wait_init["argv"] == ["-s", sock, "-t", "120", "framework_wait_init"]
    assert perform["prog"] == "bdevperf.py"
    assert perform["argv"] == ["-s", sock, "-t", "70", "perform_tests"]  # -t 10 plus 60 s
    assert perform["pythonpath"] == f"{spdk}/python"
    assert stopped == {"prog": "bdevperf", "stopped": "SIGINT"}
    # bdevperf's own output stays on stdout; the socket's folder is gone.
    assert proc.stdout.splitlines()[0] == f"bdevperf: {spdk}/build/examples/bdevperf"
    assert "Received shutdown signal" in proc.stdout
    assert Path(sock).parent.parent == tmp_path and not Path(sock).parent.exists()


def test_driver_json_mode_reports_a_failed_perform_tests(tmp_path, config, fake_spdk):
    spdk, env, calls = fake_spdk
    out = tmp_path / "results.json"
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--json-results",
                      str(out), "--", "-t", "1", env={**env, "FAKE_RPC_FAIL": "1"})
    assert proc.returncode == 1
    assert f"perform_tests failed with status 1; its message is in {out}" in proc.stderr
    assert out.read_text() == "Got JSON-RPC error response\n"
    assert calls()[-1] == {"prog": "bdevperf", "stopped": "SIGINT"}


def test_driver_json_mode_stops_everything_on_sigterm(tmp_path, config, fake_spdk):
    spdk, env, calls = fake_spdk
    proc = subprocess.Popen([str(DRIVER), "--spdk-dir", str(spdk), "--config", str(config),
                             "--json-results", str(tmp_path / "r.json"), "--", "-t", "1"],
                            env={**env, "FAKE_RPC_HANG": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not any(c.get("prog") == "bdevperf.py" for c in
                      (calls() if Path(env["FAKE_LOG"]).exists() else [])):
            assert time.monotonic() < deadline, "perform_tests never started"
            time.sleep(0.05)
        proc.terminate()
        proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143
    client = next(c for c in calls() if c.get("prog") == "bdevperf.py")
    with pytest.raises(ProcessLookupError):
        os.kill(client["pid"], 0)
    assert calls()[-1] == {"prog": "bdevperf", "stopped": "SIGINT"}


def test_driver_json_mode_when_bdevperf_dies_at_start(tmp_path, config, fake_spdk):
    spdk, env, _ = fake_spdk
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--json-results",
                      str(tmp_path / "r.json"), "--", "-t", "1", env={**env, "FAKE_EXIT": "5"})
    assert proc.returncode == 5
    assert "bdevperf.sh: bdevperf exited with status 5 before serving RPC" in proc.stderr


def test_driver_json_mode_needs_bdevperf_py(tmp_path, config, fake_spdk):
    spdk, env, calls = fake_spdk
    (spdk / "examples/bdev/bdevperf/bdevperf.py").unlink()
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--json-results",
                      str(tmp_path / "r.json"), "--", "-t", "1", env=env)
    assert proc.returncode == 127
    assert proc.stderr.strip() == (
        f"bdevperf.sh: bdevperf.py not found under {spdk}/examples/bdev/bdevperf; JSON "
        f"results need SPDK >= 24.09")


@pytest.mark.parametrize("arg", ["-z", "-r", "--rpc-socket=/tmp/x.sock"])
def test_driver_json_mode_refuses_rpc_options_it_sets_itself(tmp_path, config, fake_spdk, arg):
    spdk, env, _ = fake_spdk
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(config), "--json-results",
                      str(tmp_path / "r.json"), "--", "-t", "1", arg, env=env)
    assert proc.returncode == 2
    assert f"with --json-results this script sets bdevperf's {arg} itself" in proc.stderr
    assert proc.stdout == ""


def test_driver_refuses_a_missing_config(tmp_path, fake_spdk):
    spdk, env, _ = fake_spdk
    proc = run_driver("--spdk-dir", str(spdk), "--config", str(tmp_path / "nope.json"), env=env)
    assert proc.returncode == 2
    assert "does not exist or is not readable" in proc.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed "
                    "(apt-get install shellcheck)")
def test_driver_is_shellcheck_clean():
    proc = subprocess.run(["shellcheck", str(DRIVER)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


# --- file, block and RAM bdevs; the package's own SPDK build -----------------------------------

VM_TOPOLOGY = [{"cpu": 0, "core": 0, "package": 0, "siblings": [0]},
               {"cpu": 1, "core": 1, "package": 0, "siblings": [1]}]

def test_file_bdevs_one_per_path_with_the_block_size():
    conf = file_bdev_config("uring", ["/var/tmp/a.dat", "/dev/loop0"], 4096)
    assert conf["subsystems"][0]["config"] == [
        {"method": "bdev_uring_create",
         "params": {"name": "uring0", "filename": "/var/tmp/a.dat", "block_size": 4096}},
        {"method": "bdev_uring_create",
         "params": {"name": "uring1", "filename": "/dev/loop0", "block_size": 4096}}]
    aio = file_bdev_config("aio", ["/var/tmp/a.dat"])
    assert aio["subsystems"][0]["config"][0]["method"] == "bdev_aio_create"


@pytest.mark.parametrize("paths, key, problem", [
    (["relative.dat"], "devices[0]", "not an absolute path"),
    (["/a", "/a"], "devices[1]", "listed twice"),
    ([], "devices", "non-empty list"),
])
def test_file_bdevs_refuse_bad_paths(paths, key, problem):
    with pytest.raises(InputError, match=problem) as exc:
        file_bdev_config("aio", paths)
    assert exc.value.key == key


def test_malloc_bdevs_and_block_sizes():
    conf = malloc_bdev_config([256, 64], 512)
    assert [e["params"] for e in conf["subsystems"][0]["config"]] == [
        {"name": "Malloc0", "num_blocks": 524288, "block_size": 512},
        {"name": "Malloc1", "num_blocks": 131072, "block_size": 512}]
    with pytest.raises(InputError) as exc:
        malloc_bdev_config([256], 1024)
    assert exc.value.key == "block_size"
    with pytest.raises(InputError) as exc:
        config_for({"bdev": "nvme-of", "devices": ["x"]})
    assert exc.value.key == "bdev" and "nvme, aio, uring, malloc" in exc.value.allowed
    # without 'bdev', devices are PCIe controllers, as in every run made before file bdevs
    assert config_for({"devices": ["0000:4a:00.0"]}) == bdev_config(["0000:4a:00.0"])


def _options(**extra):
    return {"spdk_dir": None, "devices": ["/var/tmp/a.dat"], "json_results": False,
            "core_mask": CpuRequest(1, siblings=False), "queue_depth": 8, "io_size": 4096,
            "seconds": 1, "workload": "randread", "bdev": "aio", **extra}


def _spdk_tree(root: Path, patches=()) -> Path:
    tree = root / "spdk"
    exe = tree / "build" / "examples" / "bdevperf"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 'SPDK v99.01 git sha1 abc'\n")
    exe.chmod(0o755)
    (tree / "iolab-build.json").write_text(json.dumps(
        {"tool": "spdk", "version": "99.01", "source_commit": "abc",
         "patches": [{"patch": p, "why": "test"} for p in patches]}))
    return tree


def test_file_bdevs_run_without_pci_and_can_skip_hugepages(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path))
    tree = _spdk_tree(tmp_path)
    launch = Bdevperf().launch(Invocation("bdevperf", _options(memory_mib=256, all_cores=True)),
                               VM_TOPOLOGY)
    tail = launch.argv[launch.argv.index("--") + 1:]
    assert tail[-5:] == ["-C", "-u", "--no-huge", "-s", "256"]
    assert launch.argv[launch.argv.index("--spdk-dir") + 1] == str(tree)
    assert json.loads(launch.inputs["spdk-build.json"])["source_commit"] == "abc"
    assert json.loads(launch.inputs["bdev.json"])["subsystems"][0]["config"][0]["method"] == \
        "bdev_aio_create"
    assert Bdevperf().program(_options()).version() == "SPDK v99.01 git sha1 abc"


def test_a_build_that_skips_the_pci_check_never_drives_nvme(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path))
    _spdk_tree(tmp_path, patches=["dpdk-22.11-later-lts.patch"])
    nvme = {**_options(), "devices": ["0000:4a:00.0"]}
    del nvme["bdev"]
    with pytest.raises(ToolError, match="skips DPDK's PCI ABI check"):
        Bdevperf().launch(Invocation("bdevperf", nvme), VM_TOPOLOGY)
    Bdevperf().launch(Invocation("bdevperf", _options()), VM_TOPOLOGY)


def test_without_any_spdk_build_the_plan_says_how_to_get_one(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path / "none"))
    program = Bdevperf().program(_options())
    assert program.find() is None
    assert "make tools" in program.status()["install"]
    with pytest.raises(ToolError, match="no SPDK built in .*make tools"):
        Bdevperf().launch(Invocation("bdevperf", _options()), VM_TOPOLOGY)


@pytest.mark.parametrize("extra, key", [({"all_cores": "yes"}, "all_cores"),
                                        ({"memory_mib": 0}, "memory_mib"),
                                        ({"hugepages": 8}, "hugepages")])
def test_bad_new_options_fail_at_plan_time(extra, key):
    with pytest.raises(InputError) as exc:
        Bdevperf().identity(Invocation("bdevperf", _options(**extra)))
    assert exc.value.key == key


def _real_ram_run(run: Path, **options):
    """One real bdevperf run on a 32 MiB RAM bdev, without hugepages, in ``run``."""
    launch = Bdevperf().launch(Invocation("bdevperf", {
        **_options(memory_mib=512, **options), "bdev": "malloc", "devices": [32]}), topology())
    return drive(launch, run)


@pytest.mark.slow
def test_a_real_tiny_bdevperf_run_on_a_ram_bdev(tmp_path, built_spdk):
    """The driver and the parser on the real bdevperf, with malloc bdevs on two cores."""
    run = tmp_path / "run"
    done = _real_ram_run(run, all_cores=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert b"\r" in done.stdout  # bdevperf's progress lines, which the parser must survive
    metrics = Bdevperf().parse(run)
    assert metrics["problem"] is None and metrics["iops"] > 1000
    assert metrics["version"].startswith("v")


def test_a_core_mask_outside_the_hosts_cpus_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path))
    _spdk_tree(tmp_path)
    with pytest.raises(InputError) as exc:
        Bdevperf().launch(Invocation("bdevperf", _options(core_mask="0x5")), VM_TOPOLOGY)
    assert exc.value.key == "core_mask"
    assert exc.value.problem == "CPU 2 is not an online CPU of this host"
    assert exc.value.allowed == "0-1"
    Bdevperf().launch(Invocation("bdevperf", _options(core_mask="0x3")), VM_TOPOLOGY)


def test_spdk_start_line_is_found_wherever_it_is():
    from iolab.parsers.bdevperf import spdk_start
    log = ("[2026-11-24 00:02:48.971566] Starting SPDK v26.09-pre git sha1 3230130e6a / DPDK "
           "22.11.11 initialization...\n[...] app.c: 993:spdk_app_start: *NOTICE*: x\n")
    assert spdk_start(log) == {"spdk_version": "v26.09-pre", "spdk_git_sha1": "3230130e6a",
                               "dpdk_version": "22.11.11"}
    assert spdk_start("nothing here\r\n") is None


def test_the_pci_check_refusal_comes_when_the_plan_is_made(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path))
    _spdk_tree(tmp_path, patches=["dpdk-22.11-later-lts.patch"])
    nvme = {k: v for k, v in _options().items() if k != "bdev"}
    with pytest.raises(ToolError, match="skips DPDK's PCI ABI check.*Nothing was run"):
        Bdevperf().identity(Invocation("bdevperf", {**nvme, "devices": ["0000:4a:00.0"]}))
    Bdevperf().identity(Invocation("bdevperf", _options()))


def test_a_package_build_names_its_key_in_the_version(tmp_path, monkeypatch):
    monkeypatch.setenv("IOLAB_TOOLS_DIR", str(tmp_path))
    tree = _spdk_tree(tmp_path)
    record = json.loads((tree / "iolab-build.json").read_text())
    (tree / "iolab-build.json").write_text(json.dumps({**record, "key": "0123abcd"}))
    assert Bdevperf().program(_options()).version() == "SPDK v99.01 git sha1 abc (build 0123abcd)"


@pytest.mark.slow
def test_a_real_bdevperf_run_with_json_results(tmp_path, built_spdk):
    """JSON results through the real RPC client and bdevperf.py of the built tree."""
    run = tmp_path / "run"
    done = _real_ram_run(run, json_results=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    metrics = Bdevperf().parse(run)
    assert metrics["results_from"] == "perform_tests JSON" and metrics["note"] is None
    assert metrics["problem"] is None and metrics["iops"] > 1000


def _bdevperf_run(tmp_path, change=None):
    """A run folder with the two-job perform_tests JSON, ``change`` applied to it, and the
    text table of the same jobs on stdout."""
    doc = json.loads((FIX / "perform_tests_2jobs.json").read_text())
    table = parse_text("v25.09_rpc_mode_stdout.txt")["jobs"]
    for job, row in zip(doc["results"], table):  # the table's numbers: bdevperf prints the
        job.update(runtime=row["runtime_s"], iops=row["iops"], mibps=row["mibs"],  # same
                   **{key: row[key] for key in ("avg_latency_us", "min_latency_us",
                                                "max_latency_us")})
    if change:
        change(doc)
    (tmp_path / bdevperf.JSON_RESULTS).write_text(json.dumps(doc))
    shutil.copy(FIX / "v25.09_rpc_mode_stdout.txt", tmp_path / "stdout")
    (tmp_path / bdevperf.CONFIG).write_text(json.dumps(bdevperf.bdev_config(
        ["0000:4a:00.0", "0000:4b:00.0"])))  # nvme00 and nvme01: the jobs' bdevs
    return tmp_path


ARGV = ["bdevperf.sh", "--config", "bdev.json", "--json-results", bdevperf.JSON_RESULTS, "--",
        "-m", "0x3", "-q", "128", "-o", "512", "-t", "10", "-w", "randread"]


@pytest.mark.parametrize("change, argv, reason", [
    (lambda d: d["results"][1].__setitem__("workload", "randwrite"), ARGV,
     "bdevperf-results.json is not this run's report: its job 1 ('nvme01n1') ran with "
     "workload 'randwrite', the run gave bdevperf -w 'randread'"),
    (lambda d: [j.__setitem__("io_size", 65536) for j in d["results"]], ARGV,
     "bdevperf-results.json is not this run's report: its job 0 ('nvme00n1') ran with "
     "io_size 65536, the run gave bdevperf -o '512'"),
    (None, [*ARGV[:-8], "-q", "32", *ARGV[-6:]],
     "stdout is not this run's report: its job 0 ('nvme00n1') ran with queue_depth 128, the "
     "run gave bdevperf -q '32'"),
    (None, [*ARGV[:-10], "-m", "0x1", *ARGV[-8:]],
     "stdout is not this run's report: its job 1 ('nvme01n1') ran on core mask '0x2', outside "
     "the run's -m 0x1 (allowed: a non-zero mask of those cores)"),
], ids=["another workload", "another io size", "another depth", "a core outside the mask"])
def test_a_report_of_another_workload_size_depth_or_core_is_foreign(tmp_path, change, argv,
                                                                   reason):
    """bdevperf JSON of a randwrite job, of 64 KiB I/O, or of a core the run was not given was
    stored as the run's sample."""
    assert bdevperf.Bdevperf().foreign_report(_bdevperf_run(tmp_path), ARGV) == ""
    assert bdevperf.Bdevperf().foreign_report(_bdevperf_run(tmp_path, change), argv) == reason


def _job_again(name):
    """The perform_tests JSON with its first job given again, named ``name``."""
    def change(doc):
        doc["results"].append({**json.loads(json.dumps(doc["results"][0])), "job": name})
    return change


@pytest.mark.parametrize("name, reason", [
    ("nvme00n1", "bdevperf-results.json is not this run's report: it has 2 jobs of bdev "
                 "'nvme00n1', the run's argv makes bdevperf run 1 (one per bdev, or with -C "
                 "one per core of -m)"),
    ("nvme02n1", "bdevperf-results.json is not this run's report: it has a job of bdev "
                 "'nvme02n1', which the run's bdev.json never made (allowed: 'nvme00nN, "
                 "nvme01nN')"),
], ids=["a job given twice", "a job of a bdev the run never made"])
def test_a_report_whose_jobs_are_not_the_runs_bdevs_each_once_is_foreign(tmp_path, name,
                                                                          reason):
    """Probe 11's Q6 and Q7: a job given again in perform_tests' results, as itself or as a
    bdev the run's config never made, was stored with the IOPS of both (bdevperf's totals
    are the jobs' sum): 110,758 where the run measured 74,619."""
    assert bdevperf.Bdevperf().foreign_report(_bdevperf_run(tmp_path, _job_again(name)),
                                              ARGV) == reason


def test_file_bdevs_each_need_their_job_and_all_cores_gives_one_per_core(tmp_path):
    run = _bdevperf_run(tmp_path)
    (run / "stdout").write_text("")  # the JSON alone
    (run / bdevperf.CONFIG).write_text(json.dumps(bdevperf.file_bdev_config(
        "aio", ["/var/tmp/a.dat", "/var/tmp/b.dat"])))
    doc = json.loads((run / bdevperf.JSON_RESULTS).read_text())
    for job, name in zip(doc["results"], ["aio0", "aio1"]):
        job["job"] = name
    (run / bdevperf.JSON_RESULTS).write_text(json.dumps(doc))
    assert bdevperf.Bdevperf().foreign_report(run, ARGV) == ""
    doc["results"][1]["job"] = "aio0"  # two cores on aio0 with -C, none on aio1
    (run / bdevperf.JSON_RESULTS).write_text(json.dumps(doc))
    assert "it has no job of bdev 'aio1', which the run's bdev.json made" in \
        bdevperf.Bdevperf().foreign_report(run, [*ARGV, "-C"])
    assert "it has 2 jobs of bdev 'aio0'" in bdevperf.Bdevperf().foreign_report(run, ARGV)
    (run / bdevperf.CONFIG).write_text(json.dumps(bdevperf.file_bdev_config(
        "aio", ["/var/tmp/a.dat"])))
    assert bdevperf.Bdevperf().foreign_report(run, [*ARGV, "-C"]) == ""  # 0x3: two cores
    (run / bdevperf.CONFIG).unlink()  # an imported run: the count of each bdev still holds
    assert "it has 2 jobs of bdev 'aio0'" in bdevperf.Bdevperf().foreign_report(run, ARGV)


def test_a_bdev_config_iolab_never_writes_is_named(tmp_path):
    run = _bdevperf_run(tmp_path)
    (run / bdevperf.CONFIG).write_text('{"subsystems": [{"config": [{"params": {}}]}]}')
    with pytest.raises(ParseError, match="bdev.json: holds .* \\(allowed: the bdev config"):
        bdevperf.Bdevperf().foreign_report(run, ARGV)
