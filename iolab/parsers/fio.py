"""Parser for fio's JSON report (``--output-format=json`` or ``json+``), written for fio 3.x.

Responsible for: turning the text of one fio report into one flat dict of metrics with
explicit units, aggregating over every job object in the report, and raising
:class:`~iolab.errors.ParseError` (naming the source and the problem) for malformed input,
and for a report whose numbers contradict each other, which no run of fio writes: a rate
that is not its count over the runtime (iops and total_ios, bw_bytes and io_bytes), bytes
that are not the I/Os of the job's block size, a mean latency outside its min and max, a
percentile or histogram bin beyond them, bins that do not add up to N, or an N of completed
I/Os that is not the direction's total_ios. Each is held with the slack of fio's own rounding
or of the I/Os in flight (the ``*_SLACK`` constants and the checks say how much, and why). A
rate that is NaN, infinite or negative is left to ``Experiment.sample_problem``, which names it.

Not responsible for: running fio (``scripts/drivers/fio.sh`` does that), reading fio's exit
status or stderr, deciding whether a job's non-zero ``error`` makes the run unusable (the
value is reported as ``error``; the caller decides), or statistics across repetitions.

What the input may look like:

* Text before the report (fio notes and banners when stdout was captured): everything
  before the first line that starts with ``{`` is skipped.
* Several complete reports one after another (``--status-interval``): the last one is
  used, and ``warnings`` says so. Text after the last report (``json,normal`` output) is
  ignored with a warning. An incomplete report anywhere raises ParseError, because the
  final numbers are then missing.
* ``numjobs`` without ``group_reporting`` gives several job objects, and several job
  sections or groups do too. They are pooled: IOPS, bandwidth, bytes, I/O counts and
  context switches are summed; mean completion latency is the mean weighted by each
  object's sample count ``N``.
* Percentiles cannot be averaged. With one job object (``group_reporting`` included) they
  are read from fio's ``clat_ns.percentile`` map. With several, they are recomputed from
  the ``json+`` histograms (``clat_ns.bins``) merged over the objects, the same way fio
  computes them; without ``json+`` that is impossible and ParseError is raised.

CPU and runtime, and a trap in ``group_reporting`` objects: fio sums ``job_runtime`` over
the members of a group and reports ``usr_cpu``/``sys_cpu`` as member CPU time divided by
that summed runtime, i.e. a per-member average. To report CPU as a total in percent of one
CPU (like GNU time's ``%CPU``), each object's wall time is taken as its ``job_runtime``,
capped at its longest per-direction ``runtime`` (which fio takes as the maximum over the
members). Its CPU time (``usr_cpu * job_runtime``) is then divided by that wall time. For
a single job the cap normally does nothing (fio rounds direction runtimes up), so the
result is the plain sum of the jobs' ``usr_cpu`` and the longest ``job_runtime``. One case
where the cap changes a single job: a job that runs its directions one after another (a
write phase then a verify read phase) gets the longest phase as its wall time.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from itertools import accumulate
from pathlib import Path

from iolab.errors import ParseError, excerpt
from iolab.parsers import decode_json, int_within_float, is_digits, read_report, within_float

DIRECTIONS = ("read", "write", "trim")

# Result key suffix -> percentile, as fio spells it in clat_ns.percentile ("%f").
_PERCENTILES = {"p50": 50.0, "p99": 99.0, "p999": 99.9}

_FIRST_BRACE_LINE = re.compile(r"^\{", flags=re.MULTILINE)
_WHITESPACE = re.compile(r"\s*")

# The times a report's timestamp_ms can hold, ms since the epoch: none before fio existed
# (2005-01-01) and none past 2100-01-01; a 0, or a date far ahead, would place the measurement
# window (and every collector's numbers) where no run was
EARLIEST_MS = 1_104_537_600_000
LATEST_MS = 4_102_444_800_000

_NUMBER = ((int, float), "a number")
_INT = (int, "an integer")
_OBJECT = (dict, "an object")

# How far a report's numbers may stray from what fio computes them from before the report
# contradicts itself (no run of fio writes such a report; a damaged or made-up one does):
# * fio computes a direction's iops as total_ios * 1000 / runtime (ms) and prints it to 6
#   decimals, so total_ios is the whole number nearest iops * runtime / 1000: half an I/O.
# * bw_bytes is io_bytes * 1000 / runtime in whole bytes per second, cut down (integer
#   division): at most 1 B/s below, never above; 1 B/s either way.
# * a mean of whole nanoseconds lies within its min and max; fio accumulates it in floating
#   point and prints 6 decimals: a millionth of the max either way.
# * fio's latency histogram has 64 bins for each power of two and reports a bin by a value
#   inside it, so a percentile or bin may lie up to one bin (1/64) beyond the min and max.
# * io_bytes counts the bytes of completed I/Os, total_ios the I/Os issued: they part by
#   the I/Os in flight when fio zeroes its counters after ramp_time and when it stops (the
#   committed runs reach one iodepth of each job), so bs * (2 * iodepth * numjobs) bytes,
#   and by the I/Os that moved less than bs (short_ios), up to bs each.
IOS_SLACK = 0.5
BW_BYTES_SLACK = 1.0
MEAN_SLACK = 1e-6
HISTOGRAM_SLACK = 1 / 64
LATENCIES = ("slat_ns", "clat_ns", "lat_ns")
# The most bytes of a report read is the parsers' REPORT_MOST: json+ with every one of fio's
# 1,856 latency bins filled in each direction is about 170 kB a job object, so it holds
# hundreds of jobs reported one by one (thousands as the committed runs fill them)
_ROLE = "fio's JSON report"
_SIZE = re.compile(r"([0-9]+)([kmg]?)(?:i?b)?", flags=re.IGNORECASE)


def parse_fio_file(path: str | Path) -> dict:
    """Read a file holding fio's report, of at most :data:`REPORT_MOST` bytes and never
    through a link, and parse it with :func:`parse_fio_json`; ParseError naming the file and
    the bound for a larger one, before any of it is read."""
    return parse_fio_json(read_report(path, "fio", _ROLE), source=str(path))


def parse_fio_json(text: str, source: str = "<string>") -> dict:
    """Parse the text of one fio run's JSON report into a flat dict of metrics.

    Keys (units in the names; ``None`` where a value does not exist, e.g. percentiles of
    a direction that did no I/O):

    * ``fio_version`` (str), ``njobs`` (job objects in the report), ``error`` (first
      non-zero job errno, else 0), ``warnings`` (list of str; empty for a clean report),
      ``job_options`` (per job object, the options fio reports it ran with and its
      ``jobname`` as ``name``; None for a job whose report does not list them).
    * Totals over directions: ``iops``, ``bw_bytes`` (B/s), ``mibs`` (``bw_bytes / 2**20``).
    * ``direction``: the direction that moved the most bytes (``None`` if none did; a tie
      goes to the first of read, write, trim), and its ``clat_mean_us``, ``clat_p50_us``, ``clat_p99_us``.
    * ``usr_cpu``, ``sys_cpu`` (total over jobs, percent of one CPU), ``ctx`` (context
      switches), ``runtime_ms`` (wall time of the longest job), ``timestamp_ms`` (when fio
      wrote the report, ms since the epoch; None when absent).
    * For each of read, write, trim: ``<dir>_iops``, ``<dir>_bw_bytes`` (B/s),
      ``<dir>_io_bytes``, ``<dir>_total_ios``, ``<dir>_clat_mean_us``, ``<dir>_clat_p50_us``,
      ``<dir>_clat_p99_us``, ``<dir>_clat_p999_us``.
    """
    report, warnings = _last_report(text, source)
    jobs = _jobs(report, source)
    version = report.get("fio version")
    if not isinstance(version, str):
        raise ParseError(source, "missing or non-string 'fio version' at the top level")

    per_dir = {d: _direction(jobs, d, source) for d in DIRECTIONS}
    busiest = max(DIRECTIONS, key=lambda d: per_dir[d]["io_bytes"])
    if per_dir[busiest]["io_bytes"] == 0:
        busiest = None

    usr_cpu, sys_cpu, runtime_ms = _cpu_and_runtime(jobs, source)
    errors = [_field(job, "error", _INT, f"jobs[{i}]", source) for i, job in enumerate(jobs)]

    bw_bytes = sum(per_dir[d]["bw_bytes"] for d in DIRECTIONS)
    top = per_dir[busiest] if busiest else {}
    result = {
        "fio_version": version,
        "njobs": len(jobs),
        "error": next((e for e in errors if e != 0), 0),
        "direction": busiest,
        "iops": sum(per_dir[d]["iops"] for d in DIRECTIONS),
        "bw_bytes": bw_bytes,
        "mibs": bw_bytes / 2**20,
        "clat_mean_us": top.get("clat_mean_us"),
        "clat_p50_us": top.get("clat_p50_us"),
        "clat_p99_us": top.get("clat_p99_us"),
        "usr_cpu": usr_cpu,
        "sys_cpu": sys_cpu,
        "ctx": sum(_count(job, "ctx", f"jobs[{i}]", source) for i, job in enumerate(jobs)),
        "runtime_ms": runtime_ms,
        "timestamp_ms": _timestamp_ms(report, source),
    }
    for d in DIRECTIONS:
        for key, value in per_dir[d].items():
            result[f"{d}_{key}"] = value
    result["warnings"] = warnings
    result["job_options"] = [_job_options(job, f"jobs[{i}]", source)
                             for i, job in enumerate(jobs)]
    return result


def _job_options(job: dict, where: str, source: str) -> dict[str, str] | None:
    """The options fio says a job ran with, its ``jobname`` as ``name``; None for a report
    that does not list them (fio writes ``job options`` since 2.x)."""
    options = job.get("job options")
    if options is None:
        return None
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise ParseError(source, f"{where}['job options'] must be an object of strings, got "
                                 f"{_kind(options)}")
    name = _field(job, "jobname", (str, "a string"), where, source)
    return {**options, "name": name}


def _timestamp_ms(report: dict, source: str) -> int | float | None:
    """When fio wrote the report (ms since the epoch), None when it does not say; the
    measurement window is placed from it, so it must be a finite number."""
    if "timestamp_ms" not in report:
        return None
    value = _field(report, "timestamp_ms", _NUMBER, "report", source)
    if not math.isfinite(value):
        raise ParseError(source, f"report.timestamp_ms must be a finite number, got {value}")
    if not EARLIEST_MS <= value <= LATEST_MS:
        raise ParseError(source, f"report.timestamp_ms is {value:g}; allowed: a time from "
                                 f"{EARLIEST_MS} (2005, fio's first release) to {LATEST_MS} "
                                 "(2100): fio's clock read no other")
    return value


def _last_report(text: str, source: str) -> tuple[dict, list[str]]:
    """Find the JSON report(s) in the text; return the last one and any warnings."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ParseError(source, "empty input: there is no fio output to parse")
    match = _FIRST_BRACE_LINE.search(text)
    if match is None:
        raise ParseError(source, "no JSON object found: no line starts with '{'")

    reports: list[dict] = []
    warnings: list[str] = []
    pos = match.start()
    while pos < len(text):
        if text[pos] != "{":
            line = text.count("\n", 0, pos) + 1
            warnings.append(f"ignored {len(text) - pos} characters of non-JSON text after "
                            f"the JSON report (from line {line})")
            break
        try:
            report, pos = decode_json(text, source, pos)
        except json.JSONDecodeError as exc:
            raise ParseError(source, f"truncated or invalid JSON at line {exc.lineno} "
                                     f"col {exc.colno} ({exc.msg})") from None
        reports.append(report)
        pos = _WHITESPACE.match(text, pos).end()
    if len(reports) > 1:
        warnings.append(f"found {len(reports)} concatenated JSON reports "
                        f"(e.g. from --status-interval); used the last one")
    return reports[-1], warnings


