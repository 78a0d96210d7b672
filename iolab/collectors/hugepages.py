"""The hugepages collector: hugepage pools and counters at the start and end of a run.

Responsible for: ``hugepages.json``. Not responsible for: reserving hugepages.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from iolab.host.knobs import SysRoot
from iolab.parsers import is_digits
from iolab.tools.base import Collector


def _optional_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and is_digits(text) and len(text) < 20 else None


class Hugepages(Collector):
    """Hugepage counts at start and stop, in ``run_dir/hugepages.json``.

    SPDK and xNVMe allocate their DMA buffers from hugepages; a pool that is too small or
    already used shows up here. Format::

        {"start": {"time_ns": ..., "meminfo": {"HugePages_Total": 1024,
                                               "Hugepagesize_kib": 2048,
                                               "AnonHugePages_kib": 6144, ...},
                   "pools": {"hugepages-2048kB": {"nr_hugepages": 1024,
                                                  "free_hugepages": 1024}, ...}},
         "stop": {...}}

    ``meminfo`` holds every /proc/meminfo line whose name contains "Huge" (so the
    transparent-hugepage counters too), values in kB get a ``_kib`` suffix.
    """

    name = "hugepages"

    def __init__(self, root: SysRoot | None = None) -> None:
        self.root = root or SysRoot()

    def _snapshot(self) -> dict[str, Any]:
        meminfo = {}
        for line in (self.root.proc / "meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if "Huge" in key:
                number, *unit = value.split()
                meminfo[key + ("_kib" if unit == ["kB"] else "")] = int(number)
        pools = {}
        for pool in sorted((self.root.sys / "kernel/mm/hugepages").glob("hugepages-*")):
            pools[pool.name] = {f: _int_or_none(_optional_text(pool / f))
                                for f in ("nr_hugepages", "free_hugepages")}
        return {"time_ns": time.time_ns(), "meminfo": meminfo, "pools": pools}

    def start(self, run_dir: Path) -> None:
        self._write(Path(run_dir), {"start": self._snapshot()})

    def stop(self, run_dir: Path) -> None:
        path = Path(run_dir) / "hugepages.json"
        record = json.loads(path.read_text()) if path.exists() else {}
        self._write(Path(run_dir), {**record, "stop": self._snapshot()})

    @staticmethod
    def _write(run_dir: Path, record: dict[str, Any]) -> None:
        (run_dir / "hugepages.json").write_text(json.dumps(record, indent=2) + "\n")
