"""Every parser refuses a number no float holds with a ParseError naming its key
(``iolab.parsers.within_float``): Python reads an integer of any size, and ``float()`` of
one beyond 1.8e308, or a division of it, raised OverflowError, which is no ParseError, so
the campaign ended (exit 70) instead of failing the run with its reason.

Each case takes a fixture of the parser's own tests and puts one integer of 401 digits
(``10**400``) where a measured number is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iolab.errors import ParseError
from iolab.parsers import int_within_float, within_float
from iolab.parsers.bdevperf import parse_bdevperf_json, parse_bdevperf_text
from iolab.parsers.bpftrace import parse_bpftrace_json, parse_bpftrace_text
from iolab.parsers.cpufreq_log import aisio_cpu_freqs
from iolab.parsers.dcgm_dmon import parse_dcgm_dmon
from iolab.parsers.fio import parse_fio_json
from iolab.parsers.gnu_time import parse_gnu_time_default
from iolab.parsers.gpu_pcie_probe import parse_gpu_pcie_probe
from iolab.parsers.interrupts import parse_interrupts
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.parsers.spdk_nvme_perf import parse_spdk_nvme_perf
from iolab.parsers.uring_reader import parse_uring_reader
from iolab.parsers.xnvmeperf import parse_xnvmeperf

FIX = Path(__file__).parent / "fixtures"
HUGE = 10**400


def in_json(name: str, edit) -> str:
    doc = json.loads((FIX / name).read_text())
    edit(doc)
    return json.dumps(doc)


def in_text(name: str, pattern: str) -> str:
    """The fixture with the first match of ``pattern``'s group 1 replaced by 10**400."""
    text = (FIX / name).read_text()
    match = re.search(pattern, text, flags=re.MULTILINE)
    return text[:match.start(1)] + str(HUGE) + text[match.end(1):]


def _set(path: list, value=HUGE):
    def edit(doc):
        for step in path[:-1]:
            doc = doc[step]
        doc[path[-1]] = value
    return edit