def _jobs(report: dict, source: str) -> list[dict]:
    """Return the list of job objects, checking the shape fio 3.x writes."""
    if "jobs" not in report:
        hint = " (client/server output with 'client_stats' is not supported)" \
            if "client_stats" in report else ""
        raise ParseError(source, f"no 'jobs' array in the JSON report{hint}")
    jobs = report["jobs"]
    if not isinstance(jobs, list):
        raise ParseError(source, f"'jobs' must be an array, got {_kind(jobs)}")
    if not jobs:
        raise ParseError(source, "'jobs' is empty: fio reported no job")
    for i, job in enumerate(jobs):
        if not isinstance(job, dict):
            raise ParseError(source, f"jobs[{i}] must be an object, got {_kind(job)}")
        for d in ("read", "write"):
            if d not in job:
                hint = " (unified_rw_reporting output is not supported)" if "mixed" in job else ""
                raise ParseError(source, f"jobs[{i}] has no '{d}' section{hint}")
    return jobs


def _direction(jobs: list[dict], d: str, source: str) -> dict:
    """Pool one direction over all job objects; a missing 'trim' section counts as no I/O."""
    iops = 0.0
    bw_bytes = io_bytes = total_ios = 0
    clats: list[tuple[str, dict]] = []
    for i, job in enumerate(jobs):
        if d not in job:
            continue
        where = f"jobs[{i}].{d}"
        section = _field(job, d, _OBJECT, f"jobs[{i}]", source)
        iops += _field(section, "iops", _NUMBER, where, source)
        bw_bytes += _field(section, "bw_bytes", _INT, where, source)
        io_bytes += _count(section, "io_bytes", where, source)
        total_ios += _count(section, "total_ios", where, source)
        clat = _field(section, "clat_ns", _OBJECT, where, source)
        completions = _count(clat, "N", f"{where}.clat_ns", source)
        if completions > 0:
            clats.append((f"{where}.clat_ns", clat))
        _check_counts(section, _job_sizes(job), where, source)
        _check_completions(section["total_ios"], completions, _in_flight(job), where, source)
        _check_means(section, where, source)

    # each N holds in a float, their sum need not: weighted / n_total would overflow
    n_total = within_float(sum(clat["N"] for _, clat in clats),
                           f"{d}: the sum of the jobs' clat_ns.N", source)
    weighted = sum(_field(clat, "mean", _NUMBER, where, source) * clat["N"]
                   for where, clat in clats)
    out = {
        "iops": float(iops),
        "bw_bytes": bw_bytes,
        "io_bytes": io_bytes,
        "total_ios": total_ios,
        "clat_mean_us": weighted / n_total / 1000 if n_total else None,
    }
    for name, value_ns in _percentiles_ns(clats, d, source).items():
        _check_within_extremes(value_ns, f"{d}: clat {name}", clats, source)
        out[f"clat_{name}_us"] = value_ns / 1000 if value_ns is not None else None
    return out


