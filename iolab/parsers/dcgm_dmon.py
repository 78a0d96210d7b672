"""Parser for the text output of ``dcgmi dmon`` (NVIDIA DCGM), and AiSIO's summary of it.

Responsible for: turning a dmon capture into per-entity sample lists per field, with field
names from the header and field ids where known (a value is a finite number or N/A:
``nan``, ``inf`` and ``1e999`` are refused); AiSIO's p95 (:func:`aisio_p95`) and a
window summary (:func:`window_stats`); raising :class:`~iolab.errors.ParseError` (naming the
source and the problem) for malformed captures.

Not responsible for: running dcgmi, timestamps (dmon prints none, so samples are only in
order; cutting them to a run window needs outside knowledge), or deciding which GPU a
benchmark used.

Format (samples in tests/fixtures/aisio_formats/)::

    #Entity   PCITX                       PCIRX
    ID
    GPU 0     0                           0
    GPU 0     10699891                    10741955
    ...                                   (the header pair repeats every 14 samples or so)

Column widths differ between DCGM builds, so rows are split on whitespace after the
two-token entity prefix (``GPU 0``; ``GPU-I 1`` and ``GPU-CI 2`` under MIG), never by
position. Values are integers (INT64 fields), decimals (DOUBLE) or ``N/A`` (returned as
None). With several entities (``-i 0,1``) each sample has one row per entity. The capture is
stopped with ``pkill``, so a partial last row is dropped with a note.
"""

from __future__ import annotations

import statistics

from iolab.errors import ParseError, excerpt
from iolab.parsers import decimal_within_float, int_within_float

# Short names dmon prints in its header for the fields AiSIO samples (-e 1009,1010).
KNOWN_FIELD_IDS = {"PCITX": 1009, "PCIRX": 1010}


def parse_dcgm_dmon(text: str, source: str = "<string>",
                    field_ids: list[int] | None = None) -> dict:
    """Parse one dmon capture.

    ``field_ids`` is the ``-e`` list of the dmon command, in order, when known; dmon prints
    the columns in that order, so it names each column's id. Without it, ids come from
    :data:`KNOWN_FIELD_IDS` (None for other names).

    Returns ``fields`` (column names from the header), ``field_ids`` (same order),
    ``samples`` ({entity: {field name: [value or None, ...]}}, entities such as ``"GPU 0"``
    in order of appearance), ``headers`` (how many header lines were seen) and ``notes``.
    """
    lines = [(number, line) for number, line in
             enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1)
             if line.strip()]
    if not lines:
        raise ParseError(source, "empty capture: no dmon output")
    fields: list[str] | None = None
    headers = 0
    samples: dict[str, dict[str, list]] = {}
    notes: list[str] = []
    for index, (number, line) in enumerate(lines):
        tokens = line.split()
        if tokens[0] == "#Entity":
            if fields is not None and tokens[1:] != fields:
                raise ParseError(source, f"line {number}: header {excerpt(tokens[1:])} differs "
                                 f"from the first header {excerpt(fields)}")
            fields = tokens[1:]
            headers += 1
            continue
        if tokens[0] == "ID" and fields is not None:
            continue  # the units line; blank units for the PCIe byte counters
        if fields is None:
            raise ParseError(source, f"line {number}: data before the '#Entity' header: "
                                     f"{excerpt(line)}")
        if len(tokens) != 2 + len(fields):
            if index == len(lines) - 1 and len(tokens) < 2 + len(fields):
                notes.append(f"line {number}: dropped a partial last row (dmon was stopped "
                             f"while writing it)")
                break
            raise ParseError(source, f"line {number}: expected an entity and {len(fields)} "
                             f"values, got {excerpt(line)}")
        entity = f"{tokens[0]} {tokens[1]}"
        per_field = samples.setdefault(entity, {name: [] for name in fields})
        for name, token in zip(fields, tokens[2:]):
            per_field[name].append(_value(token, number, source))
    if fields is None:
        raise ParseError(source, "no '#Entity' header line")
    if field_ids is None:
        ids = [KNOWN_FIELD_IDS.get(name) for name in fields]
    elif len(field_ids) != len(fields):
        raise ParseError(source, f"the header has {len(fields)} fields {excerpt(fields)}, but "
                         f"{len(field_ids)} field ids {excerpt(field_ids)} were requested")
    else:
        ids = list(field_ids)
    return {"fields": fields, "field_ids": ids, "samples": samples, "headers": headers,
            "notes": notes}


def _value(token: str, number: int, source: str) -> int | float | None:
    if token == "N/A":
        return None
    try:
        return int_within_float(token, f"line {number}: value", source)
    except ValueError:
        pass
    # float() takes nan, inf, 1e999, '1_000' and any script's digits; dmon prints N/A for a
    # missing value and decimals in ASCII digits
    value = decimal_within_float(token, signed=True)
    if value is not None:
        return value
    try:
        float(token)
    except ValueError:
        raise ParseError(source, f"line {number}: value {excerpt(token)} is neither a number nor "
                         f"N/A") from None
    raise ParseError(source, f"line {number}: value {excerpt(token)} is not a finite number in "
                     f"digits 0-9 (allowed: a decimal such as 12.5, or N/A for a missing value)")


def aisio_p95(values: list[int | float | None]) -> float:
    """AiSIO's p95: the 95th of 99 cut points of ``statistics.quantiles(n=100,
    method="inclusive")`` (linear interpolation, like numpy's default), N/A (None) left out.

    Raises ValueError with fewer than two values, where the cut points are undefined.
    """
    kept = [v for v in values if v is not None]
    if len(kept) < 2:
        raise ValueError(f"p95 needs at least two samples, got {len(kept)}")
    return statistics.quantiles(kept, n=100, method="inclusive")[94]


def window_stats(values: list[int | float | None]) -> dict:
    """``n``, ``mean``, ``p50`` and ``p95`` of the given samples (N/A left out).

    Percentiles use the same inclusive interpolation as :func:`aisio_p95`. With one sample
    every statistic is that sample; with none they are None.
    """
    kept = [v for v in values if v is not None]
    if not kept:
        return {"n": 0, "mean": None, "p50": None, "p95": None}
    if len(kept) == 1:
        return {"n": 1, "mean": kept[0], "p50": kept[0], "p95": kept[0]}
    cuts = statistics.quantiles(kept, n=100, method="inclusive")
    return {"n": len(kept), "mean": statistics.mean(kept), "p50": cuts[49], "p95": cuts[94]}
