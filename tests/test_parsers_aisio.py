"""Golden tests for the parsers of the raw formats in AiSIO's archives.

The fixtures are synthesised from the documented formats (tests/fixtures/aisio_formats/README.md);
malformed inputs are built here from them.
"""

from __future__ import annotations

import random
import shlex
import statistics
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from iolab.errors import ParseError
from iolab.parsers import shell_words
from iolab.parsers.cijoe_state import parse_cijoe_state
from iolab.parsers.cpufreq_log import FreqLine, aisio_cpu_freqs, mean_pvariance, parse_cpufreq_log
from iolab.parsers.dcgm_dmon import aisio_p95, parse_dcgm_dmon, window_stats
from iolab.parsers.gnu_time import parse_gnu_time_default
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.parsers.spdk_nvme_perf import parse_spdk_nvme_perf
from iolab.parsers.xnvmeperf import parse_xnvmeperf

FIX = Path(__file__).parent / "fixtures" / "aisio_formats"


def text(name: str) -> str:
    return (FIX / name).read_text()


# --- xnvmeperf ---------------------------------------------------------------------------------

def test_xnvmeperf_run():
    r = parse_xnvmeperf(text("xnvmeperf_run.txt"), "run.txt")
    assert r["kind"] == "run"
    assert r["elapsed_s"] == 5.0
    assert r["echo"] == {
        "devices": ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0"], "devices_total": 3,
        "io_pattern": "randread", "queues_per_device": 1, "queue_depth": 64, "io_size": 512,
        "runtime": 5, "cpus": [0, 1], "cpus_total": 2, "host_heap_size": 1048576,
    }
    assert r["devices"] == [
        {"uri": "0000:01:00.0", "cpus": [0], "iops": 1000000.00, "mibs": 488.28, "failed": 0},
        {"uri": "0000:02:00.0", "cpus": [1], "iops": 1200000.50, "mibs": 585.94, "failed": 0},
        {"uri": "0000:03:00.0", "cpus": [0, 1], "iops": 900000.25, "mibs": 439.45, "failed": 2},
    ]
    assert r["totals"] == {"iops": 3100000.75, "mibs": 1513.67, "failed": 2}


def test_xnvmeperf_cuda_run_has_no_cpus_and_tolerates_rounding():
    r = parse_xnvmeperf(text("xnvmeperf_cuda_run.txt"), "cuda.txt")
    assert r["kind"] == "cuda-run"
    assert r["elapsed_s"] == 10.0
    assert "cpus" not in r["echo"]
    assert r["echo"]["queues_per_device"] == 2 and r["echo"]["device_heap_size"] == 4194304
    assert [d["cpus"] for d in r["devices"]] == [None, None]
    assert [d["iops"] for d in r["devices"]] == [3850000.00, 3849999.50]
    # 1879.88 + 1879.88 = 3759.76, printed Total 3759.77: within the rounding of 3 values
    assert r["totals"] == {"iops": 7699999.50, "mibs": 3759.77, "failed": 0}


def test_xnvmeperf_error_output_quotes_the_error():
    with pytest.raises(ParseError, match=r"err\.txt: no argument echo.*xnvme_dev_open"):
        parse_xnvmeperf(text("xnvmeperf_error.txt"), "err.txt")


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("3100000.75", "3100100.75"), "add up to 3100000.75 IOPS"),
    (lambda t: t.replace("1513.67", "1514.67"), "add up to 1513.67 MiB/s"),
    (lambda t: t.replace("439.45        2", "439.45        1"), "add up to 1 failed"),
    (lambda t: t.replace("     0,1 ", "     0 1 "), "6 columns|columns, got 6"),
    (lambda t: t.replace("0000:03:00.0]", "0000:04:00.0]"), "echo announced devices"),
    (lambda t: t.split(" 0000:03:00.0   ")[0], "truncated"),
    (lambda t: t.replace(" Total:", " Sum:"), "expected the 'Total:' row"),
    (lambda t: t.replace("CPUs          IOPS", "Cores          IOPS"), "expected the run header"),
    (lambda t: t.replace("        0\n", "       x0\n", 1), "Failed must be a whole count"),
    (lambda t: t + t, "2 result tables"),
    (lambda t: "", "empty input"),
    # float() took a sign, nan, inf and "_": a negative row hid in a Total that adds up
    (lambda t: t.replace("1000000.00", "-1000000.00").replace("1200000.50", "3200000.50"),
     "line 15: IOPS: '-1000000.00' is no measurement"),
    (lambda t: t.replace("488.28", "nan").replace("1513.67", "nan"), "MiB/s: 'nan' is no"),
    (lambda t: t.replace("3100000.75", "inf"), "line 19: IOPS: 'inf' is no measurement"),
    (lambda t: t.replace("1000000.00", "1_000_000.00"), "IOPS: '1_000_000.00' is no"),
    (lambda t: t.replace("1000000.00", "1e6"), "IOPS: '1e6' is no measurement"),
    (lambda t: t.replace("elapsed: 5.00s", "elapsed: 5.0.0s"),
     "no ' xnvmeperf \\(elapsed: …s\\)' line"),
    # float() and int() read other scripts' digits, '1_000', nan and inf: xnvmeperf prints
    # none of them, and the totals were stored as if it had (P6)
    (lambda t: t.replace("3100000.75", ARABIC("3100000.75")), "is no measurement"),
    (lambda t: t.replace("1513.67", "1_513.67"), "is no measurement"),
    (lambda t: t.replace("488.28", "nan"), "is no measurement"),
    (lambda t: t.replace("900000.25", "inf"), "is no measurement"),
    (lambda t: t.replace("439.45        2", "439.45        " + ARABIC("2")),
     "Failed must be a whole count"),
    (lambda t: t.replace("     0,1 ", "     0," + ARABIC("1") + " "), "CPUs column"),
    # probe 11's class 3 (a count the report gives not checked): xnvmeperf prints the list's
    # length as its total
    (lambda t: t.replace("(total: 3)", "(total: 4)", 1),
     r"line 2: the echo lists 3 devices but says total: 4 \(allowed: the number listed\)"),
])
def test_xnvmeperf_malformed(edit, message):
    with pytest.raises(ParseError, match=message) as info:
        parse_xnvmeperf(edit(text("xnvmeperf_run.txt")), "bad.txt")
    assert info.value.source == "bad.txt"


