"""Collectors, stress-ng and GNU time: fake trees for the logic, real processes for the contract."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.collectors.cpufreq import CPUFREQ_HEADER, CpufreqSampler, parse_cpufreq_samples
from iolab.collectors.gnu_time import GNU_TIME, GNU_TIME_FORMAT, gnu_time_prefix, parse_gnu_time_kv
from iolab.collectors.hugepages import Hugepages
from iolab.collectors.proctree import ProcTreeCpu, parse_proctree_cpu
from iolab.collectors.stress_ng import StressNg, check_lasted, unused_cpus
from iolab.errors import InputError, ParseError, ToolError
from iolab.host.knobs import SysRoot
from iolab.tools.marker import OutputMarker

REAL_CPUFREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq")


# --- cpufreq sampler -------------------------------------------------------------------------

@pytest.mark.skipif(REAL_CPUFREQ.exists(), reason="this host has cpufreq")
def test_sampler_without_cpufreq_writes_header_and_unavailable_meta(tmp_path):
    sampler = CpufreqSampler()
    sampler.start(tmp_path)
    sampler.stop(tmp_path)
    assert (tmp_path / "cpufreq.csv").read_text() == CPUFREQ_HEADER + "\n"
    meta = json.loads((tmp_path / "cpufreq-meta.json").read_text())
    assert meta["available"] is False and "cpufreq" in meta["reason"]
    assert parse_cpufreq_samples((tmp_path / "cpufreq.csv").read_text(), 0, 1)["n"] == 0


def _freq_tree(fake_sysroot, khz: dict[int, int]) -> SysRoot:
    root = fake_sysroot()
    for cpu, value in khz.items():
        folder = root.cpu_dir / f"cpu{cpu}/cpufreq"
        (folder / "scaling_cur_freq").write_text(f"{value}\n")
        (folder / "scaling_driver").write_text("intel_pstate\n")
    return root


def test_sampler_writes_long_format_with_explicit_cpu_ids(fake_sysroot, tmp_path):
    root = _freq_tree(fake_sysroot, {0: 800000, 1: 3000000, 2: 3100000, 3: 3200000})
    sampler = CpufreqSampler([1, 3, 7], interval_s=0.01, root=root)
    t0 = time.time_ns()
    sampler.start(tmp_path)
    time.sleep(0.05)
    # CPU 3 goes offline: its lines stop, no column shifts, and the failed reads are counted.
    (root.cpu_dir / "cpu3/cpufreq/scaling_cur_freq").unlink()
    time.sleep(0.05)
    sampler.stop(tmp_path)
    t1 = time.time_ns()

    lines = (tmp_path / "cpufreq.csv").read_text().splitlines()
    assert lines[0] == CPUFREQ_HEADER
    rows = [tuple(map(int, line.split(","))) for line in lines[1:]]
    assert {cpu for cpu, _, _ in rows} == {1, 3}
    assert all(khz == {1: 3000000, 3: 3200000}[cpu] for cpu, _, khz in rows)
    assert all(t0 <= stamp <= t1 for _, stamp, _ in rows)
    assert sum(cpu == 1 for cpu, _, _ in rows) > sum(cpu == 3 for cpu, _, _ in rows) >= 1

    meta = json.loads((tmp_path / "cpufreq-meta.json").read_text())
    assert meta["available"] is True and meta["source"] == "scaling_cur_freq"
    assert meta["cpus"] == {
        "1": {"governor": "powersave", "scaling_driver": "intel_pstate",
              "cpuinfo_max_freq_khz": 4000000},
        "3": {"governor": "powersave", "scaling_driver": "intel_pstate",
              "cpuinfo_max_freq_khz": 4000000}}
    assert meta["cpus_without_cpufreq"] == [7]
    assert meta["smt"] == {"control": "on", "active": True} and meta["turbo"] == "on"
    assert meta["samples"] == sum(cpu == 1 for cpu, _, _ in rows)
    assert meta["failed_reads"]["1"] == 0 and meta["failed_reads"]["3"] >= 1
    assert meta["error"] is None

    summary = parse_cpufreq_samples("\n".join(lines), t0, t1)
    assert summary["cpus"]["1"]["mean_khz"] == 3000000


SYNTHETIC = """cpu,timestamp_ns,khz
0,100,1000
1,100,2000
0,200,1500
1,200,2500
0,300,3000
1,300,2600
0,400,9999
1,401,9999
"""


def test_parse_cpufreq_cuts_to_the_window_inclusively():
    result = parse_cpufreq_samples(SYNTHETIC, 200, 400, "run/cpufreq.csv")
    assert result == {
        "cpus": {"0": {"mean_khz": (1500 + 3000 + 9999) / 3, "min_khz": 1500,
                       "max_khz": 9999, "n": 3},
                 "1": {"mean_khz": 2550.0, "min_khz": 2500, "max_khz": 2600, "n": 2}},
        # Mean of the two per-CPU means, each CPU weighing the same.
        "mean_khz": ((1500 + 3000 + 9999) / 3 + 2550.0) / 2,
        "n": 5,
        "window_s": 200e-9,
    }
    inner = parse_cpufreq_samples(SYNTHETIC, 150, 250)
    assert inner["cpus"] == {"0": {"mean_khz": 1500.0, "min_khz": 1500, "max_khz": 1500,
                                   "n": 1},
                             "1": {"mean_khz": 2500.0, "min_khz": 2500, "max_khz": 2500,
                                   "n": 1}}
    empty = parse_cpufreq_samples(SYNTHETIC, 500, 600)
    assert empty["cpus"] == {} and empty["n"] == 0 and empty["mean_khz"] != empty["mean_khz"]


@pytest.mark.parametrize("text, line", [
    ("cpu,timestamp_ns,khz\n0,100,1000\n0,200\n", 3),
    ("cpu,timestamp_ns,khz\n0,100,1000\n0,200,abc\n", 3),
    ("cpu,timestamp_ns,khz\n-1,100,1000\n", 2),
    ("cpu,timestamp_ns,khz\n\n0,100,1000\n", 2),
    ("2026-04-22_14:23:48 3196599 985488\n", 1),
    ("", 1),
    ("cpu,timestamp_ns,khz\n0,5,²\n", 2),  # str.isdigit takes '²', int() does not
    ("cpu,timestamp_ns,khz\n0,5" + "9" * 5000 + ",1000\n", 2),  # int() refuses 4,300 digits
])
def test_parse_cpufreq_rejects_malformed_lines(text, line):
    with pytest.raises(ParseError, match=rf"^run1/cpufreq.csv: line {line}:"):
        parse_cpufreq_samples(text, 0, 10**19, "run1/cpufreq.csv")


@pytest.mark.parametrize("khz", ["0", "999", "100000001", "99999999999999999999999"])
def test_parse_cpufreq_refuses_frequencies_no_cpu_runs_at(khz):
    """0 kHz and 10^23 kHz were stored as good samples (the mean is a metric)."""
    with pytest.raises(ParseError, match=rf"^c.csv: line 3: khz is {khz} \(allowed: 1000 to "
                                         r"100000000 kHz, 1 MHz to 100 GHz"):
        parse_cpufreq_samples(f"cpu,timestamp_ns,khz\n0,5,1000\n0,6,{khz}\n", 0, 10, "c.csv")
    assert parse_cpufreq_samples("cpu,timestamp_ns,khz\n0,5,100000000\n", 0, 10)["n"] == 1


META_OF_0_1 = {"available": True, "requested_cpus": [0, 1],
               "cpus": {"0": {"governor": "performance"}, "1": {"governor": "performance"}}}


@pytest.mark.parametrize("meta, problem", [
    # one sample of CPU 4000 at 99 GHz made the mean over CPUs 34 GHz
    (META_OF_0_1, r"cpufreq.csv: line 4: a sample of CPU 4000, which the sampler was not "
                  r"given \(allowed: the CPUs cpufreq-meta.json names, \[0, 1\]\)"),
    ({**META_OF_0_1, "cpus": {"0": {}, "4000": {}}},
     r"cpufreq-meta.json: cpus names CPU\(s\) \[4000\] the sampler was not given"),
    ({"available": False, "requested_cpus": [0, 1]},
     r"cpufreq.csv: line 2: a sample of CPU 0, which the sampler was not given .* none"),
    ({"available": True, "requested_cpus": [0, 1]}, r"cpufreq-meta.json: has no cpus"),
])
def test_cpufreq_parse_takes_only_the_cpus_the_sampler_was_given(tmp_path, meta, problem):
    (tmp_path / "cpufreq-meta.json").write_text(json.dumps(meta))
    (tmp_path / "cpufreq.csv").write_text("cpu,timestamp_ns,khz\n0,100,2000000\n1,101,2000000\n"
                                          "4000,102,99000000\n")
    with pytest.raises(ParseError, match=f"^{tmp_path}/{problem}"):
        CpufreqSampler.parse(tmp_path, (0, 1000))
    (tmp_path / "cpufreq-meta.json").write_text(json.dumps(META_OF_0_1))
    (tmp_path / "cpufreq.csv").write_text("cpu,timestamp_ns,khz\n0,100,2000000\n1,101,3000000\n")
    assert CpufreqSampler.parse(tmp_path, (0, 1000))["mean_khz"] == 2_500_000


def test_cpufreq_parse_refuses_a_record_of_cpufreq_with_no_sample_at_all(tmp_path):
    """Probe 11's Q10 class: cpufreq.csv cut to its header, where the record says cpufreq
    was there, read NaN like a VM's (no cpufreq); the sampler reads each CPU as it starts
    and as it stops. Where the record says so (no cpufreq, an error, every read failed), the
    NaN stands: it is how the collector says it has no value (probe 11's Q11)."""
    header = "cpu,timestamp_ns,khz\n"
    (tmp_path / "cpufreq.csv").write_text(header)
    (tmp_path / "cpufreq-meta.json").write_text(json.dumps(
        {**META_OF_0_1, "samples": 3, "failed_reads": {"0": 0, "1": 0}, "error": None}))
    with pytest.raises(ParseError, match=rf"^{tmp_path}/cpufreq.csv: holds no sample at all, "
                                         r"though cpufreq-meta.json says cpufreq was available "
                                         r"on CPU\(s\) \[0, 1\] and no read failed"):
        CpufreqSampler.parse(tmp_path, (0, 1000))
    for said in ({"available": False, "requested_cpus": None},
                 {**META_OF_0_1, "samples": 3, "failed_reads": {"0": 3, "1": 0}},
                 {**META_OF_0_1, "error": "sampling stopped: disk full"}):
        (tmp_path / "cpufreq-meta.json").write_text(json.dumps(said))
        assert math.isnan(CpufreqSampler.parse(tmp_path, (0, 1000))["mean_khz"])


def test_cpufreq_parse_refuses_a_sample_far_outside_the_drivers_window(tmp_path):
    start = 10**18
    (tmp_path / "cpufreq-meta.json").write_text(json.dumps(META_OF_0_1))
    (tmp_path / "driver-window.json").write_text(json.dumps(
        {"start_ns": start, "end_ns": start + 10**9}))
    (tmp_path / "cpufreq.csv").write_text(f"cpu,timestamp_ns,khz\n0,{start},2000000\n"
                                          f"1,{start + 3600 * 10**9},2000000\n")
    with pytest.raises(ParseError, match="cpufreq.csv: line 3 is stamped .* outside the run's"):
        CpufreqSampler.parse(tmp_path, (start, start + 10**9))


# --- CPU time of the driver's process tree, and output markers -----------------------------

def _tree_cpu(tmp_path, argv: list[str]) -> dict:
    """Run argv under the sampler; the window is the whole life of the process tree."""
    sampler = ProcTreeCpu(interval_s=0.05)
    sampler.start(tmp_path)
    t0 = time.time_ns()
    proc = subprocess.Popen(argv)
    sampler.attach(proc.pid)
    proc.wait()
    sampler.stop(tmp_path)
    return parse_proctree_cpu((tmp_path / "proctree-cpu.csv").read_text(),
                              (tmp_path / "proctree-cpu.json").read_text(), t0, time.time_ns())


def test_tree_cpu_counts_a_busy_grandchild(tmp_path):
    """The grandchild's CPU time is counted: what the sampler saw matches what the process
    says it used (up to one sampling interval and clock-tick rounding), however loaded the
    machine is, since both count CPU time, not wall time."""
    # the busy process is a child of a shell, as a tool is a child of GNU time
    spin = ("import time; t = time.time()\nwhile time.time() - t < 0.8: pass\n"
            "import os; u = os.times(); print(u.user + u.system)")
    out = tmp_path / "own.txt"
    res = _tree_cpu(tmp_path, ["sh", "-c", f"{sys.executable} -c '{spin}' > {out}; true"])
    own = float(out.read_text())
    assert res["processes"] >= 2 and own > 0
    assert own - 0.2 <= res["utime_s"] + res["stime_s"] <= own + 0.05


def test_tree_cpu_of_a_sleeping_tree(tmp_path):
    res = _tree_cpu(tmp_path, ["sh", "-c", "sleep 0.6; true"])
    assert res["cpu_pct"] < 15


def test_parse_proctree_cpu_cuts_to_the_window():
    meta = '{"clk_tck": 100}'
    csv = "\n".join(["timestamp_ns,pid,comm,utime,stime",
                      "1000000000,10,fio,0,0", "2000000000,10,fio,50,50",   # before the window ends
                      "3000000000,10,fio,150,50", "4000000000,10,fio,900,900"])
    res = parse_proctree_cpu(csv, meta, 2_000_000_000, 3_000_000_000)
    assert res == {"cpu_pct": 100.0, "utime_s": 1.0, "stime_s": 0.0, "span_s": 1.0, "processes": 1}
    empty = parse_proctree_cpu(csv, meta, 5_000_000_000, 6_000_000_000)
    assert math.isnan(empty["cpu_pct"])


def test_parse_proctree_cpu_refuses_a_record_of_no_sample_at_all():
    """Probe 11's Q10: proctree-cpu.csv cut to its header was stored as a sample whose
    cpu_usage_window_pct (and utime_s, stime_s) read NaN, as if the run were too short to
    sample; the sampler writes the driver's tree as soon as it is attached."""
    for csv in ("timestamp_ns,pid,comm,utime,stime\n", "timestamp_ns,pid,comm,utime,stime\n\n"):
        with pytest.raises(ParseError, match=r"^run/proctree-cpu.csv: holds the header and no "
                                             r"sample at all \(cut off\?"):
            parse_proctree_cpu(csv, '{"clk_tck": 100}', 0, 10, "run/proctree-cpu.csv")


def test_parse_proctree_cpu_rejects_malformed_lines():
    with pytest.raises(ParseError, match="line 2"):
        parse_proctree_cpu("timestamp_ns,pid,comm,utime,stime\n1,2,x,3\n", '{"clk_tck": 100}', 0, 10)


@pytest.mark.parametrize("meta, problem", [
    ("{", "not JSON \\(cut off\\?\\); the collector writes an object with 'clk_tck'"),
    ('{"clk_tck": 0}', "clk_tck is 0 \\(allowed: an object whose clk_tck is 100, Linux's USER_HZ"),
    ("[]", "clk_tck is a JSON list \\(allowed"),
    ('{"clk_tck": "100"}', "clk_tck is '100' \\(allowed"),
    ('{"clk_tck": true}', "clk_tck is True \\(allowed"),
    ('{"clk_tck": 1e999}', "clk_tck is inf \\(allowed"),
    ("[" * 100_000 + "]" * 100_000, "nested more than 100 levels deep"),
])
def test_parse_proctree_cpu_refuses_a_record_without_a_clock_rate(meta, problem):
    """The CPU times are divided by clk_tck: 0 raised ZeroDivisionError, another shape a
    TypeError and broken JSON a JSONDecodeError naming no file, none of which fails the run
    with its reason."""
    csv = "timestamp_ns,pid,comm,utime,stime\n1,5,x,1,1\n5,5,x,9,9\n"
    with pytest.raises(ParseError, match=f"^run/proctree-cpu.json: .*{problem}"):
        parse_proctree_cpu(csv, meta, 0, 10, "run/proctree-cpu.csv", "run/proctree-cpu.json")


@pytest.mark.parametrize("second, key", [("9,5,x,1,100", "utime"), ("9,5,x,100,1", "stime"),
                                         ("0,5,x,100,100", "timestamp_ns")])
def test_parse_proctree_cpu_refuses_times_that_go_down(second, key):
    """A CPU share from times that went down was negative (-2.5e10 %)."""
    csv = f"timestamp_ns,pid,comm,utime,stime\n1,5,x,100,100\n{second}\n"
    with pytest.raises(ParseError, match=f"^p.csv: line 3: pid 5's {key} went down"):
        parse_proctree_cpu(csv, '{"clk_tck": 100}', 0, 10, "p.csv")


def test_proctree_parse_refuses_a_sample_far_outside_the_drivers_window(tmp_path):
    start = 10**18
    (tmp_path / "proctree-cpu.json").write_text('{"clk_tck": 100}\n')
    (tmp_path / "driver-window.json").write_text(json.dumps(
        {"start_ns": start, "end_ns": start + 10**9}))
    (tmp_path / "proctree-cpu.csv").write_text(
        f"timestamp_ns,pid,comm,utime,stime\n{start},5,x,1,1\n{start + 10**9},5,x,51,1\n")
    assert ProcTreeCpu.parse(tmp_path, (start, start + 10**9))["cpu_pct"] == 50.0
    with open(tmp_path / "proctree-cpu.csv", "a") as f:
        f.write(f"{start + 3600 * 10**9},5,x,99,1\n")
    with pytest.raises(ParseError, match="proctree-cpu.csv: line 4 is stamped .* outside the"):
        ProcTreeCpu.parse(tmp_path, (start, start + 10**9))


def test_proctree_parse_names_the_record_it_could_not_read(tmp_path):
    (tmp_path / "proctree-cpu.csv").write_text("timestamp_ns,pid,comm,utime,stime\n1,5,x,1,1\n")
    (tmp_path / "proctree-cpu.json").write_text('{"clk_tck": 0}\n')
    with pytest.raises(ParseError, match=f"^{tmp_path}/proctree-cpu.json: clk_tck is 0"):
        ProcTreeCpu.parse(tmp_path, (0, 10))


# --- host CPU use from /proc/stat -------------------------------------------------------------

def test_parse_procstat_gives_the_busy_share():
    from iolab.collectors.procstat import parse_procstat

    res = parse_procstat("# time_ns 1000\ncpu 1 0 1 6 2 0 0 0 0 0\ncpu0 1 0 1 6 2 0 0 0 0 0\n",
                         f"# time_ns {1000 + 9 * 10**7}\ncpu 3 0 3 12 1 0 0 0 0 0\n"
                         "cpu0 3 0 3 12 1 0 0 0 0 0\n")  # iowait may go down
    assert res == {"host_busy_pct": 100.0 * 4 / 9, "host_window_s": 0.09}


@pytest.mark.parametrize("before, after, problem", [
    # every counter down gave a plausible 75 % busy
    ("# time_ns 1000\ncpu 9 9 9 9 9 9 9 9\n", "# time_ns 2000\ncpu 1 1 1 1 1 1 1 1\n",
     "s: field 1 \\(user\\) of the aggregate cpu line went down between the snapshots "
     "\\(9 -> 1; allowed: counters that never decrease\\)"),
    ("# time_ns 1000\ncpu 1 1 1 9 1 1 1 1\n", "# time_ns 2000\ncpu 2 2 2 1 2 2 2 2\n",
     "s: field 4 \\(idle\\)"),
    ("# time_ns 1000\ncpu 9 x 9 9 9\n", "# time_ns 2000\ncpu 9 9 9 9 9\n",
     "s.before: line 2 \\(cpu\\): expected whole numbers of ticks \\(digits 0-9\\), got"),
    ("# time_ns 1000\ncpu 9 9 9 9 9\n", "# time_ns 2000\ncpu 9 9 9 9 ²\n",
     "s.after: line 2 \\(cpu\\): expected whole numbers"),
    ("# time_ns 5000\ncpu 0 0 0 0 0\n", "# time_ns 1000\ncpu 5 0 0 5 0\n",
     "s: time_ns of the after snapshot \\(1000\\) is before the before snapshot's \\(5000\\)"),
    ("# time_ns ²\ncpu 0 0 0 0 0\n", "# time_ns 1000\ncpu 5 0 0 5 0\n",
     "s.before: missing '# time_ns' header line"),
])
def test_parse_procstat_refuses_what_no_snapshot_pair_gives(before, after, problem):
    from iolab.collectors.procstat import parse_procstat

    with pytest.raises(ParseError, match=f"^{problem}"):
        parse_procstat(before, after, "s")


RUN_WINDOW = (10**18, 10**18 + 4 * 10**9)   # a run's driver window of 4 s


@pytest.mark.parametrize("t0, t1", [
    # the after snapshot an hour after a 4 s run: that hour's 0.02 % was the run's host use
    (RUN_WINDOW[0] - 10**8, RUN_WINDOW[1] + 3600 * 10**9),
    (RUN_WINDOW[0] + 10**9, RUN_WINDOW[1] + 10**8),   # taken once the run had started
])
def test_parse_procstat_refuses_a_pair_that_does_not_bracket_the_run(t0, t1):
    from iolab.collectors.procstat import parse_procstat

    with pytest.raises(ParseError, match=r"^s: the snapshots span .* does not bracket the "
                                         r"run's window"):
        parse_procstat(f"# time_ns {t0}\ncpu 0 0 0 0 0\n", f"# time_ns {t1}\ncpu 5 0 0 5 0\n",
                       "s", RUN_WINDOW)


def test_parse_procstat_refuses_a_pair_with_no_tick_between():
    from iolab.collectors.procstat import parse_procstat

    with pytest.raises(ParseError, match="^s: no CPU tick passed between the snapshots"):
        parse_procstat("# time_ns 1000\ncpu 5 0 0 5 0\n", "# time_ns 2000\ncpu 5 0 0 5 0\n", "s")


def stat(time_ns: int, cpu: str, cpus: int = 2, extra: str = "") -> str:
    """A /proc/stat snapshot of ``cpus`` CPUs whose aggregate line is ``cpu``, all of it
    cpu0's (so the CPUs' lines add up to it)."""
    each = "".join(f"cpu{n} {cpu if n == 0 else '0 0 0 0 0 0 0 0 0 0'}\n" for n in range(cpus))
    return f"# time_ns {time_ns}\ncpu  {cpu}\n{extra}{each}intr 1\n"


# a committed pair 3.7 s apart on 2 CPUs: 740 ticks, a quarter busy
PAIR = (stat(0, "1000 0 1000 5000 0 0 0 0 0 0"),
        stat(37 * 10**8, "1150 0 1035 5555 0 0 0 0 0 0"))


def test_parse_procstat_takes_ticks_that_fit_the_time_between_the_snapshots():
    from iolab.collectors.procstat import parse_procstat

    assert parse_procstat(*PAIR, "s")["host_busy_pct"] == 25.0


@pytest.mark.parametrize("idle, shown", [
    (10**9 + 5555, "1000000740"),   # 10^9 idle ticks added: the host read 0.00001 % busy
    (5055, "240"),                  # 500 taken away: it read 77 % busy
])
def test_parse_procstat_refuses_ticks_the_time_between_the_snapshots_cannot_hold(idle, shown):
    from iolab.collectors.procstat import parse_procstat

    after = stat(37 * 10**8, f"1150 0 1035 {idle} 0 0 0 0 0 0")
    with pytest.raises(ParseError, match=rf"^s: {shown} CPU ticks between snapshots 3.7 s apart "
                                         r"on 2 CPUs \(allowed: 360 to 935, 2 x the time x 100 "
                                         r"ticks a second"):
        parse_procstat(PAIR[0], after, "s")


@pytest.mark.parametrize("extra, name, line", [
    ("cpu  1150 0 1035 10000 0 0 0 0 0 0\n", "cpu", 3),   # the last aggregate line was taken
    ("cpu0 0 0 0 0 0 0 0 0 0 0\n", "cpu0", 4),
])
def test_parse_procstat_refuses_a_cpu_line_listed_twice(extra, name, line):
    from iolab.collectors.procstat import parse_procstat

    after = stat(37 * 10**8, "1150 0 1035 5555 0 0 0 0 0 0", extra=extra)
    with pytest.raises(ParseError, match=rf"^s.after: line {line}: '{name}' listed twice "
                                         r"\(first on line \d; allowed: the aggregate line "
                                         r"and each CPU once\)"):
        parse_procstat(PAIR[0], after, "s")


def test_parse_procstat_refuses_a_snapshot_without_per_cpu_lines():
    from iolab.collectors.procstat import parse_procstat

    with pytest.raises(ParseError, match=r"^s.after: no per-CPU line"):
        parse_procstat(stat(0, "1 0 0 1 0", cpus=0), stat(10**8, "10 0 0 11 0", cpus=0), "s")


def test_procstat_parse_checks_the_drivers_window(tmp_path):
    from iolab.collectors.procstat import ProcStat

    (tmp_path / "procstat.before").write_text(f"# time_ns {RUN_WINDOW[0] - 10**8}\ncpu 0 0 0 0 0\n"
                                              "cpu0 0 0 0 0 0\n")
    (tmp_path / "procstat.after").write_text(f"# time_ns {RUN_WINDOW[1] + 10**8}\n"
                                             "cpu 210 0 0 210 0\ncpu0 210 0 0 210 0\n")
    (tmp_path / "driver-window.json").write_text(
        f'{{"start_ns": {RUN_WINDOW[0]}, "end_ns": {RUN_WINDOW[1]}}}')
    assert ProcStat.parse(tmp_path, None)["host_busy_pct"] == 50.0
    (tmp_path / "driver-window.json").write_text(
        f'{{"start_ns": {RUN_WINDOW[0] - 3600 * 10**9}, "end_ns": {RUN_WINDOW[1] - 3600 * 10**9}}}')
    with pytest.raises(ParseError, match="does not bracket the run's window"):
        ProcStat.parse(tmp_path, None)


def test_output_marker_timestamps_the_announcement(tmp_path):
    (tmp_path / "stdout").write_text("starting\n")
    marker = OutputMarker(r"Running I/O for (\d+) seconds", interval_s=0.01)
    marker.start(tmp_path)
    time.sleep(0.05)
    before = time.time_ns()
    with open(tmp_path / "stdout", "a") as out:
        out.write("Running I/O for 10 seconds...\r  12.00 IOPS\r")
    time.sleep(0.1)
    marker.stop(tmp_path)
    mark = json.loads((tmp_path / "marker.json").read_text())
    assert mark["line"] == "Running I/O for 10 seconds..." and before <= mark["time_ns"]


# --- hugepages -------------------------------------------------------------------------------

def test_hugepages_snapshot_at_start_and_stop(fake_sysroot, tmp_path):
    root = fake_sysroot()
    (root.proc / "meminfo").write_text(
        "MemTotal:  2113871872 kB\nAnonHugePages:   6144 kB\nHugePages_Total:    1024\n"
        "HugePages_Free:     1024\nHugepagesize:       2048 kB\nHugetlb:  2097152 kB\n")
    pool = root.sys / "kernel/mm/hugepages/hugepages-2048kB"
    pool.mkdir(parents=True)
    (pool / "nr_hugepages").write_text("1024\n")
    (pool / "free_hugepages").write_text("1024\n")
    collector = Hugepages(root)
    collector.start(tmp_path)
    (pool / "free_hugepages").write_text("0\n")
    collector.stop(tmp_path)
    record = json.loads((tmp_path / "hugepages.json").read_text())
    assert record["start"]["meminfo"] == {"AnonHugePages_kib": 6144, "HugePages_Total": 1024,
                                          "HugePages_Free": 1024, "Hugepagesize_kib": 2048,
                                          "Hugetlb_kib": 2097152}
    assert record["start"]["pools"] == {"hugepages-2048kB": {"nr_hugepages": 1024,
                                                             "free_hugepages": 1024}}
    assert record["stop"]["pools"]["hugepages-2048kB"]["free_hugepages"] == 0
    assert record["start"]["time_ns"] <= record["stop"]["time_ns"]


def test_hugepages_on_this_host(tmp_path):
    collector = Hugepages()
    collector.start(tmp_path)
    collector.stop(tmp_path)
    record = json.loads((tmp_path / "hugepages.json").read_text())
    assert "HugePages_Total" in record["start"]["meminfo"]
    assert set(record["stop"]) == {"time_ns", "meminfo", "pools"}


# --- stress-ng -------------------------------------------------------------------------------

def test_unused_cpus():
    assert unused_cpus(list(range(8)), [0, 2, 3]) == [1, 4, 5, 6, 7]
    assert unused_cpus([0, 1], [1, 0]) == []


def test_stress_refuses_an_empty_cpu_list():
    with pytest.raises(InputError, match="nothing left to stress"):
        StressNg([], 10)


def test_stress_argv():
    assert StressNg([3, 1, 2, 7], 10).argv() == [
        "stress-ng", "--cpu", "4", "--taskset", "1-3,7", "--timeout", "15s", "--metrics-brief"]
    assert StressNg([1], 0.4).argv()[6] == "6s"


def test_stress_without_stress_ng(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolError, match="apt-get install stress-ng"):
        StressNg([1], 1).start(tmp_path)


def test_stress_refuses_cpus_outside_the_affinity(tmp_path):
    if shutil.which("stress-ng") is None:
        pytest.skip("stress-ng is not installed")
    with pytest.raises(InputError, match="4096"):
        StressNg([4096], 1).start(tmp_path)
    assert not (tmp_path / "stress-ng.out").exists()


def _group_affinities(pgid: int) -> list[set[int]]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
            if entry.name.isdigit() and int(fields[2]) == pgid:
                found.append(os.sched_getaffinity(int(entry.name)))
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("stress-ng") is None or 1 not in os.sched_getaffinity(0),
                    reason="needs stress-ng and CPU 1")