def _job_sizes(job: dict) -> tuple[int, int] | None:
    """(bs, iodepth * numjobs) by the options the job's report lists, None where they do not
    fix one block size (a range, a split, one per direction, another kb_base) or say none."""
    options = job.get("job options")
    in_flight = _in_flight(job)
    if in_flight is None or "kb_base" in options or "bs" not in options:
        return None
    match = _SIZE.fullmatch(str(options["bs"]))
    if match is None or not is_digits(match[1]):
        return None
    bs = int(match[1]) * 1024 ** " kmg".index(match[2].lower() or " ")
    return (bs, in_flight) if bs else None


def _in_flight(job: dict) -> int | None:
    """The most I/Os the job keeps in flight, iodepth * numjobs by the options its report
    lists (fio's default for each is 1); None where the report lists no options, or one of
    the two is not a plain count."""
    options = job.get("job options")
    if not isinstance(options, dict):
        return None
    depth = [str(options.get(key, "1")) for key in ("iodepth", "numjobs")]
    if not all(is_digits(v) and len(v) < 10 for v in depth):
        return None
    return int(depth[0]) * int(depth[1])


def _measured(*values) -> bool:
    """Whether the values are counts and rates a run can have: finite and not negative (a NaN,
    infinite or negative one is no measurement, and ``Experiment.sample_problem`` says so
    naming its metric; nothing is set against it here)."""
    return all(math.isfinite(v) and v >= 0 for v in values)