CASES = {
    "fio iops": (parse_fio_json, lambda: in_json(
        "fio/io_uring_randread_4k_qd16.jsonplus.json", _set(["jobs", 0, "read", "iops"])),
        "jobs[0].read.iops"),
    "fio latency bin": (parse_fio_json, lambda: in_json(
        "fio/io_uring_randread_4k_qd16.jsonplus.json",
        lambda doc: doc["jobs"][0]["read"]["clat_ns"]["bins"].update({str(HUGE): 1})),
        "jobs[0].read.clat_ns.bins (a latency)"),
    "bdevperf io_failed": (parse_bdevperf_json, lambda: in_json(
        "bdevperf/perform_tests_2jobs.json", _set(["results", 0, "io_failed"])),
        "results[0].io_failed"),
    "bdevperf queue depth": (parse_bdevperf_text, lambda: in_text(
        "bdevperf/v25.09_randread_4jobs.txt", r"depth: (\d+)"), "'depth'"),
    "bpftrace count": (parse_bpftrace_json, lambda: in_text(
        "bpftrace/json_maps.ndjson", r'"probes": (\d+)'), "probes"),
    "bpftrace text value": (parse_bpftrace_text, lambda: in_text(
        "bpftrace/text_maps.txt", r"^@plain: (\d+)"), "@plain"),
    "gpu_pcie_probe bytes": (parse_gpu_pcie_probe, lambda: in_json(
        "gpu_pcie_probe/copy_h2d.json", _set(["iterations", 0, "bytes"])), "key 'bytes'"),
    "uring_reader latency": (parse_uring_reader, lambda: in_json(
        "uring_reader/coop-2cpus.json", _set(["lat_ns", "p50"])), "key 'lat_ns.p50'"),
    "GNU time elapsed": (parse_gnu_time_default, lambda: in_text(
        "aisio_formats/gnu_time_default.txt", r"system (\d+):"), "elapsed"),
    "GNU time maxresident": (parse_gnu_time_default, lambda: in_text(
        "aisio_formats/gnu_time_default.txt", r"(\d+)maxresident"), "line 1: maxresident"),
    "interrupts count": (parse_interrupts, lambda: in_text(
        "interrupts/kvm-2vcpu.txt", r"^ 24: +(\d+)"), "line 2 (24)"),
    "dcgm sample": (parse_dcgm_dmon, lambda: in_text(
        "aisio_formats/dcgm_dmon.txt", r"^GPU 1 +(\d+)"), "line 4: value"),
    "cpufreq kHz": (lambda text, source: aisio_cpu_freqs(text, [0], source), lambda: in_text(
        "aisio_formats/cpufreq.log", r"^2026-01-01_00:00:01 (\d+)"), "CPU 0"),
    "p2p matrix": (parse_p2p_bandwidth, lambda: in_text(
        "aisio_formats/p2p_bandwidth.txt", r"^     0\t +(\d+)"), "section 'P2P Connectivity"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_integer_no_float_holds_is_a_parse_error_naming_its_key(case):
    parse, text, key = CASES[case]
    with pytest.raises(ParseError) as info:
        parse(text(), "out")
    message = str(info.value)
    assert key in message, message
    assert "beyond the largest number a measurement can hold" in message, message
    assert "integer of about 401 digits" in message or case == "GNU time elapsed", message


def test_within_float_lets_every_number_a_float_holds_through():
    largest = int(1.7976931348623157e308)
    assert within_float(largest, "k", "s") == largest and within_float(-largest, "k", "s")
    assert within_float(1e308, "k", "s") == 1e308 and within_float("text", "k", "s") == "text"
    assert within_float(True, "k", "s") is True
    with pytest.raises(ParseError, match=r"^s: k: an integer of about 309 digits, beyond the "
                                         r"largest number a measurement can hold \(1.8e\+308\)$"):
        within_float(largest + 2**971, "k", "s")


DEEP = "[" * 50_000 + "]" * 50_000


def with_key(name: str, key: str, value: str) -> str:
    """The fixture (one JSON object) with ``"key": value`` added at its end."""
    text = (FIX / name).read_text().rstrip()
    return f'{text[:-1]}, "{key}": {value}}}'


def deep_bpftrace() -> str:
    return (FIX / "bpftrace/json_maps.ndjson").read_text() + '{"type": "printf", "data": ' + \
        DEEP + "}\n"


JSON_PARSERS = {
    "fio": (parse_fio_json, "fio/psync_randread_4k_nj4_group.json"),
    "bdevperf": (parse_bdevperf_json, "bdevperf/perform_tests_2jobs.json"),
    "uring_reader": (parse_uring_reader, "uring_reader/coop-2cpus.json"),
    "gpu_pcie_probe": (parse_gpu_pcie_probe, "gpu_pcie_probe/copy_h2d.json"),
}


@pytest.mark.parametrize("case", [*JSON_PARSERS, "bpftrace"])
def test_json_nested_deeper_than_any_report_is_a_parse_error(case):
    """50,000 nested arrays raised RecursionError (no ParseError), which ended the campaign
    even with --keep-going."""
    if case == "bpftrace":
        parse, text = parse_bpftrace_json, deep_bpftrace()
    else:
        parse, name = JSON_PARSERS[case]
        text = with_key(name, "zz", DEEP)
    with pytest.raises(ParseError, match=r"^out: .*nested more than 100 levels deep "
                                         r"\(at most 100 allowed\)"):
        parse(text, "out")


def test_json_nesting_a_report_can_have_is_read():
    """Brackets inside strings are text, and 100 levels are allowed."""
    parse, name = JSON_PARSERS["uring_reader"]
    assert parse(with_key(name, "zz", '"' + "[" * 500 + '"'), "out")["iops"] == 56588.0
    assert parse(with_key(name, "zz", "[" * 99 + "]" * 99), "out")["iops"] == 56588.0


@pytest.mark.parametrize("case", ["bdevperf", "uring_reader", "gpu_pcie_probe"])
def test_json_key_given_twice_is_a_parse_error(case):
    """json keeps the last of two equal keys silently: a second 'iops' (or any key) stood for
    the measured one; fio's report was refused already."""
    parse, name = JSON_PARSERS[case]
    key = {"bdevperf": "results", "uring_reader": "iops", "gpu_pcie_probe": "mode"}[case]
    doc = json.loads((FIX / name).read_text())
    text = with_key(name, key, json.dumps(doc[key]))
    with pytest.raises(ParseError, match=rf"^out: key '{key}' is given twice in one object"):
        parse(text, "out")


def test_fio_sample_counts_that_sum_past_a_float_are_a_parse_error_naming_the_key():
    """Each N held in a float, their sum did not: the mean latency's division raised
    OverflowError, which named no key."""
    def edit(doc):
        for job in doc["jobs"]:
            job["read"]["clat_ns"]["N"] = 10**308
            # without its options a job keeps no known depth in flight, so N is not held to
            # total_ios (a job that lists them is refused for that before the sum)
            del job["job options"]
    text = in_json("fio/psync_randread_4k_nj4.jsonplus.json", edit)
    with pytest.raises(ParseError, match=r"read: the sum of the jobs' clat_ns.N: an integer "
                                         r"of about 309 digits"):
        parse_fio_json(text, "out")


URING = "uring_reader/coop-2cpus.json"


@pytest.mark.parametrize("edit, message", [
    (_set(["iops"], True), r"key 'iops': True has the wrong type"),
    (_set(["bs"], 0), r"key 'bs': 0, must be above 0"),
    (_set(["qdepth"], -1), r"key 'qdepth': -1, must be above 0"),
    (_set(["lat_ns", "p50"], 9e18), r"key 'lat_ns': p50 9e\+18 is above p90 .*allowed: "
                                    r"p50 <= p90 <= p99 <= p999 <= max"),
    (_set(["lat_ns", "mean"], 9e18), r"key 'lat_ns': mean 9e\+18 is above max"),
], ids=["iops a boolean", "bs 0", "qdepth -1", "p50 above p99", "mean above max"])
def test_uring_reader_refuses_values_no_run_has(edit, message):
    with pytest.raises(ParseError, match=rf"^out: {message}"):
        parse_uring_reader(in_json(URING, edit), "out")


@pytest.mark.parametrize("key, value", [("runtime", -1), ("queue_depth", -5), ("io_size", 0),
                                        ("io_failed", -1)])
def test_bdevperf_json_refuses_values_no_job_has(key, value):
    """A runtime of -1 made the per-second rates None silently; a queue depth of -5 and
    I/Os of 0 bytes were returned as they were."""
    text = in_json("bdevperf/perform_tests_2jobs.json", _set(["results", 0, key], value))
    with pytest.raises(ParseError, match=rf"^out: results\[0\]\.{key} is {value}; allowed: "
                                         r"[01] or more$"):
        parse_bdevperf_json(text, "out")


GNU_TIME = (FIX / "aisio_formats/gnu_time_default.txt").read_text()


@pytest.mark.parametrize("old, new, message", [
    ("98%CPU", "99999999999999999999999999%CPU", r"99999999999999999999999999%CPU "
                                                 r"does not match its times \(10\.81 s of CPU "
                                                 r"in 10\.99 s elapsed allow 98% to 98%\)"),
    ("98%CPU", "9%CPU", r"9%CPU does not match its times"),
    ("0:10.99elapsed", "0:99.99elapsed", r"elapsed '0:99.99': minutes and seconds must be "
                                         r"below 60"),
    ("0:10.99elapsed", "1:75:00elapsed", r"elapsed '1:75:00': minutes and seconds must be "
                                         r"below 60"),
])
def test_gnu_time_refuses_a_cpu_share_or_elapsed_time_it_does_not_print(old, new, message):
    assert old in GNU_TIME
    with pytest.raises(ParseError, match=rf"^out: line 1: {message}"):
        parse_gnu_time_default(GNU_TIME.replace(old, new), "out")


def test_gnu_time_cpu_share_is_checked_against_times_cut_to_what_it_prints():
    """GNU time prints the times cut to 0.01 s and %CPU from the uncut ones: 0.01 s of CPU
    in 0.01 s elapsed can print anything from 50 to 300 %."""
    for cpu in (50, 100, 300):
        text = GNU_TIME.replace("10.02user 0.79system 0:10.99elapsed 98%CPU",
                                f"0.01user 0.00system 0:00.01elapsed {cpu}%CPU")
        assert parse_gnu_time_default(text, "out")["cpu_percent"] == cpu


@pytest.mark.parametrize("stamp", [0, -5, 100 * 4_102_444_800_000])
def test_fio_timestamp_no_clock_read_is_a_parse_error(stamp):
    """A report stamped 0, or centuries ahead, placed the measurement window (and every
    collector's numbers) where no run was, and was stored as a sample."""
    text = in_json("fio/psync_randread_4k_nj4_group.json", _set(["timestamp_ms"], stamp))
    with pytest.raises(ParseError, match=r"^out: report.timestamp_ms is .*; allowed: a time "
                                         r"from 1104537600000 \(2005, fio's first release\) to "
                                         r"4102444800000 \(2100\)"):
        parse_fio_json(text, "out")


def test_a_run_of_digits_int_refuses_is_a_parse_error_naming_its_key():
    """int() refuses 4,300 digits and more with a ValueError that names no file or key;
    leading zeros count towards that limit, but not towards the number's size."""
    with pytest.raises(ParseError, match=r"^out: line 3: an integer of about 5000 digits, "
                                         r"beyond the largest number"):
        int_within_float("9" * 5000, "line 3", "out")
    assert int_within_float("0" * 5000 + "17", "k", "out") == 17
    assert int_within_float("-" + "0" * 500 + "5", "k", "out") == -5


def arabic(text: str) -> str:
    """``text`` with its digits in Arabic-Indic digits ('12' -> '١٢'): str.isdigit,
    str.isdecimal, int(), float() and the regex \\d all take them as digits, and no tool
    prints them."""
    return text.translate({ord("0") + d: 0x0660 + d for d in range(10)})


def _fixture(path: str, old: str, new: str) -> str:
    text = (FIX / path).read_text()
    assert old in text
    return text.replace(old, new, 1)


def _proctree(stamp: str) -> None:
    from iolab.collectors.proctree import PROCTREE_HEADER, parse_proctree_cpu
    parse_proctree_cpu(f"{PROCTREE_HEADER}\n{stamp},1,x,0,0\n2,1,x,1,1\n", '{"clk_tck": 100}',
                       0, 10, "p.csv", "p.json")


def _lscpu(cpu: str) -> None:
    from iolab.parsers.lscpu import parse_lscpu_e
    parse_lscpu_e(f"CPU NODE SOCKET CORE\n{cpu} 0 0 0\n", "lscpu")


def _clocks(index: str) -> None:
    from iolab.tools.gpu_pcie_probe import CLOCKS_LINE, read_clocks
    read_clocks(f"{CLOCKS_LINE}{index}, 0000:4b:00.0, 1, 2, 3, 4, 5, 16\n", 0, "stdout")


def _line_times(stamp: str) -> None:
    from iolab.tools.xnvmeperf import measurement_window
    stdout = (FIX / "aisio_formats/xnvmeperf_run.txt").read_text()
    stamps = ["1000"] * len(stdout.splitlines())
    stamps[0] = stamp
    measurement_window(stdout, "\n".join(stamps), "line-times")


def _gnu_time(signal: str) -> None:
    from iolab.collectors.gnu_time import GNU_TIME_FORMAT, parse_gnu_time_kv
    values = "".join(f"{line.split('=')[0]}=0\n" for line in GNU_TIME_FORMAT.splitlines())
    parse_gnu_time_kv(f"Command terminated by signal {signal}\n{values}", "time.out")


# (where, how it is read): each reads a number a tool or a collector wrote in Arabic-Indic
# digits, which int(), float(), str.isdigit and \d took as the number (P6, P19)
OTHER_DIGITS = {
    "xnvmeperf total": lambda: parse_xnvmeperf(
        _fixture("aisio_formats/xnvmeperf_run.txt", "3100000.75", arabic("3100000.75")), "x"),
    "spdk_nvme_perf row": lambda: parse_spdk_nvme_perf(
        _fixture("aisio_formats/spdk_nvme_perf.txt", "976.56", arabic("976.56")), "x"),
    "p2p_bandwidth cell": lambda: parse_p2p_bandwidth(
        _fixture("aisio_formats/p2p_bandwidth.txt", "21.25", arabic("21.25")), "x"),
    "dcgm dmon value": lambda: parse_dcgm_dmon(
        f"#Entity PCITX PCIRX\nID\nGPU 0 1 {arabic('2.5')}\n", "x"),
    "bdevperf table row": lambda: parse_bdevperf_text(
        _fixture("bdevperf/v25.09_randread_4jobs.txt", "4515975.66", arabic("4515975.66")),
        "x"),
    "bpftrace map value": lambda: parse_bpftrace_text(
        _fixture("bpftrace/text_maps.txt", "@[kick]: 2", "@[kick]: 1" + arabic("2")), "x"),
    "proctree stamp": lambda: _proctree(arabic("1")),
    "lscpu CPU": lambda: _lscpu(arabic("0")),
    "gpu clocks index": lambda: _clocks(arabic("0")),
    "xnvmeperf line time": lambda: _line_times(arabic("1000")),
    "gnu time signal": lambda: _gnu_time(arabic("9")),
}


@pytest.mark.parametrize("case", OTHER_DIGITS)
def test_a_number_in_other_scripts_digits_is_a_parse_error(case):
    with pytest.raises(ParseError):
        OTHER_DIGITS[case]()


@pytest.mark.parametrize("text", [arabic("12"), "1_000", " 1_0", "\u00b2", "12\u0663"])
def test_int_within_float_reads_ascii_digits_only(text):
    """Every caller gets the same rule: int() took these as numbers."""
    with pytest.raises(ValueError, match="allowed: digits 0-9"):
        int_within_float(text, "k", "out")
    assert int_within_float("+12", "k", "out") == 12 and int_within_float("-3", "k", "out") == -3


def test_versions_and_flags_in_other_scripts_digits_are_not_read():
    from iolab.collectors.hugepages import _int_or_none
    from iolab.parsers.bdevperf import spdk_supports_json
    from iolab.tools.xnvmeperf import VERSION_PATTERN

    assert spdk_supports_json("v25.09") and not spdk_supports_json(arabic("v25.09"))
    assert re.search(VERSION_PATTERN, "ver: {major: 0, minor: 7, patch: 1}")
    assert not re.search(VERSION_PATTERN, arabic("ver: {major: 0, minor: 7, patch: 1}"))
    assert _int_or_none("12") == 12 and _int_or_none(arabic("12")) is None