def ARABIC(text: str) -> str:
    """``text`` with its digits in Arabic-Indic digits ('12' -> '١٢'), which str.isdigit,
    int(), float() and the regex \\d all take as digits."""
    return text.translate({ord("0") + d: 0x0660 + d for d in range(10)})


def test_xnvmeperf_echo_reads_only_ascii_digits():
    """An echo value in other digits stays text, not a number: a count so written is no
    echo of xnvmeperf's, which prints its counts in ASCII digits."""
    with pytest.raises(ParseError, match="the argument echo's queue_depth is '٦٤' "):
        parse_xnvmeperf(text("xnvmeperf_run.txt").replace("- queue depth: 64",
                                                          "- queue depth: " + ARABIC("64")))


# --- spdk_nvme_perf ----------------------------------------------------------------------------

def test_spdk_nvme_perf():
    r = parse_spdk_nvme_perf(text("spdk_nvme_perf.txt"), "perf.txt")
    assert r["rows"] == [
        {"name": "PCIE (0000:01:00.0) [144d:ac00] NSID 1 from core  0", "bdf": "0000:01:00.0",
         "vendor_device": "144d:ac00", "nsid": 1, "core": 0, "iops": 2093737.12, "mibs": 1022.33,
         "avg_us": 61.11, "min_us": 53.77, "max_us": 2015.47},
        {"name": "PCIE (0000:02:00.0) [144d:ac00] NSID 1 from core  1", "bdf": "0000:02:00.0",
         "vendor_device": "144d:ac00", "nsid": 1, "core": 1, "iops": 2000000.00, "mibs": 976.56,
         "avg_us": 63.98, "min_us": 50.00, "max_us": 1800.00},
    ]
    assert r["total"] == {"iops": 4093737.12, "mibs": 1998.89, "avg_us": 62.52, "min_us": 50.00,
                          "max_us": 2015.47}


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("4093737.12", "4000000.00"), "rows add up to"),
    (lambda t: t.split("Total")[0], "expected '<name> : IOPS"),
    (lambda t: t.replace("Device Information", "Devices"), "no result table"),
    (lambda t: t.replace("    976.56 ", "  976.56 x "), "expected '<name> : IOPS"),
    (lambda t: t.replace("2000000.00", "2OOOOOO.OO"), "iops: '2OOOOOO.OO' is no measurement"),
    (lambda t: t.replace("2000000.00", "-2000000.00"), "iops: '-2000000.00' is no measurement"),
])
def test_spdk_nvme_perf_malformed(edit, message):
    with pytest.raises(ParseError, match=message):
        parse_spdk_nvme_perf(edit(text("spdk_nvme_perf.txt")), "bad.txt")


# --- GNU time ---------------------------------------------------------------------------------

def test_gnu_time_default():
    assert parse_gnu_time_default(text("gnu_time_default.txt"), "t") == {
        "user_s": 10.02, "system_s": 0.79, "elapsed_s": 10.99, "cpu_percent": 98,
        "avgtext_kib": 0, "avgdata_kib": 0, "maxresident_kib": 200448, "inputs": 0,
        "outputs": 0, "major_faults": 0, "minor_faults": 13080, "swaps": 0,
        "exit_status": None, "signal": None,
    }


def test_gnu_time_exit_status_and_unknown_cpu():
    r = parse_gnu_time_default(text("gnu_time_exit_status.txt"), "t")
    assert r["exit_status"] == 3 and r["signal"] is None
    assert r["cpu_percent"] is None and r["elapsed_s"] == 0.0
    assert (r["inputs"], r["outputs"], r["major_faults"], r["minor_faults"]) == (8, 16, 1, 67)


def test_gnu_time_signal_and_hours():
    r = parse_gnu_time_default(text("gnu_time_signal.txt"), "t")
    assert r["signal"] == 9 and r["exit_status"] is None
    assert r["elapsed_s"] == 3723 and r["cpu_percent"] == 0 and r["swaps"] == 1


def test_gnu_time_after_tool_output_is_found():
    r = parse_gnu_time_default(text("xnvmeperf_run.txt"), "run")
    assert (r["user_s"], r["elapsed_s"], r["cpu_percent"]) == (10.01, 5.6, 185)


