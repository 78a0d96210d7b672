"""Pure parsers of raw tool output: each is a function of file contents and never runs a tool.

Responsible for: turning one output format into numbers, with a clear error naming the source
for malformed input; an error quotes at most a bounded excerpt of the input it could not read
(:func:`iolab.errors.excerpt`, :func:`iolab.errors.shortened`), however long the line.
Not responsible for: finding or running tools, or which files a run has (``iolab.tools``).

A number a report holds must be one a float can hold: Python reads a JSON integer literal, or
a run of digits, at any size, but ``float()`` of one beyond about 1.8e308, and a division of
it, raise OverflowError, which is no ParseError; the run would then end the campaign instead
of failing with its reason. :func:`within_float` names the key of such a number.

Tools print numbers in ASCII digits, so text is read in those only (:func:`is_digits`,
:func:`int_within_float`, :func:`decimal_within_float`, ``[0-9]`` or ``re.ASCII`` in a
pattern): ``int()``, ``float()``, ``str.isdigit`` and ``\\d`` also take other scripts' digits
('١٩٣'), and ``float()`` '1_000', 'nan' and 'inf', which would be stored as numbers.
A collector's own record (JSON written beside a run) is read back with :func:`record_object`
and :func:`record_value`; times in one must be times a clock gives (:func:`is_clock_ns`).
A tool's report file is read by :func:`read_report` alone: never through a link and never
beyond :data:`REPORT_MOST` bytes, so a report of gigabytes fails its run instead of taking all
the memory.
"""

from __future__ import annotations

import json
import math
import re
import errno
import os
import sys
from pathlib import Path
from typing import Any, Callable

from iolab.errors import ParseError, excerpt
from iolab.safefiles import TooLarge, read_regular

FLOAT_MAX = sys.float_info.max
FLOAT_DIGITS_MOST = 400  # more digits than FLOAT_MAX's 309, fewer than int()'s limit (4,300)
# The deepest a report's arrays and objects nest: the tools' reports nest 5 levels at most;
# Python's reader fails somewhat below its recursion limit (1,000), whatever the limit says
JSON_DEPTH_MOST = 100
# The most bytes of a tool's report read: reports were read whole (and held twice, as bytes
# and as text), so a 300 MB one took 600 MB and one of gigabytes all the memory. The committed
# runs' largest report is fio's json+ at 22 kB (full latency histograms are about 170 kB a
# job); no tool's text or JSON report comes near this
REPORT_MOST = 128 << 20


def read_report(path: str | Path, tool: str, role: str = "", errors: str = "replace") -> str:
    """The text of the report file ``path`` of ``tool``'s, read never through a link (NotOurs)
    and refused unread beyond :data:`REPORT_MOST` bytes: a ParseError naming the file and the
    bound; FileNotFoundError, as ``open`` gives it, when there is no file (a run without its
    report fails as "no output"). ``role`` names the file in a refusal (``tool``'s report by
    default); ``errors`` is how bytes that are not UTF-8 are decoded."""
    try:
        raw = read_regular(Path(path), role or f"{tool}'s report", REPORT_MOST)
    except TooLarge:
        raise ParseError(str(path), f"holds more than {REPORT_MOST:,} bytes, more than any "
                                    f"report of {tool}'s (allowed: at most {REPORT_MOST:,} "
                                    "bytes); it is not read") from None
    if raw is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    return raw.decode("utf-8", errors=errors)


