"""A sample is a sample: runs whose tool wrote no output, read a metric no measurement can
have (a rate beyond any device, or 0 operations where bytes moved), or read a target file
other than the one laid out are failed runs, kept with their reason, and never stored as
samples.

Campaigns of the conftest's ``Demo`` experiment with the scripted fake fio of
tests/test_rounds.py (its ``"silent"`` and ``"replace"`` faults, IOPS of NaN, infinity or
below zero, and rates beyond any device).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import Demo
from iolab.core import tool_registry
from iolab.core.experiment import PER_S, Metric
from iolab.errors import IolabError
from iolab.execution.campaign import Campaign
from iolab.host import scratch
from iolab.host.scratch import ScratchFile
from test_rounds import ENV, campaigns, fake_fio, stored  # noqa: F401  (the fixture)

THREE = """experiment: demo
tool: fio
runtime_s: 1
repetitions: 3
base: {engine: psync, concurrency: 1, thp: asis, pinned: false}
grids:
  one: {vary: {concurrency: [1]}}
"""
TARGET_SIZE = 1 << 20


class DemoWithTarget(Demo):
    """Demo whose runs read a target file that the campaign lays out (a scratch file)."""

    def scratch_files(self, settings, points):
        return [ScratchFile("target", Path(settings["target"]), TARGET_SIZE)]


@pytest.fixture
def campaign(demo, params_dir, tmp_path):
    return campaigns(demo, params_dir, tmp_path, THREE)


def run(camp: Campaign, **options):
    """The campaign run with none of this host's knobs: another suite changing THP meanwhile
    would fail its runs as disturbed."""
    return camp.run(progress=False, knobs={}, **options)


def reasons(camp: Campaign) -> list[str]:
    """Why each failed run failed, as its manifest records it."""
    return [json.loads((d / "run.json").read_text())["failure"]
            for d in camp.store.failed_runs()]


def test_a_tool_that_writes_no_output_is_a_failed_run_and_keep_going_goes_on(campaign,
                                                                             fake_fio):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "silent", 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == ["no output: fio.json was not written (fio exited with status 0)"]
    assert len(camp.tidy()) == 2


def test_a_tool_that_writes_no_output_stops_the_campaign_without_keep_going(campaign,
                                                                            fake_fio):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "silent", 1000]})
    with pytest.raises(IolabError, match=r"failed: no output: fio\.json was not written .*"
                                         "Use --keep-going"):
        run(camp)
    assert len(stored(camp)) == 1 and len(reasons(camp)) == 1


def test_a_huge_line_on_a_failed_tools_stderr_makes_a_short_reason(campaign, fake_fio):
    """The reason quotes the stderr's last lines, each cut short: a whole 10 MB line made a
    10 MB run.json (and a 900 MB one gigabytes)."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "shout", 1000]})
    run(camp, keep_going=True)
    [reason] = reasons(camp)
    assert reason.startswith("fio exited with status 1: xxx") and len(reason) < 1000
    assert reason.endswith("… | scripted failure")


