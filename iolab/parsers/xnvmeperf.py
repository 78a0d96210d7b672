"""Parser for the text report of xNVMe's ``xnvmeperf run`` and ``xnvmeperf cuda-run``.

Responsible for: turning the stdout of one xnvmeperf run into its argument echo, elapsed
time, per-device rows and Total row, checking that the device rows add up to the Total, that
MiB/s agrees with IOPS and the I/O size and the elapsed time with the runtime, and
raising :class:`~iolab.errors.ParseError` (naming the source and the problem) otherwise.

Not responsible for: running xnvmeperf, the exit status, GNU time's lines that follow the
report when stdout and stderr were captured together (everything after the table's closing
rule is ignored), or deciding whether failed commands make a run unusable (``failed`` is
reported as a count; the caller decides).

The report (xNVMe ``next``, April 2026; samples in tests/fixtures/aisio_formats/)::

    Running xnvmeperf with arguments:
    - Devices: [0000:4a:00.0, 0000:4b:00.0] (total: 2)
    - io pattern: randread
    ...
    - CPUs: [0] (total: 1)                      (run only)
    <blank>
    ======...
     xnvmeperf (elapsed: 10.00s)                ("xnvmeperf cuda-run (elapsed: …)" for cuda-run)
    ======...
     Device   CPUs   IOPS   MiB/s   Failed      (no CPUs column for cuda-run)
     0000:4a:00.0   0   3857242.54   1883.42   0
    ------...
     Total:          15433231.11   7535.76     0
    ======...

Device URIs (PCI addresses) contain colons, so rows are split on whitespace and never on
``:``. The CPU column is one token (a comma list such as ``0,1`` when several threads drive
one device). IOPS and MiB/s are printed with two decimals, so the device rows may miss the
Total by up to half a cent per row; anything more raises ParseError. Failed is a count and
must add up exactly. A rate or the elapsed time in any other form than digits with a
fraction (a sign, ``nan``, ``inf``, an exponent: :func:`iolab.parsers.measured_decimal`) is
no measurement and raises ParseError: a negative row could hide in a Total that adds up.
The echo must hold every line xnvmeperf prints for the subcommand (devices, io pattern,
queues per device, queue depth, io size, runtime, and CPUs for ``run``; the counts whole
numbers above zero), or the command's values could not be checked against it: else
ParseError. Each row's MiB/s must be its IOPS times the echoed ``io size`` (within the rounding of both),
and the elapsed time at least 90 % of the echoed ``runtime`` (a run cut short): else
ParseError, so such a run is stored as failed, never as a sample.
For ``cuda-run``, IOPS counts completed lock-step rounds times the queue depth, failed
commands included (§4.4), which is why ``failed`` must be looked at.
"""

from __future__ import annotations

import re

from iolab.checks import is_positive_int
from iolab.errors import ParseError, excerpt
from iolab.parsers import check_mibs, int_within_float, is_digits, measured_decimal

# numbers in ASCII digits only ([0-9]: \d, str.isdigit and int() take any script's digits)
TITLE = re.compile(r"^\s*xnvmeperf(?P<cuda> cuda-run)? \(elapsed: "
                   r"(?P<elapsed>[0-9]{1,12}(?:\.[0-9]{1,12})?)s\)\s*$")
_RULE_EQ = re.compile(r"^\s*=+\s*$")
_RULE_DASH = re.compile(r"^\s*-+\s*$")
_ECHO_START = "Running xnvmeperf with arguments:"
_ECHO_LINE = re.compile(r"^- (?P<key>[^:]+): (?P<value>.*)$")
_ECHO_LIST = re.compile(r"^\[(?P<items>.*)\] \(total: (?P<total>[0-9]+)\)$")
_ECHO_BYTES = re.compile(r"^(?P<n>[0-9]+) bytes$")
# the echo lines xnvmeperf prints on every run of a subcommand (its heap sizes aside): a
# report without one cannot be checked against the command that ran, nor its MiB/s against
# the io size, so it is no report of xnvmeperf's
_ECHO_REQUIRED = {"run": ("devices", "io_pattern", "queues_per_device", "queue_depth", "io_size",
                          "runtime", "cpus"),
                  "cuda-run": ("devices", "io_pattern", "queues_per_device", "queue_depth",
                               "io_size", "runtime")}
# echoed counts xnvmeperf prints as whole numbers above zero
_ECHO_COUNTS = ("queues_per_device", "queue_depth", "io_size", "runtime")

# Header columns as printed, per subcommand.
_HEADERS = {"run": ["Device", "CPUs", "IOPS", "MiB/s", "Failed"],
            "cuda-run": ["Device", "IOPS", "MiB/s", "Failed"]}
_ROUNDING = 0.005  # half of the last printed digit of %.2f
# the least share of the echoed runtime a run that was not cut short measures for
RUNTIME_SHARE = 0.9


