"""The quiet-machine collector: foreign CPU and steal around a run, from snapshots of a fake
/proc (the machine's load is faked, never made)."""

from __future__ import annotations

import pytest

from iolab.collectors import quiet
from iolab.collectors.quiet import Quiet, parse_quiet, tree_ticks
from iolab.errors import ParseError

PID = 4242


def proc_stat(pid: int, ppid: int, ticks: tuple[int, int, int, int], comm: str = "iolab") -> str:
    """A /proc/<pid>/stat line with utime, stime, cutime and cstime as given."""
    before = ["S", str(ppid)] + ["0"] * 9          # state ppid pgrp ... cmajflt
    return f"{pid} ({comm}) " + " ".join(before + [str(t) for t in ticks] + ["20", "0"]) + "\n"


def fake_proc(root, cpu: list[int], tree: dict[int, tuple[int, tuple]],
              load: str = "0.10 0.20 0.30 1/100 999"):
    """A /proc of one CPU with an aggregate cpu line (user nice system idle iowait irq
    softirq steal) and cpu0's the same, the load averages, and processes {pid: (ppid, (utime, stime, cutime,
    cstime))}."""
    root.mkdir(exist_ok=True)
    line = " ".join(map(str, cpu))
    (root / "stat").write_text(f"cpu  {line} 0 0\ncpu0 {line} 0 0\nintr 1\n")
    (root / "loadavg").write_text(load + "\n")
    for old in root.glob("[0-9]*"):
        (old / "stat").unlink()
        old.rmdir()
    for pid, (ppid, ticks) in tree.items():
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(proc_stat(pid, ppid, ticks))
    return root


def snap(time_ns: int, tree: int, cpu: list[int], cpus: int = 10) -> str:
    """A snapshot of a host of ``cpus`` CPUs (1000 ticks a second with the default 10), all
    the aggregate's ticks cpu0's (so the CPUs' lines add up to it)."""
    line = " ".join(map(str, cpu))
    each = "".join(f"cpu{n} {line if n == 0 else '0 0 0 0 0 0 0 0'} 0 0\n" for n in range(cpus))
    return f"# time_ns {time_ns}\n# tree_ticks {tree}\ncpu  {' '.join(map(str, cpu))} 0 0\n{each}"


def test_foreign_cpu_is_the_hosts_busy_ticks_beyond_the_tree():
    # 1000 ticks in all: 300 busy (user 200, system 80, softirq 20), 150 of them the tree's
    before = snap(0, 1000, [0, 0, 0, 0, 0, 0, 0, 0])
    after = snap(10**9, 1150, [200, 0, 80, 650, 50, 0, 20, 0])
    out = parse_quiet(before, after)
    assert out["foreign_cpu_pct"] == pytest.approx(15.0)
    assert out["steal_pct"] == 0
    assert out["foreign_load"] is True        # above the stated 10 %


def test_a_quiet_host_is_not_marked_and_steal_alone_marks_it():
    base = snap(0, 0, [0] * 8)
    calm = parse_quiet(base, snap(10**9, 95, [90, 0, 10, 900, 0, 0, 0, 0]))
    assert calm["foreign_cpu_pct"] == pytest.approx(0.5) and calm["foreign_load"] is False
    stolen = parse_quiet(base, snap(10**9, 100, [100, 0, 0, 800, 0, 0, 0, 100]))
    assert stolen["steal_pct"] == pytest.approx(10.0) and stolen["foreign_load"] is True


def test_the_tree_using_a_tick_more_than_the_host_counted_is_no_foreign_cpu():
    out = parse_quiet(snap(0, 0, [0] * 8), snap(10**9, 102, [100, 0, 0, 900, 0, 0, 0, 0]))
    assert out["foreign_cpu_pct"] == 0


def test_no_ticks_between_the_snapshots_fail_the_run_never_mark_it_quiet():
    # a NaN share gave foreign_load False: the run counted as made on a quiet machine
    same = snap(0, 5, [1] * 8)
    with pytest.raises(ParseError, match=r"^run/quiet: no CPU tick passed between"):
        parse_quiet(same, same, "run/quiet")


