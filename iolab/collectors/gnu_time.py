"""GNU time as a collector: it wraps the driver's argv and writes its counters to a file.

Responsible for: the argv prefix with iolab's key=value format, finding ``/usr/bin/time``, the
pure parser of that format, and bounding its ``maxrss_kib`` by the host record's memory. Not responsible for: GNU time's default two-line format
(``iolab.parsers.gnu_time``, for AiSIO's archives).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from iolab.collectors.hostrec import host_mem_kib
from iolab.errors import ParseError, excerpt
from iolab.parsers import decimal_within_float, int_within_float, is_digits, within_float
from iolab.tools.base import Collector, Program

GNU_TIME = "/usr/bin/time"

# (key, GNU time 1.9 directive, type). The format and its parser are both built from this.
# GNU time has no directive for the signal that ended the command (%k counts signals
# *delivered*); it writes "Command terminated by signal N" above the stats instead, and then
# %x reads 0.
_GNU_TIME_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("user_s", "%U", float),
    ("sys_s", "%S", float),
    ("elapsed_s", "%e", float),
    ("cpu_pct", "%P", int),
    ("maxrss_kib", "%M", int),
    ("major_faults", "%F", int),
    ("minor_faults", "%R", int),
    ("voluntary_ctxsw", "%w", int),
    ("involuntary_ctxsw", "%c", int),
    ("fs_inputs", "%I", int),
    ("fs_outputs", "%O", int),
    ("swaps", "%W", int),
    ("exit", "%x", int),
)

GNU_TIME_FORMAT = "\n".join(f"{key}={directive}" for key, directive, _ in _GNU_TIME_FIELDS)


def gnu_time_prefix(out_file: str | Path) -> list[str]:
    """The argv to put before a driver's so that GNU time writes ``GNU_TIME_FORMAT`` to a file.

    The values cover the command's whole lifetime (start-up and teardown too) and include
    its waited-for children; ``iolab.collectors.proctree`` measures inside the window instead. GNU time is
    the Debian package ``time``; the bash keyword of the same name is a different thing,
    hence the absolute path.
    """
    return [GNU_TIME, "-o", str(out_file), "-f", GNU_TIME_FORMAT]


# [0-9]{1,3}: \d and int() take any script's digits; a status or signal is below 256
_TIME_EXITED = re.compile(r"Command exited with non-zero status ([0-9]{1,3})")
_TIME_SIGNALLED = re.compile(r"Command terminated by signal ([0-9]{1,3})")


def _value(key: str, kind: type, raw: str, number: int, source: str) -> int | float:
    """The value of one line: a finite number of 0 or more that a float can hold, in the ASCII
    digits 0-9 (with one point for a time) as GNU time prints it (float() takes nan, -inf,
    1e999, '1_000' and other scripts' digits; int() takes -1; none is a time, a count or a
    size that GNU time gives); ParseError naming the line and key otherwise."""
    allowed = "a number of 0 or more" if kind is float else "a whole number of 0 or more"
    word = raw.removesuffix("%") if key == "cpu_pct" else raw
    # ASCII digits only (float() and int() take any script's digits and '_' between them)
    if kind is float:
        value = decimal_within_float(word)
    else:
        try:
            value = int_within_float(word, f"line {number}: '{key}'", source) \
                if is_digits(word) else None
        except ValueError:
            value = None
    if value is None or not math.isfinite(within_float(value, f"line {number}: '{key}'", source)) \
            or value < 0:
        raise ParseError(source, f"line {number}: '{key}' has the value {excerpt(raw)} "
                                 f"(allowed: {allowed})")
    return value


def parse_gnu_time_kv(text: str, source: str = "time.out") -> dict[str, Any]:
    """Parse a file written with ``gnu_time_prefix``.

    Returns every key of ``GNU_TIME_FORMAT`` plus ``signal``; ParseError for a value that
    is not a finite number of 0 or more (NaN, -inf, a negative time, count or size).
    ``cpu_pct`` is None when GNU
    time printed ``?%`` (elapsed time of zero); ``exit`` is None and ``signal`` the signal
    number when a signal ended the command.
    """
    types = {key: kind for key, _, kind in _GNU_TIME_FIELDS}
    values: dict[str, Any] = {}
    status_line: int | None = None
    signal_number: int | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if match := _TIME_EXITED.fullmatch(line):
            status_line = int(match.group(1))
            continue
        if match := _TIME_SIGNALLED.fullmatch(line):
            signal_number = int(match.group(1))
            continue
        key, eq, raw = line.partition("=")
        if not eq or key not in types:
            raise ParseError(source, f"line {number}: not a GNU time line of iolab's format: "
                             f"{excerpt(line)}")
        if key in values:
            raise ParseError(source, f"line {number}: '{key}' appears twice")
        if key == "cpu_pct" and raw == "?%":
            values[key] = None
            continue
        values[key] = _value(key, types[key], raw, number, source)
    missing = [key for key in types if key not in values]
    if missing:
        raise ParseError(source, f"missing {', '.join(missing)} (empty or cut-off file: was "
                         f"GNU time killed?)")
    if signal_number is not None:
        values["exit"] = None
    elif values["exit"] != (status_line or 0):
        raise ParseError(source, f"exit={values['exit']} disagrees with the line 'Command "
                         f"exited with non-zero status {status_line}'")
    values["signal"] = signal_number
    return values


def check_maxrss(maxrss_kib: int, mem_kib: int | None, source: str) -> None:
    """ParseError when the command's largest resident set is above the host's memory
    (``mem_kib``, the host record's MemTotal; None: no record, nothing to bound by): no
    process keeps more resident than the machine has (1 EiB on a host of 24 GiB was stored)."""
    if mem_kib is not None and maxrss_kib > mem_kib:
        raise ParseError(source, f"maxrss_kib={maxrss_kib} is above the host's memory "
                                 f"({mem_kib} KiB, mem_total_kib of the host record; allowed: "
                                 "at most that)")


class GnuTime(Collector):
    """Runs the driver under GNU time, which writes ``GNU_TIME_FORMAT`` to ``file``."""

    name = "gnu_time"
    FILE = "time.txt"

    def programs(self) -> list[Program]:
        return [Program("GNU time", GNU_TIME, ("--version",),
                        install="install it with 'apt-get install time'", role="collector")]

    def wrap(self, argv: list[str]) -> list[str]:
        return gnu_time_prefix(self.FILE) + argv

    @staticmethod
    def parse(run_dir: Path, window: tuple[int, int] | None) -> dict[str, Any]:
        path = Path(run_dir) / GnuTime.FILE
        values = parse_gnu_time_kv(path.read_text(), str(path))
        check_maxrss(values["maxrss_kib"], host_mem_kib(Path(run_dir)), str(path))
        return {key: values[key] for key in ("cpu_pct", "user_s", "sys_s", "elapsed_s",
                                             "maxrss_kib", "exit", "signal")}