@pytest.mark.parametrize("value, read", [("nan", "nan"), ("inf", "inf"), (-5, "-5.0")])
def test_a_metric_no_measurement_can_have_fails_the_run(campaign, fake_fio, value, read):
    camp = campaign("data")
    fake_fio(camp, {1: [1000, value, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == [f"metric iops (from fio.iops) reads {read}, which no measurement "
                             "of IOPS can be"]
    df = camp.tidy()
    assert len(df) == 2 and list(df["iops"]) == [1000.0, 1000.0]


@pytest.mark.parametrize("fields, key", [({"iops": 10**400}, "jobs[0].read.iops"),
                                         ({"bw_bytes": -10**400}, "jobs[0].read.bw_bytes")])
def test_a_number_no_float_holds_fails_the_run_naming_its_key(campaign, fake_fio, fields, key):
    """An integer literal beyond 1.8e308 in the report: float() of it raised OverflowError,
    which is no ParseError, and ended the campaign, --keep-going or not, recording nothing."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, fields, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [reason] = reasons(camp)
    assert reason.startswith("output could not be parsed: ")
    assert reason.endswith(f"fio.json: {key}: an integer of about 401 digits, beyond the "
                           "largest number a measurement can hold (1.8e+308)")
    assert list(camp.tidy()["iops"]) == [1000.0, 1000.0]


def test_an_overflow_no_parser_names_still_fails_only_its_run(campaign, fake_fio, monkeypatch):
    """Numbers each a float holds can still overflow where they are summed or divided (two
    jobs of 1e308 bytes/s): the run fails with what Python says, and the campaign goes on."""
    from iolab.tools import fio

    parse = fio.parse_fio_file

    def overflowing(path):
        report = parse(path)
        if report["iops"] == 4242:
            raise OverflowError("integer division result too large for a float")
        return report

    monkeypatch.setattr(fio, "parse_fio_file", overflowing)
    camp = campaign("data")
    fake_fio(camp, {1: [1000, 4242, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == ["output holds numbers too large to compute with: integer "
                             "division result too large for a float"]


def test_a_collectors_nan_is_its_missing_value_and_no_problem(demo):
    """NaN is how a collector says it has no value (no cpufreq samples in the window); from
    the tool, or infinite or negative from anything, it is no measurement."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "fio.iops": None, "iops": math.nan}) == ""
    assert demo.sample_problem({**row, "fio.iops": math.nan, "iops": math.nan}) != ""
    demo.metrics = {**demo.metrics, "busy": Metric("busy", ("procstat.busy",))}
    assert demo.sample_problem({**row, "procstat.busy": math.nan, "busy": math.nan}) == ""
    assert demo.sample_problem({**row, "procstat.busy": -1.0, "busy": -1.0}) == (
        "metric busy (from procstat.busy) reads -1.0, which no measurement of busy can be")


@pytest.mark.parametrize("fields, reason", [
    ({"iops": 2e10}, "metric iops (from fio.iops) reads 2e+10 op/s, above what any device "
                     "this package can measure does (1e+10 operations per second)"),
    ({"bw_bytes": 2 * 10**13}, "fio.bw_bytes reads 2e+13 B/s, above what any device this "
                               "package can measure does (1e+13 bytes per second)"),
    ({"iops": 0.0, "bw_bytes": 100 * 2**20},
     "metric iops (from fio.iops) reads 0 op/s while fio.bw_bytes reads 1.04858e+08 B/s: "
     "bytes were moved, so operations were made"),
    ({"iops": 5000.0, "bw_bytes": 0}, "fio.bw_bytes reads 0 B/s while metric iops (from "
                                      "fio.iops) reads 5000 op/s: operations were made, and "
                                      "each moves bytes")])
def test_a_rate_no_device_does_fails_the_run_naming_it(campaign, fake_fio, fields, reason):
    """Rates beyond any device, or 0 operations where bytes moved (a counter never set, a
    damaged report), are no measurement: the run fails with its reason, and --keep-going goes
    on; the runs beside it, at 1,000 IOPS and 294 MiB/s, are samples."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, fields, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    assert reasons(camp) == [reason]
    assert list(camp.tidy()["iops"]) == [1000.0, 1000.0]


def test_which_rates_are_set_against_each_other_and_against_the_ceilings(demo):
    """The tool's own rates are set against each other; a metric's rate from elsewhere (a
    link's line rate, a collector's count) only against the ceilings."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "fio.bw_bytes": 4096000, "fio.mibs": 3.9,
           "iops": 1000.0}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "fio.iops": 0.0, "fio.bw_bytes": 0,
                                "fio.mibs": 0.0}) == "", "nothing moved is no contradiction"
    assert demo.sample_problem({**row, "fio.iops": 0.0, "fio.bw_bytes": 1000,
                                "fio.mibs": 0.00095}) == "", "under 1 MiB/s: rounding"
    demo.metrics = {**demo.metrics, "link_gbs": Metric("line rate", ("fio.link_gbs",), "GB/s"),
                    "rx": Metric("PCIe receive traffic", ("nvml.rx",), "B/s")}
    assert demo.sample_problem({**row, "fio.link_gbs": 0.0, "link_gbs": 0.0,
                                "nvml.rx": 9e12, "rx": 9e12}) == ""
    assert demo.sample_problem({**row, "nvml.rx": 2e13, "rx": 2e13}) == (
        "metric rx (from nvml.rx) reads 2e+13 B/s, above what any device this package can "
        "measure does (1e+13 bytes per second)")


