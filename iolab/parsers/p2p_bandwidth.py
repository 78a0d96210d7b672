"""Parser for the output of cuda-samples' ``p2pBandwidthLatencyTest``.

Responsible for: the device list, the peer-access lines and every matrix of the report as a
named section (a 2-D list with its row and column ids and its unit), and raising
:class:`~iolab.errors.ParseError` (naming the source and the problem) for malformed output:
a matrix's row and column ids are distinct, the same devices in the same order, and the
listed devices when the report lists them (a cell is a pair of devices by its ids).

Not responsible for: running the test, or choosing a reference value from it (AiSIO's
"p2p ceiling" is the mean of cells (0,1) and (1,0) of the bidirectional P2P-enabled matrix,
a two-direction aggregate; callers pick explicitly).

Sections (cuda-samples v12.x; samples in tests/fixtures/aisio_formats/), each a title line and a block::

    P2P Connectivity Matrix                                  flags 0/1; rows "<i>\\t<flags>"
    Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)      header "   D\\D     0      1"
    Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
    Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
    Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
    P2P=Disabled Latency Matrix (us)                         two blocks, "   GPU  0  1" and "   CPU  0  1"
    P2P=Enabled Latency (P2P Writes) Matrix (us)

Section names are the title lines as printed; a latency section gives two names, the title
followed by `` [GPU]`` and `` [CPU]``. Bandwidth is in GB/s (10^9 B/s) and latency in µs,
as the titles say. Variants from ``--p2p_read`` appear under their own titles.
"""

from __future__ import annotations

import re

from iolab.errors import ParseError, excerpt
from iolab.parsers import decimal_within_float, int_within_float, is_digits

_DEVICE = re.compile(r"^Device: (?P<id>\d+), (?P<name>.+), pciBusID: (?P<bus>[0-9a-fA-F]+), "
                     r"pciDeviceID: (?P<dev>[0-9a-fA-F]+), pciDomainID:\s*(?P<dom>[0-9a-fA-F]+)$",
                     re.ASCII)  # ASCII: \d and \s take other scripts' digits and spaces
_ACCESS = re.compile(r"^Device=(?P<a>\d+) (?P<can>CAN|CANNOT) Access Peer Device=(?P<b>\d+)$",
                     re.ASCII)
_TITLE = re.compile(r"^(?:P2P Connectivity Matrix|.*Matrix \((?P<unit>GB/s|us)\))$")
_BLOCK_HEADER = re.compile(r"^\s*(?P<label>D\\D|GPU|CPU)(?P<ids>(?:\s+\d+)+)\s*$", re.ASCII)