def parse_xnvmeperf(text: str, source: str = "<string>") -> dict:
    """Parse one xnvmeperf ``run`` or ``cuda-run`` report.

    Returns ``kind`` ("run" | "cuda-run"), ``echo`` (the argument echo: keys lower-cased with
    ``_`` for spaces; lists such as ``devices`` and ``cpus`` as lists of strings or ints with
    a ``<key>_total`` count; ``N bytes`` and plain numbers as ints; other values as strings),
    ``elapsed_s`` (float), ``devices`` (one dict per row in printed order: ``uri``, ``cpus``
    (list of int; None for cuda-run), ``iops``, ``mibs`` (MiB/s, 2^20 B/s), ``failed``
    (count)) and ``totals`` (``iops``, ``mibs``, ``failed``).
    """
    if not text.strip():
        raise ParseError(source, "empty input: there is no xnvmeperf output to parse")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    echo = _echo(lines, source)
    titles = [i for i, line in enumerate(lines) if TITLE.match(line)]
    if not titles:
        raise ParseError(source, "no result table (no ' xnvmeperf (elapsed: …s)' line)"
                         + _first_error_hint(lines))
    if len(titles) > 1:
        raise ParseError(source, f"{len(titles)} result tables (lines "
                         f"{', '.join(str(i + 1) for i in titles)}); expected one")
    at = titles[0]
    title = TITLE.match(lines[at])
    kind = "cuda-run" if title.group("cuda") else "run"
    elapsed_s = measured_decimal(title.group("elapsed"), f"line {at + 1}: elapsed", source)

    at = _expect(lines, at + 1, _RULE_EQ, "a '=' rule after the title", source)
    header = lines[at].split() if at < len(lines) else []
    if header != _HEADERS[kind]:
        raise ParseError(source, f"line {at + 1}: expected the {kind} header "
                         f"{' '.join(_HEADERS[kind])!r}, got {excerpt(' '.join(header))}")
    devices = []
    numbers = []  # the line number of each device row
    at += 1
    while at < len(lines) and lines[at].strip() and not _RULE_DASH.match(lines[at]):
        devices.append(_device_row(lines[at], kind, at + 1, source))
        numbers.append(at + 1)
        at += 1
    if at >= len(lines) or not lines[at].strip():
        raise ParseError(source, f"line {at + 1}: truncated table: it ends before the '-' rule "
                         f"and the Total row")
    at += 1
    totals = _total_row(lines[at] if at < len(lines) else "", at + 1, source)
    numbers.append(at + 1)
    _expect(lines, at + 1, _RULE_EQ, "a closing '=' rule after the Total row", source)

    if not devices:
        raise ParseError(source, "the table has no device rows")
    _check_sums(devices, totals, source)
    _check_echo_complete(echo, kind, source)
    _check_echo_devices(echo, devices, source)
    for row, number in zip([*devices, totals], numbers):
        _check_rate(row, echo, number, source)
    _check_elapsed(echo, elapsed_s, source)
    return {"kind": kind, "echo": echo, "elapsed_s": elapsed_s, "devices": devices,
            "totals": totals}


def _echo(lines: list[str], source: str) -> dict:
    """The '- key: value' lines after 'Running xnvmeperf with arguments:'."""
    try:
        start = lines.index(_ECHO_START)
    except ValueError:
        raise ParseError(source, f"no argument echo (no line {_ECHO_START!r})"
                         + _first_error_hint(lines)) from None
    echo: dict = {}
    for number, line in enumerate(lines[start + 1:], start=start + 2):
        if not line.startswith("- "):
            break
        match = _ECHO_LINE.match(line)
        if match is None:
            raise ParseError(source, f"line {number}: argument echo line without 'key: value': "
                             f"{excerpt(line)}")
        key = match.group("key").strip().lower().replace(" ", "_")
        value = match.group("value").strip()
        listed = _ECHO_LIST.match(value)
        if listed:
            items = [item.strip() for item in listed.group("items").split(",") if item.strip()]
            echo[key] = ([int_within_float(i, key, source) for i in items]
                         if all(is_digits(i) for i in items) else items)
            echo[f"{key}_total"] = int_within_float(listed.group("total"), f"{key} total", source)
            if echo[f"{key}_total"] != len(items):  # xnvmeperf prints the list's length
                raise ParseError(source, f"line {number}: the echo lists {len(items)} "
                                 f"{key} but says total: {echo[f'{key}_total']} (allowed: the "
                                 "number listed)")
        elif _ECHO_BYTES.match(value):
            echo[key] = int_within_float(_ECHO_BYTES.match(value).group("n"), key, source)
        elif is_digits(value):
            echo[key] = int_within_float(value, key, source)
        else:
            echo[key] = value
    return echo


def _expect(lines: list[str], at: int, pattern: re.Pattern, what: str, source: str) -> int:
    if at >= len(lines) or not pattern.match(lines[at]):
        got = excerpt(lines[at]) if at < len(lines) else "end of input"
        raise ParseError(source, f"line {at + 1}: expected {what}, got {got} (truncated output?)")
    return at + 1