def test_stress_runs_pinned_and_stops(tmp_path):
    stress = StressNg([1], 1.0)
    stress.start(tmp_path)
    pgid = stress._proc.pid
    time.sleep(1.0)
    affinities = _group_affinities(pgid)
    stress.stop(tmp_path)
    # The parent and its worker, both on CPU 1 only.
    assert len(affinities) >= 2 and all(a == {1} for a in affinities)
    record = json.loads((tmp_path / "stress-ng.json").read_text())
    assert record["cpus"] == [1] and record["cpulist"] == "1"
    assert record["argv"][1:] == ["--cpu", "1", "--taskset", "1", "--timeout", "6s",
                                  "--metrics-brief"]
    assert record["exit_status"] == 0 and record["signal"] is None
    assert record["ended_before_stop"] is False and record["killed"] is False
    assert record["stopped_ns"] - record["started_ns"] > 0.9e9  # it ran until stopped
    assert "dispatching hogs: 1 cpu" in (tmp_path / "stress-ng.out").read_text()
    assert _group_affinities(pgid) == []


GOOD_STRESS = {"argv": ["/usr/bin/stress-ng", "--cpu", "1", "--taskset", "1", "--timeout", "6s",
                        "--metrics-brief"], "cpus": [1], "cpulist": "1", "seconds": 1.0,
               "ended_before_stop": False, "killed": False, "exit_status": 0,
               "started_ns": 10**18, "stopped_ns": 10**18 + 2 * 10**9}
