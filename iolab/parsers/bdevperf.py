"""Parsers for SPDK bdevperf results: its text table (stdout) and its ``perform_tests`` JSON.

Responsible for: turning one bdevperf stdout capture, or one ``bdevperf.py perform_tests``
response, into a dict of per-job and total metrics with explicit units (IOPS, MiB/s =
2^20 B/s, latencies in µs), deciding whether the run is usable (``ok`` and ``problems``), and
raising :class:`~iolab.errors.ParseError` (naming the source and the problem) for output
that cannot be trusted. Written for SPDK v22.09 to v25.09 (samples in tests/fixtures/bdevperf/).

Not responsible for: running bdevperf (``scripts/drivers/bdevperf.sh``), its exit status,
the latency summary and histogram that ``-l``/``-ll`` print after the table (skipped), or
statistics across repetitions.

The text table, and what can surround it:

* Start-up log lines (``EAL: …``, ``app.c: … *NOTICE*: Total cores available: 4``, NVMe
  notices full of colons and numbers) come before the table, and with stdout and stderr
  merged they can land inside it. Tables are therefore found by their ``Device
  Information`` header line, and inside a table only lines of known shape are read: ``Job:``
  lines, data rows (indented, a name, ``:``, numbers), the ``=`` separator and ``Total``.
  Anything else, such as a log line, is skipped.
* ``\\r``: progress updates are separated by a lone ``\\r`` and several table lines start with
  one; every ``\\r\\n`` and lone ``\\r`` ends a line.
* Columns: the header says whether the table has latency columns (v23.01 and later: 8
  numbers per data row, 7 in ``Total``, whose runtime field is blank) or not (up to
  v22.09: 5 and 4). A row with another count raises ParseError.
* Several tables: ``-S`` prints a table every period under one header, then the final one
  under a header of its own, so the table used is the one under the last header, and it
  must be the only table there (otherwise the final table is missing: ParseError). A
  trailing table that lists no job is skipped with a warning: bdevperf prints one when it
  is stopped after an RPC-driven (``-z``) test has already reported.
* ``Job: <name> ended in about <s> seconds with error`` marks that job failed.
  ``Received shutdown signal, test time was about <s> seconds`` before the table means the
  run was cut short (SIGINT).
* Total IOPS must equal the sum over the jobs (relative tolerance 1e-3, plus the rounding
  of the printed values); otherwise the table is inconsistent and ParseError is raised.

The run is not ``ok`` (and ``problems`` says why) if a job failed, Fail/s or TO/s is above
zero, the run was cut short, or no I/O completed. In the JSON response ``io_failed`` and
``io_timeout`` are counts, turned into rates here so both parsers return the same shape.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from iolab.errors import ParseError, excerpt, shortened
from iolab.parsers import int_within_float, is_digits, load_json, measured_decimal, within_float

FORMAT_TEXT = "text"
FORMAT_JSON = "json"

_COLUMNS_WITH_LATENCY = ["runtime(s)", "IOPS", "MiB/s", "Fail/s", "TO/s", "Average", "min",
                         "max"]
_COLUMNS_WITHOUT_LATENCY = _COLUMNS_WITH_LATENCY[:5]
_ROW_KEYS = ["runtime_s", "iops", "mibs", "fail_per_s", "timeout_per_s", "avg_latency_us",
             "min_latency_us", "max_latency_us"]

_STARTING = re.compile(r"Starting SPDK (?P<version>v\S+)(?: git sha1 (?P<sha>\S+))?"
                       r"(?: / DPDK (?P<dpdk>\S+?))?(?: initialization\.\.\.)?\s*$")
_SHUTDOWN = re.compile(r"Received shutdown signal, test time was about "
                       r"(?P<s>[0-9]{1,12}(?:\.[0-9]{1,12})?) seconds")
# Greedy name: a bdev name may itself contain " (".
_JOB = re.compile(r"^Job: (?P<name>.+) \(Core Mask (?P<mask>0x[0-9a-fA-F]+)(?P<rest>,[^()]*)?\)$")
_ENDED = re.compile(r"^Job: (?P<name>.+) ended in about (?P<s>[0-9.]+) seconds with error$")
_JOB_FIELDS = {"workload": "workload", "percentage": "percentage", "depth": "queue_depth",
               "IO size": "io_size"}
_JOB_META = ("core_mask", "workload", "percentage", "queue_depth", "io_size")
_END_OF_TABLE = ("Latency summary", "Latency histogram")

# The first SPDK release whose bdevperf answers perform_tests with JSON results.
JSON_RESULTS_SINCE = (24, 9)


def spdk_supports_json(version: str | None) -> bool:
    """Whether bdevperf of this SPDK version (``v25.09``, ``24.09.1-pre``) returns JSON results.

    A ``-pre`` version of 24.09 itself is a development snapshot from before the release and
    may lack the feature, so it counts as unsupported; so does an unreadable version.
    """
    match = re.match(r"^v?([0-9]{1,9})\.([0-9]{1,9})(\.[0-9]+)?(-pre)?", version or "")
    if not match:
        return False
    release = (int(match.group(1)), int(match.group(2)))
    if release == JSON_RESULTS_SINCE and match.group(4) and not match.group(3):
        return False
    return release >= JSON_RESULTS_SINCE


def spdk_start(text: str) -> dict[str, Any] | None:
    """``spdk_version``, ``spdk_git_sha1`` and ``dpdk_version`` from SPDK's "Starting SPDK …"
    line anywhere in ``text`` (builds whose log goes to stderr print it there), or None."""
    for line in text.replace("\r", "\n").splitlines():
        start = _STARTING.search(line)
        if start:
            return {"spdk_version": start.group("version"), "spdk_git_sha1": start.group("sha"),
                    "dpdk_version": start.group("dpdk")}
    return None


def parse_bdevperf_text(text: str, source: str = "<string>") -> dict[str, Any]:
    """Parse bdevperf's stdout (text results table) into metrics; see the module docstring.

    Keys: ``format`` ("text"); ``spdk_version`` (e.g. "v25.09"), ``spdk_git_sha1``,
    ``dpdk_version`` (None when the start-up line is missing); ``jobs`` (list, see below);
    ``njobs``; ``core_count`` (CPUs in the union of the jobs' core masks); totals ``iops``,
    ``mibs``, ``fail_per_s``, ``timeout_per_s``, ``avg_latency_us``, ``min_latency_us``,
    ``max_latency_us`` (latencies None without latency columns); ``tables_found`` (complete
    tables in the output, periodic ones included); ``shutdown_signal`` (bool) and
    ``shutdown_after_s``; ``ok``, ``problems`` and ``warnings`` (lists of str).

    Each job: ``name`` (bdev), ``core_mask`` ("0x…"), ``workload``, ``percentage`` (rw and
    randrw only), ``queue_depth``, ``io_size`` (bytes; these three None in the short
    pre-v24.01 Job line), ``runtime_s``, ``iops``, ``mibs``, ``fail_per_s``,
    ``timeout_per_s``, ``io_failed`` and ``io_timeout`` (counts: None, the text has only
    rates), ``avg_latency_us``, ``min_latency_us``, ``max_latency_us``, ``failed`` (bool).
    """
    lines = _lines(text)
    if not text.strip():
        raise ParseError(source, "empty input: there is no bdevperf output to parse")
    tables, warnings = _scan(lines, source)
    if not tables:
        raise ParseError(source, "no results table: no 'Device Information' header line "
                                 "(bdevperf did not get to report)")
    table = _final_table(tables, warnings, source)
    block = table.blocks[0]
    jobs = block.jobs
    total = block.total
    _check_sum(jobs, total, table, source)

    start = next((m for m in (_STARTING.search(line) for _, line in lines) if m), None)
    problems = _job_problems(jobs, rates=True)
    for key, label in (("fail_per_s", "Fail/s"), ("timeout_per_s", "TO/s")):
        if total[key] > 0 and not any(job[key] > 0 for job in jobs):
            problems.append(f"Total {label} = {total[key]:g}")
    if table.shutdown_after_s is not None:
        problems.append(f"bdevperf received a shutdown signal; the test ran only about "
                        f"{table.shutdown_after_s} s")
    if total["iops"] == 0:
        problems.append("no I/O completed (Total IOPS is 0)")

    return {
        "format": FORMAT_TEXT,
        "spdk_version": start.group("version") if start else None,
        "spdk_git_sha1": start.group("sha") if start else None,
        "dpdk_version": start.group("dpdk") if start else None,
        "jobs": jobs,
        "njobs": len(jobs),
        "core_count": _core_count(jobs),
        **{key: total[key] for key in _ROW_KEYS[1:]},
        "tables_found": sum(len(t.blocks) for t in tables),
        "shutdown_signal": table.shutdown_after_s is not None,
        "shutdown_after_s": table.shutdown_after_s,
        "ok": not problems,
        "problems": problems,
        "warnings": warnings,
    }


class _Block:
    """One set of job rows ended by a Total row."""

    def __init__(self) -> None:
        self.jobs: list[dict[str, Any]] = []
        self.pending: dict[str, Any] | None = None  # a Job: line still waiting for its row
        self.total: dict[str, Any] | None = None


class _Table:
    """Everything under one 'Device Information' header: one block, or several with -S."""

    def __init__(self, line: int, columns: list[str], shutdown_after_s: float | None) -> None:
        self.line = line
        self.columns = columns
        self.shutdown_after_s = shutdown_after_s
        self.blocks: list[_Block] = []   # complete blocks only
        self.open: _Block | None = None  # a block without its Total yet


def _lines(text: str) -> list[tuple[int, str]]:
    """(line number in the file, text) of each line; a lone \\r ends a line too.

    The numbers count newlines only, so that messages match what an editor shows.
    """
    return [(number, part)
            for number, physical in enumerate(text.replace("\r\n", "\n").split("\n"), start=1)
            for part in physical.split("\r")]


def _scan(lines: list[tuple[int, str]], source: str) -> tuple[list[_Table], list[str]]:
    """Find every table and read its blocks; return the tables and any warnings."""
    tables: list[_Table] = []
    warnings: list[str] = []
    table: _Table | None = None   # the table whose rows are being read, None outside one
    shutdown: float | None = None  # from a shutdown line not yet followed by a header
    for number, line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        match = _SHUTDOWN.search(stripped)
        if match:
            shutdown = float(match.group("s"))
            continue
        if stripped.startswith("Device Information") and ":" in stripped:
            if table is not None and table.open is not None:
                # -S tables interrupted by the final one; that final table is what counts.
                warnings.append(f"ignored an incomplete table without a Total row before "
                                f"line {number}")
            table = _Table(number, _header_columns(stripped, number, source), shutdown)
            tables.append(table)
            shutdown = None
            continue
        if table is None:
            continue
        if stripped in _END_OF_TABLE:
            # The -l/-ll summary below the table has its own "Job:" and "… : …us" lines.
            table = None
            continue
        if stripped.startswith("Job:"):
            _job_line(table, stripped, number, source)
        elif stripped.startswith("Verification LBA range"):
            continue
        elif set(stripped) == {"="}:
            continue
        elif stripped.partition(":")[0].strip() == "Total":
            _total_line(table, stripped, number, source)
        elif line[0].isspace() and ":" in stripped:
            _data_row(table, stripped, number, source)
        # Anything else inside a table is a log line that got interleaved: skipped.
    return tables, warnings


def _header_columns(header: str, number: int, source: str) -> list[str]:
    columns = header.partition(":")[2].split()
    if columns not in (_COLUMNS_WITH_LATENCY, _COLUMNS_WITHOUT_LATENCY):
        raise ParseError(source, f"line {number}: unknown table columns {excerpt(columns)}; "
                                 f"expected {_COLUMNS_WITH_LATENCY} or "
                                 f"{_COLUMNS_WITHOUT_LATENCY}")
    return columns


def _block(table: _Table) -> _Block:
    """The block being read; after a Total, -S starts the next one without a new header."""
    if table.open is None:
        table.open = _Block()
    return table.open


def _job_line(table: _Table, line: str, number: int, source: str) -> None:
    block = _block(table)
    ended = _ENDED.match(line)
    if ended:
        if block.pending is None or block.pending["name"] != ended.group("name"):
            raise ParseError(source, f"line {number}: {excerpt(line)} does not follow the Job line "
                                     f"of '{shortened(ended.group('name'))}'")
        block.pending["failed"] = True
        return
    match = _JOB.match(line)
    if not match:
        raise ParseError(source, f"line {number}: unrecognised Job line {excerpt(line)}")
    if block.pending is not None:
        raise ParseError(source, f"line {number}: job '{shortened(block.pending['name'])}' has "
                                 f"no data row before the next Job line")
    job: dict[str, Any] = {"name": match.group("name"), "core_mask": match.group("mask"),
                           "workload": None, "percentage": None, "queue_depth": None,
                           "io_size": None, "failed": False}
    for item in filter(None, (match.group("rest") or "").split(",")):
        key, _, value = item.strip().partition(": ")
        if key not in _JOB_FIELDS:
            continue  # a field added by a later SPDK; the known ones are enough
        field = _JOB_FIELDS[key]
        if field == "workload":
            job[field] = value
        elif is_digits(value):
            job[field] = int_within_float(value, f"line {number}: '{key}'", source)
        else:
            raise ParseError(source, f"line {number}: '{key}' is not a whole number in "
                                     f"{excerpt(line)}")
    block.pending = job


def _numbers(text: str, count: int, what: str, number: int, source: str) -> list[float]:
    tokens = text.split()
    if len(tokens) != count:
        raise ParseError(source, f"line {number}: {what} has {len(tokens)} numbers, expected "
                                 f"{count}: {excerpt(text.strip())}")
    # float() would take a sign, nan and inf, which no rate, time or latency is
    return [measured_decimal(token, f"line {number}: {what}", source) for token in tokens]


def _data_row(table: _Table, line: str, number: int, source: str) -> None:
    block = table.open
    if block is None or block.pending is None:
        # Every bdevperf version prints a Job line before each row, so an indented line
        # with a colon that follows none is an interleaved log line. (A real row lost this
        # way would make the Total disagree with the sum, which is checked.)
        return
    # A bdev name may contain ':'; the numbers never do.
    name, _, rest = line.rpartition(":")
    name = name.strip()
    values = _numbers(rest, len(table.columns), f"the row of '{shortened(name)}'", number, source)
    meta = block.pending
    row = dict(zip(_ROW_KEYS, values + [None] * (len(_ROW_KEYS) - len(values))))
    if row["iops"]:
        _check_latency_order(row["min_latency_us"], row["avg_latency_us"],
                             row["max_latency_us"], _PRINTED_SLACK_US, f"line {number}", source)
    block.jobs.append({
        # The data row names the bdev; Job lines before v24.01 name the thread instead.
        "name": name,
        **{key: meta[key] for key in _JOB_META},
        **row,
        "io_failed": None,
        "io_timeout": None,
        "failed": meta["failed"],
    })
    block.pending = None


def _total_line(table: _Table, line: str, number: int, source: str) -> None:
    block = _block(table)
    if block.pending is not None:
        raise ParseError(source, f"line {number}: job '{shortened(block.pending['name'])}' has "
                                 f"no data row before the Total row")
    # The Total row leaves the runtime column blank.
    values = _numbers(line.partition(":")[2], len(table.columns) - 1, "the Total row",
                      number, source)
    keys = _ROW_KEYS[1:]
    block.total = dict(zip(keys, values + [None] * (len(keys) - len(values))))
    if block.total["iops"]:
        _check_latency_order(block.total["min_latency_us"], block.total["avg_latency_us"],
                             block.total["max_latency_us"], _PRINTED_SLACK_US,
                             f"line {number} (Total)", source)
    table.blocks.append(block)
    table.open = None


def _final_table(tables: list[_Table], warnings: list[str], source: str) -> _Table:
    """The last table holding jobs; it must be complete and hold a single block."""
    while (len(tables) > 1 and tables[-1].open is None and tables[-1].blocks
           and not any(block.jobs for block in tables[-1].blocks)):
        warnings.append(f"ignored the empty results table at line {tables[-1].line} (printed "
                        f"when bdevperf is stopped after it has reported)")
        tables = tables[:-1]
    table = tables[-1]
    if table.open is not None or not table.blocks:
        got = len(table.open.jobs) if table.open is not None else 0
        raise ParseError(source, f"truncated output: the results table at line {table.line} "
                                 f"has no Total row ({got} job row{'s' if got != 1 else ''} "
                                 f"read)")
    if len(table.blocks) > 1:
        raise ParseError(source, f"the table at line {table.line} holds {len(table.blocks)} "
                                 f"periodic (-S) results but no final table follows "
                                 f"(was bdevperf killed?)")
    if not table.blocks[0].jobs:
        raise ParseError(source, f"the results table at line {table.line} lists no job")
    return table


def _check_sum(jobs: list[dict[str, Any]], total: dict[str, Any], table: _Table,
               source: str) -> None:
    summed = sum(job["iops"] for job in jobs)
    # Each printed value is rounded to 0.01, so allow that much per job on top of 1e-3.
    if not math.isclose(summed, total["iops"], rel_tol=1e-3, abs_tol=0.005 * (len(jobs) + 1)):
        raise ParseError(source, f"the table at line {table.line} is inconsistent: the jobs' "
                                 f"IOPS sum to {summed:.2f} but Total says {total['iops']:.2f}")


# How far a printed latency may stray from its order: the table rounds each to 0.01 us;
# the JSON's are SPDK's own quotients, in their order bar floating point (a millionth)
_PRINTED_SLACK_US = 0.01
_ORDER_REL_SLACK = 1e-6


def _check_latency_order(least: float | None, mean: float | None, most: float | None,
                         slack: float, where: str, source: str) -> None:
    """ParseError unless min <= average <= max (with ``slack``, and the floating point of
    :data:`_ORDER_REL_SLACK`): SPDK takes each from the same I/Os' latencies, so a report
    whose latencies are out of that order is damaged or made up, not measured."""
    if least is None or mean is None or most is None:
        return  # a table without latency columns
    slack += _ORDER_REL_SLACK * most
    if not (least <= mean + slack and mean <= most + slack):
        raise ParseError(source, f"{where}: latencies min {least:g}, average {mean:g}, max "
                                 f"{most:g} us are out of order (allowed: min <= average <= "
                                 "max): the report contradicts itself")


def _job_problems(jobs: list[dict[str, Any]], rates: bool) -> list[str]:
    problems = []
    for job in jobs:
        name = shortened(job["name"])
        if job["failed"]:
            problems.append(f"job {name} ended with an error after about "
                            f"{job['runtime_s']:.2f} s")
        if rates:
            failed, timed_out = job["fail_per_s"], job["timeout_per_s"]
            what = ("Fail/s", "TO/s")
        else:
            failed, timed_out = job["io_failed"], job["io_timeout"]
            what = ("io_failed", "io_timeout")
        if failed > 0:
            problems.append(f"job {name}: {what[0]} = {failed:g}")
        if timed_out > 0:
            problems.append(f"job {name}: {what[1]} = {timed_out:g}")
    return problems


def _core_count(jobs: list[dict[str, Any]]) -> int | None:
    if any(job["core_mask"] is None for job in jobs):
        return None
    union = 0
    for job in jobs:
        union |= int(job["core_mask"], 16)
    return union.bit_count()


# --- JSON (perform_tests) ---------------------------------------------------------------------

_JSON_JOB_KEYS = {
    "job": (str, "a string"), "core_mask": (str, "a string"), "workload": (str, "a string"),
    "status": (str, "a string"), "queue_depth": (int, "an integer"),
    "io_size": (int, "an integer"), "runtime": ((int, float), "a number"),
    "iops": ((int, float), "a number"), "mibps": ((int, float), "a number"),
    "io_failed": (int, "an integer"), "io_timeout": (int, "an integer"),
    "avg_latency_us": ((int, float), "a number"), "min_latency_us": ((int, float), "a number"),
    "max_latency_us": ((int, float), "a number"),
}
# No job has a negative runtime or count, a queue of depth 0 or I/Os of 0 bytes
_JSON_JOB_LEAST = {"queue_depth": 1, "io_size": 1, "runtime": 0, "iops": 0, "mibps": 0,
                   "io_failed": 0, "io_timeout": 0, "avg_latency_us": 0, "min_latency_us": 0,
                   "max_latency_us": 0}
_STATUSES = ("finished", "failed", "terminated")
_RPC_CLIENT_ERRORS = ("Timeout while waiting for response",
                      "Connection closed with partial response")


def parse_bdevperf_json(text: str, source: str = "<string>") -> dict[str, Any]:
    """Parse the stdout of ``bdevperf.py perform_tests`` (the RPC result, as JSON).

    Returns the shape of :func:`parse_bdevperf_text` with ``format`` "json". The response
    carries no version (``spdk_version`` and friends are None: take them from bdevperf's
    own stdout) and no table (``tables_found`` is None). ``io_failed``/``io_timeout`` are the
    counts SPDK reports, and ``fail_per_s``/``timeout_per_s`` those counts over the job's
    runtime. Totals: IOPS, MiB/s and rates summed; average latency weighted by each job's
    I/O count (IOPS × runtime; None if no I/O completed); min and max over the jobs. A
    status other than ``finished`` makes the run not ok; ``terminated`` (a shutdown signal
    during the test) also sets ``shutdown_signal``.
    """
    doc = _json_response(text, source)
    core_count = doc.get("core_count")
    jobs = [_json_job(entry, i, source) for i, entry in enumerate(doc["results"])]
    problems = _job_problems(jobs, rates=False)
    statuses = [entry["status"] for entry in doc["results"]]
    terminated = [job["name"] for job, status in zip(jobs, statuses) if status == "terminated"]
    problems += _status_problems(jobs, statuses, terminated)
    totals = _json_totals(jobs)
    if totals["iops"] == 0:
        problems.append("no I/O completed (the jobs' IOPS sum to 0)")
    return {
        "format": FORMAT_JSON,
        "spdk_version": None,
        "spdk_git_sha1": None,
        "dpdk_version": None,
        "jobs": jobs,
        "njobs": len(jobs),
        "core_count": core_count if core_count is not None else _core_count(jobs),
        **totals,
        "tables_found": None,
        "shutdown_signal": bool(terminated),
        "shutdown_after_s": None,
        "ok": not problems,
        "problems": problems,
        "warnings": [],
    }


def _json_response(text: str, source: str) -> dict[str, Any]:
    """The perform_tests response: a JSON object with a non-empty ``results`` array and, if
    any, an integer ``core_count``; ParseError for an RPC error or anything else."""
    if not text.strip():
        raise ParseError(source, "empty input: there is no perform_tests response to parse")
    if "Got JSON-RPC error response" in text:
        raise ParseError(source, f"perform_tests returned an error: {_rpc_error(text)}")
    first_line = text.strip().splitlines()[0]
    if first_line.startswith(_RPC_CLIENT_ERRORS):
        raise ParseError(source, f"the RPC client gave up: {shortened(first_line)}")
    try:
        doc = load_json(text, source)
    except json.JSONDecodeError as exc:
        raise ParseError(source, f"not a JSON document ({exc.msg} at line {exc.lineno}); "
                                 f"it starts with {excerpt(first_line[:80])}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ParseError(source, "no 'results' array at the top level")
    if not doc["results"]:
        raise ParseError(source, "'results' is empty: bdevperf reported no job")
    core_count = doc.get("core_count")
    if core_count is not None and (isinstance(core_count, bool)
                                   or not isinstance(core_count, int)):
        raise ParseError(source, f"'core_count' must be an integer, got {excerpt(core_count)}")
    within_float(core_count, "core_count", source)
    return doc


def _status_problems(jobs: list[dict[str, Any]], statuses: list[str],
                     terminated: list[str]) -> list[str]:
    """The problems the jobs' statuses show: a shutdown signal (``terminated``: the names of
    the jobs it ended), then each unknown status."""
    problems = []
    if terminated:
        problems.append(f"bdevperf received a shutdown signal; status 'terminated' for "
                        f"{shortened(', '.join(terminated))}")
    for job, status in zip(jobs, statuses):
        if status not in _STATUSES:
            problems.append(f"job {shortened(job['name'])}: unknown status "
                        f"'{shortened(status)}'")
    return problems


def _json_totals(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's totals over the jobs (see :func:`parse_bdevperf_json`)."""
    ios = [job["iops"] * job["runtime_s"] for job in jobs]
    rates_known = all(job["runtime_s"] > 0 for job in jobs)
    return {
        "iops": sum(job["iops"] for job in jobs),
        "mibs": sum(job["mibs"] for job in jobs),
        "fail_per_s": sum(job["fail_per_s"] for job in jobs) if rates_known else None,
        "timeout_per_s": sum(job["timeout_per_s"] for job in jobs) if rates_known else None,
        "avg_latency_us": (sum(job["avg_latency_us"] * n for job, n in zip(jobs, ios))
                           / sum(ios)) if sum(ios) > 0 else None,
        "min_latency_us": min(job["min_latency_us"] for job in jobs),
        "max_latency_us": max(job["max_latency_us"] for job in jobs),
    }


