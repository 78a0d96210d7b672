"""The SPDK bdevperf adapter: the bdev configuration, core mask and options of one run, and
the metrics of its text table or ``perform_tests`` JSON.

Options (bdevperf's vocabulary): ``spdk_dir`` (an SPDK tree with a build), ``devices`` (PCIe
addresses; one ``bdev_nvme_attach_controller`` each, in this order), ``json_results`` (ask
``perform_tests`` for JSON, SPDK >= 24.09), ``core_mask`` (a
:class:`~iolab.tools.base.CpuRequest`), ``queue_depth``, ``io_size``, ``seconds``,
``workload``. The driver is ``scripts/drivers/bdevperf.sh``; bdevperf announces its
measurement ("Running I/O for T seconds"), which :class:`~iolab.tools.marker.OutputMarker`
timestamps.

Responsible for: the SPDK JSON subsystem configuration, hex core masks, bdevperf's option
list, finding bdevperf, and the metrics of a stored run (with the text-table fallback for
SPDK releases without JSON results, said once per campaign). Every check raises
:class:`~iolab.errors.InputError` naming the key.
Not responsible for: binding devices to a user-space driver (``iolab.host.binding``),
reserving hugepages, choosing CPUs (:meth:`CpuRequest.resolve`), or parsing bdevperf's
output formats (:mod:`iolab.parsers.bdevperf`). Apart from the text handed in, nothing here
reads or changes the host.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError, ParseError
from iolab.parsers.bdevperf import parse_bdevperf_json, parse_bdevperf_text, spdk_supports_json
from iolab.tools.base import (CpuRequest, Invocation, Launch, Program, ToolAdapter, cpu_mask)
from iolab.tools.marker import OutputMarker

CONFIG = "bdev.json"
JSON_RESULTS = "bdevperf-results.json"
START = r"Running I/O for (\d+) seconds"  # bdevperf's announcement of its measurement

# Domain, bus, device, function; SPDK's traddr wants the full form with the domain.
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
_BDF_ALLOWED = "DDDD:BB:DD.F, e.g. 0000:4a:00.0"

# bdevperf's -w values (examples/bdev/bdevperf/bdevperf.c, PATTERN_TYPES_STR).
WORKLOADS = ("read", "write", "randread", "randwrite", "rw", "randrw", "verify", "reset",
             "unmap", "flush", "write_zeroes")
_MIXED = ("rw", "randrw")


def controller_name(index: int) -> str:
    """SPDK controller name of the index-th device: nvme00, nvme01, …; its bdev adds 'n1'."""
    return f"nvme{index:02d}"


def bdev_config(pci_addrs: list[str]) -> dict[str, Any]:
    """The JSON subsystem config (bdevperf ``-c``) attaching one PCIe controller per address.

    The controllers are named in the order given, so the bdevs are nvme00n1, nvme01n1, ….
    Addresses must be full PCIe BDFs, each at most once.
    """
    if not isinstance(pci_addrs, list) or not pci_addrs:
        raise InputError(None, "devices", f"need a non-empty list of PCIe addresses, "
                         f"got {pci_addrs!r}", allowed=_BDF_ALLOWED)
    seen: dict[str, int] = {}
    entries = []
    for i, addr in enumerate(pci_addrs):
        if not isinstance(addr, str) or not _BDF.match(addr):
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not a PCIe address",
                             allowed=_BDF_ALLOWED)
        # 0000:4A:00.0 and 0000:4a:00.0 are the same function.
        key = addr.lower()
        if key in seen:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is listed twice (also "
                             f"devices[{seen[key]}]); each controller can be attached once")
        seen[key] = i
        entries.append({"method": "bdev_nvme_attach_controller",
                        "params": {"name": controller_name(i), "trtype": "PCIe",
                                   "traddr": addr}})
    return {"subsystems": [{"subsystem": "bdev", "config": entries}]}


def check_devices(pci_addrs: list[str], available: list[str]) -> None:
    """Refuse a device list longer than the environment's, or naming a device it lacks."""
    if not available:
        raise InputError(None, "devices", "the environment lists no NVMe devices for SPDK",
                         allowed="PCIe addresses in the params file's devices list")
    if len(pci_addrs) > len(available):
        raise InputError(None, "ndevs", f"asked for {len(pci_addrs)} devices but the "
                         f"environment lists {len(available)}", allowed=f"1..{len(available)}")
    known = {addr.lower() for addr in available}
    for i, addr in enumerate(pci_addrs):
        if str(addr).lower() not in known:
            raise InputError(None, f"devices[{i}]", f"'{addr}' is not among the "
                             f"environment's devices", allowed=", ".join(available))


def _positive_int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(None, key, f"must be a positive whole number, got {value!r}")
    return value