@pytest.mark.parametrize("body, message", [
    ("", "no GNU time report"),
    ("10.02user 0.79system 0:10.99elapsed 98%CPU (0avgtext+0avgdata 200448maxresident)k\n",
     "expected GNU time's second line"),
    ("10.02user 0.79system 0:10.99elapsed 98%CPU (0avgtext+0avgdata 2004", "no GNU time report"),
    ("1.0user 0.1system 1:2:3.4elapsed 9%CPU (0avgtext+0avgdata 1maxresident)k\n"
     "0inputs+0outputs (0major+1minor)pagefaults 0swaps\n", "neither m:ss.cc nor h:mm:ss"),
])
def test_gnu_time_malformed(body, message):
    with pytest.raises(ParseError, match=message):
        parse_gnu_time_default(body, "t")


# --- CPU frequency logger -----------------------------------------------------------------------

def strptime_lines(text: str) -> list[tuple[datetime, tuple[int, ...]]]:
    """The log's complete lines read with a general date parser, as the parser did before it
    used one compiled pattern: what it must still give."""
    lines = [line for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
             if line.strip()]
    if not text.endswith("\n"):
        lines = lines[:-1]
    return [(datetime.strptime(line.split()[0], "%Y-%m-%d_%H:%M:%S"),
             tuple(int(t) for t in line.split()[1:])) for line in lines]


def test_cpufreq_log_lines_and_partial_last_line():
    r = parse_cpufreq_log(text("cpufreq.log"), "f.log")
    assert r["ncpus"] == 4 and len(r["lines"]) == 11
    assert r["notes"] == ["line 12: dropped a partial last line (the logger was stopped while "
                          "writing it)"]
    assert r["lines"][0] == FreqLine(datetime(2026, 1, 1, 0, 0, 0),
                                     (1000000, 2000000, 800000, 3000000))
    assert r["lines"][-1] == FreqLine(datetime(2026, 1, 1, 0, 0, 5),
                                      (2000000, 2000000, 800010, 2990000))
    assert [tuple(line) for line in r["lines"]] == strptime_lines(text("cpufreq.log"))


def test_cpufreq_log_as_a_general_date_parser_reads_it():
    # leading blanks, tabs, CRLF, blank lines and a last line that only lacks its newline
    body = (" 2026-02-28_23:59:59\t1 2 \r\n\n2026-03-01_00:00:00 3  4\r\n"
            "2026-12-31_10:20:30 5 6 \n2026-12-31_10:20:31 7 8")
    r = parse_cpufreq_log(body, "f")
    assert [tuple(line) for line in r["lines"]] == strptime_lines(body)
    assert r["lines"][1] == FreqLine(datetime(2026, 3, 1), (3, 4))
    assert r["notes"] == ["line 5: dropped a partial last line (the logger was stopped while "
                          "writing it)"]


def test_cpufreq_aisio_summary_counts_the_piece_after_the_last_newline():
    # 12 pieces (11 lines + the partial one): lines [int(1.2), int(10.8)) = 1..9 are kept
    r = aisio_cpu_freqs(text("cpufreq.log"), [0, 2], "f.log")
    cpu0 = [1100000 + 100000 * i for i in range(9)]
    assert r[0] == (statistics.mean(cpu0), statistics.pvariance(cpu0)) == (1500000, 200000000000 / 3)
    assert r[2] == (800005, statistics.pvariance(range(800001, 800010)))


@pytest.mark.parametrize("values", [
    [5], [1, 2], [1, 2, 4], [2, 4, 6, 8], [0, 0, 0], [3000000, 3000001, 3000003],
    [4_000_000, 800_000, 2_900_123, 3_333_333, 1_234_567, 999_999, 3_000_000],
    [7] * 17 + [8], list(range(800001, 800010)),
])
def test_mean_pvariance_is_statistics_exactly(values):
    mean, variance = mean_pvariance(values)
    assert (mean, variance) == (statistics.mean(values), statistics.pvariance(values))
    # the same type too: an int where the exact result is whole, as statistics gives
    assert (type(mean), type(variance)) == (type(statistics.mean(values)),
                                            type(statistics.pvariance(values)))


def test_mean_pvariance_random_columns():
    rng = random.Random(13)
    for _ in range(2000):
        values = [rng.choice((800000, 3000000, 4000000)) + rng.randrange(-5000, 5000)
                  for _ in range(rng.randint(1, 40))]
        assert mean_pvariance(values) == (statistics.mean(values), statistics.pvariance(values))


def test_cpufreq_log_samples_may_share_a_second():
    lines = parse_cpufreq_log("2026-01-01_00:00:01 1 2\n2026-01-01_00:00:01 3 4\n", "f")["lines"]
    assert [line.khz for line in lines] == [(1, 2), (3, 4)]


def test_cpufreq_empty_and_unsupported():
    assert parse_cpufreq_log("", "f")["notes"] == ["empty log: no samples"]
    r = parse_cpufreq_log("UNSUPPORTED\n", "f")
    assert r["lines"] == [] and "UNSUPPORTED" in r["notes"][0]


