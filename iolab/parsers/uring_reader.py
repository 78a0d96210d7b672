"""Parser of the JSON report of the project's io_uring reader (``scripts/src/uring_reader.c``).

The report (``schema_version`` 1; ``window_ns`` since reader version 2) holds the arguments, the ring setup flags the kernel
accepted, per-thread I/O counts, totals, read errors and completion latency in ns (mean and
percentiles of a log-linear histogram). The parser checks that every field is present with
its type (a boolean is no number), that the block size, queue depth and runtime are above 0, that
the latencies are in order (p50 <= p90 <= p99 <= p999 <= max, mean <= max), that the threads'
I/Os add up to the total, and converts latencies to µs.

Result: ``window_ns`` (CLOCK_REALTIME start and end of the measurement), ``iops``, ``mibs``, ``ios``, ``threads`` (number), ``cpus`` (their CPU ids),
``setup_flags`` (list), ``clat_mean_us``, ``clat_p50_us``, ``clat_p90_us``, ``clat_p99_us``,
``clat_p999_us``, ``clat_max_us``, ``errors``, ``first_error``, ``short_reads``, ``bs``,
``qdepth``, ``runtime_s``, ``direct``, ``version``, ``liburing``.

Responsible for: the format. Not responsible for: running the reader (its adapter).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from iolab.errors import ParseError, excerpt
from iolab.parsers import load_json, within_float

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
    out = {key: doc[key] for key in ("iops", "mibs", "ios", "setup_flags", "errors", "first_error",
                                     "short_reads", "bs", "qdepth", "runtime_s", "direct",
                                     "version", "liburing")}
    window = doc["window_ns"]
    for t in window:
        within_float(t, "key 'window_ns'", source)
    # in ns: int() of an infinite end would raise OverflowError
    if len(window) != 2 or not all(isinstance(t, (int, float)) and math.isfinite(t)
                                   for t in window) or window[0] > window[1]:
        raise ParseError(source, f"key 'window_ns': {excerpt(window)} is not [start, end]")
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


def parse_uring_reader_file(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ParseError(path, f"cannot be read: {exc.strerror or exc}") from None
    return parse_uring_reader(text, str(path))