def bdevperf_argv(core_mask: str, queue_depth: int, io_size: int, seconds: int,
                  workload: str = "randread", rwmixread: int | None = None) -> list[str]:
    """bdevperf's options for one run: ``-m MASK -q QD -o BYTES -t S -w WORKLOAD [-M PCT]``.

    ``rwmixread`` (percent reads) is required for rw/randrw and refused for the others,
    because bdevperf only warns and ignores it there.
    """
    if not isinstance(core_mask, str) or not re.fullmatch(r"0x[0-9a-fA-F]+", core_mask) \
            or int(core_mask, 16) == 0:
        raise InputError(None, "core_mask", f"'{core_mask}' is not a non-zero hex core mask",
                         allowed="0x followed by hex digits, e.g. 0x3")
    if workload not in WORKLOADS:
        raise InputError(None, "workload", f"unknown bdevperf workload '{workload}'",
                         allowed=", ".join(WORKLOADS))
    argv = ["-m", core_mask,
            "-q", str(_positive_int("queue_depth", queue_depth)),
            "-o", str(_positive_int("io_size", io_size)),
            "-t", str(_positive_int("seconds", seconds)),
            "-w", workload]
    if workload in _MIXED:
        if isinstance(rwmixread, bool) or not isinstance(rwmixread, int) \
                or not 0 <= rwmixread <= 100:
            raise InputError(None, "rwmixread", f"{workload} needs the percentage of reads, "
                             f"got {rwmixread!r}", allowed="0..100")
        argv += ["-M", str(rwmixread)]
    elif rwmixread is not None:
        raise InputError(None, "rwmixread", f"only applies to rw and randrw, not {workload}")
    return argv


class Bdevperf(ToolAdapter):
    name = "bdevperf"
    driver = "bdevperf.sh"
    # SPDK's start-up (hugepages, probing, attaching controllers) and teardown; an estimate
    startup_s = 12.0

    def program(self, options: Mapping[str, Any]) -> Program:
        exe = f"{options['spdk_dir']}/build/examples/bdevperf"
        return Program("bdevperf", exe, ("--version",),
                       install="build SPDK (https://spdk.io) and set spdk_dir in the params file")

    def collectors(self, invocation: Invocation) -> list:
        return [OutputMarker(START)]

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        o = invocation.options
        request = o["core_mask"]
        cpus = request.resolve(topology) if isinstance(request, CpuRequest) else None
        mask = cpu_mask(cpus) if cpus is not None else request
        extra = ["--json-results", JSON_RESULTS] if o["json_results"] else []
        argv = [str(self.driver_path), "--spdk-dir", o["spdk_dir"], "--config", CONFIG, *extra,
                "--", *bdevperf_argv(mask, o["queue_depth"], o["io_size"], o["seconds"],
                                     o["workload"])]
        config = bdev_config(list(o["devices"]))
        return Launch(argv, inputs={CONFIG: json.dumps(config, indent=2) + "\n"}, cpus=cpus)

    def parse(self, run_dir: Path) -> dict[str, Any]:
        stdout = Path(run_dir) / "stdout"
        text = parse_bdevperf_text(stdout.read_text(errors="replace"), str(stdout))
        res, source, note = text, "text table", None
        json_path = Path(run_dir) / JSON_RESULTS
        if json_path.exists():  # JSON results were asked for
            if not spdk_supports_json(text.get("spdk_version")):
                note = (f"SPDK {text.get('spdk_version')} predates JSON results (needs v24.09 or "
                        "later): results are read from bdevperf's text table")
            elif json_path.stat().st_size:
                try:
                    res = {**parse_bdevperf_json(json_path.read_text(), str(json_path)),
                           "spdk_version": text.get("spdk_version")}
                    source = "perform_tests JSON"
                except ParseError:
                    # SPDK answers perform_tests with a JSON-RPC error when a job fails; the
                    # text table on stdout still shows the failed job, so it decides
                    note = "perform_tests returned an error instead of results: text table used"
        return {"iops": res["iops"], "mibs": res["mibs"], "lat_mean_us": res["avg_latency_us"],
                "fail_per_s": res["fail_per_s"], "timeout_per_s": res["timeout_per_s"],
                "version": res.get("spdk_version"), "results_from": source, "note": note,
                "problem": "; ".join(res["problems"]) if not res["ok"] else None}

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """From the marker's timestamp of bdevperf's "Running I/O for T seconds"."""
        marker = Path(run_dir) / OutputMarker.FILE
        if not marker.exists():
            return None
        mark = json.loads(marker.read_text())
        seconds = int(re.search(START, mark["line"]).group(1))
        return mark["time_ns"], mark["time_ns"] + seconds * 10**9