@pytest.mark.parametrize("body, message", [
    ("2026-01-01_00:00:00 1 2\n2026-01-01_00:00:01 1\n2026-01-01_00:00:02 1 2\n", "line 2: 1 CPU values"),
    ("2026-01-01 00:00:00 1 2\n2026-01-01_00:00:01 1 2\n",
     "line 1: expected 'YYYY-MM-DD_HH:MM:SS' first, got '2026-01-01'"),
    ("2026-1-1_0:00:00 1 2\n2026-01-01_00:00:01 1 2\n",
     "line 1: expected 'YYYY-MM-DD_HH:MM:SS' first, got '2026-1-1_0:00:00'"),
    ("2026-01-01_00:00:00 1 2\n2026-01-01_00:00:01 1 x\n2026-01-01_00:00:02 1 2\n",
     "line 2: expected integer kHz values after the timestamp, got 'x'"),
    ("2026-01-01_00:00:00 1 +2\n2026-01-01_00:00:01 1 2\n", "line 1: .*got '\\+2'"),
    ("2026-01-01_00:00:00 1 ２\n2026-01-01_00:00:01 1 2\n", "line 1: .*got '２'"),
    ("2026-01-01_00:00:00 1\u00a02\n2026-01-01_00:00:01 1 2\n",
     "line 1: expected values separated by spaces"),
    ("2026-02-30_00:00:00 1 2\n2026-01-01_00:00:01 1 2\n",
     "line 1: '2026-02-30_00:00:00' is not a date and time \\(day is out of range"),
    ("2026-01-01_24:00:00 1 2\n2026-01-01_00:00:01 1 2\n", "line 1: .* is not a date and time"),
    ("2026-01-01_00:00:00\n2026-01-01_00:00:01 1 2\n", "line 1: a timestamp without CPU values"),
    # a log going back in time was imported: the trimming and windows assume log order
    ("2026-01-01_00:00:05 1 2\n2026-01-01_00:00:06 1 2\n2026-01-01_00:00:01 1 2\n"
     "2026-01-01_00:00:07 1 2\n",
     "line 3: 2026-01-01_00:00:01 is before the line above's 2026-01-01_00:00:06 "
     "\\(allowed: samples in time order"),
])
def test_cpufreq_malformed(body, message):
    with pytest.raises(ParseError, match=f"^f: {message}"):
        parse_cpufreq_log(body, "f")


def test_cpufreq_aisio_summary_malformed():
    with pytest.raises(ParseError, match="no column for CPU 9"):
        aisio_cpu_freqs(text("cpufreq.log"), [9], "f")
    lines = text("cpufreq.log").split("\n")
    lines[5] = lines[5].replace("_00:00:02", "_00:00:99")
    with pytest.raises(ParseError, match="^f: line 6: '2026-01-01_00:00:99' is not a date"):
        aisio_cpu_freqs("\n".join(lines), [0], "f")


# --- CIJOE command records (.state) -------------------------------------------------------------

# The shape CIJOE's yaml.dump writes (keys sorted, a long value folded onto an indented line);
# the values are made up.
STATE = """begin: 1767225600.0364695
cmd: /usr/bin/time xnvmeperf run --cpumask 0001 --qdepth 128 --iosize 512 --runtime
  10 --iopattern randread --be upcie 0000:01:00.0 0000:02:00.0
cwd: None
elapsed: 10.803450107574463
end: 1767225610.8399196
err: -15
is_done: true
output_dpath: /root/cijoe-output/003_run
output_fpath: /root/cijoe-output/003_run/cmd_04.output
"""

# Commands that yaml.dump writes in each style: plain, folded, single- and double-quoted
# (non-ASCII, control characters, escapes folded across lines), and values that only quotes
# keep text.
AWKWARD = [
    "lscpu -e", "x" * 200, "echo 'a: b' # not a comment", "a: b " * 30, "a  b\n\nc\n", "  lead",
    "trail  ", "#x", "- x", "? y", ": z", "123", "1.5", "0x1F", "2026-01-01", "true", "null", "~",
    "", "it's", 'say "hi"', "a\\b" * 30, "über straße", "€" * 40 + " x" * 30, "tab\there",
    "ctl\x01\x1b", "nl\u2028ls\x85", "\ufeffbom", "for cpu in 0 1; do cpupower -c $cpu "
    "frequency-set -g performance; done", 'screen -dm bash -c "dcgmi dmon -d 100 > /tmp/d.txt"',
    "[a, b]", "{a: 1}", "&anchor", "*alias", "!tag", "|", ">", "%", "@", "`", "=", "<<",
]


def same_values(ours: dict, theirs: dict) -> bool:
    """Equal keys and values, of the same types (True is not 1 here)."""
    return ours == theirs and all(type(ours[k]) is type(theirs[k]) for k in theirs)


def test_cijoe_state_golden():
    state = parse_cijoe_state(STATE.encode(), "cmd_04.state")
    assert state == {
        "begin": 1767225600.0364695,
        "cmd": "/usr/bin/time xnvmeperf run --cpumask 0001 --qdepth 128 --iosize 512 --runtime "
               "10 --iopattern randread --be upcie 0000:01:00.0 0000:02:00.0",
        "cwd": "None", "elapsed": 10.803450107574463, "end": 1767225610.8399196, "err": -15,
        "is_done": True, "output_dpath": "/root/cijoe-output/003_run",
        "output_fpath": "/root/cijoe-output/003_run/cmd_04.output"}
    assert same_values(state, yaml.safe_load(STATE))


