"""Parser for the JSON report of the project's GPU PCIe probe (``scripts/src/gpu_pcie_probe.cu``).

One report is one point: a copy-engine transfer (``mode`` copy, ``direction`` h2d or d2h,
``bytes`` per copy) or GPU-initiated requests (``mode`` read or write: ``inflight`` warps,
each issuing ``requests_per_warp`` requests of ``iosize`` contiguous bytes to pinned, mapped
host memory), timed over ``iterations`` (CUDA events) after ``warmup`` untimed ones.

Derived here: ``gbs`` (bytes of every timed iteration over their summed time, 10^9 B/s),
``gbs_min``/``gbs_max`` (over the iterations), ``requests_per_s``, and for read and write the
response time by Little's law, ``latency_us`` = warps resident at once / requests per second
(each resident warp has one request in flight), with ``resident_warps`` as the probe reports
it (at most the warps the GPU can hold at once).

Responsible for: checking the report (schema version 1; every key, type and range, and that
a read or write iteration's bytes are its requests of ``iosize``, each error naming the file
and the key) and those derivations. Not responsible for: running the probe
(``iolab.tools.gpu_pcie_probe``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from iolab.checks import is_whole_number
from iolab.errors import ParseError, excerpt
from iolab.parsers import load_json, read_report, within_float

SCHEMA_VERSION = 1
MODES = ("copy", "read", "write")
DIRECTIONS = ("h2d", "d2h")


def _whole(doc: dict, key: str, source: str, *, positive: bool = True,
           allow_null: bool = False) -> int | None:
    value = doc.get(key)
    if value is None and allow_null:
        return None
    if not is_whole_number(value, 1 if positive else 0):
        raise ParseError(source, f"key '{key}': expected a {'positive ' if positive else ''}whole "
                         f"number, got {excerpt(value)}")
    return within_float(value, f"key '{key}'", source)


def parse_gpu_pcie_probe(text: str, source: str = "<string>") -> dict[str, Any]:
    """The checked report with the derived figures (see the module docstring)."""
    try:
        doc = load_json(text, source)
    except ValueError as exc:
        raise ParseError(source, f"not JSON ({exc}); the probe writes its report only when "
                         "it finished") from None
    if not isinstance(doc, dict):
        raise ParseError(source, "the report is not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ParseError(source, f"key 'schema_version': {excerpt(doc.get('schema_version'))}, "
                         f"this parser reads version {SCHEMA_VERSION}")
    mode = doc.get("mode")
    if mode not in MODES:
        raise ParseError(source, f"key 'mode': {excerpt(mode)} is not one of {', '.join(MODES)}")
    device = doc.get("device")
    if not isinstance(device, dict) or not isinstance(device.get("pci_bus_id"), str) \
            or not isinstance(device.get("name"), str):
        raise ParseError(source, "key 'device': needs 'index', 'name' and 'pci_bus_id'")
    _whole(device, "index", f"{source}: device", positive=False)
    copy = mode == "copy"
    if copy and doc.get("direction") not in DIRECTIONS:
        raise ParseError(source, f"key 'direction': {excerpt(doc.get('direction'))} is not one of "
                         f"{', '.join(DIRECTIONS)}")
    for key in (("bytes",) if copy else ("iosize", "inflight", "requests_per_warp",
                                         "resident_warps")):
        _whole(doc, key, source)
    _whole(doc, "warmup", source, positive=False)
    window = doc.get("window_ns")
    if not (isinstance(window, list) and len(window) == 2 and all(
            isinstance(t, int) and not isinstance(t, bool) for t in window)
            and window[0] <= window[1]):
        raise ParseError(source, f"key 'window_ns': expected [start, end] in ns, got "
                                 f"{excerpt(window)}")
    for t in window:
        within_float(t, "key 'window_ns'", source)
    iterations = _iterations(doc, copy, source)
    seconds = sum(it["seconds"] for it in iterations)
    moved = sum(it["bytes"] for it in iterations)
    requests = sum(it["requests"] for it in iterations)
    rates = [it["bytes"] / it["seconds"] / 1e9 for it in iterations]
    out = {**doc, "gbs": moved / seconds / 1e9, "gbs_min": min(rates), "gbs_max": max(rates),
           "requests_per_s": requests / seconds, "timed_iterations": len(iterations),
           "latency_us": None}
    if not copy:
        out["latency_us"] = doc["resident_warps"] / out["requests_per_s"] * 1e6
    return out


def _iterations(doc: dict[str, Any], copy: bool, source: str) -> list[dict[str, Any]]:
    """The timed iterations, each checked: a positive time, whole byte and request counts,
    and (for requests) bytes that are its requests times the I/O size."""
    iterations = doc.get("iterations")
    if not isinstance(iterations, list) or not iterations:
        raise ParseError(source, "key 'iterations': no timed iteration")
    for i, it in enumerate(iterations):
        seconds = it.get("seconds") if isinstance(it, dict) else None
        within_float(seconds, f"key 'iterations[{i}].seconds'", source)
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) \
                or not math.isfinite(seconds) or seconds <= 0:
            raise ParseError(source, f"key 'iterations[{i}].seconds': expected a positive "
                             f"time, got {excerpt(seconds)}")
        _whole(it, "bytes", f"{source}: iterations[{i}]")
        _whole(it, "requests", f"{source}: iterations[{i}]")
        if not copy and it["bytes"] != it["requests"] * doc["iosize"]:
            raise ParseError(source, f"key 'iterations[{i}].bytes': {it['bytes']}, but its "
                             f"{it['requests']} requests of iosize {doc['iosize']} move "
                             f"{it['requests'] * doc['iosize']} (allowed: exactly that): the "
                             "report contradicts itself")
    return iterations


def parse_gpu_pcie_probe_file(path: Path) -> dict[str, Any]:
    """The probe's report file, read by :func:`iolab.parsers.read_report` (never through a
    link, never beyond its bound), parsed by :func:`parse_gpu_pcie_probe`."""
    return parse_gpu_pcie_probe(read_report(path, "gpu_pcie_probe"), str(path))
