"""Parser for the log of AiSIO's CPU frequency logger (``auxiliary/cpu_freq_logger.sh``).

Responsible for: turning the log text into timestamped lines of kHz per CPU, with the
timestamps parsed; tolerating a partial last line (the logger is killed with ``pkill`` and
may die mid-line) with a note; reproducing AiSIO's own per-CPU summary
(:func:`aisio_cpu_freqs`) so that imported results can be checked against AiSIO's; and
raising :class:`~iolab.errors.ParseError` (naming the source, the line and what it expected)
for anything else that is malformed.

Not responsible for: running the logger, choosing which CPUs or which time window matter
(callers select columns and lines), or time zones: the timestamps are naive, exactly as
written.

Log format (samples in tests/fixtures/aisio_formats/): one line per sample,
``YYYY-MM-DD_HH:MM:SS`` (zero-padded, as ``date`` writes it; second resolution, so
consecutive samples can share a timestamp), then one integer per CPU in kHz, space
separated, usually with a trailing space. The column index is taken as the CPU id, as
AiSIO does (the script lists every ``cpu*/cpufreq`` folder in ``sort -V`` order; offline
CPUs could shift the columns, which the log cannot show). A log whose first line is
``UNSUPPORTED``, and an empty log, give no samples and a note.

The timestamps never go back: a line stamped before the line above is a ParseError (the
trimming of :func:`aisio_cpu_freqs` and any window alignment assume log order).

A line is *partial* when it has fewer values than the lines before it, or when the text does
not end with a newline (its last value may be cut short). Only the last line may be partial.

Lines are kept wide (one tuple of kHz per line, indexed by CPU id) and read with one compiled
pattern: an import reads 160 logs of ~100 CPUs each, where a sample object per value and a
general date parser per line cost more than the rest of the import.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import NamedTuple

from iolab.errors import ParseError, excerpt
from iolab.parsers import int_within_float

# The logger writes ``date +%Y-%m-%d_%H:%M:%S`` (zero-padded) and the values of
# ``scaling_cur_freq``; ASCII only, so that ``\d`` never takes another script's digits. The
# values are one run of digits and blanks (split afterwards): a group repeated per value
# would cost more than the rest of the line.
_LINE = re.compile(r"\s*(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)((?:\s[\d\s]*)?)", re.ASCII)
_STAMP = re.compile(r"\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d", re.ASCII)


class FreqLine(NamedTuple):
    """One sample line: when, and the kHz of every CPU (index = CPU id)."""

    timestamp: datetime
    khz: tuple[int, ...]


def parse_cpufreq_log(text: str, source: str = "<string>") -> dict:
    """Parse a logger file.

    Returns ``lines`` (list of :class:`FreqLine` in log order, each with ``ncpus`` values),
    ``ncpus`` (values per line; 0 without lines) and ``notes`` (list of str: a dropped
    partial last line, an empty or UNSUPPORTED log).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    numbered = [(number, line) for number, line in enumerate(text.split("\n"), start=1)
                if line.strip()]
    if not numbered:
        return {"lines": [], "ncpus": 0, "notes": ["empty log: no samples"]}
    if numbered[0][1].strip() == "UNSUPPORTED":
        return {"lines": [], "ncpus": 0, "notes": ["the logger reported UNSUPPORTED: no samples"]}

    notes = []
    lines: list[FreqLine] = []
    last = len(numbered) - 1
    for index, (number, line) in enumerate(numbered):
        row = _read_line(line, number, source, lenient=index == last)
        if index == last and (row is None or (lines and len(row[1]) < len(lines[0].khz))
                              or not text.endswith("\n")):
            notes.append(f"line {number}: dropped a partial last line (the logger was stopped "
                         f"while writing it)")
            break
        if lines and len(row[1]) != len(lines[0].khz):
            raise ParseError(source, f"line {number}: {len(row[1])} CPU values, but the first "
                             f"line has {len(lines[0].khz)}")
        if lines and row[0] < lines[-1].timestamp:
            raise ParseError(source, f"line {number}: {row[0]:%Y-%m-%d_%H:%M:%S} is before the "
                             f"line above's {lines[-1].timestamp:%Y-%m-%d_%H:%M:%S} (allowed: "
                             "samples in time order, as the logger writes them; the same "
                             "second twice is fine)")
        lines.append(FreqLine(row[0], tuple(map(int, row[1]))))
    return {"lines": lines, "ncpus": len(lines[0].khz) if lines else 0, "notes": notes}


