"""Parser for the text report of SPDK's ``spdk_nvme_perf`` (the "perf" example, v24–v26).

Responsible for: turning the stdout of one run into its rows (one per namespace × worker
core, none listed twice) and its Total row, checking that the rows add up to the Total (IOPS
and MiB/s summed; min, max and the IOPS-weighted average latency), that each row's latencies
are in order (min <= average <= max), that MiB/s is IOPS times the run's I/O size when the
caller knows it (``-o``), and raising
:class:`~iolab.errors.ParseError` (naming the source and the problem) for malformed or
truncated output.

Not responsible for: running the tool, the exit status, the optional latency percentile and
histogram sections (``-L``/``-LL``, printed after the Total and ignored here), or GNU time's
lines when stdout and stderr were captured together.

The table (samples in tests/fixtures/aisio_formats/)::

    ========================================================
                                                                        Latency(us)
    Device Information                                     :       IOPS      MiB/s    Average        min        max
    PCIE (0000:4a:00.0) [144d:ac00] NSID 1 from core  0:  2093737.12    1022.33      61.11      53.77    2015.47
    ========================================================
    Total                                                  : 33386712.81   16302.11      61.31      36.47    5086.51

Row names contain colons (PCI addresses, vendor:device ids), so each row is split at its
*last* colon: the name is to the left and exactly five numbers are to the right. Rows with
zero completions are omitted by the tool. Average/min/max are latencies in µs; MiB/s is
2^20 B/s. The printed values have two decimals, so the rows may miss the Total by up to
half a cent per row; anything more raises ParseError, and so does a value in any other form
than digits with a fraction (a sign, ``nan``, ``inf``: :func:`iolab.parsers.measured_decimal`).
"""

from __future__ import annotations

import re

from iolab.errors import ParseError, excerpt
from iolab.parsers import check_mibs, measured_decimal

_HEADER = re.compile(r"^\s*Device Information\s*:\s*IOPS\s+MiB/s\s+Average\s+min\s+max\s*$")
_SEPARATOR = re.compile(r"^\s*=+\s*$")
_PCIE_NAME = re.compile(r"^PCIE \((?P<bdf>[^)]+)\) \[(?P<vid>[0-9a-fA-F]+):(?P<did>[0-9a-fA-F]+)\] "
                        r"NSID (?P<nsid>[0-9]{1,9}) from core\s+(?P<core>[0-9]{1,9})$")
_COLUMNS = ("iops", "mibs", "avg_us", "min_us", "max_us")
_ROUNDING = 0.005


def parse_spdk_nvme_perf(text: str, source: str = "<string>",
                         io_size: int | None = None) -> dict:
    """Parse one spdk_nvme_perf report; ``io_size`` is the run's ``-o`` in bytes (None: not
    known, and MiB/s is then not held to IOPS).

    Returns ``rows`` (one dict per printed row, in order: ``name`` as printed; ``bdf``,
    ``vendor_device`` (``"144d:ac00"``), ``nsid`` and ``core`` for PCIe rows, else None; and
    ``iops``, ``mibs``, ``avg_us``, ``min_us``, ``max_us``) and ``total`` (the same five
    numbers from the Total row).
    """
    if not text.strip():
        raise ParseError(source, "empty input: there is no spdk_nvme_perf output to parse")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if not headers:
        raise ParseError(source, "no result table (no 'Device Information : IOPS MiB/s Average "
                         "min max' header)")
    if len(headers) > 1:
        raise ParseError(source, f"{len(headers)} result tables; expected one")
    rows = []
    seen: dict[tuple, int] = {}
    at = headers[0] + 1
    while at < len(lines) and not _SEPARATOR.match(lines[at]):
        name, numbers = _split_row(lines[at], at + 1, source, io_size)
        row = {"name": name, **_pcie_fields(name), **numbers}
        key = _row_key(row)
        if key in seen:
            raise ParseError(source, f"line {at + 1}: {excerpt(name)} is listed twice (first on "
                             f"line {seen[key]}): the tool prints one row per namespace and core")
        seen[key] = at + 1
        rows.append(row)
        at += 1
    if at >= len(lines):
        raise ParseError(source, "truncated table: no '=' separator before the Total row")
    at += 1
    name, total = _split_row(lines[at] if at < len(lines) else "", at + 1, source, io_size)
    if name != "Total":
        raise ParseError(source, f"line {at + 1}: expected the Total row after the separator, "
                         f"got {excerpt(lines[at] if at < len(lines) else 'end of input')} (the "
                         f"tool omits it when nothing completed)")
    if not rows:
        raise ParseError(source, "the table has no rows")
    for key in ("iops", "mibs"):
        summed = sum(r[key] for r in rows)
        allowed = _ROUNDING * (len(rows) + 1) + 1e-9 * abs(total[key])
        if not abs(summed - total[key]) <= allowed:  # NaN or inf (inf - inf) too
            raise ParseError(source, f"rows add up to {summed:.2f} {key}, but the Total row "
                             f"says {total[key]:.2f} (allowed rounding ±{allowed:.3f})")
    _check_total_latency(rows, total, at + 1, source)
    return {"rows": rows, "total": total}


