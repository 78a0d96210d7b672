"""Golden tests for iolab.parsers.fio.

The fixtures are real fio-3.33 output (see tests/fixtures/fio/README.md). Where it is simple, the
expected value is also computed here straight from the raw JSON, independently of the parser.
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path

import pytest

from iolab.errors import ParseError
from iolab.parsers import REPORT_MOST
from iolab.parsers.fio import parse_fio_file, parse_fio_json

FIX = Path(__file__).parent / "fixtures" / "fio"
BAD = FIX / "bad"

NJ4_PLUS = FIX / "psync_randread_4k_nj4.jsonplus.json"
NJ4_GROUP = FIX / "psync_randread_4k_nj4_group.json"
URING = FIX / "io_uring_randread_4k_qd16.jsonplus.json"
MIXED = FIX / "libaio_randrw70_4k_qd8.json"
NOTES = FIX / "psync_iodepth4_stdout.txt"
STATUS = FIX / "psync_status_interval_stdout.txt"
ERROR_RUN = FIX / "error_direct_unaligned_bs.json"

DIRECTION_KEYS = ["iops", "bw_bytes", "io_bytes", "total_ios", "clat_mean_us",
                  "clat_p50_us", "clat_p99_us", "clat_p999_us"]
EXPECTED_KEYS = (
    ["fio_version", "njobs", "error", "direction", "iops", "bw_bytes", "mibs",
     "clat_mean_us", "clat_p50_us", "clat_p99_us", "usr_cpu", "sys_cpu", "ctx", "runtime_ms",
     "timestamp_ms"]
    + [f"{d}_{k}" for d in ("read", "write", "trim") for k in DIRECTION_KEYS]
    + ["warnings", "job_options"]
)


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def nearest_rank(latencies_ns: list[int], p: float) -> float:
    """Percentile by the nearest-rank rule on the expanded sample list, in µs."""
    ordered = sorted(latencies_ns)
    return ordered[math.ceil(p / 100 * len(ordered)) - 1] / 1000


def expand_bins(jobs: list[dict], direction: str) -> list[int]:
    return [int(value) for job in jobs
            for value, count in job[direction]["clat_ns"]["bins"].items()
            for _ in range(count)]


# --- golden values from real runs -------------------------------------------------------------

def test_numjobs_without_group_reporting_pools_four_job_objects():
    jobs = raw(NJ4_PLUS)["jobs"]
    r = parse_fio_file(NJ4_PLUS)

    assert list(r) == EXPECTED_KEYS
    assert r["fio_version"] == "fio-3.33"
    assert r["njobs"] == 4 == len(jobs)
    assert r["error"] == 0
    assert r["warnings"] == []
    assert r["direction"] == "read"

    assert r["read_iops"] == pytest.approx(36708.291709)
    assert r["read_iops"] == pytest.approx(sum(j["read"]["iops"] for j in jobs))
    assert r["read_bw_bytes"] == 150357160 == sum(j["read"]["bw_bytes"] for j in jobs)
    assert r["read_io_bytes"] == 150507520
    assert r["read_total_ios"] == 36745 == sum(j["read"]["total_ios"] for j in jobs)
    assert r["iops"] == r["read_iops"]
    assert r["bw_bytes"] == r["read_bw_bytes"]
    assert r["mibs"] == pytest.approx(150357160 / 2**20)

    weighted = sum(j["read"]["clat_ns"]["mean"] * j["read"]["clat_ns"]["N"] for j in jobs)
    assert r["read_clat_mean_us"] == pytest.approx(weighted / 36745 / 1000)
    assert r["read_clat_mean_us"] == pytest.approx(106.012900, abs=1e-6)

    # Merged-histogram percentiles: golden values, and an independent nearest-rank computation.
    assert (r["read_clat_p50_us"], r["read_clat_p99_us"], r["read_clat_p999_us"]) \
        == (102.912, 175.104, 325.632)
    samples = expand_bins(jobs, "read")
    assert len(samples) == 36745
    for key, p in (("p50", 50), ("p99", 99), ("p999", 99.9)):
        assert r[f"read_clat_{key}_us"] == nearest_rank(samples, p)
    assert (r["clat_mean_us"], r["clat_p50_us"], r["clat_p99_us"]) \
        == (r["read_clat_mean_us"], r["read_clat_p50_us"], r["read_clat_p99_us"])

    assert r["usr_cpu"] == pytest.approx(1.3 + 4.4 + 1.2 + 1.6)
    assert r["sys_cpu"] == pytest.approx(12.7 + 10.0 + 13.4 + 12.9)
    assert r["runtime_ms"] == 1000
    assert r["timestamp_ms"] == raw(NJ4_PLUS)["timestamp_ms"]  # when fio wrote the report
    assert r["runtime_ms"] == 1000

    for d in ("write", "trim"):
        assert (r[f"{d}_iops"], r[f"{d}_bw_bytes"], r[f"{d}_io_bytes"], r[f"{d}_total_ios"]) \
            == (0.0, 0, 0, 0)
        assert r[f"{d}_clat_mean_us"] is None
        assert r[f"{d}_clat_p50_us"] is None and r[f"{d}_clat_p999_us"] is None
    json.dumps(r)  # plain JSON types only


def test_histogram_percentiles_match_fios_own_for_each_single_job():
    doc = raw(NJ4_PLUS)
    for job in doc["jobs"]:
        single = dict(doc, jobs=[job])
        r = parse_fio_json(json.dumps(single))
        table = job["read"]["clat_ns"]["percentile"]
        assert r["read_clat_p50_us"] == table["50.000000"] / 1000
        assert r["read_clat_p99_us"] == table["99.000000"] / 1000
        assert r["read_clat_p999_us"] == table["99.900000"] / 1000


def test_histogram_percentile_at_an_exact_boundary_takes_the_lower_bin():
    # fio picks the first bin whose running count reaches p % of N, ties included.
    # four 4 KiB reads over the job's 1001 ms, in its counts too (N is the I/Os completed)
    doc = raw(URING)
    doc["jobs"][0]["read"].update(total_ios=4, iops=4000 / 1001, io_bytes=4 * 4096,
                                  bw_bytes=4 * 4096 * 1000 // 1001)
    doc["jobs"][0]["read"]["clat_ns"].update(N=4, mean=2000.0, bins={"3000": 2, "1000": 2})
    r = parse_fio_json(json.dumps(doc))
    assert (r["read_clat_p50_us"], r["read_clat_p99_us"], r["read_clat_p999_us"]) \
        == (1.0, 3.0, 3.0)


def test_group_reporting_object_gives_totals_not_per_member_averages():
    job = raw(NJ4_GROUP)["jobs"][0]
    assert job["job_runtime"] == 4000  # fio sums the 4 members' runtimes
    r = parse_fio_file(NJ4_GROUP)

    assert r["njobs"] == 1
    assert r["read_iops"] == pytest.approx(34593.406593)
    assert r["read_bw_bytes"] == 141694593
    assert r["read_io_bytes"] == 141836288
    assert r["read_total_ios"] == 34628
    assert r["read_clat_mean_us"] == pytest.approx(114.891033355)
    assert (r["read_clat_p50_us"], r["read_clat_p99_us"], r["read_clat_p999_us"]) \
        == (112.128, 181.248, 419.84)
    assert r["runtime_ms"] == 1001  # the longest member's read runtime
    # fio's 2.1 % / 12.4 % are CPU time over the summed runtime, i.e. per member.
    assert r["usr_cpu"] == pytest.approx(2.1 * 4000 / 1001)
    assert r["sys_cpu"] == pytest.approx(12.4 * 4000 / 1001)
    assert r["ctx"] == 34646
    assert r["warnings"] == []


def test_io_uring_single_job_jsonplus():
    r = parse_fio_file(URING)
    assert r["njobs"] == 1
    assert r["direction"] == "read"
    assert r["iops"] == pytest.approx(75218.781219)
    assert r["bw_bytes"] == 308096127
    assert r["mibs"] == pytest.approx(293.823363, abs=1e-6)
    assert r["read_total_ios"] == 75294
    assert r["clat_mean_us"] == pytest.approx(208.804725848)
    assert (r["clat_p50_us"], r["clat_p99_us"], r["read_clat_p999_us"]) \
        == (193.536, 321.536, 2277.376)
    assert (r["usr_cpu"], r["sys_cpu"], r["ctx"], r["runtime_ms"]) == (8.7, 30.5, 4700, 1000)


def test_mixed_randrw_reports_both_directions():
    job = raw(MIXED)["jobs"][0]
    r = parse_fio_file(MIXED)

    assert r["read_iops"] == pytest.approx(37903.096903)
    assert r["write_iops"] == pytest.approx(16208.791209)
    assert r["iops"] == pytest.approx(job["read"]["iops"] + job["write"]["iops"])
    assert r["read_bw_bytes"] == 155251084
    assert r["write_bw_bytes"] == 66391208
    assert r["bw_bytes"] == 155251084 + 66391208
    assert (r["read_total_ios"], r["write_total_ios"]) == (37941, 16225)
    assert r["write_io_bytes"] == 66457600
    assert r["write_clat_mean_us"] == pytest.approx(159.318738305)
    assert (r["write_clat_p50_us"], r["write_clat_p99_us"], r["write_clat_p999_us"]) \
        == (138.24, 692.224, 1892.352)
    assert (r["read_clat_p50_us"], r["read_clat_p99_us"]) == (123.392, 391.168)
    # read moved more bytes (70/30 mix), so the headline latencies are read's
    assert r["direction"] == "read"
    assert (r["clat_p50_us"], r["clat_p99_us"]) == (123.392, 391.168)
    assert r["trim_iops"] == 0.0 and r["trim_clat_p99_us"] is None


def test_headline_latencies_follow_the_direction_that_moved_most_bytes():
    doc = raw(MIXED)
    job = doc["jobs"][0]
    job["read"], job["write"] = job["write"], job["read"]  # now write has the 70 %
    r = parse_fio_json(json.dumps(doc))
    assert r["direction"] == "write"
    assert (r["clat_p50_us"], r["clat_p99_us"]) == (123.392, 391.168)
    assert r["clat_mean_us"] == r["write_clat_mean_us"]


def test_text_notes_before_json_are_skipped():
    text = NOTES.read_text()
    assert text.startswith("note: both iodepth >= 1 and synchronous I/O engine")
    r = parse_fio_file(NOTES)
    assert r["iops"] == pytest.approx(16888.111888)
    assert r["read_total_ios"] == 16905
    assert (r["clat_p50_us"], r["clat_p99_us"]) == (56.576, 103.936)
    assert r["warnings"] == []


def test_status_interval_uses_last_report_and_warns():
    text = STATUS.read_text()
    last = json.loads(text[text.rindex("\n{") + 1:])["jobs"][0]["read"]
    r = parse_fio_file(STATUS)
    assert r["read_iops"] == pytest.approx(last["iops"])
    assert r["read_iops"] == pytest.approx(17174.912544)  # the interim reports say 17219.9 and 17078.6
    assert r["read_total_ios"] == 34367
    assert r["runtime_ms"] == 2000
    assert len(r["warnings"]) == 1 and "3 concatenated JSON reports" in r["warnings"][0]


def test_truncated_last_report_after_complete_ones_raises():
    text = STATUS.read_text()
    cut = text[: text.rindex("\n{") + 2000]
    with pytest.raises(ParseError, match="truncated or invalid JSON at line 618 col 31"):
        parse_fio_json(cut, source="status.txt")


def test_text_after_the_report_is_ignored_with_a_warning():
    text = MIXED.read_text() + "\nmixed: (groupid=0, jobs=1): err= 0: pid=1\n"
    r = parse_fio_json(text)
    assert r["read_iops"] == pytest.approx(37903.096903)
    assert len(r["warnings"]) == 1 and "non-JSON text after" in r["warnings"][0]


def test_crlf_line_endings_are_accepted():
    text = ("note: a banner\r\n" + NOTES.read_text().split("\n", 1)[1]).replace("\n", "\r\n")
    assert parse_fio_json(text)["read_total_ios"] == 16905


def test_job_error_is_reported_not_raised():
    r = parse_fio_file(ERROR_RUN)
    assert r["error"] == 22  # EINVAL
    assert r["njobs"] == 1
    assert r["direction"] is None
    assert (r["iops"], r["bw_bytes"], r["read_io_bytes"]) == (0.0, 0, 0)
    assert r["read_total_ios"] == 1  # the failed I/O is counted although no byte moved
    assert r["clat_mean_us"] is None and r["clat_p50_us"] is None
    assert r["read_clat_p99_us"] is None
    assert r["runtime_ms"] == 0


def test_first_nonzero_error_over_jobs():
    doc = raw(NJ4_PLUS)
    doc["jobs"][2]["error"] = 5
    doc["jobs"][3]["error"] = 22
    assert parse_fio_json(json.dumps(doc))["error"] == 5


# --- malformed input --------------------------------------------------------------------------

@pytest.mark.parametrize("name, problem", [
    ("truncated.json", "truncated or invalid JSON at line 129 col 1"),
    ("empty.json", "empty input"),
    ("garbage.txt", "no JSON object found"),
    ("no_jobs.json", "no 'jobs' array"),
])
def test_bad_fixture_raises_parse_error_naming_the_file(name, problem):
    with pytest.raises(ParseError) as info:
        parse_fio_file(BAD / name)
    assert name in str(info.value)
    assert problem in str(info.value)
    assert info.value.source == str(BAD / name)


def test_a_report_file_beyond_the_bound_is_refused_unread(tmp_path):
    """Probe 13 P13-03: fio.json was read whole (and held twice, as bytes and as text): a
    tool's 300 MB of blanks before a report took 600 MB of memory, one of gigabytes all of
    it. Now a file of more than REPORT_MOST bytes is refused by its size, naming the file and
    the bound (a sparse file here: nothing of it is on disk or read)."""
    path = tmp_path / "fio.json"
    with open(path, "wb") as fh:
        fh.write(URING.read_bytes())
        os.truncate(fh.fileno(), REPORT_MOST + 1)
    with pytest.raises(ParseError) as info:
        parse_fio_file(path)
    assert str(info.value) == (
        f"{path}: holds more than 134,217,728 bytes, more than any report of fio's (allowed: "
        "at most 134,217,728 bytes); it is not read")
    with open(path, "r+b") as fh:  # blanks after the report: read, and ignored with a warning
        fh.write(URING.read_bytes() + b" " * 10)
        os.truncate(fh.fileno(), len(URING.read_bytes()) + 10)
    assert parse_fio_file(path)["read_total_ios"] == 75294


def test_a_missing_report_file_is_no_file(tmp_path):
    """A run without its report fails as one with no output (one_run reads FileNotFoundError)."""
    with pytest.raises(FileNotFoundError):
        parse_fio_file(tmp_path / "fio.json")


def _mutated(edit) -> str:
    doc = copy.deepcopy(raw(NJ4_GROUP))
    edit(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("edit, problem", [
    (lambda d: d["jobs"][0].pop("read"), "jobs[0] has no 'read' section"),
    (lambda d: d["jobs"][0].pop("write"), "jobs[0] has no 'write' section"),
    (lambda d: d["jobs"][0].update(mixed=d["jobs"][0].pop("read")), "unified_rw_reporting"),
    (lambda d: d.update(jobs={}), "'jobs' must be an array, got an object"),
    (lambda d: d.update(jobs=[]), "'jobs' is empty"),
    (lambda d: d["jobs"].append("job"), "jobs[1] must be an object, got a string"),
    (lambda d: d["jobs"][0]["read"].update(iops="fast"), "jobs[0].read.iops must be a number"),
    (lambda d: d["jobs"][0]["read"].update(iops=True), "jobs[0].read.iops must be a number"),
    (lambda d: d["jobs"][0]["write"].pop("bw_bytes"), "jobs[0].write: missing key 'bw_bytes'"),
    (lambda d: d["jobs"][0]["read"]["clat_ns"].update(N=None), "clat_ns.N must be an integer"),
    (lambda d: d["jobs"][0].update(job_runtime="1s"), "jobs[0].job_runtime must be an integer"),
    (lambda d: d.pop("fio version"), "'fio version'"),
])
def test_wrong_shapes_and_types_raise(edit, problem):
    with pytest.raises(ParseError) as info:
        parse_fio_json(_mutated(edit), source="mutated.json")
    assert str(info.value).startswith("mutated.json: ")
    assert problem in str(info.value)


def test_bin_latencies_in_other_digits_than_fios_are_refused():
    """fio writes a bin's latency in ASCII digits; '١٩٣٥٣٦' (Arabic-Indic) was read as 193536
    ns, so p50 and p99 came from keys fio never wrote (P5 of probe 6)."""
    doc = raw(URING)
    clat = doc["jobs"][0]["read"]["clat_ns"]
    other = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
    clat["bins"] = {key.translate(other): count for key, count in clat["bins"].items()}
    with pytest.raises(ParseError, match=r"b.json: jobs\[0\].read.clat_ns.bins: expected "
                                         "integer latency keys"):
        parse_fio_json(json.dumps(doc), source="b.json")


def _read_edited(**fields) -> str:
    """The io_uring job's report (bs 4k, iodepth 16, read runtime 1001 ms) with fields of its
    read section set; a dict value updates that sub-object."""
    doc = raw(URING)
    read = doc["jobs"][0]["read"]
    for key, value in fields.items():
        if isinstance(value, dict):
            read[key].update(value)
        else:
            read[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize("fields, problem", [
    # P7 of probe 6: a mean latency 25 times the slowest one
    ({"clat_ns": {"mean": 5e6, "max": 200_000}},
     "jobs[0].read.clat_ns: mean 5e+06 with min 143 and max 200000 (allowed: min <= mean <= "
     "max)"),
    ({"clat_ns": {"min": 10**9}}, "jobs[0].read.clat_ns: mean 208805 with min 1e+09"),
    ({"lat_ns": {"mean": 1.0}}, "jobs[0].read.lat_ns: mean 1 with min 53698"),
    ({"slat_ns": {"mean": 10**6}}, "jobs[0].read.slat_ns: mean 1e+06 with min 1490"),
    # P8: 5 I/Os beside 75,218 IOPS over 1 s
    ({"total_ios": 5}, "jobs[0].read: iops 75218.8 over runtime 1001 ms makes 75294.0 I/Os, "
                       "but total_ios is 5"),
    ({"runtime": 3}, "jobs[0].read: iops 75218.8 over runtime 3 ms makes 225.7 I/Os"),
    # P9: bandwidth 100 times what the bytes give
    ({"bw_bytes": 30809612700}, "jobs[0].read: io_bytes 308404224 over runtime 1001 ms is "
                                "308096128 B/s, but bw_bytes is 30809612700"),
    # bytes and bandwidth agreeing with each other, but not with 4 KiB reads
    ({"io_bytes": 30840422400, "bw_bytes": 30809612787},
     "jobs[0].read: io_bytes 30840422400 is 7529400.0 blocks of the job's bs 4096, but "
     "total_ios is 75294 (allowed: 32 I/Os apart"),
    ({"clat_ns": {"bins": {"193536": 75295}}},
     "jobs[0].read.clat_ns: the bins count 75295 latencies, N says 75294"),
    ({"clat_ns": {"bins": {"193536": 75293, "99000000": 1}}},
     "jobs[0].read.clat_ns.bins: a latency is 9.9e+07 ns, outside the min 143 and max "
     "3.61004e+06 ns that clat_ns reports"),
    ({"total_ios": -5}, "jobs[0].read.total_ios is -5 (allowed: a count, 0 or more)"),
], ids=["mean above max", "min above max", "lat mean below min", "slat mean above max",
        "total_ios 5", "runtime 3 ms", "bw_bytes x100", "bytes x100", "bins beside N",
        "bin beyond max", "negative count"])
def test_a_report_whose_numbers_contradict_each_other_is_refused(fields, problem):
    """Each number here is one fio computes from others of the same report: a report where
    they disagree is not what fio measured (damaged, or made up), and was stored as a sample."""
    with pytest.raises(ParseError) as info:
        parse_fio_json(_read_edited(**fields), source="c.json")
    assert str(info.value).startswith(f"c.json: {problem}")


def test_numbers_within_fios_own_rounding_agree():
    """The slack of each check, at its edge: total_ios the whole number nearest iops over
    the runtime; bw_bytes io_bytes per second cut to whole bytes; io_bytes up to twice the
    iodepth's I/Os off total_ios blocks (counters zeroed after ramp_time and read at the end
    with I/Os in flight), and a block for each short I/O; a bin within one bin width (1/64)
    of the max."""
    iops = 75294 * 1000 / 1001
    agree = [{"iops": iops + 0.49 * 1000 / 1001}, {"bw_bytes": 308096127},
             {"bw_bytes": 308096128},
             {"io_bytes": (75294 + 32) * 4096, "bw_bytes": (75294 + 32) * 4096 * 1000 // 1001},
             {"clat_ns": {"max": 3_600_000, "bins": {"143": 75293, "3656250": 1}}}]
    agree.append({"short_ios": 10, "io_bytes": (75294 - 42) * 4096,  # 10 read 0 bytes
                  "bw_bytes": (75294 - 42) * 4096 * 1000 // 1001})
    for fields in agree:
        parse_fio_json(_read_edited(**fields))
    disagree = [{"iops": iops + 0.51 * 1000 / 1001}, {"bw_bytes": 308096126},
                {"bw_bytes": 308096129}, {"clat_ns": {"bins": {"143": 75293, "3656300": 1},
                                                      "max": 3_600_000}},
                {"io_bytes": (75294 + 33) * 4096,
                 "bw_bytes": (75294 + 33) * 4096 * 1000 // 1001}]
    for fields in disagree:
        with pytest.raises(ParseError, match="the report contradicts itself"):
            parse_fio_json(_read_edited(**fields))


@pytest.mark.parametrize("runtime", [1001, 0])
def test_a_report_of_no_io_beside_thousands_of_completions_is_refused(runtime):
    """Probe 13 P13-01: a report with its read rates and counts set to 0 (iops, bw_bytes,
    total_ios, io_bytes) but its 75,294 completion latencies kept agrees with itself in every
    rate-over-runtime check, and was stored as a sample of 0 IOPS; fio counts each I/O in
    both total_ios and clat_ns.N, so they part only by the I/Os in flight."""
    zeroed = _read_edited(runtime=runtime, iops=0.0, bw_bytes=0, total_ios=0, io_bytes=0)
    with pytest.raises(ParseError) as info:
        parse_fio_json(zeroed, source="z.json")
    assert str(info.value) == (
        "z.json: jobs[0].read: clat_ns.N counts 75294 completed I/Os, but total_ios is 0 "
        "(fio counts each I/O in both; allowed: 32 apart, twice what its iodepth and numjobs "
        "keep in flight): the report contradicts itself")


def test_completions_and_ios_agree_within_twice_the_ios_in_flight():
    """iodepth 16: N may lie 32 I/Os from total_ios (in flight when the counters are zeroed
    after ramp_time, and at the stop), not 33; the committed runs lie within iodepth."""
    for apart, agrees in ((32, True), (-32, True), (33, False), (-33, False)):
        n = 75294 + apart
        edited = _read_edited(clat_ns={"N": n, "bins": {"193536": n}})
        if agrees:
            assert parse_fio_json(edited)["read_total_ios"] == 75294
        else:
            with pytest.raises(ParseError, match=f"clat_ns.N counts {n} completed I/Os"):
                parse_fio_json(edited)


def test_a_percentile_of_fios_map_beyond_the_slowest_latency_is_refused():
    """Without json+ bins the percentiles come from fio's own map; one beyond clat_ns.max
    by more than a bin (1/64) was not measured with it."""
    doc = raw(MIXED)
    clat = doc["jobs"][0]["write"]["clat_ns"]
    clat["percentile"]["99.000000"] = clat["max"] * 2
    with pytest.raises(ParseError, match=r"m.json: write: clat p99 is .* ns, outside the min"):
        parse_fio_json(json.dumps(doc), source="m.json")


def test_a_rate_no_measurement_has_is_left_to_the_sample_check():
    """A NaN or negative rate contradicts its count too; the sample check names it as a
    metric no measurement can have, which says more than a contradiction."""
    assert parse_fio_json(_read_edited(iops=-5.0))["iops"] == -5.0
    assert math.isinf(parse_fio_json(_read_edited(iops=float("inf")))["iops"])


@pytest.mark.parametrize("bs", ["4k-64k", "4k,8k", "64k", "4096"])
def test_the_block_size_is_held_only_where_the_job_fixes_one(bs):
    """A range or one size per direction fixes no size to hold io_bytes to; a plain size
    does (64k: 16 times the report's 4 KiB reads)."""
    doc = raw(URING)
    doc["jobs"][0]["job options"]["bs"] = bs
    if bs == "64k":
        with pytest.raises(ParseError, match="blocks of the job's bs 65536"):
            parse_fio_json(json.dumps(doc))
    else:
        assert parse_fio_json(json.dumps(doc))["read_io_bytes"] == 308404224


def test_top_level_array_is_not_a_report():
    with pytest.raises(ParseError, match="s.json: no JSON object found"):
        parse_fio_json('[{"fio version": "fio-3.33", "jobs": []}]\n', source="s.json")


def test_several_jobs_without_bins_cannot_pool_percentiles():
    doc = raw(NJ4_PLUS)
    for job in doc["jobs"]:
        del job["read"]["clat_ns"]["bins"]
    with pytest.raises(ParseError, match="4 job objects did read I/O but have no 'clat_ns.bins'"):
        parse_fio_json(json.dumps(doc), source="nobins.json")


def test_single_job_without_the_999_percentile_reports_none():
    doc = raw(MIXED)
    del doc["jobs"][0]["write"]["clat_ns"]["percentile"]["99.900000"]
    r = parse_fio_json(json.dumps(doc))
    assert r["write_clat_p999_us"] is None
    assert r["write_clat_p99_us"] == 692.224


# --- the driver -------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1, 2, 100])
def test_a_rate_beside_a_runtime_of_0_is_refused(scale):
    """Probe 12 R1: fio divides by a direction's runtime only when it has one, so its rate
    beside a runtime of 0 is 0; a runtime of 0 beside a rate (here the run's own, doubled,
    a hundredfold) skipped every rate-against-count check and the rate was stored."""
    iops, bw_bytes = 75294 * 1000 / 1001 * scale, 308096128 * scale
    with pytest.raises(ParseError, match=r"c.json: jobs\[0\].read: runtime is 0 ms, but iops "
                                         r"is .* \(fio reports a rate of 0 .*contradicts"):
        parse_fio_json(_read_edited(runtime=0, iops=iops, bw_bytes=bw_bytes), source="c.json")
    # a direction that did nothing: runtime 0, rates 0, no I/O completed (the write section
    # of a read job)
    assert parse_fio_json(_read_edited(runtime=0, iops=0.0, bw_bytes=0, total_ios=0,
                                       io_bytes=0, clat_ns={"N": 0}))["read_iops"] == 0.0
