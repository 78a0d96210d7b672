"""The irqtrace collector: its bpftrace program, the parser's window arithmetic (on a real
trace and on hand-made ones), malformed output, and a real trace where bpftrace can run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from iolab.collectors import irqtrace
from iolab.collectors.irqtrace import IrqTrace, program
from iolab.errors import IolabError, ParseError, ToolError
from iolab.parsers.irqtrace import parse_irqtrace
from iolab.tools.base import Program

FIXTURES = Path(__file__).parent / "fixtures" / "irqtrace"
ALL = {tp for tp, _, _ in irqtrace.PROBES.values()}


def test_the_program_filters_the_device_irqs_and_uses_what_the_kernel_has():
    text = program([36, 40], ALL)
    assert "tracepoint:irq:irq_handler_entry /args->irq == 36 || args->irq == 40/ " \
           "{ @irq[cpu, args->irq] = count(); }" in text
    assert "tracepoint:ipi:ipi_send_cpu /args->callback == 0/ { @resched[args->cpu] = count(); }" in text
    assert text.count('printf("@@tick %lld\\n", nsecs);') == 2  # every tick, and at the end
    without = program([36], ALL - {"io_uring:io_uring_task_add"})
    assert "@task_add" not in without and "@task_run" in without
    assert "@irq" not in program([], ALL)  # no IRQ of the device: nothing to filter on


def test_the_committed_trace_shows_remote_completions():
    """The fixture's story (see its README): interrupts on CPU 1, task work and IPIs on CPU 0."""
    meta = json.loads((FIXTURES / "irqtrace.meta.json").read_text())
    metrics = IrqTrace.parse(FIXTURES, None)
    assert metrics["traced"] and metrics["probes"] == 9 and metrics["missing_probes"] is None
    assert json.loads(metrics["irqs"]) == {"1": metrics["irqs_total"]}
    assert metrics["task_run_total"] > 0 and json.loads(metrics["task_run"]).keys() == {"0"}
    assert json.loads(metrics["call_ipis"])["0"] >= 0.9 * metrics["irqs_total"]
    assert metrics["task_add"] == "{}" and metrics["task_add_total"] == 0
    assert meta["irqs"] == [35, 36]


def trace(*ticks: tuple[int, dict]) -> str:
    lines = ['{"type": "attached_probes", "data": {"probes": 3}}']
    for t, maps in ticks:
        lines.append(json.dumps({"type": "printf", "data": f"@@tick {t}\n"}))
        lines += [json.dumps({"type": "map", "data": {name: m}}) for name, m in maps.items()]
    return "\n".join(lines) + "\n"


def test_counts_are_cut_to_whole_ticks_around_the_window():
    text = trace((100, {"@irq": {"1,36": 5}}), (200, {"@irq": {"1,36": 50}, "@resched": {"0": 2}}),
                 (300, {"@irq": {"1,36": 90}, "@resched": {"0": 9}}),
                 (400, {"@irq": {"1,36": 95}, "@resched": {"0": 9}}))
    offset = 1000
    cut = parse_irqtrace(text, offset, (1000 + 150, 1000 + 300))
    assert cut["window_ns"] == [1100, 1300] and cut["ticks"] == 4
    assert cut["counts"] == {"@irq": {(1, 36): 85}, "@resched": {(0,): 9}}
    whole = parse_irqtrace(text, offset, None)
    assert whole["counts"]["@irq"] == {(1, 36): 95} and whole["window_ns"] is None
    early = parse_irqtrace(text, offset, (1000 + 50, 1000 + 150))  # before the first tick
    assert early["window_ns"] == [None, 1200] and early["counts"]["@irq"] == {(1, 36): 50}


@pytest.mark.parametrize("text, window, problem", [
    ('{"type": "attached_probes", "data": {"probes": 3}}\n', None, "no tick"),
    (trace((100, {})), (0, 500), "the trace ends before the measurement window does"),
    (trace((100, {"@irq": {"0,1": 5}}), (200, {"@irq": {"0,1": 4}})), None, None),
    (trace((100, {"@irq": {"0,1": 5}})) + '{"type": "map", "da', None, "not a JSON object"),
    ('{"type": "printf", "data": "@@tick soon\\n"}\n', None, "a tick without a time"),
    ('{"type": "printf", "data": "@@tick ²\\n"}\n', None, "a tick without a time"),  # isdigit
    # the first and last ticks swapped: out of time order
    (trace((400, {"@irq": {"0,1": 9}}), (200, {"@irq": {"0,1": 5}}), (100, {"@irq": {"0,1": 1}})),
     None, "a tick at 200 ns follows one at 400 ns \\(allowed: ticks in time order\\)"),
])
def test_malformed_traces_are_refused(text, window, problem):
    if problem is None:  # a count that went down only shows inside a window
        with pytest.raises(ParseError, match="map @irq: a count went down between ticks"):
            parse_irqtrace(text, 0, (150, 200))
        return
    with pytest.raises(ParseError, match=problem):
        parse_irqtrace(text, 0, window, "t.json")