def _check_counts(section: dict, sizes: tuple[int, int] | None, where: str,
                  source: str) -> None:
    """ParseError when a direction's rates contradict its counts over its runtime: iops is
    not total_ios per runtime, bw_bytes not io_bytes per runtime, or io_bytes not total_ios
    of the job's block size (see the slack constants for how far each may stray)."""
    runtime = _count(section, "runtime", where, source)
    iops, total_ios = section["iops"], section["total_ios"]
    bw_bytes, io_bytes = section["bw_bytes"], section["io_bytes"]
    if not _measured(iops, bw_bytes):
        return  # no rate at all: Experiment.sample_problem names it
    if runtime == 0:
        # fio gives a direction without runtime a rate of 0 (it divides only by a runtime
        # it has), so a rate beside none was not computed by fio: any value would pass below
        if iops or bw_bytes:
            raise ParseError(source, f"{where}: runtime is 0 ms, but iops is {iops:g} and "
                                     f"bw_bytes {bw_bytes} (fio reports a rate of 0 for a "
                                     "direction without runtime; allowed: 0): the report "
                                     "contradicts itself")
        return
    if abs(total_ios - iops * runtime / 1000) > IOS_SLACK:
        raise ParseError(source, f"{where}: iops {iops:g} over runtime {runtime} ms makes "
                                 f"{iops * runtime / 1000:.1f} I/Os, but total_ios is {total_ios}"
                                 f" (fio computes one from the other; allowed: within "
                                 f"{IOS_SLACK:g} I/O): the report contradicts itself")
    if abs(bw_bytes - io_bytes * 1000 / runtime) > BW_BYTES_SLACK:
        raise ParseError(source, f"{where}: io_bytes {io_bytes} over runtime {runtime} ms is "
                                 f"{io_bytes * 1000 / runtime:.0f} B/s, but bw_bytes is "
                                 f"{bw_bytes} (fio computes one from the other; allowed: within "
                                 f"{BW_BYTES_SLACK:g} B/s): the report contradicts itself")
    if sizes is not None:
        bs, in_flight = sizes
        short = _count(section, "short_ios", where, source) if "short_ios" in section else 0
        slack = 2 * in_flight + short
        if abs(io_bytes - total_ios * bs) > slack * bs:
            raise ParseError(source, f"{where}: io_bytes {io_bytes} is {io_bytes / bs:.1f} "
                                     f"blocks of the job's bs {bs}, but total_ios is "
                                     f"{total_ios} (allowed: {slack} I/Os apart, twice what "
                                     "its iodepth and numjobs keep in flight, and its "
                                     "short_ios): the report contradicts itself")


