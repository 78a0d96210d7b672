"""What an AiSIO import stored beside its runs, read back: the figures of the
p2pBandwidthLatencyTest output kept under ``extras/<archive>/`` of the campaign's store.

Responsible for: finding that output and turning it into the figures the PCIe chapters use.
Not responsible for: storing it (:mod:`iolab.importers.cijoe`), parsing its text
(:mod:`iolab.parsers.p2p_bandwidth`), or the figures of the test run as a point of this
package (:func:`iolab.shared.gpu_sources.p2p_metrics`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from iolab.errors import ParseError
from iolab.parsers.p2p_bandwidth import parse_p2p_bandwidth
from iolab.safefiles import NotOurs, read_regular
from iolab.tools import p2p_bandwidth


def imported_p2p(store_root: Path, archives: list[str] | None = None) -> dict[str, Any] | None:
    """The figures of the p2pBandwidthLatencyTest output an AiSIO import stored under
    ``extras/<archive>/``, from the first of ``archives`` (archive names, as ``run.source``
    gives them; any when None) that has one, or None. An output that cannot be parsed counts
    as none."""
    stems = [a.removesuffix(".tar.gz").removesuffix(".tgz") for a in archives or []]
    outputs = [p for p in sorted(Path(store_root).glob("extras/*/p2pBandwidthLatencyTest-*.output"))
               if archives is None or p.parent.name in stems]
    if not outputs:
        return None
    path = outputs[0]
    try:
        # a link in the store's place of the output is never followed: no output
        raw = read_regular(path, "a raw extra file")
        if raw is None:
            return None
        parsed = parse_p2p_bandwidth(raw.decode("utf-8", errors="replace"), str(path))
        figures = p2p_bandwidth.metrics(parsed, str(path))
    except (ParseError, NotOurs):
        return None
    return {"source": f"AiSIO's p2pBandwidthLatencyTest output ({path.parent.name})",
            "p2p_write_gbs": figures["p2p_write_gbs"],
            "p2p_write_min_gbs": figures.get("p2p_write_min_gbs", float("nan")),
            "bidir_p2p_gbs": figures["bidir_p2p_gbs"],
            "aisio_reference_gbs": p2p_bandwidth.aisio_reference(parsed)}