def _device_row(line: str, kind: str, number: int, source: str) -> dict:
    tokens = line.split()
    if len(tokens) != len(_HEADERS[kind]):
        raise ParseError(source, f"line {number}: a {kind} device row has "
                         f"{len(_HEADERS[kind])} columns, got {len(tokens)}: {excerpt(line)}")
    uri = tokens[0]
    cpus = None
    if kind == "run":
        cpus = tokens[1].split(",")
        if not all(is_digits(c) and len(c) <= 9 for c in cpus):
            raise ParseError(source, f"line {number}: CPUs column {excerpt(tokens[1])} is not a "
                             f"comma list of CPU ids (digits 0-9)")
        cpus = [int(c) for c in cpus]
    iops, mibs, failed = _numbers(tokens[-3:], number, source)
    return {"uri": uri, "cpus": cpus, "iops": iops, "mibs": mibs, "failed": failed}


def _total_row(line: str, number: int, source: str) -> dict:
    tokens = line.split()
    if not tokens or tokens[0] != "Total:":
        raise ParseError(source, f"line {number}: expected the 'Total:' row, got {excerpt(line)}")
    if len(tokens) != 4:
        raise ParseError(source, f"line {number}: the Total row has IOPS, MiB/s and Failed, "
                         f"got {len(tokens) - 1} values: {excerpt(line)}")
    iops, mibs, failed = _numbers(tokens[1:], number, source)
    return {"iops": iops, "mibs": mibs, "failed": failed}


def _numbers(tokens: list[str], number: int, source: str) -> tuple[float, float, int]:
    # float() would take a sign, nan and inf: a negative device row hid in a positive Total
    iops = measured_decimal(tokens[0], f"line {number}: IOPS", source)
    mibs = measured_decimal(tokens[1], f"line {number}: MiB/s", source)
    if not is_digits(tokens[2]):
        raise ParseError(source, f"line {number}: Failed must be a whole count (digits 0-9), "
                                 f"got {excerpt(tokens[2])}")
    return iops, mibs, int_within_float(tokens[2], "Failed", source)


def _check_sums(devices: list[dict], totals: dict, source: str) -> None:
    """Device rows must add up to the Total, within the rounding of the printed values (a
    NaN or an infinite rate, whose difference is NaN, does not)."""
    for key, unit in (("iops", "IOPS"), ("mibs", "MiB/s")):
        summed = sum(d[key] for d in devices)
        allowed = _ROUNDING * (len(devices) + 1) + 1e-9 * abs(totals[key])
        if not abs(summed - totals[key]) <= allowed:  # NaN or inf (inf - inf) too
            raise ParseError(source, f"device rows add up to {summed:.2f} {unit}, but the Total "
                             f"row says {totals[key]:.2f} (allowed rounding ±{allowed:.3f})")
    failed = sum(d["failed"] for d in devices)
    if failed != totals["failed"]:
        raise ParseError(source, f"device rows add up to {failed} failed commands, but the "
                         f"Total row says {totals['failed']}")


def _check_rate(row: dict, echo: dict, number: int, source: str) -> None:
    """A row's MiB/s must be its IOPS times the echoed I/O size (:func:`check_mibs`), which
    :func:`_check_echo_complete` made sure is there."""
    check_mibs(row, echo["io_size"], "the echoed io size", number, source)


def _check_elapsed(echo: dict, elapsed_s: float, source: str) -> None:
    """A run that ended well before its echoed runtime was cut short (or its timer is
    wrong): its rates are no measurement over the runtime it was asked for."""
    runtime = echo["runtime"]
    if elapsed_s < RUNTIME_SHARE * runtime:
        raise ParseError(source, f"elapsed {elapsed_s:.2f} s is far below the echoed runtime "
                         f"{runtime} s (at least {RUNTIME_SHARE:.0%} of it is expected)")


def _check_echo_complete(echo: dict, kind: str, source: str) -> None:
    """xnvmeperf echoes every argument it ran with: a line missing (removed, or the output
    damaged) would leave the command's value unchecked, and the MiB/s with it."""
    missing = [key for key in _ECHO_REQUIRED[kind] if key not in echo]
    if missing:
        raise ParseError(source, f"the argument echo lacks {', '.join(missing)} (xnvmeperf "
                         f"{kind} echoes {', '.join(_ECHO_REQUIRED[kind])})")
    for key in _ECHO_COUNTS:
        if not is_positive_int(echo[key]):
            raise ParseError(source, f"the argument echo's {key} is {excerpt(echo[key])} "
                             "(allowed: a whole number above 0, in ASCII digits)")


def _check_echo_devices(echo: dict, devices: list[dict], source: str) -> None:
    """The table must list the devices the echo announced, in the same order."""
    announced = echo.get("devices")
    if announced is None:
        raise ParseError(source, "the argument echo has no '- Devices:' line")
    uris = [d["uri"] for d in devices]
    if announced != uris:
        raise ParseError(source, f"the echo announced devices {excerpt(announced)}, but the "
                         f"table has rows for {excerpt(uris)}")


def _first_error_hint(lines: list[str]) -> str:
    """xnvmeperf reports failures on stderr as 'Failed: …' or 'Error: …'; quote the first."""
    for line in lines:
        if line.startswith(("Failed:", "Error:")):
            return f"; the output says: {excerpt(line.strip())}"
    return ""