STRESS_METRICS = {k: GOOD_STRESS[k] for k in ("cpulist", "ended_before_stop", "killed",
                                              "exit_status")}


@pytest.mark.parametrize("change, problem", [
    ({"killed": "no"}, "killed is 'no' (allowed: true or false)"),
    ({"ended_before_stop": None}, "ended_before_stop is None (allowed: true or false)"),
    ({"exit_status": -1}, "exit_status is -1 (allowed: null or a whole number 0 to 255)"),
    ({"exit_status": True}, "exit_status is True (allowed: null or a whole number 0 to 255)"),
    ({"cpulist": "0-99999999999,x"}, "cpulist is '0-99999999999,x' (allowed: a CPU list such "
     "as 1,3-5)"),
    ({"cpulist": "\u00b2"}, "cpulist is '\u00b2' (allowed: a CPU list such as 1,3-5)"),
    ({"cpulist": ...}, "has no cpulist (allowed: a CPU list such as 1,3-5)"),
])
def test_stress_parse_refuses_a_record_it_did_not_write(tmp_path, change, problem):
    """stress-ng.json is read back as any output is: a missing key was a KeyError and a
    wrong type went into the run's metrics. (``...`` leaves the key out.)"""
    record = {k: v for k, v in {**GOOD_STRESS, **change}.items() if v is not ...}
    (tmp_path / "stress-ng.json").write_text(json.dumps(record))
    with pytest.raises(ParseError) as info:
        StressNg.parse(tmp_path, None)
    assert str(info.value) == f"{tmp_path}/stress-ng.json: {problem}"