def test_a_tree_using_far_more_than_the_hosts_busy_ticks_is_refused():
    # 99999999 ticks of the tree over 1000 of the host read as no foreign CPU at all
    before = snap(0, 0, [0] * 8)
    with pytest.raises(ParseError, match=r"tree used 99999999 ticks .* host's 300 busy ticks "
                                         r"\(allowed: at most 100 more"):
        parse_quiet(before, snap(10**9, 99999999, [200, 0, 80, 700, 0, 0, 20, 0]), "q")
    # the two clocks' difference is allowed: the tree 20 ticks above the host's 300
    out = parse_quiet(before, snap(10**9, 320, [200, 0, 80, 700, 0, 0, 20, 0]), "q")
    assert out["foreign_cpu_pct"] == 0
    with pytest.raises(ParseError, match=r"tree used 401 ticks"):
        parse_quiet(before, snap(10**9, 401, [200, 0, 80, 700, 0, 0, 20, 0]), "q")


def test_a_tree_a_few_percent_above_the_hosts_busy_ticks_is_a_real_run():
    """The first run of a fresh clone's 'iolab run' on a KVM guest failed as unparsable: its
    tree used 768 ticks against the host's 737 busy ones of 810 (a fio child reaped in the
    window brings its whole life into the tree's count), above the 2 % then allowed."""
    before = snap(0, 0, [0] * 8, cpus=2)
    after = snap(4 * 10**9, 768, [600, 0, 137, 73, 0, 0, 0, 0], cpus=2)   # 2 CPUs, 4 s
    out = parse_quiet(before, after, "q")
    assert out["foreign_cpu_pct"] == 0


W = (10**18, 10**18 + 4 * 10**9)   # a run's window of 4 s


@pytest.mark.parametrize("t0, t1", [
    (W[0] - 10**8, W[1] + 3600 * 10**9),      # the after snapshot an hour after the run
    (W[0] - 3600 * 10**9, W[1] + 10**8),      # the before snapshot an hour before it
    (W[0] + 10**9, W[1] + 10**8),             # taken once the run had started
    (W[0] - 10**8, W[1] - 10**9),             # taken before the run ended
    (W[0] - 10**8, W[0] - 10**8),             # a zero-width pair before the run
])
def test_snapshots_that_do_not_bracket_the_runs_window_are_refused(t0, t1):
    before, after = snap(t0, 0, [0] * 8), snap(t1, 50, [100, 0, 0, 900, 0, 0, 0, 0])
    with pytest.raises(ParseError, match=r"^q: the snapshots span .* which does not bracket "
                                         r"the run's window .*allowed: .* 60 s"):
        parse_quiet(before, after, "q", W)


def test_snapshots_just_around_the_window_are_the_runs_reading():
    before = snap(W[0] - 10**8, 0, [0] * 8, cpus=2)
    after = snap(W[1] + 10**8, 50, [100, 0, 0, 900] + [0] * 4, cpus=2)
    assert parse_quiet(before, after, "q", W)["foreign_cpu_pct"] == pytest.approx(5.0)


def test_the_collector_checks_its_pair_against_the_drivers_window(tmp_path):
    # the driver's window (driver-window.json) is the one the snapshots bracket, not the
    # tool's measurement window it is given, which leaves out set-up and ramp
    (tmp_path / "quiet.before").write_text(snap(W[0] - 10**8, 0, [0] * 8))
    (tmp_path / "quiet.after").write_text(snap(W[1] + 3600 * 10**9, 50, [100, 0, 0, 900] + [0] * 4))
    (tmp_path / "driver-window.json").write_text(f'{{"start_ns": {W[0]}, "end_ns": {W[1]}}}')
    with pytest.raises(ParseError, match="does not bracket the run's window"):
        Quiet.parse(tmp_path, (W[0] + 10**9, W[1] - 10**9))


@pytest.mark.parametrize("before, after, what", [
    (snap(0, 10, [5] * 8), snap(1, 9, [6] * 8), "tree_ticks"),
    (snap(0, 10, [5] * 8), snap(1, 11, [6, 6, 6, 6, 6, 6, 6, 4]), "steal"),
    (snap(5, 10, [5] * 8), snap(1, 11, [6] * 8), "time_ns"),
])
def test_counters_that_go_down_are_refused(before, after, what):
    with pytest.raises(ParseError, match=what):
        parse_quiet(before, after, "run/quiet")


def test_a_snapshot_without_the_tree_line_is_refused_naming_it():
    with pytest.raises(ParseError, match=r"quiet.before.*tree_ticks"):
        parse_quiet("# time_ns 1\ncpu  1 2 3 4 5 6 7 8\n", snap(2, 1, [9] * 8))


