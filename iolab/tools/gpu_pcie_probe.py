"""The adapter of the project's GPU PCIe probe: copy-engine transfers and GPU-initiated
reads and writes of pinned host memory, one point per run.

The probe (``scripts/src/gpu_pcie_probe.cu``) is built with nvcc by its driver on first use.
Options, as the probe names them: ``mode`` (copy | read | write), ``direction`` (h2d | d2h,
copy only), ``bytes`` (per copy), ``copies`` (copies per timed operation, copy only, optional),
``iosize`` (bytes per request, a power of two), ``inflight``
(warps, a multiple of 32), ``requests_per_warp``, ``iterations`` (timed), ``warmup``
(untimed), ``device`` (CUDA ordinal), ``buffer`` (bytes of host memory the requests spread
over) and ``seed``. The report goes to ``probe.json``. The driver prints the GPUs' clocks and
current PCIe links (``iolab-gpu-clocks:`` lines) before the probe runs; the metrics keep those
of the GPU used.

Responsible for: checking options (every error names the key and what is allowed), the argv,
the probe's version, its window, the metrics of a stored run (a PCIe link no PCIe has is
refused), and whether a stored report is the run's own (its options against the argv). Not responsible for: the
report's format (:mod:`iolab.parsers.gpu_pcie_probe`) or the probe itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping

from iolab.errors import InputError, ParseError, excerpt
from iolab.parsers import is_digits, read_report
from iolab.parsers.gpu_pcie_probe import DIRECTIONS, MODES, parse_gpu_pcie_probe_file
from iolab.paths import DRIVERS_DIR
from iolab.tools.base import (Invocation, Launch, Program, ToolAdapter, pci_address,
                              source_version)

OUTPUT = "probe.json"
SOURCE = Path(__file__).resolve().parents[2] / "scripts" / "src" / "gpu_pcie_probe.cu"
CUDA_NVCC = "/usr/local/cuda/bin/nvcc"
CLOCKS_LINE = "iolab-gpu-clocks: "
COPY_OPTIONS = ("direction", "bytes", "copies")
REQUEST_OPTIONS = ("iosize", "inflight", "requests_per_warp", "buffer", "seed")
COMMON = ("mode", "iterations", "warmup", "device")
# the probe's limits (its usage text says the same)
LIMITS = {"bytes": (4096, 2**30), "iosize": (512, 2**20), "inflight": (32, 2**20),
          "requests_per_warp": (1, 2**24), "iterations": (1, 10_000), "warmup": (0, 10_000),
          "device": (0, 63), "copies": (1, 10**6), "buffer": (2**16, 2**40), "seed": (0, 2**32 - 1)}


def check(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options after checking them (absent optional ones left out)."""
    mode = options.get("mode")
    if mode not in MODES:
        raise InputError(None, "mode", f"unknown probe mode {mode!r}", allowed=", ".join(MODES))
    allowed = COMMON + (COPY_OPTIONS if mode == "copy" else REQUEST_OPTIONS)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise InputError(None, unknown[0], f"not an option of mode {mode}",
                         allowed=", ".join(allowed))
    required = ("iterations", "warmup") + (("direction", "bytes") if mode == "copy" else
                                           ("iosize", "inflight", "requests_per_warp"))
    for key in required:
        if key not in options:
            raise InputError(None, key, f"mode {mode} needs it")
    for key, value in options.items():
        if key in LIMITS:
            low, high = LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InputError(None, key, f"{value!r} is out of range",
                                 allowed=f"a whole number from {low:,} to {high:,}")
    if mode == "copy" and options["direction"] not in DIRECTIONS:
        raise InputError(None, "direction", f"unknown direction {options['direction']!r}",
                         allowed=", ".join(DIRECTIONS))
    if mode != "copy":
        if options["iosize"] & (options["iosize"] - 1):
            raise InputError(None, "iosize", f"{options['iosize']} is not a power of two")
        if options["inflight"] % 32:
            raise InputError(None, "inflight", f"{options['inflight']} warps is not a multiple "
                             "of 32 (whole blocks of the probe's kernel)")
    return dict(options)


def probe_version() -> str:
    """The ``iolab-probe-version`` line of the probe's source: a changed probe gives new runs."""
    return source_version(SOURCE, "iolab-probe-version")


def read_clocks(stdout: str, device: int, source: str) -> dict[str, Any]:
    """The clocks (MHz) and current PCIe link of GPU ``device`` from the driver's lines; None
    each where the driver had no nvidia-smi or nvidia-smi printed no number."""
    out: dict[str, Any] = {"sm_clock_mhz": None, "mem_clock_mhz": None, "sm_clock_max_mhz": None,
                           "mem_clock_max_mhz": None, "link_gen": None, "link_width": None}
    for number, line in enumerate(stdout.splitlines(), 1):
        if not line.startswith(CLOCKS_LINE) or "unavailable" in line:
            continue
        fields = [f.strip() for f in line[len(CLOCKS_LINE):].split(",")]
        if len(fields) != 8 or not (is_digits(fields[0]) and len(fields[0]) <= 9):
            raise ParseError(source, f"line {number}: expected '{CLOCKS_LINE}<index>, <pci>, "
                             f"<6 numbers>', got {line!r}")
        if int(fields[0]) == device:
            out.update(zip(out, (int(f) if is_digits(f) and len(f) <= 9 else None
                                 for f in fields[2:])))
            _check_link(out, number, source)
    return out