@pytest.mark.parametrize("width", [80, 12, 10**6])
@pytest.mark.parametrize("cmd", AWKWARD)
def test_cijoe_state_reads_what_yaml_dump_writes(cmd, width):
    state = {"begin": 1767225600.5, "cmd": cmd, "cwd": "None", "elapsed": 5e-06, "end": 0,
             "err": 0, "is_done": False, "output_fpath": cmd[:20]}
    text = yaml.dump(state, width=width)  # as CIJOE writes it (at its default width, 80)
    assert same_values(parse_cijoe_state(text.encode(), "s"), yaml.safe_load(text)), text


def test_cijoe_state_random_commands_read_as_yaml_reads_them():
    rng = random.Random(13)
    alphabet = list("ab xz:#'\"\\-?,[]{}&*!|>%@`\t\n0.e+~") + ["é", "€", "\x01", "\u2028", "  "]
    for _ in range(1500):
        cmd = "".join(rng.choice(alphabet) for _ in range(rng.choice((3, 20, 120))))
        text = yaml.dump({"cmd": cmd, "err": rng.choice((0, -15)), "begin": rng.random() * 2e9},
                         width=rng.choice((80, 10)))
        assert same_values(parse_cijoe_state(text.encode(), "s"), yaml.safe_load(text)), text


@pytest.mark.parametrize("body, message", [
    ('{"begin": 1, "cmd": "x"}', "line 1: expected 'key: value' or a value continued"),
    ("  cmd: x\n", "line 1: expected 'key: value'"),
    ("cmd: x\n\tmore\n", "line 2: expected 'key: value'"),
    ("cmd: x\n---\nerr: 0\n", "line 2: expected 'key: value'"),
    ("cmd: x # a comment\n", "line 1: key 'cmd': 'x # a comment' is not a plain value"),
    ("err: 0\ncmd: a: b\n", "line 2: key 'cmd': 'a: b' is not a plain value"),
    ("cmd: [a, b]\n", "line 1: key 'cmd': '\\[a, b\\]' is not a plain value"),
    ("cmd: |\n  x\n", "line 1: key 'cmd': .* is not a plain value"),
    ("cmd: &a x\n", "line 1: key 'cmd': .* is not a plain value"),
    ("cmd: - x\n", "line 1: key 'cmd': .* is not a plain value"),
    ("err: 0x1F\n", "line 1: key 'err': '0x1F' is a YAML 1.1 number, date or merge key"),
    ("err: 017\n", "line 1: key 'err': '017' is a YAML 1.1 number"),
    ("begin: 1_000.5\n", "line 1: key 'begin': '1_000.5' is a YAML 1.1 number"),
    ("begin: 2026-01-01\n", "line 1: key 'begin': '2026-01-01' is a YAML 1.1 number, date"),
    ("cmd: <<\n", "line 1: key 'cmd': '<<' is a YAML 1.1"),
    ("cmd: 'abc\n", "line 1: key 'cmd': no closing quote '"),
    ('cmd: "abc\\"\n', "line 1: key 'cmd': no closing quote \""),
    ("err: 0\ncmd: 'a' b\n", "line 2: key 'cmd': 'b' after the closing quote"),
    ('cmd: "a\\qb"\n', "line 1: key 'cmd': unknown escape \\\\q"),
    ('cmd: "\\x4g"\n', "line 1: key 'cmd': unknown escape \\\\x"),
    ('cmd: "\\UFFFFFFFF"\n', "line 1: key 'cmd': \\\\UFFFFFFFF is not a character"),
    ("yes: 1\n", "line 1: key 'yes' reads as a YAML null or boolean"),
    ("cmd: a\x01b\n", "character '\\\\x01' at offset 6: not in a CIJOE .state"),
    ("cmd: a\u2028b\n", "character '\\\\u2028'"),
    (b"cmd: \xff\n", "not UTF-8 text"),
])
def test_cijoe_state_malformed(body, message):
    data = body if isinstance(body, bytes) else body.encode()
    with pytest.raises(ParseError, match=f"^003_run/cmd_01.state: {message}"):
        parse_cijoe_state(data, "003_run/cmd_01.state")


def test_cijoe_state_empty_and_value_on_the_next_line():
    assert parse_cijoe_state(b"", "s") == {}
    text = "cmd:\n  lscpu\n  -e\nerr:\n"
    assert same_values(parse_cijoe_state(text.encode(), "s"), yaml.safe_load(text))
    assert parse_cijoe_state(text.encode(), "s") == {"cmd": "lscpu -e", "err": None}


# --- command lines ------------------------------------------------------------------------------

def shlex_or_error(cmd: str):
    try:
        return shlex.split(cmd)
    except ValueError as exc:
        return f"ValueError: {exc}"


def words_or_error(cmd: str):
    try:
        return shell_words.split(cmd)
    except ValueError as exc:
        return f"ValueError: {exc}"


@pytest.mark.parametrize("cmd", [
    "", "   ", "lscpu -e", " a\tb\r\nc ", "a\x0bb\x0cc", "pkill -f dcgmi; sleep 0.2",
    'screen -dm bash -c "dcgmi dmon -d 100 -i 0 -e 1009,1010 > /tmp/dcgm_monitor.txt"',
    "spdk_nvme_perf -r 'trtype:PCIe traddr:0000:01:00.0' -c 3", "a''b ''", 'a""b ""',
    r"a\ b\\c \'d\"", r'"a\"b\\c\$d\n"', r"'a\b'", 'x"y z"w', "for cpu in 0 1; do echo $cpu; done",
    "'unclosed", '"unclosed', 'trailing\\', '"escape at the end\\', "'single \\",
    '"a\\\\"b', "é ü\u00a0x",
])
def test_shell_words_split_as_shlex(cmd):
    assert words_or_error(cmd) == shlex_or_error(cmd)