def aisio_cpu_freqs(text: str, cpus: list[int], source: str = "<string>") -> dict[int, tuple[float, float]]:
    """AiSIO's summary of one log: {cpu: (mean kHz, population variance)} for ``cpus``.

    AiSIO's ``cpu_freq_helper.py`` keeps the lines from index ``int(0.1 n)`` up to (not
    including) ``int(0.9 n)``, drops empty ones, and takes column ``cpu`` of each. Here ``n``
    counts the pieces of the text split on ``\\n``, *including* the empty piece after the
    final newline: with that count this function reproduces the stored ``cpu_freqs`` of all
    175 repetitions in the two archived AiSIO result archives exactly, and without it none.
    (the shared format notes describe the empty lines as dropped first; the data say
    otherwise.) The window is not aligned to the benchmark; see :func:`parse_cpufreq_log`
    for timestamped samples. The numbers are ``statistics.mean`` and ``statistics.pvariance``
    of each column, as AiSIO computes them (see :func:`mean_pvariance`).
    """
    pieces = text.split("\n")
    n = len(pieces)
    window = [(number, piece) for number, piece in
              enumerate(pieces[int(0.1 * n):int(0.9 * n)], start=int(0.1 * n) + 1) if piece.strip()]
    if not window:
        raise ParseError(source, f"AiSIO's 10 %/10 % trim leaves no sample of {n} lines")
    rows = [(number, _read_line(line, number, source, lenient=False)[1]) for number, line in window]
    out = {}
    for cpu in cpus:
        missing = next((number for number, values in rows if cpu >= len(values)), None)
        if missing is not None:
            raise ParseError(source, f"line {missing}: no column for CPU {cpu}")
        khz = [int_within_float(values[cpu], f"line {number}: CPU {cpu}", source)
               for number, values in rows]
        try:
            out[cpu] = mean_pvariance(khz)
        except OverflowError:  # a variance of values each a float can hold may not be one
            raise ParseError(source, f"CPU {cpu}: the variance of its values is beyond the "
                             "largest number a measurement can hold") from None
    return out


def mean_pvariance(values: list[int]) -> tuple[int | float, int | float]:
    """``statistics.mean`` and ``statistics.pvariance`` of integers, with the same results.

    Both are exact: they sum as fractions and round once, giving an int where the result is
    whole. So is this, in integers: the mean is sum/n and the variance (n·Σx² − (Σx)²)/n²,
    and Python's int division rounds correctly, as Fraction's float() does. (statistics'
    fractions cost more than reading the log.)
    """
    n = len(values)
    total = sum(values)
    scaled = n * sum(v * v for v in values) - total * total
    return (total // n if total % n == 0 else total / n,
            scaled // (n * n) if scaled % (n * n) == 0 else scaled / (n * n))


def _read_line(line: str, number: int, source: str,
               lenient: bool) -> tuple[datetime, list[str]] | None:
    """(timestamp, kHz per CPU as digit strings) of one line; None for a broken line when
    ``lenient``, else ParseError saying what is wrong. Callers convert the values they use."""
    match = _LINE.fullmatch(line)
    if match is not None:
        year, month, day, hour, minute, second, values = match.groups()
        khz = values.split()
        try:
            timestamp = datetime(int(year), int(month), int(day), int(hour), int(minute),
                                 int(second))
        except ValueError as exc:
            if lenient:
                return None
            raise ParseError(source, f"line {number}: {excerpt(line.split()[0])} is not a date and "
                             f"time ({exc})") from None
        if khz:
            return timestamp, khz
        if lenient:
            return None
        raise ParseError(source, f"line {number}: a timestamp without CPU values")
    if lenient:
        return None
    tokens = line.split()
    if not _STAMP.fullmatch(tokens[0]):
        raise ParseError(source, f"line {number}: expected 'YYYY-MM-DD_HH:MM:SS' first, got "
                         f"{excerpt(tokens[0])}")
    bad = next((t for t in tokens[1:] if not (t.isascii() and t.isdigit())), None)
    if bad is None:  # every word is fine: the separator is not a space or a tab
        raise ParseError(source, f"line {number}: expected values separated by spaces, got "
                         f"{excerpt(line)}")
    raise ParseError(source, f"line {number}: expected integer kHz values after the timestamp, "
                     f"got {excerpt(bad)}")