def test_a_rate_that_rounds_to_nothing_beside_bytes_moved_makes_no_sample(demo):
    """1e-300 operations per second beside 300 MB/s escaped the rule for exactly 0: it is an
    operation of astronomical size."""
    row = {"run.tool": "fio", "fio.iops": 1e-300, "fio.bw_bytes": 308096127, "fio.mibs": 293.8,
           "iops": 1e-300}
    assert "bytes per operation, which no operation here moves" in demo.sample_problem(row)
    # a GPU copy of 256 MiB, once a second, is one
    assert demo.sample_problem({**row, "fio.iops": 1.0, "fio.bw_bytes": 2**28,
                                "fio.mibs": 256.0, "iops": 1.0}) == ""


@pytest.mark.parametrize("experiment, row", [
    ("smt_thp", {"run.tool": "fio", "bs": 4096, "fio.iops": 25530.156614,
                 "fio.bw_bytes": 104572886, "fio.mibs": 99.728}),
    ("irq_affinity", {"run.tool": "uring_reader", "bs": 4096, "uring_reader.iops": 60083.3,
                      "uring_reader.mibs": 234.701}),
    ("tool_comparison", {"run.tool": "bdevperf", "iosize": 4096, "bdevperf.iops": 14042.51,
                         "bdevperf.mibs": 54.85}),
], ids=["fio", "uring_reader", "bdevperf"])
def test_bytes_per_operation_other_than_the_runs_block_size_makes_no_sample(experiment, row):
    """A bandwidth 100 times what the IOPS of the run's 4 KiB reads give (P9, P10 of probe 6)
    was stored as a sample; only 2**34 bytes per operation was a limit. Within 25 % of the
    block size (the I/Os a tool has in flight when it stops, rates printed with 2 decimals)
    the rates agree."""
    from iolab.core import registry

    exp = registry.get(experiment)
    assert exp.sample_problem(row) == ""
    op = next(c for c in row if c.endswith(".iops"))
    for factor, refused in ((1.2, False), (0.8, False), (1.3, True), (0.7, True), (0.5, True),
                            (100, True)):
        got = exp.sample_problem({**row, op: row[op] / factor})
        assert bool(got) == refused, (factor, got)
    got = exp.sample_problem({**row, op: row[op] / 100})
    assert f"per operation, where each of the run's moves 4096 bytes ({exp.operation_size}; " \
           "allowed: within 25%)" in got, got


def test_every_operation_size_is_a_variable_of_its_experiment():
    from iolab.core import registry

    sized = [exp for exp in registry.all_experiments() if exp.operation_size]
    assert {exp.name for exp in sized} >= {"smt_thp", "irq_affinity", "tool_comparison",
                                           "cpu_search"}
    for exp in sized:
        assert exp.operation_size in exp.variables, exp.name


@pytest.mark.parametrize("fields, reason", [
    ({"total_ios": 5}, "jobs[0].read: iops 75218.8 over runtime 20 ms makes 1504.4 I/Os, "
                       "but total_ios is 5"),
    ({"bw_bytes": 30809612700, "io_bytes": 308404224},
     "jobs[0].read: io_bytes 308404224 over runtime 20 ms is 15420211200 B/s, but bw_bytes "
     "is 30809612700"),
    ({"clat_ns": {**json.loads(Path(__file__).with_name("fixtures").joinpath(
        "fio", "io_uring_randread_4k_qd16.jsonplus.json").read_text())["jobs"][0]["read"][
        "clat_ns"], "mean": 5e6, "max": 200_000}},
     "jobs[0].read.clat_ns: mean 5e+06 with min 143 and max 200000"),
], ids=["total_ios 5", "bw_bytes x100", "mean above max"])
def test_a_report_that_contradicts_itself_fails_its_run(campaign, fake_fio, fields, reason):
    """P7-P9 of probe 6: each of these reports was stored as a sample; the run now fails with
    the contradiction, and --keep-going goes on."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, fields, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [got] = reasons(camp)
    assert got.startswith("output could not be parsed: ") and f"fio.json: {reason}" in got, got
    assert list(camp.tidy()["iops"]) == [1000.0, 1000.0]


def test_every_adapters_rates_have_a_unit_of_rate():
    for adapter in tool_registry.ADAPTERS.values():
        assert set(adapter.rates.values()) <= set(PER_S), adapter.name


def test_another_jobs_report_is_a_failed_run_and_keep_going_goes_on(campaign, fake_fio):
    """A report whose job ran with another name, file or options (one left by another job)
    was stored as this run's sample."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "foreign", 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [reason] = reasons(camp)
    assert reason == ("fio.json is not this run's report: its jobs[0] ran with filename "
                      "'/var/tmp/fiowork/data', the run gave fio '/tmp/demo.dat'")
    assert len(camp.tidy()) == 2