def test_stress_parse_names_a_record_that_is_not_json(tmp_path):
    (tmp_path / "stress-ng.json").write_text('{"cpulist": "1"')
    with pytest.raises(ParseError, match="stress-ng.json: not JSON"):
        StressNg.parse(tmp_path, None)
    (tmp_path / "stress-ng.json").write_text(json.dumps(GOOD_STRESS))
    assert StressNg.parse(tmp_path, None) == STRESS_METRICS


def _taskset(cpus: str) -> list[str]:
    argv = list(GOOD_STRESS["argv"])
    argv[4] = cpus
    return argv


@pytest.mark.parametrize("change, problem", [
    # the load pinned to CPU 0 (the tool's) was stored as stress on CPU 1
    ({"argv": _taskset("0")}, r"argv '/usr/bin/stress-ng --cpu 1 --taskset 0 .* is not the "
     r"load of the record's cpus and seconds \(allowed: '/usr/bin/stress-ng --cpu 1 "
     r"--taskset 1 --timeout 6s --metrics-brief'\)"),
    ({"cpus": [2]}, r"cpulist '1' is not the record's cpus \[2\] \(allowed: '2'\)"),
    ({"seconds": 30.0}, r"argv .* is not the load of the record's cpus and seconds"),
    ({"cpus": []}, r"cpus is \[\] \(allowed: a list of CPU ids"),
    ({"argv": ...}, r"has no argv \(allowed: the stress-ng command line"),
])
def test_stress_parse_refuses_a_record_that_contradicts_itself(tmp_path, change, problem):
    record = {k: v for k, v in {**GOOD_STRESS, **change}.items() if v is not ...}
    (tmp_path / "stress-ng.json").write_text(json.dumps(record))
    with pytest.raises(ParseError, match=f"^{tmp_path}/stress-ng.json: {problem}"):
        StressNg.parse(tmp_path, None)


