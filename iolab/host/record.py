"""A host record (``host.json``) read as every reader takes it: the store, ``verify`` and the
collectors that bound a run's counts by its host (:mod:`iolab.collectors.hostrec`).

A record is a regular file (never a link) of at most :data:`HOST_MOST` bytes holding one JSON
object whose ``cpu`` and ``tools`` are objects and whose stored ``fingerprint`` is the one its
own fields give: a record edited after it was made describes another host, and every run's
``host_fingerprint`` vouches for the record as it was made.

Responsible for: reading and checking one record. Not responsible for: making it or its
fingerprint (:mod:`iolab.host.inventory`), nor where it lies (:mod:`iolab.core.store`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.errors import InputError, ParseError
from iolab.parsers import load_json
from iolab.safefiles import read_regular

HOST_MOST = 16 << 20  # bytes of a host record at most: iolab's are about 10 kB


def read_host_record(path: Path) -> dict[str, Any] | None:
    """The host record at ``path`` as every reader takes it: a regular file (never a link) of
    at most :data:`HOST_MOST` bytes holding a JSON object whose stored ``fingerprint`` is the
    one its fields give; None when there is none; InputError naming the file (and the key)
    for anything else."""
    # a FIFO, a link or a device there is refused before any read that could block
    raw = read_regular(path, "the campaign's host record", HOST_MOST)
    if raw is None:
        return None
    try:
        doc = load_json(raw.decode("utf-8"), str(path))
    except (ValueError, ParseError) as exc:  # nested too deeply: ParseError
        why = exc.problem if isinstance(exc, ParseError) else exc
        raise InputError(path, None, f"not valid JSON ({why}); restore it from git "
                         "or move the campaign away") from None
    if not isinstance(doc, dict):
        raise InputError(path, None, "is not a JSON object, so not a host record; "
                         "restore it from git or move the campaign away")
    # the fingerprint is read from these: a field of another shape is named here, in one
    # line, rather than failing where it is read
    for key in ("cpu", "tools"):
        if not isinstance(doc.get(key, {}), (dict, type(None))):
            raise InputError(path, key, "is not a JSON object", allowed="the "
                             "mapping iolab records; restore the file from git or move the "
                             "campaign away")
    for name, tool in (doc.get("tools") or {}).items():
        if not isinstance(tool, (dict, type(None))):
            raise InputError(path, f"tools.{name}", "is not a JSON object",
                             allowed="{argv, version, error} as iolab records it; restore "
                             "the file from git or move the campaign away")
    from iolab.host.inventory import fingerprint_problem

    # the runs' host_fingerprint vouch for the host this record describes: one changed
    # after it was made describes another
    problem = fingerprint_problem(doc)
    if problem:
        raise InputError(path, "fingerprint", problem, allowed="the record as "
                         "iolab wrote it; restore the file from git or move the campaign "
                         "away")
    return doc