def test_a_target_replaced_during_a_run_fails_it_and_stops_the_campaign(params_dir, tmp_path,
                                                                      fake_fio):
    target = tmp_path / "target.dat"
    camp = Campaign(DemoWithTarget(), ENV, data_dir=tmp_path / "data",
                    params_dir=params_dir({ENV: THREE}), overrides={"target": str(target)})
    fake_fio(camp, {1: [1000, "replace", 1000]})
    with pytest.raises(IolabError) as info:
        run(camp, keep_going=True)
    [reason] = reasons(camp)
    assert reason.startswith(f"target {target} (target) changed during the run: it was ")
    assert reason.endswith("; the run did not read the file iolab laid out")
    # the next run reads nothing: the file is not ours, and the message says what happened
    message = str(info.value)
    assert message.startswith(f"key 'target': {target} changed during the campaign: it was ")
    assert (f"no further run reads it. {target} exists, and is a file that is not in the "
            "registry of files iolab wrote") in message
    assert message.endswith("The runs stored before are kept.")
    assert len(stored(camp)) == 1, "only the run before the replacement is a sample"
    assert scratch.Registry().entry(target) is None, "the new file is not taken for ours"


def test_a_target_removed_between_runs_stops_the_campaign_before_the_next(params_dir, tmp_path,
                                                                         fake_fio, monkeypatch):
    target = tmp_path / "target.dat"
    camp = Campaign(DemoWithTarget(), ENV, data_dir=tmp_path / "data",
                    params_dir=params_dir({ENV: THREE}), overrides={"target": str(target)})
    fake_fio(camp, {1: [1000, 1000, 1000]})
    from iolab.execution.one_run import RunMaker

    real = RunMaker.run_one
    removals = [target]

    def then_remove(self, session, planned):  # someone removes it after the first run
        outcome = real(self, session, planned)
        for path in removals:
            path.unlink()
        removals.clear()
        return outcome

    monkeypatch.setattr(RunMaker, "run_one", then_remove)
    with pytest.raises(IolabError, match=f"key 'target': {target} changed during the "
                                         "campaign: it was removed; no further run reads it. "
                                         "Run the same command again to lay it out anew"):
        run(camp, keep_going=True)
    assert len(stored(camp)) == 1 and reasons(camp) == []
    assert run(camp).completed == 2, "laid out anew, the campaign goes on"


@pytest.mark.parametrize("column, value", [("fio.runtime_ms", math.nan),
                                           ("fio.njobs", -1.0), ("fio.runtime_ms", math.inf)])
def test_a_number_of_the_tools_own_that_no_measurement_can_be_makes_no_sample(column, value):
    """Not only the metrics: a NaN in a column the experiment does not read (a mean latency,
    in an experiment without one) was stored as a sample. A collector's NaN is how it says
    it has no value, and stays one."""
    from iolab.core import registry

    exp = registry.get("smt_thp")
    row = {"run.tool": "fio", "fio.iops": 1000.0, "fio.bw_bytes": 4_096_000, "iops": 1000.0,
           "fio.clat_mean_us": 50.0, "fio.njobs": 16, "fio.runtime_ms": 3000,
           "cpufreq.mean_khz": math.nan}
    assert exp.sample_problem(row) == ""
    problem = exp.sample_problem({**row, column: value})
    assert problem.startswith(f"{column} reads {value!r}, which no measurement")