def test_stress_parse_refuses_a_load_on_the_tools_own_cpus(tmp_path):
    record = {**GOOD_STRESS, "argv": _taskset("0"), "cpus": [0], "cpulist": "0"}
    (tmp_path / "stress-ng.json").write_text(json.dumps(record))
    assert StressNg.parse(tmp_path, None)["cpulist"] == "0"   # no run CPUs known: nothing to clash
    (tmp_path / "cpus.json").write_text('{"cpus": [0], "mask": "0x1"}\n')
    with pytest.raises(ParseError, match=r"stress-ng.json: the load ran on CPU\(s\) 0, which "
                                         r"the run's tool was pinned to \(cpus.json: 0; "
                                         r"allowed: CPUs the run leaves idle\)"):
        StressNg.parse(tmp_path, None)
    (tmp_path / "stress-ng.json").write_text(json.dumps(GOOD_STRESS))
    assert StressNg.parse(tmp_path, None) == STRESS_METRICS


@pytest.mark.parametrize("change, problem", [
    # probe 9, Q17: a stressor that exited with status 2 10 ms after it started was stored as
    # a stressed sample
    ({"exit_status": 2, "ended_before_stop": True, "stopped_ns": 10**18 + 10**7},
     r"ended_before_stop is true: the load ended by itself during the run \(exit_status 2; "
     r"allowed: a load that lasts until stopped"),
    ({"exit_status": 2}, r"exit_status is 2: stress-ng reported a failure"),
    ({"stopped_ns": 10**18 + 10**7}, r"the snapshots span .* which does not bracket the run's "
                                     r"window"),
    ({"started_ns": "soon"}, r"started_ns is 'soon' \(allowed: whole nanoseconds"),
])
def test_stress_parse_refuses_a_load_that_did_not_last_the_run(tmp_path, change, problem):
    (tmp_path / "driver-window.json").write_text(
        f'{{"start_ns": {10**18 + 10**6}, "end_ns": {10**18 + 19 * 10**8}}}')
    (tmp_path / "stress-ng.json").write_text(json.dumps(GOOD_STRESS))
    assert StressNg.parse(tmp_path, None) == STRESS_METRICS
    (tmp_path / "stress-ng.json").write_text(json.dumps({**GOOD_STRESS, **change}))
    with pytest.raises(ParseError, match=f"^{tmp_path}/stress-ng.json: {problem}"):
        StressNg.parse(tmp_path, None)