def test_shell_words_random_lines_split_as_shlex():
    rng = random.Random(13)
    alphabet = list("ab '\"\\\t\n\r$#;|&\x0b") + ["é", "\u00a0"]
    for _ in range(20000):
        cmd = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert words_or_error(cmd) == shlex_or_error(cmd), repr(cmd)


# --- DCGM dmon ---------------------------------------------------------------------------------

def test_dcgm_dmon_two_gpus_repeated_header_na_partial_row():
    r = parse_dcgm_dmon(text("dcgm_dmon.txt"), "d.txt", field_ids=[1009, 1010])
    assert r["fields"] == ["PCITX", "PCIRX"] and r["field_ids"] == [1009, 1010]
    assert r["headers"] == 2
    assert r["samples"] == {
        "GPU 0": {"PCITX": [0, 100, 200, 300], "PCIRX": [0, 1000, 3000, 2000]},
        "GPU 1": {"PCITX": [5, None, 15, 25], "PCIRX": [7, None, 21, 35]},
    }
    assert r["notes"] == ["line 13: dropped a partial last row (dmon was stopped while "
                          "writing it)"]


def test_dcgm_field_ids_from_known_names():
    assert parse_dcgm_dmon(text("dcgm_dmon.txt"), "d")["field_ids"] == [1009, 1010]


def test_aisio_p95_and_window_stats():
    # inclusive method: position 0.95 * (4 - 1) = 2.85 between 2000 and 3000
    assert aisio_p95([0, 1000, 3000, 2000]) == 2850.0
    assert aisio_p95([7, None, 21, 35]) == pytest.approx(33.6)
    assert window_stats([0, 1000, 3000, 2000, None]) == {"n": 4, "mean": 1500, "p50": 1500.0,
                                                         "p95": 2850.0}
    assert window_stats([5]) == {"n": 1, "mean": 5, "p50": 5, "p95": 5}
    assert window_stats([None]) == {"n": 0, "mean": None, "p50": None, "p95": None}
    with pytest.raises(ValueError, match="at least two"):
        aisio_p95([1, None])


@pytest.mark.parametrize("body, ids, message", [
    ("", None, "empty capture"),
    ("GPU 0  1  2\n", None, "data before the '#Entity' header"),
    ("#Entity PCITX PCIRX\nID\nGPU 0 1 2 3\nGPU 0 1 2\n", None, "line 3: expected an entity and 2"),
    ("#Entity PCITX PCIRX\nID\nGPU 0 1 x\n", None, "neither a number nor N/A"),
    ("#Entity PCITX PCIRX\nGPU 0 1 2\n#Entity PCITX\n", None, "differs from the first header"),
    ("#Entity PCITX PCIRX\nGPU 0 1 2\n", [1009], "1 field ids"),
])
def test_dcgm_malformed(body, ids, message):
    with pytest.raises(ParseError, match=message):
        parse_dcgm_dmon(body, "d", field_ids=ids)


# --- p2pBandwidthLatencyTest -------------------------------------------------------------------

def test_p2p_bandwidth_every_matrix():
    r = parse_p2p_bandwidth(text("p2p_bandwidth.txt"), "p2p")
    assert r["devices"] == [
        {"id": 0, "name": "NVIDIA Example GPU", "pci_bus_id": "1a", "pci_device_id": "0",
         "pci_domain_id": "0"},
        {"id": 1, "name": "NVIDIA Example GPU", "pci_bus_id": "b5", "pci_device_id": "0",
         "pci_domain_id": "0"},
    ]
    assert r["peer_access"] == [{"from": 0, "to": 1, "can": True}, {"from": 1, "to": 0, "can": False}]
    m = r["matrices"]
    assert list(m) == [
        "P2P Connectivity Matrix",
        "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
        "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
        "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
        "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)",
        "P2P=Disabled Latency Matrix (us) [GPU]",
        "P2P=Disabled Latency Matrix (us) [CPU]",
        "P2P=Enabled Latency (P2P Writes) Matrix (us) [GPU]",
        "P2P=Enabled Latency (P2P Writes) Matrix (us) [CPU]",
    ]
    assert m["P2P Connectivity Matrix"] == {"unit": None, "row_ids": [0, 1], "col_ids": [0, 1],
                                            "values": [[1, 1], [0, 1]]}
    assert m["Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)"] == {
        "unit": "GB/s", "row_ids": [0, 1], "col_ids": [0, 1],
        "values": [[1012.00, 50.00], [51.00, 1013.00]]}
    assert m["Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)"]["values"] == [[1000.0, 20.5],
                                                                                  [21.25, 1001.0]]
    assert m["P2P=Enabled Latency (P2P Writes) Matrix (us) [CPU]"] == {
        "unit": "us", "row_ids": [0, 1], "col_ids": [0, 1], "values": [[2.6, 1.7], [1.8, 2.7]]}


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("     1  21.25 1001.00 ", "     1  21.25"), "expected a row id and 2 values"),
    (lambda t: t.replace("  26.00 1003.00", "  2x.00 1003.00"), "non-numeric"),
    (lambda t: t.split("   D\\D     0      1 \n     0 1012.00")[0], "has no matrix"),
    (lambda t: t.split("P2P Connectivity")[0], "no matrix section"),
    (lambda t: t.replace("Device: 1, NVIDIA", "Device: 2, NVIDIA").replace(
        "Device: 0, NVIDIA Example GPU, pciBusID: 1a, pciDeviceID: 0, pciDomainID:0",
        "Device: 0, NVIDIA Example GPU, pciBusID: 1a, pciDeviceID: 0, pciDomainID:0\n"
        "Device: 1, NVIDIA Example GPU, pciBusID: 1b, pciDeviceID: 0, pciDomainID:0"),
     "2 rows, but 3 devices"),
])
def test_p2p_malformed(edit, message):
    with pytest.raises(ParseError, match=message):
        parse_p2p_bandwidth(edit(text("p2p_bandwidth.txt")), "p2p")