def test_without_bpftrace_an_optional_trace_is_skipped_and_a_required_one_refused(tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setattr(irqtrace, "BPFTRACE", Program(
        "bpftrace", str(tmp_path / "no-bpftrace"), install="install it with 'apt-get install bpftrace'"))
    with pytest.raises(ToolError, match="bpftrace not found at .*no-bpftrace; install it"):
        IrqTrace([36]).start(tmp_path)
    optional = IrqTrace([36], optional=True)
    assert optional.programs() == []  # the plan does not require it either
    optional.start(tmp_path)
    optional.stop(tmp_path)
    metrics = IrqTrace.parse(tmp_path, None)
    assert metrics["traced"] is False
    assert metrics["why_not_traced"].startswith("bpftrace not found at")


CAN_TRACE = os.geteuid() == 0 and shutil.which("bpftrace") is not None


@pytest.mark.slow
@pytest.mark.skipif(not CAN_TRACE, reason="needs root and bpftrace")
def test_a_real_trace_counts_interrupts_of_real_reads(tmp_path):
    from iolab.host.irqs import placement
    from iolab.host.knobs import SysRoot

    disk = Path(os.path.realpath("/dev/root" if Path("/dev/root").exists() else "/dev/vda"))
    try:
        vectors = placement(SysRoot(), disk.name, [0])["vectors"]
    except (IolabError, OSError) as exc:
        pytest.skip(f"no interrupt vectors for {disk.name}: {exc}")
    tracing_before = sorted(os.listdir(irqtrace.TRACING)) if irqtrace.TRACING.exists() else None
    collector = IrqTrace([v["irq"] for v in vectors])
    target = tmp_path / "t.dat"
    target.write_bytes(os.urandom(8 << 20))
    collector.start(tmp_path)
    t0 = time.time_ns()
    subprocess.run(["dd", f"if={target}", "of=/dev/null", "bs=4k", "iflag=direct"],
                   check=True, capture_output=True)
    t1 = time.time_ns()
    collector.stop(tmp_path)
    metrics = IrqTrace.parse(tmp_path, (t0, t1))
    assert metrics["traced"] and metrics["probes"] and metrics["lost_events"] == 0
    assert metrics["irqs_total"] > 0, "2048 direct reads raised no interrupt of the disk"
    # tracefs is left as it was found (mounted or not)
    assert (sorted(os.listdir(irqtrace.TRACING)) if irqtrace.TRACING.exists() else None) \
        == tracing_before


def _meta_run(tmp_path: Path, change: dict) -> Path:
    """A copy of the committed trace whose irqtrace.meta.json has ``change`` (``...`` leaves a
    key out; a str replaces the whole file)."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES, run)
    if isinstance(change, str):
        (run / irqtrace.META).write_text(change)
        return run
    meta = json.loads((FIXTURES / irqtrace.META).read_text())
    meta = {k: v for k, v in {**meta, **change}.items() if v is not ...}
    (run / irqtrace.META).write_text(json.dumps(meta))
    return run


OFFSET = "CLOCK_REALTIME minus CLOCK_MONOTONIC, whole nanoseconds 0 to 9223372036854775807"


@pytest.mark.parametrize("change, problem", [
    ("{}", "has no traced (allowed: true or false)"),
    ('{"traced": false}', "has no why (allowed: a text)"),
    ('{"traced": "yes"}', "traced is 'yes' (allowed: true or false)"),
    ("[" * 100_000, "line 1: arrays or objects nested more than 100 levels deep (at most 100 "
     "allowed)"),
    ("[1]", "holds list, not the object the collector writes"),
    ({"offset_ns": ...}, f"has no offset_ns (allowed: {OFFSET})"),
    ({"offset_ns": "5"}, f"offset_ns is '5' (allowed: {OFFSET})"),
    ({"offset_ns": 1e300}, f"offset_ns is 1e+300 (allowed: {OFFSET})"),
    ({"offset_ns": 2**63}, f"offset_ns is {2**63} (allowed: {OFFSET})"),
    ({"offset_ns": float("nan")}, f"offset_ns is nan (allowed: {OFFSET})"),
    ({"missing": 5}, "missing is 5 (allowed: a sorted list, without repeats, of the tracepoints "),
    ({"missing": ["sched:sched_switch"]}, "missing is ['sched:sched_switch'] (allowed: "),
])
def test_a_meta_record_the_collector_did_not_write_fails_the_parse_naming_it(tmp_path, change,
                                                                          problem):
    """irqtrace.meta.json is read back as any output is: a missing key or a wrong type was a
    KeyError or TypeError, and 100,000 nested '[' a RecursionError, each of which ended the
    campaign; an offset of 1e300 placed every tick at one instant, so the counts were stored
    wrong (irqs_total 5,676 read as 152)."""
    run = _meta_run(tmp_path, change)
    with pytest.raises(ParseError) as info:
        IrqTrace.parse(run, (1, 2))
    assert str(info.value).startswith(f"{run}/irqtrace.meta.json: {problem}")


def test_a_trace_far_from_the_runs_window_is_refused(tmp_path):
    run = _meta_run(tmp_path, {})
    traced = IrqTrace.parse(run, None)
    assert traced["traced"]
    offset = json.loads((run / irqtrace.META).read_text())["offset_ns"]
    ticks = [int(json.loads(line)["data"].split()[1]) + offset
             for line in (run / irqtrace.OUTPUT).read_text().splitlines() if "@@tick" in line]
    (run / "driver-window.json").write_text(json.dumps({"start_ns": ticks[0] + 10**8,
                                                        "end_ns": ticks[-1] - 10**8}))
    assert IrqTrace.parse(run, None) == traced
    hour = 3600 * 10**9
    (run / "driver-window.json").write_text(json.dumps({"start_ns": ticks[0] + hour,
                                                        "end_ns": ticks[-1] + hour}))
    with pytest.raises(ParseError, match=r"irqtrace.json: the first tick is stamped .* outside "
                                         r"the run's window"):
        IrqTrace.parse(run, None)


def test_an_untraced_run_says_why(tmp_path):
    run = _meta_run(tmp_path, '{"traced": false, "why": "bpftrace not found"}')
    assert IrqTrace.parse(run, None) == {"traced": False, "why_not_traced": "bpftrace not found"}


def _edited_trace(tmp_path, edit) -> Path:
    """The fixture run at ``<env>/runs/r1``, each map of its 5th tick on given to ``edit``."""
    run = tmp_path / "env" / "runs" / "r1"
    shutil.copytree(FIXTURES, run)
    lines, tick = [], 0
    for line in (run / irqtrace.OUTPUT).read_text().splitlines():
        event = json.loads(line)
        tick += event["type"] == "printf"
        if event["type"] == "map" and tick >= 5:
            edit(event["data"])
        lines.append(json.dumps(event))
    (run / irqtrace.OUTPUT).write_text("\n".join(lines) + "\n")
    return run


def _bump(name: str, key: str, by: int):
    def edit(maps: dict) -> None:
        if name in maps:
            maps[name][key] = maps[name].get(key, 0) + by
    return edit


def test_counts_beyond_what_the_ticks_time_holds_are_refused(tmp_path):
    """Probe 9, Q5: 10^12 function-call IPIs added to CPU 0 from a tick on (still
    never decreasing) gave call_ipis_per_io 5,547,850."""
    run = _edited_trace(tmp_path, _bump("@call", "0", 10**12))
    with pytest.raises(ParseError, match=r"irqtrace.json: map @call counts 1000000\d+ on CPU 0 "
                                         r"in [\d.]+ s of ticks \(allowed: at most \d+, 1e\+07 a "
                                         r"CPU a second and 1 s\)"):
        IrqTrace.parse(run, None)
    assert IrqTrace.parse(_edited_trace(tmp_path / "b", _bump("@call", "0", 10**6)),
                          None)["call_ipis_total"] > 10**6   # a busy CPU's is taken


def test_a_cpu_the_host_record_lacks_is_refused(tmp_path):
    """Probe 9, Q6: 5,000 IPIs to CPU 4000 of a 2-CPU host were stored in call_ipis."""
    run = _edited_trace(tmp_path, _bump("@call", "4000", 5000))
    assert json.loads(IrqTrace.parse(run, None)["call_ipis"])["4000"] > 0   # no host record
    (tmp_path / "env" / "host.json").write_text('{"cpu": {"logical_cpus": 2}}')
    with pytest.raises(ParseError, match=r"irqtrace.json: map @call counts CPU 4000, on a host "
                                         r"whose record has 2 logical CPUs \(allowed: 0 to 1\)"):
        IrqTrace.parse(run, None)
    shutil.rmtree(tmp_path / "env" / "runs")
    run = _edited_trace(tmp_path, lambda maps: None)
    assert IrqTrace.parse(run, None)["irqs_total"] > 0   # the fixture's own CPUs 0 and 1


def test_an_irq_the_program_does_not_trace_is_refused(tmp_path):
    """Probe 9, Q7: @irq key '1,99' (the program traces IRQs 35 and 36) was counted as the
    device's: irqs_per_io 0.031 read 0.531."""
    run = _edited_trace(tmp_path, _bump("@irq", "1,99", 90000))
    with pytest.raises(ParseError, match=r"irqtrace.json: map @irq counts IRQ 99 on CPU 1, "
                                         r"which the program does not trace \(allowed: the IRQs "
                                         r"of irqtrace.meta.json, \[35, 36\]\)"):
        IrqTrace.parse(run, None)


@pytest.mark.parametrize("irqs", [..., [35, 35], ["35"], [-1]])
def test_a_meta_record_without_the_traced_irqs_is_refused(tmp_path, irqs):
    run = _meta_run(tmp_path, {"irqs": irqs})
    with pytest.raises(ParseError, match=r"irqtrace.meta.json: (has no irqs|irqs is .*) "
                                         r"\(allowed: a list, without repeats, of IRQ numbers"):
        IrqTrace.parse(run, None)
