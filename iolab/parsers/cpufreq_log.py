"""Parser for the log of AiSIO's CPU frequency logger (``auxiliary/cpu_freq_logger.sh``).

Responsible for: turning the log text into long-format samples (cpu, timestamp, kHz) with
the timestamps parsed; tolerating a partial last line (the logger is killed with ``pkill``
and may die mid-line) with a note; reproducing AiSIO's own per-CPU summary
(:func:`aisio_cpu_freqs`) so that imported results can be checked against AiSIO's; and
raising :class:`~iolab.errors.ParseError` (naming the source and the problem) for anything
else that is malformed.

Not responsible for: running the logger, choosing which CPUs or which time window matter
(callers select samples), or time zones: the timestamps are naive, exactly as written.

Log format (samples in tests/fixtures/aisio_formats/): one line per sample, ``YYYY-MM-DD_HH:MM:SS`` (second
resolution, so consecutive samples can share a timestamp), then one integer per CPU in kHz,
space separated, usually with a trailing space. The column index is taken as the CPU id, as
AiSIO does (the script lists every ``cpu*/cpufreq`` folder in ``sort -V`` order; offline
CPUs could shift the columns, which the log cannot show). A log whose first line is
``UNSUPPORTED``, and an empty log, give no samples and a note.

A line is *partial* when it has fewer values than the lines before it, or when the text does
not end with a newline (its last value may be cut short). Only the last line may be partial.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from typing import NamedTuple

from iolab.errors import ParseError

TIMESTAMP_FORMAT = "%Y-%m-%d_%H:%M:%S"


class FreqSample(NamedTuple):
    cpu: int
    timestamp: datetime
    khz: int


def parse_cpufreq_log(text: str, source: str = "<string>") -> dict:
    """Parse a logger file.

    Returns ``samples`` (list of :class:`FreqSample` in log order, CPU ids ascending within a
    line), ``ncpus`` (values per line; 0 without samples), ``nlines`` (complete sample
    lines used) and ``notes`` (list of str: a dropped partial last line, an empty or
    UNSUPPORTED log).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [(number, line) for number, line in enumerate(text.split("\n"), start=1)
             if line.strip()]
    if not lines:
        return {"samples": [], "ncpus": 0, "nlines": 0, "notes": ["empty log: no samples"]}
    if lines[0][1].strip() == "UNSUPPORTED":
        return {"samples": [], "ncpus": 0, "nlines": 0,
                "notes": ["the logger reported UNSUPPORTED: no samples"]}

    notes = []
    rows = []
    for index, (number, line) in enumerate(lines):
        is_last = index == len(lines) - 1
        row = _row(line, number, source, lenient=is_last)
        if is_last and (row is None or (rows and len(row[1]) < len(rows[0][1]))
                        or not text.endswith("\n")):
            notes.append(f"line {number}: dropped a partial last line (the logger was stopped "
                         f"while writing it)")
            break
        if rows and len(row[1]) != len(rows[0][1]):
            raise ParseError(source, f"line {number}: {len(row[1])} CPU values, but the first "
                             f"line has {len(rows[0][1])}")
        rows.append(row)
    samples = [FreqSample(cpu, timestamp, khz)
               for timestamp, values in rows for cpu, khz in enumerate(values)]
    return {"samples": samples, "ncpus": len(rows[0][1]) if rows else 0, "nlines": len(rows),
            "notes": notes}


def aisio_cpu_freqs(text: str, cpus: list[int], source: str = "<string>") -> dict[int, tuple[float, float]]:
    """AiSIO's summary of one log: {cpu: (mean kHz, population variance)} for ``cpus``.

    AiSIO's ``cpu_freq_helper.py`` keeps the lines from index ``int(0.1 n)`` up to (not
    including) ``int(0.9 n)``, drops empty ones, and takes column ``cpu`` of each. Here ``n``
    counts the pieces of the text split on ``\\n``, *including* the empty piece after the
    final newline: with that count this function reproduces the stored ``cpu_freqs`` of all
    175 repetitions in the two archived AiSIO result archives exactly, and without it none.
    (the shared format notes describe the empty lines as dropped first; the data say
    otherwise.) The window is not aligned to the benchmark; see :func:`parse_cpufreq_log`
    for timestamped samples.
    """
    pieces = text.split("\n")
    n = len(pieces)
    window = [(number, piece) for number, piece in
              enumerate(pieces[int(0.1 * n):int(0.9 * n)], start=int(0.1 * n) + 1) if piece.strip()]
    if not window:
        raise ParseError(source, f"AiSIO's 10 %/10 % trim leaves no sample of {n} lines")
    rows = [(number, _row(line, number, source, lenient=False)[1]) for number, line in window]
    out = {}
    for cpu in cpus:
        missing = [number for number, values in rows if cpu >= len(values)]
        if missing:
            raise ParseError(source, f"line {missing[0]}: no column for CPU {cpu}")
        column = [values[cpu] for _, values in rows]
        out[cpu] = (statistics.mean(column), statistics.pvariance(column))
    return out


def _row(line: str, number: int, source: str, lenient: bool) -> tuple[datetime, list[int]] | None:
    """(timestamp, kHz per CPU) of one line; None for a broken line when ``lenient``."""
    tokens = line.split()
    try:
        timestamp = datetime.strptime(tokens[0], TIMESTAMP_FORMAT)
        values = [int(t) for t in tokens[1:]]
    except ValueError as exc:
        if lenient:
            return None
        raise ParseError(source, f"line {number}: expected 'YYYY-MM-DD_HH:MM:SS' and integer "
                         f"kHz values ({exc})") from None
    if not values:
        if lenient:
            return None
        raise ParseError(source, f"line {number}: a timestamp without CPU values")
    return timestamp, values