# The table prints each number to 0.01 (``%10.2f``): half of that, and a little for the
# printing of a binary fraction
_TABLE_ROUNDING = 0.0051
_SHARED = (("runtime_s", "runtime"), ("iops", "IOPS"), ("mibs", "MiB/s"),
           ("avg_latency_us", "Average"), ("min_latency_us", "min"), ("max_latency_us", "max"))


def table_disagrees(results: dict[str, Any], table: dict[str, Any]) -> str:
    """Why the ``perform_tests`` JSON (``results``, :func:`parse_bdevperf_json`) is not the
    jobs bdevperf's text table on the same run's stdout (``table``,
    :func:`parse_bdevperf_text`) shows ("" when it is): bdevperf prints the table from the
    same numbers it answers the RPC with, so each job's runtime, IOPS, MiB/s and latencies
    are the JSON's rounded to 0.01. A JSON whose numbers are not is another run's, or
    altered (a doubled IOPS was stored as the run's sample)."""
    got = [job["name"] for job in results["jobs"]]
    shown = [job["name"] for job in table["jobs"]]
    if got != shown:
        return (f"its jobs {excerpt(', '.join(got))} are not those of the text table on "
                f"stdout ({excerpt(', '.join(shown))})")
    for job, row in zip(results["jobs"], table["jobs"]):
        for key, column in _SHARED:
            if row[key] is None:
                continue  # a table without latency columns
            if abs(job[key] - row[key]) > _TABLE_ROUNDING:
                return (f"its job {excerpt(job['name'])} has {column} {job[key]:.6g}, the text "
                        f"table on stdout {row[key]:.2f} (allowed: the same number rounded to "
                        "0.01, as bdevperf prints it)")
    return ""


