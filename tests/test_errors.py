"""The error types keep their message, type and fields across a process boundary (the tidy
table's worker processes pickle what they raise), and quote what they were given briefly."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from iolab.collectors import cpufreq, gnu_time as gnu_time_kv, proctree
from iolab.errors import (EXCERPT, PROBLEM_MOST, InputError, ParseError, excerpt, printable,
                          shortened)
from iolab.parsers import (bdevperf, bpftrace, cijoe_state, cpufreq_log, dcgm_dmon, fio,
                           gnu_time, interrupts, lscpu, p2p_bandwidth, spdk_nvme_perf, xnvmeperf)


def test_errors_survive_pickling():
    for exc in (ParseError("/d/fio.json", "no report"),
                InputError("p.yaml", "runtime_s", "is negative", allowed="1..86400")):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
        assert vars(back) == vars(exc)


def test_printable_escapes_what_a_terminal_would_obey_and_keeps_what_it_is_told():
    assert printable("a\x1b[2J\x1b]0;t\x07\r\n\tb") == r"a\x1b[2J\x1b]0;t\x07\r\n\tb"
    assert printable("a\x1b[2J\nb\tc\rd", keep="\n\t") == "a\\x1b[2J\nb\tc\\rd"
    # letters stay, a bidi override does not
    assert printable("naïve ☃ \u202e") == "naïve ☃ \\u202e"


# -- quoting the input a parser could not read ----------------------------------------------
# A run's failure is the parser's error, stored in its run.json: quoting a whole line of a
# tool's output made a 900 MB line cost gigabytes (its repr, then its JSON) and a 20 MB one a
# 100 MB run.json. Every parser quotes at most an excerpt, and a problem is cut past a bound.

FIXTURES = Path(__file__).parent / "fixtures"
AISIO = FIXTURES / "aisio_formats"
# each text parser with an output it reads
PARSERS = {
    "bdevperf": (bdevperf.parse_bdevperf_text,
                 FIXTURES / "bdevperf" / "v25.09_randread_4jobs.txt"),
    "bpftrace": (bpftrace.parse_bpftrace_text, FIXTURES / "bpftrace" / "text_maps.txt"),
    "bpftrace json": (bpftrace.parse_bpftrace_json, FIXTURES / "bpftrace" / "json_maps.ndjson"),
    "cpufreq": (cpufreq_log.parse_cpufreq_log, AISIO / "cpufreq.log"),
    "dcgm dmon": (dcgm_dmon.parse_dcgm_dmon, AISIO / "dcgm_dmon.txt"),
    "gnu time": (gnu_time.parse_gnu_time_default, AISIO / "gnu_time_default.txt"),
    "interrupts": (interrupts.parse_interrupts, FIXTURES / "interrupts" / "kvm-2vcpu.txt"),
    "p2p": (p2p_bandwidth.parse_p2p_bandwidth, AISIO / "p2p_bandwidth.txt"),
    "spdk nvme perf": (spdk_nvme_perf.parse_spdk_nvme_perf, AISIO / "spdk_nvme_perf.txt"),
    "xnvmeperf": (xnvmeperf.parse_xnvmeperf, AISIO / "xnvmeperf_run.txt"),
}
# the longest message of a parser's error that quotes the input: a few excerpts and words,
# well under the cut every problem gets (PROBLEM_MOST), which only a whole line would reach
MOST = 1000


def test_an_excerpt_is_the_repr_of_a_short_value_and_a_bounded_cut_of_a_long_one():
    assert excerpt("a\tb") == "'a\\tb'" and excerpt([1, 2]) == "[1, 2]"
    for value in ("\x00" * 10**7, "x" * 10**7, b"\x00" * 10**6, [["x" * 10**6] * 100] * 100,
                  {"k": "v" * 10**6}, 10**10000):
        text = excerpt(value)
        assert len(text) <= EXCERPT, text[:50]
    assert excerpt("x" * 10**7).endswith("…") and excerpt("x" * 10**7).startswith("'xxx")


def test_a_shortened_name_is_itself_when_short_and_a_bounded_cut_when_long():
    assert shortened("nvme0n1") == "nvme0n1"
    text = shortened("x" * 10**7)
    assert len(text) == EXCERPT and text.endswith("…") and text.startswith("xxx")


def test_a_parsers_problem_is_cut_past_its_bound():
    assert MOST < PROBLEM_MOST
    error = ParseError("src", "x" * 10**6)
    assert len(error.problem) == PROBLEM_MOST and error.problem.endswith("…")


@pytest.mark.parametrize("name, text", [
    ("dcgm dmon", "\x01" * 10**7),                                   # data before the header
    ("dcgm dmon", "#Entity   PCITX\nGPU 0 " + "9" * 10**7 + "z\n"),   # a value
    ("dcgm dmon", "#Entity   PCITX\nGPU 0 1 " + "\x01" * 10**7),     # too many values
    ("cijoe_state", "cmd: x\n" + "\x02" * 10**7),
    ("lscpu", "\x01" * 10**7),
    ("interrupts", "\x01" * 10**7),
    ("bdevperf json", "[" + "\x01" * 10**7),
    ("bdevperf json", "Timeout while waiting for response" + "\x01" * 10**7),  # RPC client
    ("interrupts", "  CPU0\n" + ("x" * 10**7 + ": 1 a\n") * 2),         # a row's name, twice
    ("interrupts", "  CPU0\n" + "x" * 10**7 + ":\n"),                   # a row's name, no count
    ("bpftrace", "@" + "a" * 10**7 + "[1]: zz\n"),                      # a map's name
    ("cijoe_state", "k" * 10**7 + ": 'open\n"),                          # a key's name
    ("cpufreq collector", "\x01" * 10**7),                              # the header
    ("cpufreq collector", "cpu,timestamp_ns,khz\n" + "\x01" * 10**7),   # a sample
    ("gnu time collector", "\x01" * 10**7),
    ("gnu time collector", "elapsed_s=" + "\x01" * 10**7),             # a value
    ("proctree collector", "timestamp_ns,pid,comm,utime,stime\n" + "\x01" * 10**7),
    ("proctree collector", "timestamp_ns,pid,comm,utime,stime\n1,2,c,3," + "\x01" * 10**7),
])
def test_a_parser_given_a_10_mb_line_gives_a_short_error(name, text):
    parse = {"dcgm dmon": dcgm_dmon.parse_dcgm_dmon, "lscpu": lscpu.parse_lscpu_e,
             "interrupts": interrupts.parse_interrupts,
             "bdevperf json": bdevperf.parse_bdevperf_json,
             "bpftrace": bpftrace.parse_bpftrace_text,
             "cijoe_state": cijoe_state.parse_cijoe_state,
             "cpufreq collector": lambda text, source: cpufreq.parse_cpufreq_samples(
                 text, 0, 10, source),
             "gnu time collector": gnu_time_kv.parse_gnu_time_kv,
             "proctree collector": lambda text, source: proctree.parse_proctree_cpu(
                 text, '{"clk_tck": 100}', 0, 10, source)}[name]
    with pytest.raises(ParseError) as info:
        parse(text, "src")
    assert len(str(info.value)) <= MOST, str(info.value)[:300]


def test_a_huge_latency_key_in_fios_histogram_gives_a_short_error():
    doc = json.loads((FIXTURES / "fio" / "psync_randread_4k_nj4.jsonplus.json").read_text())
    doc["jobs"][0]["read"]["clat_ns"]["bins"]["\x01" * 10**6] = 1
    with pytest.raises(ParseError, match="expected integer latency keys") as info:
        fio.parse_fio_json(json.dumps(doc), "src")
    assert len(str(info.value)) <= MOST


@pytest.mark.parametrize("name", list(PARSERS))
def test_a_long_line_anywhere_in_a_tools_output_gives_a_short_error(name):
    """Each line of a real output in turn has 100,000 control characters added to its end
    (their repr is four times as long): every error it gives is short."""
    parse, fixture = PARSERS[name]
    lines = fixture.read_text().splitlines(keepends=True)
    errors = 0
    for i in range(min(len(lines), 150)):
        text = "".join(lines[:i] + [lines[i].rstrip("\n") + "\x01" * 100_000 + "\n"]
                       + lines[i + 1:])
        try:
            parse(text, "src")
        except ParseError as exc:
            errors += 1
            assert len(str(exc)) <= MOST, f"line {i + 1}: {str(exc)[:200]}"
    assert errors, "no line made an error: the fixture does not test the quoting"


def test_a_shell_word_is_pasted_as_itself_and_stays_on_its_line():
    import shlex

    from iolab.errors import shell_word

    name = "/tmp/d'$(touch x)`y`; z"
    assert shlex.split(shell_word(name)) == [name]
    assert shell_word("/tmp/plain") == "/tmp/plain"
    assert "\x1b" not in shell_word("/tmp/\x1b[2Jx") and "\n" not in shell_word("/a\nb")