# a pair 3.7 s apart on 2 CPUs: 740 ticks, 140 busy, 40 of them the tree's
CALM = [100, 0, 40, 600, 0, 0, 0, 0]


def test_ticks_the_time_between_the_snapshots_cannot_hold_are_refused():
    before = snap(0, 0, [0] * 8, cpus=2)
    assert parse_quiet(before, snap(37 * 10**8, 40, CALM, cpus=2), "q")["foreign_load"] is True
    # 10^9 idle ticks added read as 0.0000024 % foreign CPU: a quiet machine
    flooded = snap(37 * 10**8, 40, [100, 0, 40, 600 + 10**9, 0, 0, 0, 0], cpus=2)
    with pytest.raises(ParseError, match=r"^q: 1000000740 CPU ticks between snapshots 3.7 s "
                                         r"apart on 2 CPUs \(allowed: 360 to 935"):
        parse_quiet(before, flooded, "q")
    with pytest.raises(ParseError, match=r"^q: 240 CPU ticks .* on 2 CPUs"):
        parse_quiet(before, snap(37 * 10**8, 40, [100, 0, 40, 100, 0, 0, 0, 0], cpus=2), "q")


def test_a_snapshot_with_a_cpu_line_twice_is_refused():
    # the second aggregate line was taken without a word
    after = snap(37 * 10**8, 40, CALM, cpus=2).replace("cpu0", f"cpu  {' '.join(['9'] * 10)}\ncpu0")
    with pytest.raises(ParseError, match=r"^q.after: line 4: 'cpu' listed twice \(first on "
                                         r"line 3"):
        parse_quiet(snap(0, 0, [0] * 8, cpus=2), after, "q")


def test_the_collector_bounds_snapshots_without_per_cpu_lines_by_the_host_record(tmp_path):
    # the committed snapshots kept the aggregate line only: the host record counts the CPUs
    run = tmp_path / "env" / "runs" / "r0"
    run.mkdir(parents=True)
    (run / "quiet.before").write_text(snap(0, 0, [0] * 8, cpus=0))
    (run / "quiet.after").write_text(snap(37 * 10**8, 40, CALM, cpus=0))
    with pytest.raises(ParseError, match=r"quiet.after: no per-CPU line .* and no host record"):
        Quiet.parse(run, None)
    host = tmp_path / "env" / "host.json"
    host.write_text('{"cpu": {"logical_cpus": 2}}')
    assert Quiet.parse(run, None)["foreign_load"] is True
    host.write_text('{"cpu": {"logical_cpus": 1}}')
    with pytest.raises(ParseError, match=r"740 CPU ticks .* on 1 CPUs"):
        Quiet.parse(run, None)
    host.write_text('{"cpu": {"logical_cpus": "2"}}')
    with pytest.raises(ParseError, match=r"host.json: cpu.logical_cpus: expected a whole number"):
        Quiet.parse(run, None)


def test_the_tree_counts_live_descendants_and_what_they_reaped_but_no_stranger(tmp_path):
    proc = fake_proc(tmp_path / "proc", [0] * 8, {
        PID: (1, (10, 5, 100, 20)),          # iolab, with the ticks of children it reaped
        PID + 1: (PID, (30, 3, 0, 0)),       # the driver
        PID + 2: (PID + 1, (7, 1, 2, 0)),    # its child (fio's job)
        PID + 3: (1, (1000, 1000, 0, 0)),    # someone else's compile
    })
    assert tree_ticks(PID, proc) == 135 + 33 + 10


def test_the_collector_writes_snapshots_its_parser_reads(tmp_path, quiet_clock):
    quiet_clock += [0, 10 * 10**9]   # 1000 ticks of one CPU: 10 s
    proc = fake_proc(tmp_path / "proc", [0] * 8, {PID: (1, (0, 0, 0, 0))})
    run = tmp_path / "run"
    run.mkdir()
    collector = Quiet(proc=proc, root_pid=PID)
    collector.start(run)
    # the run: the tree used 100 ticks, another process 300, of 1000
    fake_proc(proc, [350, 0, 50, 600, 0, 0, 0, 0], {PID: (1, (60, 40, 0, 0))})
    collector.stop(run)
    out = Quiet.parse(run, None)
    assert out["foreign_cpu_pct"] == pytest.approx(30.0) and out["foreign_load"] is True


