"""``lscpu -e`` output as a CPU topology, the same shape ``iolab.host.inventory.topology`` reads
from sysfs, so that a host recorded elsewhere (host.json's ``lscpu_e``, an AiSIO archive) can
be planned for.

Responsible for: parsing the table. Not responsible for: choosing CPUs (``inventory``).
"""

from __future__ import annotations

from typing import Any

from ..errors import ParseError, excerpt
from . import is_digits


def parse_lscpu_e(text: str, source: str = "<lscpu -e>") -> list[dict[str, Any]]:
    """Online CPUs from ``lscpu -e`` output: [{"cpu", "core", "package", "siblings"}] by CPU id.

    Takes host.json's ``lscpu_e`` field as well as a capture of plain ``lscpu -e``. The
    header line names the columns, in any order; CPU, CORE and SOCKET are needed. A CPU
    is left out when its ONLINE column says ``no`` or its core or socket is ``-`` (lscpu
    knows no topology for offline CPUs). Siblings are the online CPUs sharing the
    (socket, core) pair, read from the table rather than assumed from CPU numbering.
    ParseError for a header naming a column twice or a CPU listed twice: which of the two
    is the host's is unknowable (the first column and every line used to be taken).
    """
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    if not lines:
        raise ParseError(source, "empty input: no lscpu -e table")
    header = lines[0].split()
    missing = [name for name in ("CPU", "CORE", "SOCKET") if name not in header]
    if missing:
        raise ParseError(source, f"the header names no {', '.join(missing)} column "
                                 f"(header: {excerpt(' '.join(header))})")
    twice = next((name for name in header if header.count(name) > 1), None)
    if twice is not None:
        raise ParseError(source, f"the header names the {excerpt(twice)} column twice "
                                 f"(allowed: each column once; header: "
                                 f"{excerpt(' '.join(header))})")
    col = {name: header.index(name) for name in header}
    out = []
    seen: dict[int, int] = {}  # CPU id: the line that listed it
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split()
        if len(fields) != len(header):
            raise ParseError(source, f"line {number}: {len(fields)} fields for "
                                     f"{len(header)} columns: {excerpt(line.strip())}")
        _check_once(fields[col["CPU"]], number, seen, line, source)
        if "ONLINE" in col and fields[col["ONLINE"]] == "no":
            continue
        cpu, core, package = (fields[col[name]] for name in ("CPU", "CORE", "SOCKET"))
        if core == "-" or package == "-":
            continue
        if not all(is_digits(v) and len(v) <= 9 for v in (cpu, core, package)):
            raise ParseError(source, f"line {number}: CPU, CORE and SOCKET must be whole "
                                     f"numbers: {excerpt(line.strip())}")
        out.append({"cpu": int(cpu), "core": int(core), "package": int(package)})
    if not out:
        raise ParseError(source, "the table lists no online CPU")
    cores: dict[tuple[int, int], list[int]] = {}
    for entry in out:
        cores.setdefault((entry["package"], entry["core"]), []).append(entry["cpu"])
    for entry in out:
        entry["siblings"] = sorted(cores[(entry["package"], entry["core"])])
    return sorted(out, key=lambda entry: entry["cpu"])


def _check_once(cpu: str, number: int, seen: dict[int, int], line: str, source: str) -> None:
    """ParseError unless ``cpu`` is a whole number no line before (``seen``) listed; notes it."""
    if not (is_digits(cpu) and len(cpu) <= 9):
        raise ParseError(source, f"line {number}: CPU, CORE and SOCKET must be whole "
                                 f"numbers: {excerpt(line.strip())}")
    if int(cpu) in seen:
        raise ParseError(source, f"line {number}: CPU {int(cpu)} listed twice (first on line "
                                 f"{seen[int(cpu)]}; allowed: each CPU once)")
    seen[int(cpu)] = number


def offline_cpus(text: str) -> int:
    """How many CPUs the table lists as offline (``ONLINE`` is ``no``), e.g. with SMT off."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines or "ONLINE" not in lines[0]:
        return 0
    col = lines[0].index("ONLINE")
    return sum(1 for fields in lines[1:] if len(fields) > col and fields[col] == "no")
