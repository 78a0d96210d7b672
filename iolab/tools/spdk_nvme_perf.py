"""The spdk_nvme_perf adapter: options in its vocabulary <-> its argv; its table -> metrics.

spdk_nvme_perf is SPDK's NVMe benchmark (``app/spdk_nvme_perf``, built as
``<spdk_dir>/build/bin/spdk_nvme_perf``). Options, named after its long options:

==============  ======================================================================
``spdk_dir``    an SPDK tree with a build
``devices``     PCIe addresses, one ``-r 'trtype:PCIe traddr:<BDF>'`` each, in order
``core_mask``   the CPUs that submit and complete I/O: a
                :class:`~iolab.tools.base.CpuRequest` resolved on the host that runs, or a
                list of CPU ids (what :func:`read_argv` gives back); written as ``-c 0x…``
``io_depth``    ``-q``;  ``io_size``: ``-o`` (bytes);  ``time``: ``-t`` (seconds)
``io_pattern``  ``-w``: read, write, randread, randwrite, rw, randrw
``rwmixread``   ``-M``: percent reads, required for rw/randrw and refused otherwise
                (spdk_nvme_perf only warns and ignores it there)
==============  ======================================================================

There is no driver script yet (``driver`` is None): :meth:`SpdkNvmePerf.launch` gives the
tool's own argv, its path first. :func:`read_argv` reads a recorded command line back into
these options (short or long options, attached or separate values, ``4k``-style sizes):
``read_argv(build_argv(o)) == check(o)``. :func:`core_mask_cpus` reads SPDK's core-mask
syntax, which every SPDK application shares (bdevperf's ``-m`` too).

Responsible for: finding the tool, checking options (every error names the key and what is
allowed), the argv in both directions, the metrics of a stored run (via
:mod:`iolab.parsers.spdk_nvme_perf`), and whether a stored report is the run's own (its I/O
size, and each row's controller and core, against the argv). Not responsible for: binding devices to a user-space
driver, hugepages, choosing CPUs, or parsing the table.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from iolab.checks import positive_int
from iolab.errors import InputError, ParseError, excerpt
from iolab.parsers import read_report
from iolab.parsers.spdk_nvme_perf import parse_spdk_nvme_perf
from iolab.tools.base import CpuRequest, Invocation, Launch, Program, ToolAdapter, cpu_mask

EXECUTABLE = "spdk_nvme_perf"
IO_PATTERNS = ("read", "write", "randread", "randwrite", "rw", "randrw")
_MIXED = ("rw", "randrw")

# Every option, in the order build_argv writes them (spdk_dir is where, not an argument).
OPTIONS = ("spdk_dir", "io_depth", "io_size", "io_pattern", "time", "rwmixread", "core_mask",
           "devices")
# short flag, long flag -> option
_FLAGS = {"-q": "io_depth", "-o": "io_size", "-w": "io_pattern", "-t": "time", "-M": "rwmixread",
          "-c": "core_mask", "-r": "devices"}
_LONG = {"--io-depth": "-q", "--io-size": "-o", "--io-pattern": "-w", "--time": "-t",
         "--rwmixread": "-M", "--core-mask": "-c", "--transport": "-r"}
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$")
_BDF_ALLOWED = "DDDD:BB:DD.F, e.g. 0000:4a:00.0"
_SIZE = re.compile(r"^([0-9]+)([kKmMgG]?)$")
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_STARTING = re.compile(r"Starting SPDK (v\S+)")
_ATTACHED = re.compile(r"^Attached to NVMe Controller at PCIE \((\S+)\)", re.M)


def core_mask_cpus(mask: str) -> list[int]:
    """CPU ids of an SPDK core mask: hex with or without ``0x`` (``3`` -> [0, 1]), or a CPU
    list in brackets (``[0,2-3]``)."""
    text = mask.strip()
    if text.startswith("[") and text.endswith("]"):
        cpus: list[int] = []
        for part in text[1:-1].split(","):
            first, dash, last = part.strip().partition("-")
            if not re.fullmatch(r"[0-9]+", first) or (dash and not re.fullmatch(r"[0-9]+", last)):
                raise InputError(None, "core_mask", f"{mask!r} is not an SPDK core list",
                                 allowed="e.g. [0,2-3]")
            cpus += range(int(first), int(last if dash else first) + 1)
        if not cpus or len(set(cpus)) != len(cpus):
            raise InputError(None, "core_mask", f"{mask!r} lists no CPU, or a CPU twice",
                             allowed="e.g. [0,2-3]")
        return sorted(cpus)
    if re.fullmatch(r"(?:0[xX])?[0-9a-fA-F]+", text) and int(text, 16):
        bits = int(text, 16)
        return [cpu for cpu in range(bits.bit_length()) if bits >> cpu & 1]
    raise InputError(None, "core_mask", f"{mask!r} is not a non-empty SPDK core mask",
                     allowed="hex with or without 0x (e.g. 0x3), or a list such as [0,2-3]")


def check(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option (``rwmixread`` None where absent) after checking it, CPU ids sorted.

    ``core_mask`` must already be CPU ids here (:meth:`SpdkNvmePerf.launch` resolves a
    :class:`CpuRequest`).
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(None, unknown[0], "not a spdk_nvme_perf option",
                         allowed=", ".join(OPTIONS))
    o = {key: options.get(key) for key in OPTIONS}
    if o["spdk_dir"] is not None and (not isinstance(o["spdk_dir"], str) or not o["spdk_dir"]):
        raise InputError(None, "spdk_dir", f"must be the path of an SPDK tree, got "
                         f"{o['spdk_dir']!r}")
    for key in ("io_depth", "io_size", "time"):
        positive_int(o[key], key)
    if o["io_pattern"] not in IO_PATTERNS:
        raise InputError(None, "io_pattern", f"unknown I/O pattern {o['io_pattern']!r}",
                         allowed=", ".join(IO_PATTERNS))
    mix = o["rwmixread"]
    if o["io_pattern"] in _MIXED:
        if isinstance(mix, bool) or not isinstance(mix, int) or not 0 <= mix <= 100:
            raise InputError(None, "rwmixread", f"{o['io_pattern']} needs the percentage of "
                             f"reads, got {mix!r}", allowed="0..100")
    elif mix is not None:
        raise InputError(None, "rwmixread", f"only applies to rw and randrw, not "
                         f"{o['io_pattern']}", allowed="None")
    cpus = o["core_mask"]
    if not isinstance(cpus, list) or not cpus or len(set(cpus)) != len(cpus) or not all(
            isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
        raise InputError(None, "core_mask", f"need distinct CPU ids, got {cpus!r}",
                         allowed="a CpuRequest (resolved by launch) or a list such as [0, 1]")
    o["core_mask"] = sorted(cpus)
    devices = o["devices"]
    if not isinstance(devices, list) or not devices:
        raise InputError(None, "devices", f"need a non-empty list of PCIe addresses, got "
                         f"{devices!r}", allowed=_BDF_ALLOWED)
    for i, addr in enumerate(devices):
        if not isinstance(addr, str) or not _BDF.match(addr):
            raise InputError(None, f"devices[{i}]", f"{addr!r} is not a PCIe address",
                             allowed=_BDF_ALLOWED)
        if addr.lower() in (d.lower() for d in devices[:i]):
            raise InputError(None, f"devices[{i}]", f"'{addr}' is listed twice")
    return o


def executable(spdk_dir: str | None) -> str:
    """Where an SPDK tree's build puts spdk_nvme_perf (without a tree: the name, on PATH)."""
    return f"{spdk_dir}/build/bin/{EXECUTABLE}" if spdk_dir else EXECUTABLE