def test_the_live_sample_reads_the_same_quantities_over_its_wait(tmp_path, quiet_clock):
    quiet_clock += [0, 2 * 10**9]    # 200 ticks of one CPU: 2 s
    proc = fake_proc(tmp_path / "proc", [0] * 8, {PID: (1, (0, 0, 0, 0))},
                     load="1.50 0.80 0.40 2/150 1234")

    def busy_meanwhile(seconds):
        fake_proc(proc, [100, 0, 20, 80, 0, 0, 0, 0], {PID: (1, (0, 0, 0, 0))},
                  load="1.50 0.80 0.40 2/150 1234")

    out = quiet.sample(2.0, proc, root_pid=PID, sleep=busy_meanwhile)
    assert out["foreign_cpu_pct"] == pytest.approx(60.0)
    assert quiet.load_average(proc) == 1.5


@pytest.mark.parametrize("first", ["nan", "inf", "-5", "-0.5", "\u0661\u0662", "1_0",
                                   "9" * 400])
def test_a_load_average_the_kernel_never_prints_is_refused(tmp_path, first):
    """Probe 10, Q16: float() took nan (which passes every "too busy" comparison, so read as
    a quiet machine), -5, other scripts' digits and '1_0'."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "loadavg").write_text(f"{first} 0.10 0.10 1/100 5\n")
    with pytest.raises(ParseError, match="is not a load average") as err:
        quiet.load_average(proc)
    assert str(err.value).startswith(f"{proc / 'loadavg'}: ") and "\n" not in str(err.value)


def test_every_run_records_the_quiet_collector(demo):
    launch, collectors, _ = demo.launch({"tool": "fio", "runtime_s": 1, "ramp_s": 0,
                                         "target": "/tmp/demo.dat"},
                                        demo_point(), [])
    assert collectors[-1].name == "quiet"


def demo_point():
    return {"engine": "psync", "concurrency": 1, "thp": "asis", "pinned": False}


def test_per_cpu_lines_in_one_snapshot_only_are_refused(tmp_path):
    """Probe 9, Q3: 1,000 lines 'cpuN 0 0 ...' appended to quiet.after only (quiet.before
    has none, the host record says 2 CPUs) and 400,000 idle ticks added to its aggregate read
    3.27 % foreign CPU as 0.006 %."""
    run = tmp_path / "env" / "runs" / "r0"
    run.mkdir(parents=True)
    (tmp_path / "env" / "host.json").write_text('{"cpu": {"logical_cpus": 2}}')
    (run / "quiet.before").write_text(snap(0, 0, [0] * 8, cpus=0))
    idle = [CALM[0], CALM[1], CALM[2], CALM[3] + 400_000, *CALM[4:]]
    zeros = "".join(f"cpu{n} 0 0 0 0 0 0 0 0 0 0\n" for n in range(1000))
    (run / "quiet.after").write_text(snap(37 * 10**8, 40, idle, cpus=0) + zeros)
    with pytest.raises(ParseError, match=r"quiet: the snapshots list different CPUs \(cpu0, "
                                         r"cpu1, cpu2, cpu3, \.\.\. in one only"):
        Quiet.parse(run, None)


def test_per_cpu_lines_beyond_the_host_records_cpus_are_refused(tmp_path):
    run = tmp_path / "env" / "runs" / "r0"
    run.mkdir(parents=True)
    (tmp_path / "env" / "host.json").write_text('{"cpu": {"logical_cpus": 2}}')
    (run / "quiet.before").write_text(snap(0, 0, [0] * 8, cpus=4))
    (run / "quiet.after").write_text(snap(37 * 10**8, 40, CALM, cpus=4))
    with pytest.raises(ParseError, match=r"quiet: 4 per-CPU lines, up to cpu3, on a host whose "
                                         r"record has 2 logical CPUs"):
        Quiet.parse(run, None)


def test_iowait_stepping_back_by_seconds_is_refused():
    before = snap(0, 0, [0, 0, 0, 0, 400, 0, 0, 0], cpus=2)
    after = snap(37 * 10**8, 40, [CALM[0], CALM[1], CALM[2], CALM[3] + 300, 100, *CALM[5:]],
                 cpus=2)
    with pytest.raises(ParseError, match=r"^q: iowait of the aggregate cpu line went down by 300 "
                                         r"ticks .* at most 5 ticks a CPU, 10 on 2 CPUs"):
        parse_quiet(before, after, "q")