def _rpc_error(text: str) -> str:
    """The message and code of a JSON-RPC error as SPDK's client prints it, or its text."""
    after = text.partition("Got JSON-RPC error response")[2]
    body = after.partition("response:")[2].strip()
    try:
        error = json.JSONDecoder().raw_decode(body)[0]
    except json.JSONDecodeError:
        error = None
    if isinstance(error, dict) and "message" in error:
        return (f"{shortened(str(error['message']))} "
                f"(JSON-RPC code {shortened(str(error.get('code')))})")
    return " ".join(after.split())[:200] or "no details"


def _json_job(entry: Any, i: int, source: str) -> dict[str, Any]:
    where = f"results[{i}]"
    if not isinstance(entry, dict):
        raise ParseError(source, f"{where} must be an object")
    for key, (types, description) in _JSON_JOB_KEYS.items():
        if key not in entry:
            raise ParseError(source, f"{where}: missing key '{key}'")
        if isinstance(entry[key], bool) or not isinstance(entry[key], types):
            raise ParseError(source, f"{where}.{key} must be {description}, "
                                     f"got {excerpt(entry[key])}")
        within_float(entry[key], f"{where}.{key}", source)
    for key, least in _JSON_JOB_LEAST.items():
        if not (math.isfinite(entry[key]) and entry[key] >= least):  # JSON's NaN, Infinity
            raise ParseError(source, f"{where}.{key} is {excerpt(entry[key])}; allowed: "
                                     f"{least} or more")
    percentage = entry.get("percentage")
    if percentage is not None and (isinstance(percentage, bool)
                                   or not isinstance(percentage, int)):
        raise ParseError(source, f"{where}.percentage must be an integer, got "
                                 f"{excerpt(percentage)}")
    within_float(percentage, f"{where}.percentage", source)
    runtime = float(entry["runtime"])
    if runtime == 0 and (entry["iops"] or entry["mibps"]):
        raise ParseError(source, f"{where}: runtime is 0, but iops is {entry['iops']:g} and "
                                 f"mibps {entry['mibps']:g} (a rate is I/Os over a runtime; "
                                 "allowed: a runtime above 0 beside a rate): the report "
                                 "contradicts itself")
    if entry["iops"]:
        _check_latency_order(entry["min_latency_us"], entry["avg_latency_us"],
                             entry["max_latency_us"], 0.0, where, source)

    def rate(count: int) -> float | None:
        return count / runtime if runtime > 0 else None

    return {
        "name": entry["job"],
        "core_mask": entry["core_mask"],
        "workload": entry["workload"],
        "percentage": percentage,
        "queue_depth": entry["queue_depth"],
        "io_size": entry["io_size"],
        "runtime_s": runtime,
        "iops": float(entry["iops"]),
        "mibs": float(entry["mibps"]),
        "fail_per_s": rate(entry["io_failed"]),
        "timeout_per_s": rate(entry["io_timeout"]),
        "avg_latency_us": float(entry["avg_latency_us"]),
        "min_latency_us": float(entry["min_latency_us"]),
        "max_latency_us": float(entry["max_latency_us"]),
        "io_failed": entry["io_failed"],
        "io_timeout": entry["io_timeout"],
        "failed": entry["status"] == "failed",
    }
