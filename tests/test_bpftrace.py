"""bpftrace: the map-output parser (iolab.parsers.bpftrace) and the adapter (iolab.tools.bpftrace).

The golden files in tests/fixtures/bpftrace/ are written from the documented formats (see
its README): the same maps in text and in JSON mode, a map printed repeatedly, and malformed
outputs in bad/. No bpftrace is needed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iolab.core.tool_registry import adapter
from iolab.errors import InputError, ParseError, ToolError
from iolab.parsers.bpftrace import parse_bpftrace, parse_bpftrace_json, parse_bpftrace_text
from iolab.tools import bpftrace as bt
from iolab.tools.base import Invocation

FIX = Path(__file__).parent / "fixtures" / "bpftrace"
BAD = FIX / "bad"

MAPS = {
    "@": {("reschedule",): 1, ("kick",): 2},
    "@av": {(0,): 12, (1,): 8},
    "@b": {(33,): 1, (34,): 7},
    "@lat": {(): [{"min": 512, "max": 1023, "count": 5}, {"min": 1024, "max": 2047, "count": 12},
                  {"min": 2048, "max": 4095, "count": 0}, {"min": 4096, "max": 8191, "count": 1}]},
    "@lat_by": {("kworker/0:1",): [{"min": 0, "max": 0, "count": 1},
                                   {"min": 1, "max": 1, "count": 2},
                                   {"min": 2, "max": 3, "count": 0},
                                   {"min": 4, "max": 7, "count": 1}],
                ("fio",): [{"min": 1024, "max": 2047, "count": 3},
                           {"min": 2048, "max": 4095, "count": 1}]},
    "@m": {(1, "fio"): 3, (0, "fio"): 12},
    "@plain": {(): 1},
    "@q": {(): [{"min": None, "max": -1, "count": 1}, {"min": 0, "max": 9, "count": 4},
                {"min": 10, "max": 19, "count": 0}, {"min": 20, "max": 29, "count": 2},
                {"min": 30, "max": None, "count": 1}]},
    "@st": {(): {"count": 4, "average": 10, "total": 40}},
}


def read(name: str) -> str:
    return (FIX / name).read_text()


# --- the parser ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, mode", [("text_maps.txt", "text"), ("json_maps.ndjson", "json")])
def test_both_modes_give_the_same_maps(name, mode):
    result = parse_bpftrace(read(name), name)
    assert result["format"] == mode and result["maps"] == MAPS
    assert (result["probes"], result["lost_events"], result["helper_errors"]) == (3, 3, 0)
    assert result["prints"] == {name: 1 for name in MAPS}


def test_modes_can_be_chosen_explicitly():
    assert parse_bpftrace_text(read("text_maps.txt"))["maps"] == \
        parse_bpftrace_json(read("json_maps.ndjson"))["maps"]


@pytest.mark.parametrize("name", ["text_reprinted.txt", "json_reprinted.ndjson"])
def test_the_last_printing_of_a_map_wins(name):
    result = parse_bpftrace(read(name), name)
    assert result["maps"] == {"@io": {("fio",): 26, ("kworker",): 3}}
    assert result["prints"] == {"@io": 3} and result["probes"] == 2


def test_quiet_or_empty_output_has_no_maps():
    for text in ("", "\n\n", "tracing...\n"):
        result = parse_bpftrace(text, "empty")
        assert result["maps"] == {} and result["probes"] is None


def test_json_helper_errors_and_unknown_events_are_counted_or_skipped():
    stats = {"count": 2, "average": 3, "total": 6}
    text = "\n".join([
        json.dumps({"type": "attached_probes", "data": {"probes": 1}}),
        json.dumps({"type": "helper_error", "helper": "map_update_elem", "retcode": -7,
                    "line": 1, "col": 20}),
        json.dumps({"type": "time", "data": "10:00:00\n"}),
        json.dumps({"type": "stats", "data": {"@av": 4}}),
        json.dumps({"type": "stats", "data": {"@st": {"x": stats}}}),
    ])
    result = parse_bpftrace_json(text, "j")
    assert result["helper_errors"] == 1
    assert result["maps"] == {"@av": {(): 4}, "@st": {("x",): stats}}


def test_keys_that_only_look_like_numbers_stay_strings():
    result = parse_bpftrace_text("@z[007]: 1\n@z[-3]: 2\n", "t")
    assert result["maps"] == {"@z": {("007",): 1, (-3,): 2}}


BAD_CASES = [
    ("text_value_not_number.txt", "line 4: @comm\\[1\\]: value 'bash' is neither a number"),
    ("text_hist_no_buckets.txt", "line 4: histogram @lat has no buckets"),
    ("text_hist_cut_bucket.txt", "line 6: histogram @lat: malformed bucket line"),
    ("text_bucket_outside_hist.txt", "line 6: a histogram bucket outside a histogram"),
    ("text_mixed_key_lengths.txt", "@m: keys have \\[1, 2\\] components"),
    ("text_duplicate_key.txt", "line 6: @io\\[fio\\] appears twice in one printing"),
    ("text_bad_map_line.txt", "line 4: not a map line"),
    ("json_truncated.ndjson", "line 2: not a JSON object \\(truncated output\\?\\)"),
    ("json_no_type.ndjson", "line 1: an event without a 'type'"),
    ("json_array_line.ndjson", "line 2: an event without a 'type'"),
    ("json_string_value.ndjson", "line 1: @comm\\[1\\]: value 'bash' is not a number"),
    ("json_two_maps.ndjson", "line 1: a 'map' event must hold exactly one map"),
    ("json_bucket_without_count.ndjson", "line 1: @lat: a bucket needs an integer 'count'"),
    ("json_mixed_key_lengths.ndjson", "@m: keys have \\[1, 2\\] components"),
]


@pytest.mark.parametrize("name, message", BAD_CASES)
def test_malformed_output_names_the_source_and_the_problem(name, message):
    path = BAD / name
    with pytest.raises(ParseError, match=message) as caught:
        parse_bpftrace(path.read_text(), str(path))
    assert caught.value.source == str(path)


def test_every_bad_fixture_is_tested():
    assert {p.name for p in BAD.iterdir()} == {name for name, _ in BAD_CASES}


# --- the adapter ----------------------------------------------------------------------------------

def test_argv_runs_program_text_with_json_output():
    assert bt.build_argv({"program": "BEGIN { exit(); }"}) == [
        "bpftrace", "-f", "json", "-o", "bpftrace.json", "-e", "BEGIN { exit(); }"]


def test_a_program_file_is_copied_into_the_run_folder(tmp_path, monkeypatch):
    program = tmp_path / "irq.bt"
    program.write_text("kprobe:nvme_irq { @b[arg0] = count(); }\n")
    fake = tmp_path / "bin" / "bpftrace"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    launch = bt.Bpftrace().launch(Invocation("bpftrace", {"file": str(program)}), [])
    assert launch.argv == [str(fake), "-f", "json", "-o", "bpftrace.json", "program.bt"]
    assert launch.inputs == {"program.bt": program.read_text()}


def test_an_edited_program_file_changes_the_identity(tmp_path):
    program = tmp_path / "irq.bt"
    program.write_text("kprobe:nvme_irq { @b[arg0] = count(); }\n")
    invocation = Invocation("bpftrace", {"file": str(program)})
    before = bt.Bpftrace().identity(invocation)
    program.write_text("kprobe:nvme_irq { @c[cpu] = count(); }\n")
    after = bt.Bpftrace().identity(invocation)
    assert before["options"] == after["options"] and before["file_sha256"] != after["file_sha256"]
    assert "file_sha256" not in bt.Bpftrace().identity(Invocation("bpftrace", {"program": "x"}))


@pytest.mark.parametrize("options, key", [
    ({}, "file/program"),
    ({"file": "a.bt", "program": "BEGIN {}"}, "file/program"),
    ({"program": "  "}, "program"),
    ({"file": "/no/such/file.bt"}, "file"),
    ({"program": "x", "format": "json"}, "format"),
])
def test_bad_options_name_the_key(options, key):
    with pytest.raises(InputError) as caught:
        bt.build_argv(options)
    assert caught.value.key == key


def test_launch_without_bpftrace_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    program = bt.Bpftrace().program({"program": "BEGIN { exit(); }"})
    assert not program.status()["found"]
    with pytest.raises(ToolError, match="apt-get install bpftrace"):
        program.require()


def test_parse_gives_one_column_per_map_entry(tmp_path):
    shutil.copy(FIX / "json_maps.ndjson", tmp_path / "bpftrace.json")
    metrics = bt.Bpftrace().parse(tmp_path)
    assert metrics["probes"] == 3 and metrics["lost_events"] == 3 and metrics["helper_errors"] == 0
    assert metrics["@[kick]"] == 2 and metrics["@b[34]"] == 7 and metrics["@m[0,fio]"] == 12
    assert metrics["@plain"] == 1
    assert (metrics["@st.count"], metrics["@st.average"], metrics["@st.total"]) == (4, 10, 40)
    assert json.loads(metrics["@lat_by[fio].hist"]) == MAPS["@lat_by"][("fio",)]
    assert metrics["problem"] is None and metrics["note"] is None


def test_parse_problems(tmp_path):
    (tmp_path / "bpftrace.json").write_text(
        json.dumps({"type": "helper_error", "helper": "map_update_elem", "retcode": -7}) + "\n")
    metrics = bt.Bpftrace().parse(tmp_path)
    assert metrics["problem"] == ("bpftrace never reported attaching its probes (it failed to "
                                  "start?); 1 BPF helper errors")


def test_parse_of_a_malformed_file_names_it(tmp_path):
    shutil.copy(BAD / "json_truncated.ndjson", tmp_path / "bpftrace.json")
    with pytest.raises(ParseError, match=str(tmp_path / "bpftrace.json")):
        bt.Bpftrace().parse(tmp_path)


def test_registered():
    assert isinstance(adapter("bpftrace"), bt.Bpftrace)


@pytest.mark.parametrize("text, problem", [
    ("Attaching " + "9" * 5000 + " probes...\n", "line 1: probes: an integer of about 5000 digits"),
    ("Lost " + "9" * 5000 + " events\n", "line 1: lost events: an integer of about 5000 digits"),
    ("@x: " + "9" * 5000 + "\n", "line 1: @x: an integer of about 5000 digits"),
    ("@h:\n[1, 2)   " + "9" * 5000 + " |@@@@|\n", "malformed bucket line"),
])
def test_a_number_longer_than_any_bpftrace_prints_is_a_parse_error(text, problem):
    """A 5,000-digit count was a ValueError (Python's int() refuses 4,300 digits) that named
    no file; bpftrace prints 64-bit integers, at most 20 digits."""
    with pytest.raises(ParseError, match=problem):
        parse_bpftrace(text, "trace.txt")


ATTACHED = '{"type": "attached_probes", "data": {"probes": 3}}\n'


def json_events(*events: dict) -> str:
    return ATTACHED + "\n".join(json.dumps(e) for e in events) + "\n"


@pytest.mark.parametrize("events, message", [
    # P10 Q12: a negative bucket count
    ([{"type": "hist", "data": {"@h": [{"min": 0, "max": 9, "count": -3}]}}],
     "bucket 0 has a count of -3"),
    # P10 Q13: a bucket's min above its max, and buckets that overlap
    ([{"type": "hist", "data": {"@h": [{"min": 100, "max": 9, "count": 3}]}}],
     "bucket 0 has min 100 above its max 9"),
    ([{"type": "hist", "data": {"@h": [{"min": 10, "max": 19, "count": 3},
                                       {"min": 0, "max": 200, "count": 1}]}}],
     r"bucket 1 \[0, 200\] does not start after bucket 0 ends \(19\)"),
    # P10 Q14: stats whose total is not count × average
    ([{"type": "stats", "data": {"@s": {"count": 4, "average": 10, "total": 99999}}}],
     "stats count 4, average 10, total 99999 do not agree"),
    ([{"type": "stats", "data": {"@s": {"count": 0, "average": 5, "total": 0}}}],
     "stats count 0, average 5, total 0 do not agree"),
    # P10 S5: a map name with control characters, or outside [A-Za-z0-9_]
    ([{"type": "map", "data": {"@a\u001b]0;pwn\u0007\nX": 5}}], r"map name .* is not '@' and"),
    # P10 Q15: '@a[1]' would be the column of map @a's key 1
    ([{"type": "map", "data": {"@a": {"1": 5}}}, {"type": "map", "data": {"@a[1]": 7}}],
     r"map name '@a\[1\]' is not '@' and letters"),
], ids=["negative count", "min above max", "overlapping", "stats total", "stats no values",
        "control characters", "name with a key"])
def test_json_maps_no_bpftrace_prints_are_refused(tmp_path, events, message):
    """Each was parsed as a measurement (and S5's name became a column, Q15's value went into
    another map's column)."""
    (tmp_path / bt.OUTPUT).write_text(json_events(*events))
    with pytest.raises(ParseError, match=message):
        bt.Bpftrace().parse(tmp_path)


def test_text_stats_must_agree_and_good_maps_still_parse(tmp_path):
    with pytest.raises(ParseError, match="stats count 4, average 10, total 99999 do not agree"):
        parse_bpftrace_text("Attaching 1 probe...\n@s: count 4, average 10, total 99999\n")
    assert parse_bpftrace_text("Attaching 1 probe...\n@s: count 4, average -2, total -9\n"
                               )["maps"]["@s"] == {(): {"count": 4, "average": -2, "total": -9}}
    (tmp_path / bt.OUTPUT).write_text(json_events(
        {"type": "hist", "data": {"@h": [{"min": None, "max": -1, "count": 1},
                                         {"min": 0, "max": 0, "count": 0},
                                         {"min": 1, "max": None, "count": 2}]}},
        {"type": "stats", "data": {"@s": {"count": 3, "average": 3, "total": 10}}}))
    metrics = bt.Bpftrace().parse(tmp_path)
    assert metrics["@s.average"] == 3 and json.loads(metrics["@h.hist"])[2]["count"] == 2


def test_two_maps_in_one_column_are_refused(tmp_path, monkeypatch):
    """What the name rule leaves: a parsed result whose entries give one column twice."""
    (tmp_path / bt.OUTPUT).write_text(ATTACHED)
    real = bt.parse_bpftrace_json

    def doubled(text, source):
        return {**real(text, source), "maps": {"@a": {("1",): 5}, "@a[1]": {(): 7}}}
    monkeypatch.setattr(bt, "parse_bpftrace_json", doubled)
    with pytest.raises(ParseError, match=r"gives the column '@a\[1\]' another map"):
        bt.Bpftrace().parse(tmp_path)