def _check_completions(total_ios: int, completions: int, in_flight: int | None, where: str,
                       source: str) -> None:
    """ParseError when a direction's completion latencies (clat_ns.N) are more or fewer than
    its I/Os (total_ios) by more than twice what the job keeps in flight: fio counts an I/O
    in total_ios when it issues it and in N when it completes, and both counters are zeroed
    together after ramp_time, so they part only by the I/Os in flight then and at the stop
    (the committed runs' N is at most iodepth - 1 above total_ios, and 1 below). A report of
    0 I/Os beside thousands of latencies passed every other check (its rates are 0 over its
    runtime) and was stored as a sample of 0 IOPS. Without the job's options the depth is
    not known, and nothing is held."""
    if in_flight is None:
        return
    if abs(completions - total_ios) > 2 * in_flight:
        raise ParseError(source, f"{where}: clat_ns.N counts {completions} completed I/Os, but "
                                 f"total_ios is {total_ios} (fio counts each I/O in both; "
                                 f"allowed: {2 * in_flight} apart, twice what its iodepth "
                                 "and numjobs keep in flight): the report contradicts itself")


def _check_means(section: dict, where: str, source: str) -> None:
    """ParseError when a latency summary's mean lies outside its min and max, or its min is
    above its max: no mean of samples does."""
    for name in LATENCIES:
        summary = section.get(name)
        if not isinstance(summary, dict) or not summary.get("N"):
            continue
        at = f"{where}.{name}"
        low, mean, high = (_field(summary, key, _NUMBER, at, source)
                           for key in ("min", "mean", "max"))
        if not _measured(low, mean, high):
            continue
        slack = MEAN_SLACK * high
        if low > high or not low - slack <= mean <= high + slack:
            raise ParseError(source, f"{at}: mean {mean:g} with min {low:g} and max {high:g} "
                                     "(allowed: min <= mean <= max): the report contradicts "
                                     "itself")