REPORT = ("{user}user 0.79system 0:10.99elapsed 98%CPU (0avgtext+0avgdata 200448maxresident)k\n"
          "0inputs+0outputs (0major+13080minor)pagefaults 0swaps\n")


@pytest.mark.parametrize("body, message", [
    (REPORT.format(user="9" * 400), "line 1: user: a number of 400 digits"),
    ("Command exited with non-zero status " + "9" * 5000 + "\n" + REPORT.format(user="10.02"),
     r"line 1: exit status 9{20}\.\.\. \(5000 digits\) is none a process can have"),
    ("Command exited with non-zero status 999\n" + REPORT.format(user="10.02"),
     r"exit status 999 is none a process can have \(allowed: 1 to 255\)"),
    ("Command terminated by signal 300\n" + REPORT.format(user="10.02"),
     r"signal 300 is none a process can have \(allowed: 1 to 127\)"),
    ("Command exited with non-zero status 0\n" + REPORT.format(user="10.02"),
     "exit status 0 is none"),
], ids=["400-digit user", "5000-digit status", "status 999", "signal 300", "status 0"])
def test_gnu_time_numbers_no_process_has_are_parse_errors(body, message):
    """A 400-digit user time ended an import with OverflowError, a 5,000-digit status with
    int()'s digit limit (both rc 70), and a status of 999 was taken."""
    with pytest.raises(ParseError, match=message):
        parse_gnu_time_default(body, "t")


def test_p2p_a_matrix_with_a_device_s_row_twice_is_refused():
    """Probe 9, Q24: a row id repeated made a device's local cell (1012 GB/s) count as a pair,
    and the p2p bandwidth read 531.5 GB/s where the report says 50.5."""
    report = text("p2p_bandwidth.txt")
    title = "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)"
    before, after = report.split(title)
    edited = before + title + after.replace("     1  51.00", "     0  51.00", 1)
    assert edited != report
    with pytest.raises(ParseError, match=r"^p2p: line \d+: section 'Bidirectional P2P=Enabled "
                       r"Bandwidth Matrix \(GB/s\)': row id 0 appears more than once \(allowed: "
                       "each device's id once"):
        parse_p2p_bandwidth(edited, "p2p")


def test_p2p_columns_twice_or_rows_not_the_columns_are_refused():
    report = text("p2p_bandwidth.txt")
    twice = report.replace("   D\\D     0      1 \n     0 1012.00",
                           "   D\\D     0      0 \n     0 1012.00", 1)
    assert twice != report
    with pytest.raises(ParseError, match="column id 0 appears more than once"):
        parse_p2p_bandwidth(twice, "p2p")
    swapped = report.replace("   D\\D     0      1 \n     0 1012.00",
                             "   D\\D     1      0 \n     0 1012.00", 1)
    with pytest.raises(ParseError, match=r"row ids \[0, 1\] are not the column ids \[1, 0\]"):
        parse_p2p_bandwidth(swapped, "p2p")


def test_cijoe_state_a_key_given_twice_is_refused():
    """Probe 9, Q23: 'err: 1' then 'err: 0' kept the last, and a failed command was imported
    as good."""
    with pytest.raises(ParseError, match=r"^cmd_04.state: line 2: key 'err' is given twice "
                       r"\(first on line 1\); allowed: each key once"):
        parse_cijoe_state(b"err: 1\nerr: 0\n", "cmd_04.state")
    with pytest.raises(ParseError, match=r"line 8: key 'err' is given twice \(first on line 1\)"):
        parse_cijoe_state(("err: 1\n" + STATE).encode(), "cmd_04.state")


def tenfold_mibs(t: str) -> str:
    """xnvmeperf_run.txt with every MiB/s ten times as large; the rows still add up."""
    for mibs in ("488.28", "585.94", "439.45", "1513.67"):
        t = t.replace(f" {mibs} ", f" {float(mibs) * 10:.2f} ")
    return t


def test_xnvmeperf_mibs_must_be_iops_times_the_io_size():
    """A MiB/s ten times what IOPS × the echoed io size gives, with the rows and the Total in
    agreement, was parsed as a measurement (P10 Q1)."""
    with pytest.raises(ParseError, match=r"line 15: MiB/s 4882.80 is not IOPS 1000000.00 × "
                                         r"the echoed io size 512 B \(= 488.28 MiB/s"):
        parse_xnvmeperf(tenfold_mibs(text("xnvmeperf_run.txt")), "bad.txt")