def parse_p2p_bandwidth(text: str, source: str = "<string>") -> dict:
    """Parse one report.

    Returns ``devices`` (list of {``id``, ``name``, ``pci_bus_id``, ``pci_device_id``,
    ``pci_domain_id``}; the PCI ids as lower-case hex strings), ``peer_access`` (list of
    {``from``, ``to``, ``can``}) and ``matrices`` ({section name: {``unit`` ("GB/s", "us",
    or None for the connectivity flags), ``row_ids``, ``col_ids``, ``values`` (list of rows;
    floats, ints for the connectivity flags)}}), in report order.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    devices, access = [], []
    matrices: dict[str, dict] = {}
    at = 0
    while at < len(lines):
        line = lines[at].strip()
        device, peer, title = _DEVICE.match(line), _ACCESS.match(line), _TITLE.match(line)
        if device:
            devices.append({"id": int(device.group("id")), "name": device.group("name"),
                            "pci_bus_id": device.group("bus").lower(),
                            "pci_device_id": device.group("dev").lower(),
                            "pci_domain_id": device.group("dom").lower()})
        elif peer:
            access.append({"from": int(peer.group("a")), "to": int(peer.group("b")),
                           "can": peer.group("can") == "CAN"})
        elif title:
            at = _section(lines, at, title.group("unit"), matrices, source)
            continue
        at += 1
    if not matrices:
        raise ParseError(source, "no matrix section found (no line ending in 'Matrix (GB/s)' "
                         "or 'Matrix (us)')")
    if devices:
        listed = [d["id"] for d in devices]
        for name, matrix in matrices.items():
            if len(matrix["row_ids"]) != len(devices):
                raise ParseError(source, f"section {excerpt(name)} has {len(matrix['row_ids'])} "
                                 f"rows, but {len(devices)} devices were listed")
            if matrix["row_ids"] != listed:
                raise ParseError(source, f"section {excerpt(name)}: its row ids "
                                 f"{matrix['row_ids']} are not the listed devices {listed} "
                                 "(allowed: one row per listed device, in their order)")
    return {"devices": devices, "peer_access": access, "matrices": matrices}


def _section(lines: list[str], at: int, unit: str | None, matrices: dict, source: str) -> int:
    """Read the block(s) under the title at ``at``; return the index after the section."""
    title = lines[at].strip()
    at += 1
    blocks = 0
    while at < len(lines):
        if not lines[at].strip():
            at += 1  # the blank line between a latency section's GPU and CPU blocks
            continue
        header = _BLOCK_HEADER.match(lines[at])
        if header is None:
            break
        label = header.group("label")
        col_ids = [int_within_float(i, f"line {at + 1}: column id", source)
                   for i in header.group("ids").split()]
        at += 1
        row_ids, values = [], []
        while at < len(lines) and lines[at].strip() and not _BLOCK_HEADER.match(lines[at]) \
                and not _TITLE.match(lines[at].strip()):
            tokens = lines[at].split()
            if len(tokens) != len(col_ids) + 1 or not is_digits(tokens[0]):
                raise ParseError(source, f"line {at + 1}: section {excerpt(title)}: expected a "
                                 f"row id and {len(col_ids)} values, got {excerpt(lines[at])}")
            try:
                row = [int_within_float(t, f"line {at + 1}: section {title!r}", source)
                       if unit is None else _decimal(t) for t in tokens[1:]]
            except ValueError:
                raise ParseError(source, f"line {at + 1}: section {excerpt(title)}: non-numeric "
                                 f"value in {excerpt(lines[at])}") from None
            row_ids.append(int_within_float(tokens[0], f"line {at + 1}: row id", source))
            values.append(row)
            at += 1
        if not values:
            raise ParseError(source, f"line {at + 1}: section {excerpt(title)} has a header but "
                                     f"no rows")
        name = title if label == "D\\D" else f"{title} [{label}]"
        _check_ids(name, row_ids, col_ids, at, source)
        if name in matrices:
            raise ParseError(source, f"section {excerpt(name)} appears twice")
        matrices[name] = {"unit": unit, "row_ids": row_ids, "col_ids": col_ids, "values": values}
        blocks += 1
    if blocks == 0:
        raise ParseError(source, f"line {at + 1}: section {excerpt(title)} has no matrix "
                                 f"(truncated?)")
    return at


def _check_ids(name: str, row_ids: list[int], col_ids: list[int], at: int, source: str) -> None:
    """ParseError unless a block's rows and columns are the same devices, each once, in the
    same order: a cell is taken for a pair of devices by its ids, so a repeated id would make
    a device's own (local) cell count as a pair."""
    for what, ids in (("row", row_ids), ("column", col_ids)):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ParseError(source, f"line {at}: section {excerpt(name)}: {what} id "
                             f"{twice[0]} appears more than once (allowed: each device's id "
                             "once, as the test prints them)")
    if row_ids != col_ids:
        raise ParseError(source, f"line {at}: section {excerpt(name)}: row ids {row_ids} are not "
                         f"the column ids {col_ids} (allowed: the same devices, in the same "
                         "order, as the test prints them)")


def _decimal(token: str) -> float:
    """A bandwidth or latency cell: a decimal in ASCII digits (``float`` also takes nan, inf,
    '1_000' and other scripts' digits); ValueError otherwise, as ``float`` gives."""
    value = decimal_within_float(token)
    if value is None:
        raise ValueError(token)
    return value
