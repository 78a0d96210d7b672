"""Parser of the JSON report of the project's io_uring reader (``scripts/src/uring_reader.c``).

The report (``schema_version`` 1; ``window_ns`` since reader version 2) holds the arguments, the ring setup flags the kernel
accepted, per-thread I/O counts, totals, read errors and completion latency in ns (mean and
percentiles of a log-linear histogram). The parser checks that every field is present with
its type (a boolean is no number), that the block size, queue depth and runtime are above 0, that
the latencies are in order (p50 <= p90 <= p99 <= p999 <= max, mean <= max), that the threads'
I/Os add up to the total, that the rates are what its counts give over its runtime (iops
``ios / runtime_s``, mibs ``ios * bs / runtime_s / 2**20``, each thread's iops, within the
rounding of the printed numbers) and that no more reads were short than were made, and
converts latencies to µs.

Result: ``window_ns`` (CLOCK_REALTIME start and end of the measurement), ``iops``, ``mibs``, ``ios``, ``threads`` (number), ``cpus`` (their CPU ids),
``setup_flags`` (list), ``clat_mean_us``, ``clat_p50_us``, ``clat_p90_us``, ``clat_p99_us``,
``clat_p999_us``, ``clat_max_us``, ``errors``, ``first_error``, ``short_reads``, ``bs``,
``qdepth``, ``runtime_s``, ``ramp_s``, ``seed``, ``file``, ``direct``, ``version``, ``liburing``.

Responsible for: the format. Not responsible for: running the reader (its adapter).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from iolab.errors import ParseError, excerpt
from iolab.parsers import load_json, read_report, within_float

_FIELDS = {"schema_version": int, "tool": str, "version": str, "liburing": str, "file": str,
           "bytes": int, "bs": int, "qdepth": int, "runtime_s": (int, float),
           "ramp_s": (int, float), "direct": bool, "seed": int, "setup_flags": list,
           "threads": list, "ios": int, "iops": (int, float), "mibs": (int, float),
           "errors": int, "first_errno": int, "first_error": str, "short_reads": int,
           "lat_ns": dict, "window_ns": list}
_LATENCIES = ("mean", "p50", "p90", "p99", "p999", "max")
# what the reader was asked to do: a read of 0 bytes, a ring of depth 0 or no time is no run
_POSITIVE = ("bs", "qdepth", "runtime_s")
# percentiles of one histogram cannot decrease, and none is above the slowest read
_ORDERED = ("p50", "p90", "p99", "p999", "max")
# The reader computes its rates from its counts, over the runtime it was given: iops as
# ios / runtime_s (printed with 1 decimal), mibs as ios * bs / runtime_s / 2**20 (3 decimals),
# and writes runtime_s with %g (6 significant digits). A rate recomputed from the printed
# numbers differs by at most half its last digit, and 5e-6 of its value for runtime_s (allowed:
# twice that). A rate beyond that contradicts the counts (no reader writes such a report; a
# damaged one does).
# (rate key, its last printed digit, bytes per unit of the rate: None for I/Os)
_RATES = (("iops", 0.1, None), ("mibs", 0.001, 2**20))
RUNTIME_SLACK = 1e-5
# Each thread measures for exactly runtime_s, and the window runs from the earliest thread's
# start to the latest's end, so it is no shorter than runtime_s; each end is printed in ns
# from a double of seconds since the epoch, whose step there is 256 ns: 1 µs either way.
WINDOW_SLACK_NS = 1000


def parse_uring_reader(text: str, source: str = "uring.json") -> dict[str, Any]:
    try:
        doc = load_json(text, source)
    except ValueError as exc:
        raise ParseError(source, f"not valid JSON (cut off?): {exc}") from None
    if not isinstance(doc, dict):
        raise ParseError(source, "not a JSON object")
    if doc.get("schema_version") != 1 or doc.get("tool") != "uring_reader":
        raise ParseError(source, f"not a uring_reader report of schema version 1 (tool "
                         f"{excerpt(doc.get('tool'))}, schema_version "
                         f"{excerpt(doc.get('schema_version'))})")
    for key, kind in _FIELDS.items():
        if key not in doc:
            raise ParseError(source, f"key '{key}' is missing")
        if not isinstance(doc[key], kind) or (kind is not bool and isinstance(doc[key], bool)):
            raise ParseError(source, f"key '{key}': {excerpt(doc[key])} has the wrong type")
        within_float(doc[key], f"key '{key}'", source)
    for key in _POSITIVE:
        if not doc[key] > 0:
            raise ParseError(source, f"key '{key}': {excerpt(doc[key])}, must be above 0")
    lat = doc["lat_ns"]
    if any(isinstance(lat.get(k), bool) or not isinstance(lat.get(k), (int, float))
           for k in _LATENCIES):
        raise ParseError(source, f"key 'lat_ns' needs numbers {', '.join(_LATENCIES)}")
    for k in _LATENCIES:
        within_float(lat[k], f"key 'lat_ns.{k}'", source)
    _check_order(lat, source)
    threads = doc["threads"]
    if not threads or any(not isinstance(t, dict) or not isinstance(t.get("ios"), int)
                          or not isinstance(t.get("cpu"), int) for t in threads):
        raise ParseError(source, "key 'threads': needs at least one {cpu, ios} object")
    for i, t in enumerate(threads):
        within_float(t["ios"], f"key 'threads[{i}].ios'", source)
    if sum(t["ios"] for t in threads) != doc["ios"]:
        raise ParseError(source, f"the threads' I/Os add up to {sum(t['ios'] for t in threads)}, "
                         f"not to the total {doc['ios']}")
    _check_rates(doc, source)
    out = {key: doc[key] for key in ("iops", "mibs", "ios", "setup_flags", "errors", "first_error",
                                     "short_reads", "bs", "qdepth", "runtime_s", "direct",
                                     "version", "liburing", "file", "ramp_s", "seed")}
    window = doc["window_ns"]
    for t in window:
        within_float(t, "key 'window_ns'", source)
    # in ns: int() of an infinite end would raise OverflowError
    if len(window) != 2 or not all(isinstance(t, (int, float)) and math.isfinite(t)
                                   for t in window) or window[0] > window[1]:
        raise ParseError(source, f"key 'window_ns': {excerpt(window)} is not [start, end]")
    if window[1] - window[0] < doc["runtime_s"] * 1e9 - WINDOW_SLACK_NS:
        raise ParseError(source, f"key 'window_ns': {excerpt(window)} is "
                         f"{(window[1] - window[0]) / 1e9:g} s long, shorter than runtime_s "
                         f"{doc['runtime_s']:g}, which each thread measured for (allowed: "
                         f"{WINDOW_SLACK_NS} ns shorter at most): the report contradicts itself")
    out["window_ns"] = (int(window[0]), int(window[1]))
    out["threads"] = len(threads)
    out["cpus"] = [t["cpu"] for t in threads]
    out.update({f"clat_{k}_us": lat[k] / 1000.0 for k in _LATENCIES})
    return out


def _check_order(lat: dict, source: str) -> None:
    """ParseError when the latencies are out of order: p50 <= p90 <= p99 <= p999 <= max, and
    the mean at most the max."""
    pairs = [*zip(_ORDERED, _ORDERED[1:]), ("mean", "max")]
    for low, high in pairs:
        if lat[low] > lat[high]:
            raise ParseError(source, f"key 'lat_ns': {low} {excerpt(lat[low])} is above {high} "
                             f"{excerpt(lat[high])} (allowed: p50 <= p90 <= p99 <= p999 <= max, "
                             "mean <= max)")


def _check_rates(doc: dict, source: str) -> None:
    """ParseError when a rate contradicts the counts it is computed from (see
    :data:`_RATES`), or more reads were short than were counted: the report is not what the
    reader measured. A NaN, infinite or negative rate is left to the sample check, which
    names it as no measurement."""
    if doc["bytes"] < doc["bs"]:
        raise ParseError(source, f"key 'bytes': a file of {doc['bytes']} bytes holds no read of "
                         f"bs {doc['bs']} bytes (the reader reads whole blocks of it)")
    if not 0 <= doc["short_reads"] <= doc["ios"]:
        raise ParseError(source, f"key 'short_reads': {doc['short_reads']} of {doc['ios']} "
                         "reads (allowed: 0 to ios, as the reader counts short reads among them)")
    runtime_s, ios, bs = doc["runtime_s"], doc["ios"], doc["bs"]
    for where, count, rates in [("", ios, {k: doc[k] for k, _, _ in _RATES}),
                                *[(f"threads[{i}].", t["ios"], {"iops": t.get("iops")})
                                  for i, t in enumerate(doc["threads"])]]:
        for key, digit, unit in _RATES:
            value = rates.get(key)
            if key not in rates or not _measured(value):
                continue
            expected = count * (bs / unit if unit else 1) / runtime_s
            if abs(value - expected) > digit / 2 + RUNTIME_SLACK * expected:
                raise ParseError(source, f"key '{where}{key}': {excerpt(value)}, but "
                                 f"{count} reads{f' of {bs} bytes' if unit else ''} over "
                                 f"runtime_s {runtime_s:g} make {expected:.3f} (the reader "
                                 f"computes one from the other; allowed: within {digit / 2:g} "
                                 f"and {RUNTIME_SLACK:g} of it): the report contradicts itself")


def _measured(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0


def parse_uring_reader_file(path: Path) -> dict[str, Any]:
    try:
        text = read_report(path, "uring_reader", errors="strict")
    except OSError as exc:
        raise ParseError(path, f"cannot be read: {exc.strerror or exc}") from None
    return parse_uring_reader(text, str(path))