@pytest.mark.parametrize("fixture, line, key", [
    ("xnvmeperf_run.txt", "- queue depth: 64\n", "queue_depth"),
    ("xnvmeperf_run.txt", "- io size: 512\n", "io_size"),
    ("xnvmeperf_run.txt", "- io pattern: randread\n", "io_pattern"),
    ("xnvmeperf_run.txt", "- runtime: 5\n", "runtime"),
    ("xnvmeperf_run.txt", "- CPUs: [0, 1] (total: 2)\n", "cpus"),
    ("xnvmeperf_cuda_run.txt", "- queues per device: 2\n", "queues_per_device"),
], ids=["qdepth", "io size", "io pattern", "runtime", "cpus", "cuda-run queues"])
def test_xnvmeperf_echo_without_a_line_xnvmeperf_always_prints_is_refused(fixture, line, key):
    """Probe 12's I1/I2: an echo without its queue depth (or io size, pattern, runtime) was
    parsed, and the command's value then stood unchecked, as did the MiB/s against the size."""
    t = text(fixture)
    assert line in t
    with pytest.raises(ParseError, match=rf"bad.txt: the argument echo lacks {key} "):
        parse_xnvmeperf(t.replace(line, ""), "bad.txt")


@pytest.mark.parametrize("old, new", [("- io size: 512", "- io size: 512 KiB"),
                                      ("- queue depth: 64", "- queue depth: 0")],
                         ids=["io size not a count", "queue depth 0"])
def test_xnvmeperf_echo_counts_must_be_whole_numbers_above_zero(old, new):
    t = text("xnvmeperf_run.txt")
    assert old in t
    with pytest.raises(ParseError, match=r"the argument echo's (io_size|queue_depth) is .* "
                                         r"\(allowed: a whole number above 0"):
        parse_xnvmeperf(t.replace(old, new), "bad.txt")


def test_xnvmeperf_elapsed_far_below_the_runtime_is_refused():
    """An elapsed time of 0.01 s for a 5 s runtime was parsed as a measurement (P10 Q2)."""
    with pytest.raises(ParseError, match=r"elapsed 0.01 s is far below the echoed runtime 5 s"):
        parse_xnvmeperf(text("xnvmeperf_run.txt").replace("elapsed: 5.00s", "elapsed: 0.01s"),
                        "bad.txt")
    assert parse_xnvmeperf(text("xnvmeperf_run.txt").replace("elapsed: 5.00s",
                                                             "elapsed: 4.60s"))["elapsed_s"] == 4.6


def test_spdk_nvme_perf_mibs_must_be_iops_times_the_io_size():
    """Every MiB/s ten times IOPS × ``-o`` (512 B), rows and Total in agreement, was parsed as
    a measurement (P10 Q11)."""
    tenfold = (text("spdk_nvme_perf.txt").replace("1022.33", "10223.30")
               .replace("976.56", "9765.60").replace("1998.89", "19988.90", 1))
    assert parse_spdk_nvme_perf(text("spdk_nvme_perf.txt"), "perf.txt", 512)["total"]["mibs"] \
        == 1998.89
    with pytest.raises(ParseError, match=r"line 10: MiB/s 10223.30 is not IOPS 2093737.12 × "
                                         r"the I/O size 512 B \(= 1022.33 MiB/s"):
        parse_spdk_nvme_perf(tenfold, "bad.txt", 512)


@pytest.mark.parametrize("edit, message", [
    # P10 Q8: a row's min above its max
    (lambda t: t.replace("61.11      53.77    2015.47", "61.11    3000.00      10.00"),
     r"line 10: latency min 3000.00 µs, average 61.11 µs and max 10.00 µs are not in order"),
    # P10 Q9: one device and core listed twice (the rows still sum to the Total)
    (lambda t: t.replace("PCIE (0000:02:00.0) [144d:ac00] NSID 1 from core  1: 2000000.00",
                         "PCIE (0000:01:00.0) [144d:ac00] NSID 1 from core  0: 2000000.00"),
     r"line 11: 'PCIE \(0000:01:00.0\) .* from core  0' is listed twice \(first on line 10\)"),
    # P10 Q10: a Total average outside the rows' weighted mean, a Total min below every row's
    (lambda t: t.replace("1998.89      62.52      50.00", "1998.89      99.52      50.00"),
     r"line 13: the Total row's average 99.52 µs is not the rows' averages weighted by"),
    (lambda t: t.replace("1998.89      62.52      50.00", "1998.89      62.52      10.00"),
     r"line 13: the Total row's min 10.00 µs is not the least of the rows' mins \(50.00 µs\)"),
    (lambda t: t.replace("62.52      50.00    2015.47", "62.52      50.00    9015.47"),
     r"line 13: the Total row's max 9015.47 µs is not the greatest of the rows' maxes"),
], ids=["min above max", "device and core twice", "total average", "total min", "total max"])
def test_spdk_nvme_perf_rows_that_no_run_prints_are_refused(edit, message):
    """Each was parsed as a measurement (only IOPS and MiB/s were summed)."""
    assert edit(text("spdk_nvme_perf.txt")) != text("spdk_nvme_perf.txt")
    with pytest.raises(ParseError, match=message):
        parse_spdk_nvme_perf(edit(text("spdk_nvme_perf.txt")), "bad.txt")
