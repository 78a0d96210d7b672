"""Parser for GNU time's default report (``/usr/bin/time CMD`` with no format option).

Responsible for: finding GNU time's two-line report in a text (alone, or at the end of a
stream where the timed command's own output comes first, as in AiSIO's CIJOE captures that
merge stdout and stderr), reading every field of it and the optional status line before it,
and raising :class:`~iolab.errors.ParseError` (naming the source and the problem) when there
is no complete report.

Not responsible for: other GNU time formats (``-p``, ``-v``, ``-f``), the bash builtin
``time``, or judging the timed command.

The default format (GNU time 1.7–1.9; samples in tests/fixtures/aisio_formats/)::

    [Command exited with non-zero status N]        only when the command exited non-zero
    [Command terminated by signal N]               only when a signal killed it
    10.02user 0.79system 0:10.99elapsed 98%CPU (0avgtext+0avgdata 200448maxresident)k
    0inputs+0outputs (0major+13080minor)pagefaults 0swaps

Elapsed is ``m:ss.cc`` below one hour and ``h:mm:ss`` (no fraction) from one hour on. ``%CPU``
is ``(user + system) / elapsed`` as a whole percent of one CPU, over the command's whole
lifetime (start-up and teardown included), and is ``?`` when elapsed is zero; it is then
returned as None; a ``%CPU`` the printed times cannot give, minutes or seconds of 60 or
more, a time beyond what a float holds, or an exit status outside 1-255 or a signal outside
1-127 (what a wait status holds) is a ParseError (the report is not GNU time's own). GNU
time writes the report last, after the command has exited, so the *last* report in the text
is the one read.
"""

from __future__ import annotations

import math
import re

from iolab.errors import ParseError, excerpt
from iolab.parsers import int_within_float, measured_decimal, within_float

_NUM = r"[0-9]+(?:\.[0-9]+)?"
_LINE1 = re.compile(
    rf"^(?P<user>{_NUM})user (?P<system>{_NUM})system (?P<elapsed>[0-9:.]+)elapsed "
    r"(?P<cpu>[0-9]+|\?)%CPU \((?P<avgtext>[0-9]+)avgtext\+(?P<avgdata>[0-9]+)avgdata "
    r"(?P<maxresident>[0-9]+)maxresident\)k$")
_LINE2 = re.compile(
    r"^(?P<inputs>[0-9]+)inputs\+(?P<outputs>[0-9]+)outputs \((?P<major>[0-9]+)major\+"
    r"(?P<minor>[0-9]+)minor\)pagefaults (?P<swaps>[0-9]+)swaps$")
_NUMBER = re.compile(_NUM)
# a wait status holds an exit status of 1-255 and a signal number of 1-127 (7 bits): longer
# numbers are not GNU time's, and are read no further than three digits
_EXITED = re.compile(r"^Command exited with non-zero status (?P<n>[0-9]+)$")
_SIGNALLED = re.compile(r"^Command terminated by signal (?P<n>[0-9]+)$")
_EXIT_MOST, _SIGNAL_MOST = 255, 127