def build_argv(options: Mapping[str, Any]) -> list[str]:
    """spdk_nvme_perf's argv for checked options (see :func:`check`), its path first."""
    o = check(options)
    argv = [executable(o["spdk_dir"]), "-q", str(o["io_depth"]), "-o", str(o["io_size"]),
            "-w", o["io_pattern"], "-t", str(o["time"])]
    if o["rwmixread"] is not None:
        argv += ["-M", str(o["rwmixread"])]
    argv += ["-c", cpu_mask(o["core_mask"])]
    for addr in o["devices"]:
        argv += ["-r", f"trtype:PCIe traddr:{addr}"]
    return argv


def read_argv(argv: list[str]) -> dict[str, Any]:
    """The options of a recorded spdk_nvme_perf command line (``argv[0]`` is the tool).

    ``spdk_dir`` comes from a path ending in ``build/bin/spdk_nvme_perf`` (else None); options
    absent from the line are None (``devices`` an empty list). Raises InputError naming the
    option for one this adapter does not read or a value it cannot.
    """
    if not argv or PurePosixPath(argv[0]).name != EXECUTABLE:
        raise InputError(None, "argv", f"not a spdk_nvme_perf command line: {argv[:1]!r}",
                         allowed=f"…/{EXECUTABLE} -q N -o N -w PATTERN -t S -c MASK -r TRID")
    program = PurePosixPath(argv[0])
    spdk_dir = (str(program.parents[2]) if program.parts[-3:-1] == ("build", "bin") else None)
    options: dict[str, Any] = {key: None for key in OPTIONS}
    options.update(spdk_dir=spdk_dir, devices=[])
    words = argv[1:]
    at = 0
    while at < len(words):
        word = words[at]
        if not word.startswith("-"):
            raise InputError(None, word, "kernel block devices as positional arguments are not "
                             "read by this adapter", allowed="-r 'trtype:PCIe traddr:<BDF>'")
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            flag = _LONG.get(name)
            attached = value if eq else None
        else:
            flag, attached = word[:2], word[2:] or None
        if flag not in _FLAGS:
            raise InputError(None, word, "not a spdk_nvme_perf option this adapter reads",
                             allowed=", ".join(f"{s}/{lng}" for lng, s in _LONG.items()))
        if attached is None:
            if at + 1 >= len(words):
                raise InputError(None, flag, "has no value at the end of the command line")
            at += 1
            attached = words[at]
        key = _FLAGS[flag]
        if key == "devices":
            options["devices"].append(_traddr(attached))
        else:
            options[key] = _value(key, flag, attached)
        at += 1
    return options