def test_an_output_left_as_a_link_to_dev_zero_fails_the_run_unread(campaign, fake_fio):
    """Read through the link, /dev/zero filled the memory until the kernel killed iolab."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, "devzero", 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [reason] = reasons(camp)
    assert reason == ("the run left 'fio.json' as a symbolic link to /dev/zero, not a regular "
                      "file; it is never read")


def test_a_detached_child_of_the_tool_is_ended_before_the_run_is_sealed(campaign, fake_fio):
    """A child that outlived fio appended to the stored report after the run was sealed,
    which made the run corrupt."""
    import time

    camp = campaign("data")
    fake_fio(camp, {1: ["late", 1000, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 3 and not result.failed
    time.sleep(2.5)  # past the child's write, had it lived
    runs, corrupt = camp.store.scan(rehash=True)
    assert len(runs) == 3 and not corrupt


def _clat(**fields) -> dict:
    """The fake fio's read latencies (its fixture's clat_ns) with ``fields`` set, without the
    json+ histogram when a percentile map is given (fio then reads its map)."""
    from test_rounds import FIXTURE

    clat = json.loads(FIXTURE.read_text())["jobs"][0]["read"]["clat_ns"]
    if "percentile" in fields:
        del clat["bins"]
    return {**clat, **fields}


def test_json_nested_too_deeply_fails_only_its_run(campaign, fake_fio):
    """A report nested 50,000 deep raised RecursionError, which ended the campaign, with
    --keep-going, recording neither a run nor a failure; 200 levels are beyond any report."""
    camp = campaign("data")
    deep: list = []
    for _ in range(200):
        deep = [deep]
    fake_fio(camp, {1: [1000, {"zz": deep}, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [reason] = reasons(camp)
    assert reason.startswith("output could not be parsed: ")
    assert reason.endswith("fio.json: line 1: arrays or objects nested more than 100 levels "
                           "deep (at most 100 allowed)")


@pytest.mark.parametrize("clat, reason", [
    (_clat(mean=1e300, max=1e300), "fio.clat_mean_us reads 1e+297 µs, longer than the whole run"),
    (_clat(percentile={"50.000000": 9_000_000, "99.000000": 90_000, "99.900000": 95_000},
           max=9_000_000),
     "fio.clat_p50_us reads 9000, above fio.clat_p99_us at 90: a higher percentile "
     "is never below a lower one"),
], ids=["mean latency of 1e300 ns", "p50 above p99"])
def test_a_latency_no_run_can_have_fails_the_run_naming_it(campaign, fake_fio, clat, reason):
    """A mean latency of 3e279 years, and a median above the 99th percentile, were stored as
    samples."""
    camp = campaign("data")
    fake_fio(camp, {1: [1000, {"clat_ns": clat}, 1000]})
    result = run(camp, keep_going=True)
    assert result.completed == 2 and len(result.failed) == 1
    [got] = reasons(camp)
    assert got.startswith(reason), got
    assert list(camp.tidy()["iops"]) == [1000.0, 1000.0]


def test_a_latency_is_bounded_by_the_longest_account_of_the_run(demo):
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0, "run.duration_s": 3.05,
           "fio.runtime_ms": 3000, "fio.clat_mean_us": 2_900_000.0}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "fio.clat_mean_us": 3_100_000.0}) == (
        "fio.clat_mean_us reads 3.1e+06 µs, longer than the whole run (3.05 s), within which "
        "every timed operation began and ended")
    assert demo.sample_problem({**row, "config.runtime_s": 4, "config.ramp_s": 1,
                                "fio.clat_mean_us": 4_900_000.0}) == ""
    assert demo.sample_problem({"run.tool": "fio", "fio.clat_mean_us": 1e300}) == "", \
        "no account of the run's time: no bound"


def test_the_tools_own_runtime_is_bounded_by_the_run(demo):
    """fio.json saying fio measured for 60 s (its counts and rates made to agree) inside a
    4.285 s run was stored."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0, "run.duration_s": 4.285,
           "fio.runtime_ms": 3008}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "fio.runtime_ms": 4385}) == ""
    assert demo.sample_problem({**row, "fio.runtime_ms": 60000}) == (
        "fio.runtime_ms reads 60000, a runtime of 60 s, longer than the whole run (4.285 s, "
        "run.duration_s, allowed: up to 0.1 s more): the tool measured inside the run")
    assert demo.sample_problem({**row, "run.tool": "uring_reader",
                                "uring_reader.runtime_s": 5.0}) != ""
    assert demo.sample_problem({**row, "run.duration_s": None, "fio.runtime_ms": 60000}) == "", \
        "no wall time: no bound"


@pytest.mark.parametrize("tool, column", [("fio", "clat_p50_us"), ("fio", "clat_mean_us"),
                                          ("uring_reader", "clat_max_us")])