def within_float(value: Any, key: str, source: str) -> Any:
    """``value``, unless it is an integer too large for a float: then a ParseError naming
    ``key`` (no tool writes one; a report that holds one is damaged or not the tool's)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > FLOAT_MAX:
        digits = int(value.bit_length() * math.log10(2)) + 1  # str() refuses 4,300 and more
        raise ParseError(source, f"{key}: an integer of about {digits} digits, beyond the "
                                 f"largest number a measurement can hold ({FLOAT_MAX:.3g})")
    return value


def int_within_float(text: str, key: str, source: str) -> int:
    """``int(text)`` of an integer in ASCII digits (an optional sign, then 0-9), checked by
    :func:`within_float`; ValueError, as ``int`` gives, for any other text (``int`` itself
    takes any script's digits, such as '١٩٣', and '1_000': no tool writes those), and
    ParseError naming ``key`` for a run of digits longer than any float holds (``int``
    refuses 4,300 digits and more with a ValueError that names no key)."""
    word = text.strip()
    sign, body = (word[0], word[1:]) if word[:1] in ("+", "-") else ("", word)
    if not is_digits(body):
        raise ValueError(f"invalid literal for int() with base 10: {excerpt(text)} (allowed: "
                         "digits 0-9)")
    if len(body) > FLOAT_DIGITS_MOST:
        digits = body.lstrip("0") or "0"
        if len(digits) > FLOAT_DIGITS_MOST:
            raise ParseError(source, f"{key}: an integer of about {len(digits)} digits, "
                                     f"beyond the largest number a measurement can hold "
                                     f"({FLOAT_MAX:.3g})")
        body = digits  # int() counts leading zeros towards its 4,300 digits
    return within_float(int(sign + body), key, source)


def measured_decimal(token: str, key: str, source: str) -> float:
    """``token`` read as a rate, a count or a time a tool prints (``%.2f`` and the like), as
    :func:`decimal_within_float` reads it; ParseError naming ``key`` for anything else that
    ``float()`` takes (a sign: no rate, count or time is negative; ``nan``, ``inf``, an
    exponent, ``_`` between digits or another script's digits) and for a number beyond what a
    float holds."""
    value = decimal_within_float(token)
    if value is not None:
        return value
    if _DECIMAL.fullmatch(token):
        raise ParseError(source, f"{key}: a number of {len(token)} digits, beyond the largest "
                                 f"number a measurement can hold ({FLOAT_MAX:.3g})")
    raise ParseError(source, f"{key}: {excerpt(token)} is no measurement (allowed: the digits "
                             "0-9 with an optional fraction, as the tool prints them)")


PRINTED_ROUNDING = 0.005  # half of the last digit of a rate printed with %.2f


def check_mibs(row: dict, io_size: int, size_words: str, number: int, source: str) -> None:
    """A row's printed MiB/s must be its printed IOPS × ``io_size`` / 2^20 (the tool computes
    one from the other, and prints both with %.2f), within the rounding of both: a MiB/s ten
    times too large beside a true IOPS is no measurement of either. ``size_words`` names
    where the size came from (``the I/O size``)."""
    expected = row["iops"] * io_size / 2**20
    allowed = PRINTED_ROUNDING + PRINTED_ROUNDING * io_size / 2**20 + 1e-6 * expected
    if not abs(row["mibs"] - expected) <= allowed:
        raise ParseError(source, f"line {number}: MiB/s {row['mibs']:.2f} is not IOPS "
                         f"{row['iops']:.2f} × {size_words} {io_size} B (= {expected:.2f} "
                         f"MiB/s; allowed rounding ±{allowed:.3f})")


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more of the ASCII digits 0-9: ``str.isdigit`` accepts
    superscripts such as '²', which ``int`` then refuses with a ValueError that names no file."""
    return text.isascii() and text.isdigit()


# a decimal number as C's printf writes one with %d or %f: ASCII digits and at most one point.
# float() takes more ('nan', 'inf', '1e999', '1_000', '+1', any script's digits), none of
# which such a tool prints
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SIGNED_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def decimal_within_float(text: str, signed: bool = False) -> float | None:
    """``float(text)`` when ``text`` is a decimal as printf writes it (see :data:`_DECIMAL`;
    with ``signed``, a leading '-' too) and the float is finite; None for anything else (the
    caller's ParseError names the column: this helper knows no source)."""
    pattern = _SIGNED_DECIMAL if signed else _DECIMAL
    if len(text) > FLOAT_DIGITS_MOST or pattern.fullmatch(text) is None:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


class _KeyTwice(Exception):
    def __init__(self, key: str):
        self.key = key


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict:
    """An object of a report, refused when a key is given twice (see the module docstring)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _KeyTwice(key)
        out[key] = value
    return out


_DECODER = json.JSONDecoder(object_pairs_hook=_no_key_twice)


def decode_json(text: str, source: str, pos: int = 0) -> tuple[Any, int]:
    """The JSON value that starts at ``pos`` of ``text`` and where it ends, as
    ``json.JSONDecoder.raw_decode`` gives them; ParseError naming ``source`` for a key given
    twice in one object, nesting deeper than :data:`JSON_DEPTH_MOST` or a number Python cannot
    read. json.JSONDecodeError (malformed JSON) is left to the caller, whose message says what
    the tool writes."""
    _check_depth(text, source, pos)
    try:
        return _DECODER.raw_decode(text, pos)
    except _KeyTwice as exc:
        raise ParseError(source, f"key {excerpt(exc.key)} is given twice in one object (a "
                                 "tool writes each key once), so the report is not the "
                                 "tool's own") from None
    except RecursionError:  # below JSON_DEPTH_MOST when the caller's stack is deep already
        raise ParseError(source, f"arrays or objects nested too deeply (at most "
                                 f"{JSON_DEPTH_MOST} levels allowed)") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of more digits than Python reads (4,300)
        raise ParseError(source, f"a number that cannot be read: {excerpt(str(exc))}") from None


def load_json(text: str, source: str) -> Any:
    """The one JSON value ``text`` holds (``json.loads``, checked as :func:`decode_json`
    checks); json.JSONDecodeError for malformed JSON or text after the value."""
    start = _SPACE.match(text).end()
    value, end = decode_json(text, source, start)
    end = _SPACE.match(text, end).end()
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


_SPACE = re.compile(r"[ \t\n\r]*")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _check_depth(text: str, source: str, pos: int) -> None:
    """ParseError when arrays and objects nest deeper than :data:`JSON_DEPTH_MOST` in the
    value at ``pos`` (strings, whose brackets are text, are skipped; the count stops where the
    value's outermost bracket closes)."""
    if text.count("[", pos) + text.count("{", pos) <= JSON_DEPTH_MOST:
        return  # too few brackets to nest that deep: no need to scan (most reports)
    depth = 0
    for match in _BRACKETS.finditer(text, pos):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > JSON_DEPTH_MOST:
                line = text.count("\n", 0, match.start()) + 1
                raise ParseError(source, f"line {line}: arrays or objects nested more than "
                                         f"{JSON_DEPTH_MOST} levels deep (at most "
                                         f"{JSON_DEPTH_MOST} allowed)")
        elif char in "]}":
            depth -= 1
            if depth <= 0:
                return
        elif depth == 0:
            return  # a string at the top level: no brackets to count


# A clock's nanoseconds (CLOCK_REALTIME, CLOCK_MONOTONIC) are a signed 64-bit count: a record
# time outside 0 .. 2**63 - 1, or one that is not a whole number, no clock gave
CLOCK_NS_MOST = 2**63 - 1


def is_clock_ns(value: Any) -> bool:
    """Whether ``value`` is a time in nanoseconds a clock gives: a whole number 0 to
    :data:`CLOCK_NS_MOST` (not a float, which loses nanoseconds and may be 1e300, nor a bool)."""
    return type(value) is int and 0 <= value <= CLOCK_NS_MOST


CLOCK_NS_ALLOWED = f"whole nanoseconds 0 to {CLOCK_NS_MOST}"


CPU_ID_MOST = 2**22 - 1  # far above the kernel's largest NR_CPUS (8,192)
CPU_IDS_ALLOWED = f"a list of CPU ids 0 to {CPU_ID_MOST}, each once"


def is_cpu_ids(value: Any) -> bool:
    """Whether ``value`` is a list of CPU ids (whole numbers 0 to :data:`CPU_ID_MOST`, not
    bools), each at most once, as a record of CPUs a run used or an IRQ is delivered to."""
    return (isinstance(value, list)
            and all(type(c) is int and 0 <= c <= CPU_ID_MOST for c in value)
            and len(set(value)) == len(value))


def record_object(text: str, source: str) -> dict:
    """The JSON object of a collector's own record (what it wrote beside the run's output);
    ParseError naming ``source`` for anything else. The record is read back by the run's
    parse like any output: a cut-off or replaced one fails the run with this reason rather
    than a KeyError or a JSON error that names no file."""
    try:
        record = load_json(text, source)
    except ValueError:
        raise ParseError(source, "not JSON (cut off?); the collector writes one object") from None
    if not isinstance(record, dict):
        raise ParseError(source, f"holds {type(record).__name__}, not the object the "
                                 "collector writes")
    return record


def record_value(record: dict, key: str, source: str, usable: Callable[[Any], bool],
                 allowed: str) -> Any:
    """``record[key]`` when ``usable`` says it is; ParseError naming ``source``, ``key`` and
    what is ``allowed`` when it is missing or is not."""
    if key not in record:
        raise ParseError(source, f"has no {key} (allowed: {allowed})")
    value = record[key]
    if not usable(value):
        raise ParseError(source, f"{key} is {excerpt(value)} (allowed: {allowed})")
    return value