def parse_gnu_time_default(text: str, source: str = "<string>") -> dict:
    """Parse the last GNU time default report in ``text``.

    Returns ``user_s``, ``system_s``, ``elapsed_s`` (floats), ``cpu_percent`` (int, or None
    for ``?``), ``avgtext_kib``, ``avgdata_kib``, ``maxresident_kib``, ``inputs``,
    ``outputs`` (file-system blocks), ``major_faults``, ``minor_faults``, ``swaps`` (ints),
    ``exit_status`` (int from 'Command exited with non-zero status N', else None; a clean
    exit prints no line, so None means 0 unless ``signal`` is set) and ``signal`` (int from
    'Command terminated by signal N', else None).
    """
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    starts = [i for i, line in enumerate(lines) if _LINE1.match(line)]
    if not starts:
        hint = " (only a partial first line?)" if "elapsed" in text and "%CPU" in text else ""
        raise ParseError(source, f"no GNU time report: no line like '<u>user <s>system "
                         f"<e>elapsed <n>%CPU (…avgtext+…avgdata …maxresident)k'{hint}")
    at = starts[-1]
    second = _LINE2.match(lines[at + 1]) if at + 1 < len(lines) else None
    if second is None:
        got = excerpt(lines[at + 1]) if at + 1 < len(lines) else "end of input"
        raise ParseError(source, f"line {at + 2}: expected GNU time's second line "
                         f"'<i>inputs+<o>outputs (<M>major+<m>minor)pagefaults <w>swaps', got {got}")
    first = _LINE1.match(lines[at])
    before = lines[at - 1] if at > 0 else ""
    exited, signalled = _EXITED.match(before), _SIGNALLED.match(before)
    def whole(match: re.Match, group: str, key: str) -> int:
        return int_within_float(match.group(group), f"line {at + 1}: {key}", source)

    user_s = measured_decimal(first.group("user"), f"line {at + 1}: user", source)
    system_s = measured_decimal(first.group("system"), f"line {at + 1}: system", source)
    elapsed = first.group("elapsed")
    elapsed_s = _elapsed_s(elapsed, at + 1, source)
    cpu_percent = None if first.group("cpu") == "?" else whole(first, "cpu", "%CPU")
    _check_cpu(cpu_percent, user_s + system_s, elapsed_s, 0.01 if "." in elapsed else 1.0,
               at + 1, source)
    return {
        "user_s": user_s,
        "system_s": system_s,
        "elapsed_s": elapsed_s,
        "cpu_percent": cpu_percent,
        "avgtext_kib": whole(first, "avgtext", "avgtext"),
        "avgdata_kib": whole(first, "avgdata", "avgdata"),
        "maxresident_kib": whole(first, "maxresident", "maxresident"),
        "inputs": whole(second, "inputs", "inputs"),
        "outputs": whole(second, "outputs", "outputs"),
        "major_faults": whole(second, "major", "major"),
        "minor_faults": whole(second, "minor", "minor"),
        "swaps": whole(second, "swaps", "swaps"),
        "exit_status": _status(exited, "exit status", _EXIT_MOST, at, source),
        "signal": _status(signalled, "signal", _SIGNAL_MOST, at, source),
    }


def _status(match: re.Match | None, what: str, most: int, number: int,
            source: str) -> int | None:
    """The number of GNU time's status line (line ``number``), 1 to ``most``; None without
    the line; a ParseError for any other number (no wait status holds one)."""
    if match is None:
        return None
    digits = match.group("n")
    if len(digits) > 3 or not 1 <= int(digits) <= most:
        shown = digits if len(digits) <= 20 else f"{digits[:20]}... ({len(digits)} digits)"
        raise ParseError(source, f"line {number}: {what} {shown} is none a process can have "
                                 f"(allowed: 1 to {most})")
    return int(digits)


def _check_cpu(cpu_percent: int | None, cpu_s: float, elapsed_s: float, step_s: float,
               number: int, source: str) -> None:
    """ParseError when %CPU is not what GNU time computes from the times beside it: the whole
    part of (user + system) / elapsed in percent, from times it prints cut to ``step_s``
    (0.01 s; 1 s for h:mm:ss), so each printed time is at most one step below the real one."""
    if cpu_percent is None or elapsed_s <= 0:
        return
    least = math.floor(cpu_s * 100 / (elapsed_s + step_s))
    most = math.floor((cpu_s + 0.02) * 100 / elapsed_s)
    if not least <= cpu_percent <= most:
        raise ParseError(source, f"line {number}: {cpu_percent}%CPU does not match its times "
                         f"({cpu_s:.2f} s of CPU in {elapsed_s:g} s elapsed allow "
                         f"{least}% to {most}%)")


def _elapsed_s(value: str, number: int, source: str) -> float:
    """``m:ss.cc`` (below one hour) or ``h:mm:ss`` (from one hour on) in seconds; seconds and
    minutes (of hours) below 60."""
    parts = value.split(":")
    if len(parts) in (2, 3) and any(_NUMBER.fullmatch(p) and float(p) >= 60 for p in parts[1:]):
        raise ParseError(source, f"line {number}: elapsed {excerpt(value[:40])}: minutes and "
                         "seconds must be below 60 (allowed: m:ss.cc or h:mm:ss)")
    try:
        if len(parts) == 2:
            return int(parts[0]) * 60 + float(parts[1])
        if len(parts) == 3 and "." not in value:
            return within_float(int(parts[0]) * 3600 + int(parts[1]) * 60 + int(parts[2]),
                                f"line {number}: elapsed", source)
    except ValueError:
        pass
    except OverflowError:  # more minutes or hours than a number holds
        raise ParseError(source, f"line {number}: elapsed {excerpt(value[:40])}...: beyond the "
                         "largest number a measurement can hold") from None
    raise ParseError(source, f"line {number}: elapsed {excerpt(value)} is neither m:ss.cc nor "
                             f"h:mm:ss")