def test_a_latency_of_zero_beside_io_is_no_sample(demo, tool, column):
    """fio's and the uring reader's reports with every latency 0 ns, beside 25,530 IOPS, were
    stored with a p99 of 0 µs: no I/O completes in no time."""
    row = {"run.tool": tool, f"{tool}.iops": 1000.0, f"{tool}.{column}": 80.0,
           f"{tool}.clat_min_us": 0.0, f"{tool}.errors": 0, f"{tool}.short_reads": 0}
    assert demo.sample_problem(row) == "", "a minimum of 0 and counts of 0 are measurements"
    assert demo.sample_problem({**row, f"{tool}.{column}": 0.0}) == (
        f"{tool}.{column} reads 0 µs while the tool moved something: no I/O completes in no "
        "time")
    assert demo.sample_problem({**row, f"{tool}.iops": 0.0, f"{tool}.{column}": 0.0}) == "", \
        "nothing moved: no latency to judge"


def test_gnu_times_lifetime_of_the_tool_is_bounded_by_the_run(demo):
    """time.txt saying the tool lived 3,600 s inside a 3.7 s run was stored, and its %CPU of
    0 made cpu_usage_lifetime_pct 0."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0, "run.duration_s": 3.7,
           "gnu_time.elapsed_s": 3.68, "gnu_time.cpu_pct": 170}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "gnu_time.elapsed_s": 3.8}) == "", "within the slack"
    assert demo.sample_problem({**row, "gnu_time.elapsed_s": 3600.0}) == (
        "gnu_time.elapsed_s reads 3600 s, longer than the whole run (3.7 s, run.duration_s, "
        "allowed: up to 0.1 s more): GNU time's process ran inside the run")
    assert demo.sample_problem({**row, "gnu_time.elapsed_s": 3600.0,
                                "run.duration_s": None}) == "", "no run time: no bound"


def test_percentiles_of_one_quantity_must_not_decrease(demo):
    row = {"run.tool": "uring_reader", "uring_reader.clat_p50_us": 10.0,
           "uring_reader.clat_p90_us": 20.0, "uring_reader.clat_p99_us": 30.0,
           "uring_reader.clat_p999_us": 40.0, "uring_reader.clat_max_us": 50.0,
           "nvml.rx_p50_bytes_per_s": 5.0, "nvml.rx_p95_bytes_per_s": 9.0}
    assert demo.sample_problem(row) == ""
    assert demo.sample_problem({**row, "uring_reader.clat_max_us": 39.0}).startswith(
        "uring_reader.clat_p999_us reads 40, above uring_reader.clat_max_us at 39")
    assert demo.sample_problem({**row, "nvml.rx_p50_bytes_per_s": 10.0}).startswith(
        "nvml.rx_p50_bytes_per_s reads 10, above nvml.rx_p95_bytes_per_s at 9")
    assert demo.sample_problem({**row, "uring_reader.clat_p90_us": None}) == "", \
        "a value not there is not ordered"


def test_a_rate_beside_a_runtime_of_0_makes_no_sample(demo):
    """fio's runtime 0 beside bytes moved was stored as a sample."""
    row = {"run.tool": "fio", "fio.iops": 1000.0, "fio.bw_bytes": 4_096_000, "iops": 1000.0,
           "fio.runtime_ms": 0}
    assert demo.sample_problem(row) == ("fio.runtime_ms reads 0 while metric iops (from "
                                        "fio.iops) reads 1000 op/s: a rate needs time to move "
                                        "anything in")
    assert demo.sample_problem({**row, "fio.iops": 0.0, "fio.bw_bytes": 0, "iops": 0.0}) == ""