def _check_within_extremes(value_ns: float | None, what: str, clats: list[tuple[str, dict]],
                           source: str) -> None:
    """ParseError when a percentile, or a bin that counted latencies, lies beyond the
    latencies' min and max by more than one bin of fio's histogram (:data:`HISTOGRAM_SLACK`)."""
    if value_ns is None or not _measured(value_ns):
        return
    extremes = [(clat.get("min"), clat.get("max")) for _, clat in clats]
    if not all(_number(v) and _measured(v) for pair in extremes for v in pair):
        return
    low, high = min(lo for lo, _ in extremes), max(hi for _, hi in extremes)
    if not low * (1 - HISTOGRAM_SLACK) <= value_ns <= high * (1 + HISTOGRAM_SLACK):
        raise ParseError(source, f"{what} is {value_ns:g} ns, outside the min {low:g} and "
                                 f"max {high:g} ns that clat_ns reports (allowed: within one "
                                 f"bin of fio's histogram, {HISTOGRAM_SLACK:.4g} of the value): "
                                 "the report contradicts itself")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _percentiles_ns(clats: list[tuple[str, dict]], d: str, source: str) -> dict:
    """p50/p99/p999 in ns for one direction, from the histograms or fio's own map."""
    if clats and all("bins" in clat for _, clat in clats):
        merged: dict[int, int] = {}
        for where, clat in clats:
            binned = 0
            for value, count in _field(clat, "bins", _OBJECT, where, source).items():
                if not is_digits(value) or isinstance(count, bool) or not isinstance(count, int):
                    raise ParseError(source, f"{where}.bins: expected integer latency keys and "
                                             f"counts, got {excerpt(value)}: {excerpt(count)}")
                bin_ns = int_within_float(value, f"{where}.bins (a latency)", source)
                within_float(count, f"{where}.bins['{bin_ns}']", source)
                merged[bin_ns] = merged.get(bin_ns, 0) + count
                binned += count
                if count:
                    _check_within_extremes(bin_ns, f"{where}.bins: a latency", [(where, clat)],
                                           source)
            if binned != clat["N"]:  # fio adds each completion to both, so exactly
                raise ParseError(source, f"{where}: the bins count {binned} latencies, N says "
                                         f"{clat['N']} (fio counts each in both): the report "
                                         "contradicts itself")
        if not any(merged.values()):
            raise ParseError(source, f"{d}: 'clat_ns.bins' holds no samples although N > 0")
        return {name: _from_histogram(merged, p) for name, p in _PERCENTILES.items()}
    if len(clats) > 1:
        raise ParseError(source, f"{len(clats)} job objects did {d} I/O but have no "
                                 f"'clat_ns.bins'; percentiles cannot be pooled over jobs "
                                 f"without json+ (rerun with --output-format=json+ or "
                                 f"--group_reporting)")
    if not clats:
        return {name: None for name in _PERCENTILES}
    where, clat = clats[0]
    table = clat.get("percentile", {})
    if not isinstance(table, dict):
        raise ParseError(source, f"{where}.percentile must be an object, got {_kind(table)}")
    out = {}
    for name, p in _PERCENTILES.items():
        value = table.get(f"{p:f}")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ParseError(source, f"{where}.percentile['{p:f}'] must be a number, "
                                     f"got {_kind(value)}")
        out[name] = within_float(value, f"{where}.percentile['{p:f}']", source)
    return out


def _from_histogram(counts: dict[int, int], p: float) -> int:
    """The smallest latency bin at which the running count reaches p % of all samples.

    This is fio's rule; the threshold is exact (Fraction) so ties match fio's result.
    """
    threshold = Fraction(p) * sum(counts.values()) / 100
    values = sorted(counts)
    running = accumulate(counts[value] for value in values)
    return next(value for value, seen in zip(values, running) if seen >= threshold)


def _cpu_and_runtime(jobs: list[dict], source: str) -> tuple[float, float, int]:
    """Total usr and sys CPU in percent of one CPU, and the longest wall time in ms."""
    usr_cpu = sys_cpu = 0.0
    runtime_ms = 0
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]"
        job_runtime = _field(job, "job_runtime", _INT, where, source)
        wall = _wall_ms(job, job_runtime, where, source)
        scale = job_runtime / wall if wall else 1.0
        usr_cpu += _field(job, "usr_cpu", _NUMBER, where, source) * scale
        sys_cpu += _field(job, "sys_cpu", _NUMBER, where, source) * scale
        runtime_ms = max(runtime_ms, wall)
    return usr_cpu, sys_cpu, runtime_ms


def _wall_ms(job: dict, job_runtime: int, where: str, source: str) -> int:
    """job_runtime capped at the longest direction runtime (see the module docstring)."""
    longest = max(_field(_field(job, d, _OBJECT, where, source), "runtime", _INT,
                         f"{where}.{d}", source)
                  for d in DIRECTIONS if d in job)
    return min(job_runtime, longest) if longest > 0 else job_runtime


def _count(obj: dict, key: str, where: str, source: str) -> int:
    """obj[key], a count (I/Os, bytes, samples, context switches, milliseconds): an integer,
    and never negative in any report fio writes."""
    value = _field(obj, key, _INT, where, source)
    if value < 0:
        raise ParseError(source, f"{where}.{key} is {value} (allowed: a count, 0 or more)")
    return value


def _field(obj: dict, key: str, kind: tuple, where: str, source: str):
    """obj[key], checked against kind = (types, description); bools are not numbers."""
    types, description = kind
    if key not in obj:
        raise ParseError(source, f"{where}: missing key '{key}'")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise ParseError(source, f"{where}.{key} must be {description}, got {_kind(value)}")
    return within_float(value, f"{where}.{key}", source)


def _kind(value: object) -> str:
    """A JSON-flavoured name for a Python value's type, for error messages."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
