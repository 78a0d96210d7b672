"""The host record of a run's environment, read by collectors that bound a run's counts by
the host it ran on (its CPUs, its memory).

A stored run lies at ``<env>/runs/<id>`` and its environment's host record at
``<env>/host.json``, read as the store reads it for every other command
(:func:`iolab.host.record.read_host_record`: never through a link, a key given twice or nesting
deeper than any record refused, and a record whose stored ``fingerprint`` is not the one its
fields give refused: it was changed after it was made, so describes another host). Each
value is read checked: a host record that is not JSON, or whose value is not of the stated
kind, fails the run naming the file (and the key); a missing record (a run folder
outside a store) gives None, and the collector bounds by what it has.

Responsible for: finding and reading those values. Not responsible for: writing or
validating the whole record (``iolab.host.inventory``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.checks import is_positive_int
from iolab.host.record import read_host_record
from iolab.errors import InputError, ParseError

HOST_FILE = "host.json"


def host_value(run_dir: Path, keys: tuple[str, ...], allowed: str) -> int | None:
    """The whole number above 0 at ``keys`` of the host record of the run's environment;
    None when there is no record (or it holds null there); ParseError naming the file and
    the key when it holds anything else."""
    path = Path(run_dir).parent.parent / HOST_FILE
    try:
        # checked as the store checks it for every other command: a record edited after it
        # was made (its fingerprint no longer its fields') would bound the counts by another
        # host's CPUs or memory
        value: Any = read_host_record(path)
    except InputError as exc:  # a run's input: the run fails naming the file and the key
        where = f"{exc.key}: " if exc.key else ""
        allowed = f" (allowed: {exc.allowed})" if exc.allowed else ""
        raise ParseError(str(path), f"{where}{exc.problem}{allowed}") from None
    if value is None:
        return None
    name = ".".join(keys)
    try:
        for key in keys:
            value = value[key]
    except (TypeError, KeyError):
        raise ParseError(str(path), f"{name}: expected {allowed} (a whole number)") from None
    if value is None:
        return None
    if not is_positive_int(value):
        raise ParseError(str(path), f"{name}: expected a whole number above 0 ({allowed}), "
                                    f"got {value!r}"[:200])
    return value


def host_cpus(run_dir: Path) -> int | None:
    """The logical CPUs (online or not) of the host record of the run's environment."""
    return host_value(run_dir, ("cpu", "logical_cpus"), "the host's logical CPUs")


def host_mem_kib(run_dir: Path) -> int | None:
    """The host's memory (MemTotal, KiB) of the host record of the run's environment."""
    return host_value(run_dir, ("mem_total_kib",), "the host's MemTotal in KiB")