def test_a_cpu_share_above_every_cpu_of_the_host_makes_no_sample():
    """4,000,000 % of one CPU on a 2-CPU host was stored as a sample."""
    from iolab.core import registry

    exp = registry.get("smt_thp")
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0, "fio.usr_cpu": 12.0,
           "usr_cpu": 12.0, "fio.sys_cpu": 195.0, "sys_cpu": 195.0}
    assert exp.sample_problem(row, 2) == "", "a tick or two over 200 % on 2 CPUs is allowed"
    assert exp.sample_problem({**row, "fio.usr_cpu": 4e6, "usr_cpu": 4e6}, 2) == (
        "metric usr_cpu (from fio.usr_cpu) reads 4e+06 % of one CPU, above 210 %, all of this "
        "host's 2 CPUs with a margin of 5%")
    assert exp.sample_problem({**row, "fio.sys_cpu": 300.0, "sys_cpu": 300.0}, 2) != ""
    assert exp.sample_problem({**row, "fio.sys_cpu": 300.0, "sys_cpu": 300.0}) == "", \
        "the host's CPUs not known: up to the most a host has"
    assert "8192 CPUs, the most a host has" in exp.sample_problem(
        {**row, "fio.usr_cpu": 4e6, "usr_cpu": 4e6})
    assert exp.sample_problem({**row, "procstat.host_busy_pct": 106.0,
                               "host_busy_pct": 106.0}, 2).startswith(
        "metric host_busy_pct (from procstat.host_busy_pct) reads 106 % of all CPUs, above 105 %")


def test_user_and_system_cpu_together_above_the_host_make_no_sample():
    """fio's usr_cpu and sys_cpu are parts of one share: 150 % + 150 % on 2 CPUs was stored
    as a sample because each part alone was below 210 %."""
    from iolab.core import registry

    exp = registry.get("smt_thp")
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0, "fio.usr_cpu": 150.0,
           "usr_cpu": 150.0, "fio.sys_cpu": 150.0, "sys_cpu": 150.0}
    assert exp.sample_problem(row, 2) == (
        "fio.usr_cpu + fio.sys_cpu reads 300 % of one CPU, above 210 %, all of this host's 2 "
        "CPUs with a margin of 5%")
    assert exp.sample_problem(row, 4) == ""
    assert exp.sample_problem({**row, "fio.sys_cpu": 55.0, "sys_cpu": 55.0}, 2) == ""


@pytest.mark.parametrize("khz", [0.0, 999.0, 1e23])
def test_a_mean_frequency_no_cpu_runs_at_makes_no_sample(khz):
    """A cpufreq mean of 0 kHz or 10^23 kHz was stored as a sample; NaN is the collector's
    "no value" and stays one."""
    from iolab.core import registry

    exp = registry.get("cpu_search")
    row = {"run.tool": "fio", "fio.iops": 1000.0, "iops": 1000.0}
    assert exp.sample_problem({**row, "cpufreq.mean_khz": khz}) == (
        f"metric cpufreq_mean_khz (from cpufreq.mean_khz) reads {khz:g} kHz, outside 1000 to 1e+08 kHz (1 MHz to 100 GHz: no "
        "CPU runs outside)")
    assert exp.sample_problem({**row, "cpufreq.mean_khz": 2.4e6}) == ""
    assert exp.sample_problem({**row, "cpufreq.mean_khz": float("nan")}) == ""


def test_a_run_is_judged_against_the_cpus_of_this_host(campaign, fake_fio, monkeypatch):
    from iolab.core.experiment import Experiment
    from iolab.host.inventory import topology

    seen = []
    judge = Experiment.sample_problem
    monkeypatch.setattr(Experiment, "sample_problem",
                        lambda self, row, cpus=None: seen.append(cpus) or judge(self, row, cpus))
    camp = campaign("data")
    fake_fio(camp, {1: [1000, 1000, 1000]})
    assert run(camp).completed == 3
    assert seen == [len(topology())] * 3


def _edit_json(name: str, **change):
    """An edit of a run folder: its record ``name`` with the keys of ``change`` set."""
    def edit(run: Path) -> None:
        (run / name).write_text(json.dumps({**json.loads((run / name).read_text()), **change}))
    return edit


def _write(name: str, text: str):
    return lambda run: (run / name).write_text(text)


def _no_marker_and(name: str, text: str):
    def edit(run: Path) -> None:
        (run / "marker.json").unlink()
        (run / name).write_text(text)
    return edit