def _row_key(row: dict) -> tuple:
    """What one row measured: a namespace of a PCIe controller from one core, else its name."""
    if row["bdf"] is None:
        return ("name", row["name"])
    return ("pcie", row["bdf"].lower(), row["nsid"], row["core"])


def _check_total_latency(rows: list[dict], total: dict, number: int, source: str) -> None:
    """The Total's latencies are the rows' (spdk_nvme_perf sums the I/Os and their time): its
    min the least row min, its max the greatest row max, its average the rows' averages
    weighted by their IOPS (each printed value rounded to half a cent)."""
    least, most = min(r["min_us"] for r in rows), max(r["max_us"] for r in rows)
    if not abs(total["min_us"] - least) <= _ROUNDING:
        raise ParseError(source, f"line {number}: the Total row's min {total['min_us']:.2f} µs "
                         f"is not the least of the rows' mins ({least:.2f} µs)")
    if not abs(total["max_us"] - most) <= _ROUNDING:
        raise ParseError(source, f"line {number}: the Total row's max {total['max_us']:.2f} µs "
                         f"is not the greatest of the rows' maxes ({most:.2f} µs)")
    iops = sum(r["iops"] for r in rows)
    if iops > 0:
        mean = sum(r["avg_us"] * r["iops"] for r in rows) / iops
        allowed = 2 * _ROUNDING + 1e-6 * mean
        if not abs(total["avg_us"] - mean) <= allowed:
            raise ParseError(source, f"line {number}: the Total row's average "
                             f"{total['avg_us']:.2f} µs is not the rows' averages weighted by "
                             f"their IOPS ({mean:.3f} µs; allowed rounding ±{allowed:.3f})")


def _split_row(line: str, number: int, source: str, io_size: int | None) -> tuple[str, dict]:
    """(name, the five numbers) of one table row, split at the row's last colon; checked
    that min <= average <= max and, with ``io_size``, that MiB/s is IOPS times it."""
    name, colon, values = line.rpartition(":")
    tokens = values.split()
    if not colon or len(tokens) != len(_COLUMNS):
        raise ParseError(source, f"line {number}: expected '<name> : IOPS MiB/s Average min "
                         f"max', got {excerpt(line)}")
    # float() would take a sign, nan and inf, which no rate or latency is
    numbers = [measured_decimal(t, f"line {number}: {column}", source)
               for t, column in zip(tokens, _COLUMNS)]
    row = dict(zip(_COLUMNS, numbers))
    if not row["min_us"] <= row["avg_us"] <= row["max_us"]:
        raise ParseError(source, f"line {number}: latency min {row['min_us']:.2f} µs, average "
                         f"{row['avg_us']:.2f} µs and max {row['max_us']:.2f} µs are not in "
                         f"order (min <= average <= max)")
    if io_size is not None:
        check_mibs(row, io_size, "the I/O size", number, source)
    return name.strip(), row


def _pcie_fields(name: str) -> dict:
    """BDF, vendor:device, namespace and core of a PCIe row name; None for other transports."""
    pcie = _PCIE_NAME.match(name)
    if pcie is None:
        return {"bdf": None, "vendor_device": None, "nsid": None, "core": None}
    return {"bdf": pcie.group("bdf"), "vendor_device": f"{pcie.group('vid')}:{pcie.group('did')}",
            "nsid": int(pcie.group("nsid")), "core": int(pcie.group("core"))}