def _value(key: str, flag: str, value: str) -> Any:
    if key == "io_pattern":
        return value
    if key == "core_mask":
        return core_mask_cpus(value)
    size = _SIZE.match(value)
    if size is None or (size.group(2) and key != "io_size"):
        raise InputError(None, flag, f"{value!r} is not a whole number"
                         + (" (with an optional k, m or g)" if key == "io_size" else ""))
    return int(size.group(1)) * _SIZE_UNITS[size.group(2).lower()]


def _traddr(trid: str) -> str:
    """The PCIe address of one ``-r`` transport id."""
    fields = {}
    for pair in trid.split():
        name, colon, value = pair.partition(":")
        fields[name.lower()] = value if colon else None
    if set(fields) != {"trtype", "traddr"} or (fields["trtype"] or "").lower() != "pcie" \
            or not fields["traddr"]:
        raise InputError(None, "-r", f"{trid!r} is not a local PCIe transport id",
                         allowed="'trtype:PCIe traddr:<BDF>'")
    return fields["traddr"]


class SpdkNvmePerf(ToolAdapter):
    name = "spdk_nvme_perf"
    driver = None
    # SPDK's start-up (hugepages, probing, attaching controllers) and teardown; an estimate
    startup_s = 12.0
    rates = {"iops": "op/s", "mibs": "MiB/s"}

    def program(self, options: Mapping[str, Any]) -> Program:
        # no version option: SPDK prints its version when a run starts, which parse() reads
        return Program("spdk_nvme_perf", executable(options["spdk_dir"]), ("--help",),
                       reports_version=False,
                       install="build SPDK (https://spdk.io) and set spdk_dir in the params file")

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        options = dict(invocation.options)
        request = options.get("core_mask")
        if isinstance(request, CpuRequest):
            options["core_mask"] = request.resolve(topology)
        checked = check(options)
        if checked["spdk_dir"] is None:
            raise InputError(None, "spdk_dir", "needed to find spdk_nvme_perf",
                             allowed="the path of an SPDK tree with a build")
        return Launch(build_argv(checked), cpus=checked["core_mask"])

    def parse(self, run_dir: Path, io_size: int | None = None) -> dict[str, Any]:
        """Metrics of a stored run from its ``stdout``: the Total row, the SPDK version from
        the start-up line (None without it), and as ``problem`` any attached controller that
        completed no I/O (spdk_nvme_perf omits such rows rather than print zeros). With
        ``io_size`` (the run's ``-o``), MiB/s is held to IOPS times it (ParseError else)."""
        stdout = Path(run_dir) / "stdout"
        text = read_report(stdout, "spdk_nvme_perf")
        report = parse_spdk_nvme_perf(text, str(stdout), io_size)
        total = report["total"]
        measured = {row["bdf"].lower() for row in report["rows"] if row["bdf"]}
        idle = [bdf for bdf in _ATTACHED.findall(text) if bdf.lower() not in measured]
        version = _STARTING.search(text)
        return {"iops": total["iops"], "mibs": total["mibs"], "lat_mean_us": total["avg_us"],
                "lat_min_us": total["min_us"], "lat_max_us": total["max_us"],
                "rows": len(report["rows"]), "version": version.group(1) if version else None,
                "problem": (f"controller(s) {', '.join(idle)} attached but completed no I/O"
                            if idle else None),
                "note": None}

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A report whose MiB/s is not its IOPS times the ``-o`` of the run's argv measured
        some other I/O size, or nothing at all; one with a row of a controller the argv's
        ``-r`` never named, or of a core outside its ``-c``, measured another run's devices
        (the Total is the rows' sum). "" when it agrees, or the argv cannot be read."""
        given = _given(argv)
        if given is None:
            return ""
        try:
            report = parse_spdk_nvme_perf(
                read_report(Path(run_dir) / "stdout", "spdk_nvme_perf"),
                "stdout", given["io_size"])
        except ParseError as exc:
            return f"stdout is not this run's report: {exc.problem}"
        devices = {bdf.lower() for bdf in given["devices"]}
        cores = given["core_mask"]
        for row in report["rows"]:
            if row["bdf"] is None:
                continue
            if devices and row["bdf"].lower() not in devices:
                return (f"stdout is not this run's report: its row {excerpt(row['name'])} is of "
                        f"controller {row['bdf']}, which the run's -r never named (allowed: "
                        f"{', '.join(given['devices'])})")
            if cores is not None and row["core"] not in cores:
                return (f"stdout is not this run's report: its row {excerpt(row['name'])} ran "
                        f"on core {row['core']}, outside the run's -c (allowed: "
                        f"{', '.join(map(str, cores))})")
        return ""


def _given(argv: list[str]) -> dict[str, Any] | None:
    """The options of the spdk_nvme_perf command inside ``argv`` (which a collector may wrap),
    None without one or when the command line cannot be read."""
    starts = [i for i, word in enumerate(argv) if PurePosixPath(word).name == EXECUTABLE]
    if not starts:
        return None
    try:
        return read_argv(argv[starts[0]:])
    except InputError:
        return None