NESTED = "[" * 100_000
RUN_RECORDS = [  # (experiment, environment, edit, the file named, what the message says)
    ("irq_affinity", "xeon-2vcpu-v657", _write("irqtrace.meta.json", "{}"),
     "irqtrace.meta.json", "has no traced"),
    ("irq_affinity", "xeon-2vcpu-v657", _write("irqtrace.meta.json", NESTED),
     "irqtrace.meta.json", "nested more than 100 levels"),
    ("irq_affinity", "xeon-2vcpu-v657", _edit_json("irqtrace.meta.json", offset_ns="5"),
     "irqtrace.meta.json", "offset_ns is '5'"),
    ("irq_affinity", "xeon-2vcpu-v657", _edit_json("irqtrace.meta.json", offset_ns=1e300),
     "irqtrace.meta.json", "offset_ns is 1e+300"),
    ("irq_affinity", "xeon-2vcpu-v657", _write("irqs.json", "{}"), "irqs.json",
     "has no vectors"),
    ("irq_affinity", "xeon-2vcpu-v657", _write("irqs.json", '{"vectors": [{}]}'), "irqs.json",
     "has no vectors[0].irq"),
    ("irq_affinity", "xeon-2vcpu-v657", _write("irqs.json", NESTED), "irqs.json",
     "nested more than 100 levels"),
    ("irq_affinity", "xeon-2vcpu-v657", _edit_json("irqs.json", irq_cpus="1"), "irqs.json",
     "irq_cpus is '1'"),
    ("cpu_search", "kvm-2vcpu", _write("marker.json", "{}"), "marker.json", "has no line"),
    ("cpu_search", "kvm-2vcpu", _edit_json("marker.json", line="Starting I/O"), "marker.json",
     "line is 'Starting I/O' (allowed: bdevperf's 'Running I/O for T seconds'"),
    ("cpu_search", "kvm-2vcpu", _edit_json("marker.json", time_ns="1"), "marker.json",
     "time_ns is '1'"),
    ("cpu_search", "kvm-2vcpu", _edit_json("marker.json", time_ns=1e300), "marker.json",
     "time_ns is 1e+300"),
    ("cpu_search", "kvm-2vcpu", _write("marker.json", NESTED), "marker.json",
     "nested more than 100 levels"),
    ("cpu_search", "kvm-2vcpu",
     _edit_json("marker.json", line="Running I/O for \u0662 seconds..."), "marker.json",
     "line is 'Running I/O for \u0662 seconds...'"),
    ("cpu_search", "kvm-2vcpu", _no_marker_and("driver-window.json", "{}"),
     "driver-window.json", "has no start_ns"),
    ("cpu_search", "kvm-2vcpu", _no_marker_and("driver-window.json", "[1]"),
     "driver-window.json", "holds list"),
    ("cpu_search", "kvm-2vcpu", _no_marker_and("driver-window.json", NESTED),
     "driver-window.json", "nested more than 100 levels"),
    ("cpu_search", "kvm-2vcpu",
     _no_marker_and("driver-window.json", '{"start_ns": 1e300, "end_ns": 1e301}'),
     "driver-window.json", "start_ns is 1e+300"),
    ("cpu_search", "kvm-2vcpu",
     _no_marker_and("driver-window.json", '{"start_ns": 5, "end_ns": 4}'),
     "driver-window.json", "end_ns 4 is before start_ns 5"),
]


@pytest.mark.parametrize("experiment, environment, edit, name, problem", RUN_RECORDS)
def test_a_damaged_record_beside_a_run_fails_it_naming_the_file(tmp_path, experiment,
                                                                 environment, edit, name,
                                                                 problem):
    """What a run's output is judged by (the adapter's parse, then the experiment's row, as
    OneRun._read_output does) on a committed run with one of the records the collectors and
    the runner write beside it damaged. A KeyError, TypeError, AttributeError or
    RecursionError escaped and ended the campaign as an internal error; a time no clock
    gives (1e300) was stored as a sample with wrong counts, or a NaN metric. Now each is a
    ParseError naming the file, which fails only that run."""
    import shutil

    from iolab.core import registry
    from iolab.core.store import Store, StoredRun
    from iolab.errors import ParseError
    from iolab.paths import default_data_dir

    exp = registry.get(experiment)
    stored_run = Store(default_data_dir(), experiment, environment).complete_runs()[0]
    run = tmp_path / "run"
    shutil.copytree(stored_run.path, run)
    tool_registry.adapter(stored_run.manifest.tool).parse(run)
    exp.tidy_row(StoredRun(run, stored_run.manifest))  # as committed: a sample
    edit(run)
    with pytest.raises(ParseError) as info:
        tool_registry.adapter(stored_run.manifest.tool).parse(run)
        exp.tidy_row(StoredRun(run, stored_run.manifest))
    assert str(info.value).startswith(f"{run}/{name}: ")
    assert problem in str(info.value)