def test_stress_parse_takes_a_load_the_stop_signal_ended():
    out = {"ended_before_stop": False, "exit_status": None}
    check_lasted({**GOOD_STRESS, "exit_status": None, "signal": 15}, out, None, "s")


# --- GNU time --------------------------------------------------------------------------------

needs_gnu_time = pytest.mark.skipif(not os.access(GNU_TIME, os.X_OK),
                                    reason=f"{GNU_TIME} (Debian package 'time') is missing")


def _timed(tmp_path, argv: list[str]) -> tuple[int, dict]:
    out = tmp_path / "time.out"
    done = subprocess.run(gnu_time_prefix(out) + argv, check=False)
    return done.returncode, parse_gnu_time_kv(out.read_text(), str(out))


@needs_gnu_time
def test_gnu_time_on_success(tmp_path):
    code, values = _timed(tmp_path, ["true"])
    assert code == 0
    assert values["exit"] == 0 and values["signal"] is None
    assert values["maxrss_kib"] > 0 and values["elapsed_s"] >= 0
    assert values["cpu_pct"] is None or values["cpu_pct"] >= 0
    assert set(values) == {line.split("=")[0] for line in GNU_TIME_FORMAT.splitlines()} | {"signal"}


@needs_gnu_time
def test_gnu_time_on_non_zero_exit(tmp_path):
    code, values = _timed(tmp_path, ["sh", "-c", "exit 3"])
    assert code == 3
    assert (tmp_path / "time.out").read_text().startswith(
        "Command exited with non-zero status 3\n")
    assert values["exit"] == 3 and values["signal"] is None


@needs_gnu_time
def test_gnu_time_on_a_signal(tmp_path):
    code, values = _timed(tmp_path, ["sh", "-c", "kill -9 $$"])
    assert code == 128 + 9
    assert values["exit"] is None and values["signal"] == 9


GOOD = "\n".join(f"{line.split('=')[0]}=0" for line in GNU_TIME_FORMAT.splitlines()) + "\n"


def test_parse_gnu_time_values_and_unknown_cpu():
    text = GOOD.replace("user_s=0", "user_s=10.02").replace("cpu_pct=0", "cpu_pct=398%")
    values = parse_gnu_time_kv(text)
    assert values["user_s"] == 10.02 and values["cpu_pct"] == 398
    assert parse_gnu_time_kv(GOOD.replace("cpu_pct=0", "cpu_pct=?%"))["cpu_pct"] is None


@pytest.mark.parametrize("text, problem", [
    ("", "missing user_s"),
    (GOOD.replace("exit=0\n", ""), "missing exit"),
    (GOOD + "exit=0\n", "line 14: 'exit' appears twice"),
    (GOOD.replace("maxrss_kib=0", "maxrss_kib=12k"), "line 5: 'maxrss_kib'"),
    # float() takes nan, -inf and 1e999, int() a minus: GNU time prints none of them
    (GOOD.replace("user_s=0", "user_s=nan"),
     "line 1: 'user_s' has the value 'nan' \\(allowed: a number of 0 or more\\)"),
    (GOOD.replace("sys_s=0", "sys_s=-inf"), "line 2: 'sys_s' has the value '-inf'"),
    (GOOD.replace("user_s=0", "user_s=1e999"), "line 1: 'user_s' has the value '1e999'"),
    (GOOD.replace("elapsed_s=0", "elapsed_s=-3"), "line 3: 'elapsed_s' has the value '-3'"),
    (GOOD.replace("cpu_pct=0", "cpu_pct=-7%"), "line 4: 'cpu_pct' has the value '-7%'"),
    (GOOD.replace("maxrss_kib=0", "maxrss_kib=-1"),
     "line 5: 'maxrss_kib' has the value '-1' \\(allowed: a whole number of 0 or more\\)"),
    (GOOD.replace("maxrss_kib=0", "maxrss_kib=1" + "0" * 400),
     "line 5: 'maxrss_kib': an integer of about 401 digits"),
    # float() and int() take other scripts' digits and '_' between digits: GNU time prints
    # neither, so a file holding them is not GNU time's
    (GOOD.replace("user_s=0", "user_s=\u0665.\u0661\u0668"),
     "line 1: 'user_s' has the value '\u0665.\u0661\u0668'"),
    (GOOD.replace("maxrss_kib=0", "maxrss_kib=441_072"),
     "line 5: 'maxrss_kib' has the value '441_072'"),
    (GOOD.replace("elapsed_s=0", "elapsed_s=3_600.0"), "line 3: 'elapsed_s' has the value"),
    (GOOD.replace("cpu_pct=0", "cpu_pct=\u0661\u0667\u0660%"), "line 4: 'cpu_pct' has the value"),
    ("10.02user 0.79system 0:10.99elapsed 98%CPU\n", "line 1: not a GNU time line"),
    ("Command exited with non-zero status 3\n" + GOOD, "disagrees"),
])
def test_parse_gnu_time_rejects(text, problem):
    with pytest.raises(ParseError, match=problem):
        parse_gnu_time_kv(text, "run/time.out")


