"""What an AiSIO archive says of its host, and its archive-level raw extras.

The host record comes from the archive's ``lscpu -e`` outputs and CIJOE's merged config; an
imported campaign of its own keeps it as its ``host.json``, while an experiment's
``host.json`` belongs to the host that runs it, so there the archive's host record is kept
beside its other extras under ``extras/<archive>/``, with the p2pBandwidthLatencyTest output
and its ``.state``.

Responsible for: the host record and its fingerprint; writing it and the extras, never
overwriting a stored file, never through a link (at a file's name or in place of a folder:
``extras/``, ``extras/<archive>/`` or the campaign's), and never outside the campaign's
``extras/<archive>/`` (an archive named ``..`` is refused).
Not responsible for: parsing ``lscpu -e`` or the p2p output (``iolab.parsers``), comparing
the p2p value with AiSIO's (:mod:`iolab.importers.cijoe.crosscheck`), or the store's own
host check (:class:`~iolab.core.store.Store`).
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from iolab.core.store import DEPTH as STORE_DEPTH, Store
from iolab.durable import write_atomic
from iolab.errors import InputError, ParseError
from iolab.host.inventory import imported_fingerprint
from iolab.importers.cijoe.archive import Archive, Command
from iolab.importers.cijoe.crosscheck import check_p2p
from iolab.importers.cijoe.kinds import LSCPU, P2P
from iolab.importers.cijoe.report import ImportReport
from iolab.parsers.lscpu import offline_cpus, parse_lscpu_e
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.safefiles import NotOurs, own_folder, read_regular

SOURCE = "aisio-cijoe-import"


def host_record(arc: Archive, commands: list[Command], report: ImportReport) -> tuple[dict, str]:
    """host.json content from the archive's ``lscpu -e`` and config, and its fingerprint.

    Each run step prints ``lscpu -e`` before it sets SMT, so an output can show the sibling
    threads offline; the output with the most online CPUs describes the host.
    """
    outputs = []
    for command in commands:
        if command.kind == LSCPU and command.state.get("err") == 0:
            text = command.output_bytes.decode("utf-8", errors="replace")
            topology = parse_lscpu_e(text, f"{arc.name}:{command.path}.output")
            offline = offline_cpus(text)
            outputs.append((len(topology), command, text, topology))
            if offline:
                report.notes.append(f"{command.path}: lscpu -e shows {offline} of "
                                    f"{offline + len(topology)} CPUs offline (it ran before the "
                                    f"step set SMT)")
    topology = lscpu_text = cpu = None
    if outputs:
        _, chosen, lscpu_text, topology = max(outputs, key=lambda o: o[0])
        for _, command, _, other in outputs:
            if other != topology and len(other) == len(topology):
                report.notes.append(f"{command.path}: lscpu topology differs from {chosen.path}")
        per_core = Counter((e["package"], e["core"]) for e in topology)
        cpu = {"model_name": None, "logical_cpus": len(topology),
               "threads_per_core": max(per_core.values())}
    else:
        report.notes.append("no lscpu output in the archive: host topology unknown")
    host = {
        "schema_version": 1,
        "source": SOURCE,
        "hostname": None,  # CIJOE does not record it
        "archive": arc.name,
        "archive_sha256": arc.sha256,
        "imported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "topology": topology,
        "lscpu_e": lscpu_text,
        **_config(arc, report),
    }
    return host, imported_fingerprint(SOURCE, cpu, topology)


def _config(arc: Archive, report: ImportReport) -> dict[str, Any]:
    """OS, devices and software versions from CIJOE's merged config (``config.orig``).

    Only these keys are copied: the configs may hold an SSH password.
    """
    raw = arc.files.get("config.orig")
    if raw is None:
        report.notes.append("no config.orig in the archive: OS, devices and versions unknown")
        return {"os": None, "devices": None, "software": None}
    try:
        config = tomllib.loads(raw.decode("utf-8", errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        report.notes.append(f"config.orig is not valid TOML ({exc}); OS, devices and versions unknown")
        return {"os": None, "devices": None, "software": None}
    software = {}

    def walk(table: dict, prefix: str) -> None:
        picked = {k: table[k] for k in ("remote", "tag", "branch", "version", "apt_version")
                  if isinstance(table.get(k), str)}
        if picked and prefix not in ("", "os") and not prefix.startswith("cijoe"):
            software[prefix.removesuffix(".repository")] = picked
        for key, value in table.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}.{key}" if prefix else key)

    walk(config, "")
    os_table = config.get("os") if isinstance(config.get("os"), dict) else {}
    return {"os": {k: os_table.get(k) for k in ("distro", "version")} or None,
            "devices": [d.get("pci_addr") for d in config.get("devices", []) if isinstance(d, dict)],
            "software": software}


def record_host(store: Store, arc: Archive, host: dict[str, Any], fingerprint: str,
                report: ImportReport, *, own_campaign: bool) -> None:
    """Keep the archive's host record: as the campaign's host.json for a campaign of its own,
    else as an extra."""
    if own_campaign:
        stored = store.read_host()
        diff = [] if stored is None else [k for k in ("cpu", "topology")
                                          if stored.get(k) != host.get(k)]
        store.check_or_record_host(host, fingerprint, diff)
    else:
        # the experiment's host.json belongs to the host that runs it; the archive's host
        # is kept beside its other raw extras, so an import never blocks a campaign
        _write_host_extra(store, arc, host, fingerprint, report)


def _write_host_extra(store: Store, arc: Archive, host: dict[str, Any], fingerprint: str,
                      report: ImportReport) -> None:
    folder = _extras_folder(store, arc)
    data = json.dumps({**host, "fingerprint": fingerprint}, indent=2, sort_keys=True)
    _write_once(folder / "host.json", (data + "\n").encode(), report)


def store_extras(arc: Archive, commands: list[Command], store: Store,
                 report: ImportReport) -> None:
    """The p2pBandwidthLatencyTest output (with its .state) under ``extras/<archive>/``.

    Only raw files are stored; the output is parsed here to check it and to compare AiSIO's
    ``artifacts/cuda-sample-p2p-bandwidth`` with the matrix it came from.
    """
    p2p = [c for c in commands if c.kind == P2P]
    if not p2p:
        return
    folder = _extras_folder(store, arc)
    for command in p2p:
        name = f"{P2P}-{command.step}-cmd_{command.number:02d}"
        for suffix, data in ((".output", command.output_bytes), (".state", command.state_bytes)):
            _write_once(folder / f"{name}{suffix}", data, report)
        source = f"{arc.name}:{command.path}.output"
        try:
            parsed = parse_p2p_bandwidth(command.output_bytes.decode("utf-8", errors="replace"), source)
        except ParseError as exc:
            report.notes.append(f"{exc} (stored unparsed)")
            continue
        check_p2p(parsed, arc, report)


def _extras_folder(store: Store, arc: Archive) -> Path:
    """``extras/<archive's name without .tar.gz>/`` of the campaign: refused when the name
    would name no folder of its own there (``..`` would be the campaign's own folder)."""
    stem = _stem(arc.name)
    if stem in ("", ".", "..") or "/" in stem:
        raise InputError(arc.name, None, f"the archive's name gives no folder for its extras "
                         f"(extras/{stem})", allowed="an archive or folder with a name of its "
                         "own (not . or ..)")
    # made here, never through a link (at extras/, at it or above: the campaign's folders
    # and raw/)
    return own_folder(store.root / "extras" / stem, "an archive's raw extras (extras/)",
                      STORE_DEPTH + 1)


def _stem(name: str) -> str:
    for suffix in (".tar.gz", ".tgz", ".tar"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def _write_once(path: Path, data: bytes, report: ImportReport) -> None:
    """Write a raw extra file; keep an existing identical one; never overwrite a different one,
    nor anything that is not a regular file (a link there is never followed)."""
    try:
        stored = read_regular(path, "a raw extra file")
    except NotOurs as exc:
        report.notes.append(f"{exc}; kept as it is")
        return
    if stored is not None:
        if stored != data:
            report.notes.append(f"{path}: exists with different content; kept the stored file")
        return
    try:
        write_atomic(path, data, exclusive=True)
    except FileExistsError:
        report.notes.append(f"{path}: appeared while the import wrote it; kept the stored file")
