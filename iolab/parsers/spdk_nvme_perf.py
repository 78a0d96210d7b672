"""Parser for the text report of SPDK's ``spdk_nvme_perf`` (the "perf" example, v24–v26).

Responsible for: turning the stdout of one run into its rows (one per namespace × worker
core) and its Total row, checking that the rows add up to the Total, and raising
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
from iolab.parsers import measured_decimal

_HEADER = re.compile(r"^\s*Device Information\s*:\s*IOPS\s+MiB/s\s+Average\s+min\s+max\s*$")
_SEPARATOR = re.compile(r"^\s*=+\s*$")
_PCIE_NAME = re.compile(r"^PCIE \((?P<bdf>[^)]+)\) \[(?P<vid>[0-9a-fA-F]+):(?P<did>[0-9a-fA-F]+)\] "
                        r"NSID (?P<nsid>[0-9]{1,9}) from core\s+(?P<core>[0-9]{1,9})$")
_COLUMNS = ("iops", "mibs", "avg_us", "min_us", "max_us")
_ROUNDING = 0.005


def parse_spdk_nvme_perf(text: str, source: str = "<string>") -> dict:
    """Parse one spdk_nvme_perf report.

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
    at = headers[0] + 1
    while at < len(lines) and not _SEPARATOR.match(lines[at]):
        name, numbers = _split_row(lines[at], at + 1, source)
        rows.append({"name": name, **_pcie_fields(name), **numbers})
        at += 1
    if at >= len(lines):
        raise ParseError(source, "truncated table: no '=' separator before the Total row")
    at += 1
    name, total = _split_row(lines[at] if at < len(lines) else "", at + 1, source)
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
    return {"rows": rows, "total": total}


def _split_row(line: str, number: int, source: str) -> tuple[str, dict]:
    """(name, the five numbers) of one table row, split at the row's last colon."""
    name, colon, values = line.rpartition(":")
    tokens = values.split()
    if not colon or len(tokens) != len(_COLUMNS):
        raise ParseError(source, f"line {number}: expected '<name> : IOPS MiB/s Average min "
                         f"max', got {excerpt(line)}")
    # float() would take a sign, nan and inf, which no rate or latency is
    numbers = [measured_decimal(t, f"line {number}: {column}", source)
               for t, column in zip(tokens, _COLUMNS)]
    return name.strip(), dict(zip(_COLUMNS, numbers))


def _pcie_fields(name: str) -> dict:
    """BDF, vendor:device, namespace and core of a PCIe row name; None for other transports."""
    pcie = _PCIE_NAME.match(name)
    if pcie is None:
        return {"bdf": None, "vendor_device": None, "nsid": None, "core": None}
    return {"bdf": pcie.group("bdf"), "vendor_device": f"{pcie.group('vid')}:{pcie.group('did')}",
            "nsid": int(pcie.group("nsid")), "core": int(pcie.group("core"))}