def test_gnu_time_parse_refuses_a_maxrss_above_the_hosts_memory(tmp_path):
    """Probe 9, Q13: maxrss_kib 999999999999999 (1 EiB) on a host of 24 GiB was stored."""
    from iolab.collectors.gnu_time import GnuTime

    run = tmp_path / "env" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "time.txt").write_text(GOOD.replace("maxrss_kib=0", "maxrss_kib=999999999999999"))
    assert GnuTime.parse(run, None)["maxrss_kib"] == 999999999999999   # no host record
    (tmp_path / "env" / "host.json").write_text('{"mem_total_kib": 24684084}')
    with pytest.raises(ParseError, match=r"time.txt: maxrss_kib=999999999999999 is above the "
                                         r"host's memory \(24684084 KiB, mem_total_kib of the "
                                         r"host record; allowed: at most that\)"):
        GnuTime.parse(run, None)
    (run / "time.txt").write_text(GOOD.replace("maxrss_kib=0", "maxrss_kib=24684084"))
    assert GnuTime.parse(run, None)["maxrss_kib"] == 24684084
    (tmp_path / "env" / "host.json").write_text('{"mem_total_kib": "lots"}')
    with pytest.raises(ParseError, match=r"host.json: mem_total_kib: expected a whole number"):
        GnuTime.parse(run, None)


def test_interrupts_counts_the_device_vectors_and_ipis_per_cpu(tmp_path):
    """Two real snapshots of this machine around a burst of disk reads (virtio1-req.0 is
    IRQ 36 there); the device's vectors come from the run's irqs.json."""
    import json

    from iolab.collectors.interrupts import Interrupts

    proc = tmp_path / "proc"
    proc.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    snapshot = (Path(__file__).parent / "fixtures/interrupts/kvm-2vcpu.txt").read_text()
    collector = Interrupts(proc)
    (proc / "interrupts").write_text(snapshot)
    collector.start(run)
    later = snapshot.replace(" 36:          0    9205477", " 36:          5    9205577")
    later = later.replace("RES:    1821497      40639", "RES:    1821507      40639")
    assert later != snapshot
    (proc / "interrupts").write_text(later)
    collector.stop(run)
    (run / "irqs.json").write_text(json.dumps({"vectors": [
        {"irq": 35, "queue": False}, {"irq": 36, "queue": True}]}))
    metrics = Interrupts.parse(run, None)
    assert metrics["device_irqs"] == '{"0": 5, "1": 100}' and metrics["device_irqs_total"] == 105
    assert metrics["res_ipis"] == '{"0": 10, "1": 0}' and metrics["res_ipis_total"] == 10
    assert metrics["cal_ipis_total"] == 0 and metrics["window_s"] >= 0
    (run / "irqs.json").unlink()
    assert Interrupts.parse(run, None)["device_irqs"] is None  # IPIs still counted


def test_interrupts_refuses_snapshots_it_cannot_read():
    from iolab.errors import ParseError
    from iolab.collectors.interrupts import parse_snapshots

    good = "# time_ns 1\n   CPU0\n 40: 1 nvme0q1\n"
    with pytest.raises(ParseError, match="interrupts.before: missing '# time_ns' header line"):
        parse_snapshots("   CPU0\n 40: 1 nvme0q1\n", good, ["40"])
    with pytest.raises(ParseError, match="IRQ\\(s\\) 41 of the device are not in both snapshots"):
        parse_snapshots(good, good, ["40", "41"])
    # a stamp no clock gives was taken: window_s 1e+290 stored as the snapshots' span
    with pytest.raises(ParseError, match=r"interrupts.after: time_ns is '10+… \(allowed: "
                                         r"whole nanoseconds 0 to 9223372036854775807\)"):
        parse_snapshots(good, good.replace("# time_ns 1", "# time_ns 1" + "0" * 299), ["40"])
    # out of order, or a pair an hour from the run it is stored with
    with pytest.raises(ParseError, match=r"interrupts: time_ns of the after snapshot \(1\) is "
                                         r"before the before snapshot's \(5\)"):
        parse_snapshots(good.replace("time_ns 1", "time_ns 5"), good, ["40"])
    late = good.replace("# time_ns 1", f"# time_ns {RUN_WINDOW[1] + 3600 * 10**9}")
    with pytest.raises(ParseError, match="interrupts: the snapshots span .* does not bracket"):
        parse_snapshots(good.replace("# time_ns 1", f"# time_ns {RUN_WINDOW[0] - 1}"), late,
                        ["40"], "interrupts", RUN_WINDOW)


def _kvm_interrupts(time_ns: int, change: tuple[str, str] = ("", "")) -> str:
    snapshot = (Path(__file__).parent / "fixtures/interrupts/kvm-2vcpu.txt").read_text()
    return f"# time_ns {time_ns}\n" + snapshot.replace(*change)


def test_interrupts_refuses_a_count_no_cpu_takes_in_the_time_between_the_snapshots():
    """Probe 9, Q4: 10^15 function-call IPIs added to CPU0 in a 4.3 s pair (2 x 10^14 a
    second) was stored as cal_ipis_total."""
    from iolab.collectors.interrupts import parse_snapshots

    before = _kvm_interrupts(RUN_WINDOW[0] - 10**8)
    bump = ("CAL:    1637417", f"CAL:    {1637417 + 10**15}")
    with pytest.raises(ParseError, match=r"^interrupts: row CAL: 1000000000000000 interrupts on "
                                         r"CPU0 in 4.2 s between the snapshots \(allowed: at "
                                         r"most 52000000, 1e\+07 a CPU a second and 1 s\)"):
        parse_snapshots(before, _kvm_interrupts(RUN_WINDOW[1] + 10**8, bump), None,
                        "interrupts", RUN_WINDOW)
    # 10^7 a second is far above any device's or IPI's rate: 4 x 10^7 in 4.2 s is taken
    busy = ("CAL:    1637417", f"CAL:    {1637417 + 4 * 10**7}")
    metrics = parse_snapshots(before, _kvm_interrupts(RUN_WINDOW[1] + 10**8, busy), None,
                              "interrupts", RUN_WINDOW)
    assert metrics["cal_ipis_total"] == 4 * 10**7