# the links PCIe has: generations 1 to 6, and the widths its specification defines; the
# line-rate ceiling of the probe's rates follows the recorded link, so another is refused
LINK_GENS = range(1, 7)
LINK_WIDTHS = (1, 2, 4, 8, 12, 16, 32)


def _check_link(clocks: dict[str, Any], number: int, source: str) -> None:
    """ParseError for a link generation or width that no PCIe link has."""
    for key, allowed, said in (("link_gen", LINK_GENS, "1 to 6"),
                               ("link_width", LINK_WIDTHS, "x" + ", x".join(map(str, LINK_WIDTHS)))):
        if clocks[key] is not None and clocks[key] not in allowed:
            raise ParseError(source, f"line {number}: the PCIe link's {key} is {clocks[key]} "
                                     f"(allowed: {said}, what PCIe has)")


def _nvcc() -> str:
    return shutil.which("nvcc") or CUDA_NVCC


class GpuPcieProbe(ToolAdapter):
    name = "gpu_pcie_probe"
    driver = "gpu_pcie_probe.sh"
    rates = {"requests_per_s": "op/s", "gbs": "GB/s"}
    # CUDA context creation and the allocations; an estimate for the plan
    startup_s = 0.8

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        return Program("gpu_pcie_probe", str(DRIVERS_DIR / self.driver), ("--version",),
                       install="it is built on first use with the CUDA toolkit's nvcc (on PATH "
                               f"or at {CUDA_NVCC}) and runs on an NVIDIA GPU",
                       version_pattern=r"gpu_pcie_probe (\S+ \(CUDA runtime \S+\))",
                       needs=(_nvcc(),))

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        check(invocation.options)
        return {**super().identity(invocation), "probe_version": probe_version()}

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        argv = [str(self.driver_path), "--output", OUTPUT]
        for key, value in check(invocation.options).items():
            argv += [f"--{key.replace('_', '-')}", str(value)]
        return Launch(argv)

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        path = Path(run_dir) / OUTPUT
        return tuple(parse_gpu_pcie_probe_file(path)["window_ns"]) if path.exists() else None

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A report whose mode, direction, sizes, warps, iterations, device, buffer or seed
        differ from the options the run gave the probe was not written by this run (another
        run's, or something else's): its numbers are not this run's."""
        report = parse_gpu_pcie_probe_file(Path(run_dir) / OUTPUT)
        given = dict(zip(argv, argv[1:]))
        for option, (key, read) in _ECHOED.items():
            flag = f"--{option.replace('_', '-')}"
            if flag not in given:
                continue
            got = read(report)
            if str(got) != given[flag]:
                return (f"{OUTPUT} is not this run's report: its {key} is {excerpt(got)}, the "
                        f"run gave the probe {flag} {excerpt(given[flag])}")
        return ""

    def parse(self, run_dir: Path) -> dict[str, Any]:
        run_dir = Path(run_dir)
        report = parse_gpu_pcie_probe_file(run_dir / OUTPUT)
        stdout = run_dir / "stdout"
        clocks = read_clocks(read_report(stdout, "gpu_pcie_probe", "gpu_pcie_probe's output")
                             if stdout.exists() else "", report["device"]["index"], str(stdout))
        return {"gbs": report["gbs"], "gbs_min": report["gbs_min"], "gbs_max": report["gbs_max"],
                "requests_per_s": report["requests_per_s"], "latency_us": report["latency_us"],
                "resident_warps": report["resident_warps"],
                "timed_iterations": report["timed_iterations"],
                "gpu_pci": pci_address(report["device"]["pci_bus_id"]),
                "gpu_name": report["device"]["name"], **clocks,
                "version": f"{report['probe_version']} (CUDA runtime {report['cuda_runtime']})",
                "problem": None, "note": None}


def _key(key: str):
    return lambda report: report.get(key)


# what the probe's report echoes of its options: option -> (report key, how to read it)
_ECHOED = {"mode": ("mode", _key("mode")), "direction": ("direction", _key("direction")),
           "bytes": ("bytes", _key("bytes")), "iosize": ("iosize", _key("iosize")),
           "inflight": ("inflight", _key("inflight")),
           "requests_per_warp": ("requests_per_warp", _key("requests_per_warp")),
           "buffer": ("buffer_bytes", _key("buffer_bytes")), "warmup": ("warmup", _key("warmup")),
           "seed": ("seed", _key("seed")),
           "iterations": ("iterations", lambda report: report["timed_iterations"]),
           "device": ("device.index", lambda report: report["device"]["index"])}