def test_interrupts_refuses_a_snapshot_cut_off_before_its_architecture_rows():
    """Probe 11's Q1: interrupts.before cut at the line before NMI (the device rows kept,
    NMI to the end gone) was stored as a sample with res_ipis and cal_ipis null: rows
    missing from one snapshot were skipped, and a missing IPI row read as None."""
    from iolab.collectors.interrupts import parse_snapshots

    whole = _kvm_interrupts(RUN_WINDOW[0] - 10**8)
    cut = whole[:whole.index("NMI:")]
    after = _kvm_interrupts(RUN_WINDOW[1] + 10**8)
    with pytest.raises(ParseError, match=r"^run/interrupts.before: has no row NMI, which "
                                         r"run/interrupts.after has \(cut off\? the kernel "
                                         r"prints every architecture row in each snapshot\)"):
        parse_snapshots(cut, after, None, "run/interrupts", RUN_WINDOW)
    with pytest.raises(ParseError, match=r"^run/interrupts.after: has no row NMI"):
        parse_snapshots(whole, after[:after.index("NMI:")], None, "run/interrupts", RUN_WINDOW)
    # a device's vector may come or go while the run runs: its row is left out
    gone = after.replace(after[after.index(" 36:"):after.index("\n", after.index(" 36:")) + 1],
                         "")
    assert parse_snapshots(whole, gone, None, "run/interrupts", RUN_WINDOW)["res_ipis_total"] == 0


def test_interrupts_refuses_a_cpu_the_host_record_lacks(tmp_path):
    from iolab.collectors.interrupts import Interrupts

    run = tmp_path / "env" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "interrupts.before").write_text(_kvm_interrupts(10**18))
    (run / "interrupts.after").write_text(_kvm_interrupts(10**18 + 10**9))
    assert Interrupts.parse(run, None)["cal_ipis_total"] == 0
    (tmp_path / "env" / "host.json").write_text('{"cpu": {"logical_cpus": 1}}')
    with pytest.raises(ParseError, match=r"interrupts: the snapshots name CPU1, on a host whose "
                                         r"record has 1 logical CPUs \(allowed: CPU0 to CPU0\)"):
        Interrupts.parse(run, None)


def test_parse_procstat_refuses_per_cpu_lines_that_are_not_the_aggregates_parts():
    """Probe 9, Q1: 998 lines 'cpuN 0 0 ...' added to both snapshots of a 2-CPU host widened
    the tick bound, and 400,000 idle ticks added to the aggregate read 18 % busy as 0.04 %."""
    from iolab.collectors.procstat import parse_procstat

    zeros = "".join(f"cpu{n} 0 0 0 0 0 0 0 0 0 0\n" for n in range(2, 1000))
    before = stat(0, "1000 0 1000 5000 0 0 0 0 0 0", extra=zeros)
    after = stat(37 * 10**8, "1150 0 1035 5555 0 0 0 0 0 0", extra=zeros).replace(
        "cpu  1150 0 1035 5555 ", "cpu  1150 0 1035 405555 ")   # the aggregate's idle alone
    with pytest.raises(ParseError, match=r"^s: idle of the aggregate cpu line changed by "
                                         r"400555 ticks between the snapshots, its 1000 CPUs' "
                                         r"lines by 555 \(allowed: the CPUs' sum, within 5 "
                                         r"ticks a CPU\)"):
        parse_procstat(before, after, "s")
    with pytest.raises(ParseError, match=r"^s: 1000 per-CPU lines, up to cpu999, on a host "
                                         r"whose record has 2 logical CPUs \(allowed: cpu0 to "
                                         r"cpu1"):
        parse_procstat(before, after, "s", host=2)


def test_parse_procstat_refuses_snapshots_listing_different_cpus():
    from iolab.collectors.procstat import parse_procstat

    with pytest.raises(ParseError, match=r"^s: the snapshots list different CPUs \(cpu2 in one "
                                         r"only"):
        parse_procstat(PAIR[0], stat(37 * 10**8, "1150 0 1035 5555 0 0 0 0 0 0", cpus=3), "s")


def test_parse_procstat_takes_the_per_cpu_lines_of_a_host_with_offline_cpus():
    from iolab.collectors.procstat import parse_procstat

    # a host record of 4 CPUs, two of them offline: /proc/stat lists the online ones
    assert parse_procstat(*PAIR, "s", host=4)["host_busy_pct"] == 25.0


@pytest.mark.parametrize("iowait, ok", [(300, False), (10, True)])
def test_parse_procstat_bounds_how_far_iowait_steps_back(iowait, ok):
    """Probe 9, Q2: iowait 300 ticks (3 s on 2 CPUs) lower after the run read a host 18 %
    busy as 30 %; the kernel's step back is a tick or so a CPU."""
    from iolab.collectors.procstat import parse_procstat

    before = stat(0, "1000 0 1000 5000 400 0 0 0 0 0")
    after = stat(37 * 10**8, f"1150 0 1035 5555 {400 - iowait} 0 0 0 0 0")
    if ok:
        assert parse_procstat(before, after, "s")["host_busy_pct"] > 0
        return
    with pytest.raises(ParseError, match=r"^s: iowait of the aggregate cpu line went down by "
                                         r"300 ticks between the snapshots \(400 -> 100; "
                                         r"allowed: at most 5 ticks a CPU, 10 on 2 CPUs\)"):
        parse_procstat(before, after, "s")


def test_procstat_parse_bounds_the_cpu_lines_by_the_host_record(tmp_path):
    from iolab.collectors.procstat import ProcStat

    run = tmp_path / "env" / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "procstat.before").write_text(f"# time_ns {RUN_WINDOW[0] - 10**8}\ncpu 0 0 0 0 0\n"
                                         "cpu0 0 0 0 0 0\ncpu7 0 0 0 0 0\n")
    (run / "procstat.after").write_text(f"# time_ns {RUN_WINDOW[1] + 10**8}\n"
                                        "cpu 420 0 0 420 0\ncpu0 210 0 0 210 0\n"
                                        "cpu7 210 0 0 210 0\n")
    (run / "driver-window.json").write_text(
        f'{{"start_ns": {RUN_WINDOW[0]}, "end_ns": {RUN_WINDOW[1]}}}')
    assert ProcStat.parse(run, None)["host_busy_pct"] == 50.0
    (tmp_path / "env" / "host.json").write_text('{"cpu": {"logical_cpus": 2}}')
    with pytest.raises(ParseError, match=r"procstat: 2 per-CPU lines, up to cpu7, on a host "
                                         r"whose record has 2 logical CPUs"):
        ProcStat.parse(run, None)
