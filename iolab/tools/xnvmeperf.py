"""The xnvmeperf adapter: options in xnvmeperf's vocabulary <-> its argv; its report -> metrics.

xnvmeperf is xNVMe's NVMe benchmark (``tools/xnvmeperf``, https://xnvme.io). Options, named as
its command line names them:

==============  ======================================================================
``subcommand``  "run" (CPU threads submit) or "cuda-run" (a CUDA kernel submits)
``devices``     device URIs in order (PCIe addresses for the user-space back ends, or
                ``/dev/nvme0n1``, files, ...); positional on the command line
``iopattern``   read, write, randread, randwrite
``qdepth``      queue depth;  ``iosize``: bytes per command;  ``runtime``: seconds
``nqueues``     queues per device (None: xnvmeperf's default, one)
``be``          xNVMe back end (None: xnvmeperf's default; cuda-run takes only upcie-cuda)
``cpumask``     for run: the CPUs of the submitting threads, a
                :class:`~iolab.tools.base.CpuRequest` resolved on the host that runs, or a
                list of CPU ids (what :func:`read_argv` gives back); cuda-run has none
``gpu_id``      GPU ordinal for the GPU back ends (None: xnvmeperf's default)
``direct``      true: bypass the page cache (``--direct``, for the file and block back
                ends such as ``io_uring_file`` or ``libaio_bdev``); None or false: not given
==============  ======================================================================

For the kernel back ends (``io_uring_file``, ``libaio_bdev``, …) xnvmeperf is taken from the
build folder of ``make tools`` (:mod:`iolab.tools.builds`) when one is there, else from PATH;
for every other back end (uPCIe, SPDK, GPU memory), which that build lacks, from PATH. The
build record of a package-built xnvmeperf is copied into every run (``xnvme-build.json``) and
its key is part of the version.

Runs go through ``scripts/drivers/xnvmeperf.sh`` (:meth:`Xnvmeperf.launch`), which prints
provenance lines before xnvmeperf's report: ``xnvmeperf: PATH`` and, for runs whose I/O lands
in GPU memory (the upcie-cuda back end, cuda-run), the host's GPUs from nvidia-smi
(``iolab-gpu: <index>, <pci.bus_id>, <name>, <link gen>, <link width>``) and ``iolab-gpu-used:
<gpu_id>``; it runs xnvmeperf with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, so ``gpu_id`` counts GPUs
as nvidia-smi's and NVML's indices do. :func:`read_report` reads those lines into ``gpus`` and
``gpu_used``, and :func:`metrics` names the GPU a run used by its PCI address (``gpu_pci``) and
its link's line rate (``link_gbs``). Archived outputs (AiSIO's) have no such lines: those two
are None for them. The driver also stamps each line of xnvmeperf's stdout
(``xnvmeperf-times.txt``); :meth:`Xnvmeperf.window` takes the measurement window from the
stamp of the result title and the elapsed time it reports, so the GPU counters are cut to the
measurement, not to the process with its set-up and teardown. Options are checked when a plan is made (:meth:`Xnvmeperf.identity`), so a
cuda-run with a queue depth cuda-run cannot take fails before anything runs.

:func:`read_argv` reads a recorded command line back into these options (the AiSIO importer
uses it): ``read_argv(build_argv(o)) == check(o)``.

Responsible for: finding xnvmeperf and its version, checking options (every error names the
key and what is allowed), the argv in both directions, the driver's provenance lines, the
measurement window, the metrics of a stored run (via :mod:`iolab.parsers.xnvmeperf`) and
whether a stored report is the run's own (its subcommand and argument echo against the argv). Not responsible for: binding
devices to a user-space driver (``iolab.host.binding``), choosing CPUs
(:meth:`CpuRequest.resolve`) or parsing the report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from iolab.checks import positive_int
from iolab.errors import InputError, ParseError, excerpt
from iolab.host.binding import check_free
from iolab.parsers import CLOCK_NS_ALLOWED, is_clock_ns, is_digits
from iolab.parsers import read_report as read_file  # this module's read_report reads a run's
from iolab.parsers.xnvmeperf import TITLE, parse_xnvmeperf
from iolab.tools import builds
from iolab.tools.base import (CpuRequest, Invocation, Launch, Program, ToolAdapter, check_cpus,
                              cpu_mask, link_gbs, pci_address)

EXECUTABLE = "xnvmeperf"
SUBCOMMANDS = ("run", "cuda-run")
IOPATTERNS = ("read", "write", "randread", "randwrite")
CUDA_BACKEND = "upcie-cuda"  # the only back end cuda-run accepts, and its default
DEFAULT_NQUEUES = 1
# cuda-run runs one CUDA thread per queue slot in one block, and a block holds at most 1024.
CUDA_MAX_QDEPTH = 1024

# Every option, in the order build_argv writes them after the devices.
OPTIONS = ("subcommand", "devices", "iopattern", "qdepth", "iosize", "runtime", "nqueues", "be",
           "cpumask", "gpu_id", "direct")
BUILD_RECORD = "xnvme-build.json"
# Options given as a bare flag when true.
_SWITCHES = {"--direct": "direct"}
# Options taking a value on the command line, by flag, and the option each one sets.
_FLAGS = {"--iopattern": "iopattern", "--qdepth": "qdepth", "--iosize": "iosize",
          "--runtime": "runtime", "--nqueues": "nqueues", "--be": "be", "--cpumask": "cpumask",
          "--gpu_id": "gpu_id"}
_INTEGER = ("qdepth", "iosize", "runtime", "nqueues", "gpu_id")
# what xnvmeperf's argument echo repeats of its options: echo key -> option
_ECHOED = {"devices": "devices", "io_pattern": "iopattern", "queue_depth": "qdepth",
           "io_size": "iosize", "runtime": "runtime", "queues_per_device": "nqueues",
           "cpus": "cpumask"}
# xnvmeperf prints its version only in the footer of its usage text (--help)
VERSION_PATTERN = r"ver: \{major: ([0-9]+), minor: ([0-9]+), patch: ([0-9]+)\}"
_VERSION = re.compile(VERSION_PATTERN)
# xnvmeperf's own failure lines (stderr), e.g. "Failed: xnvme_dev_open(...)", "Error: ...".
_ERROR_LINE = re.compile(r"^(?:Failed|Error): ")
# xNVMe reads at most 1024 CPU ids from a mask: 256 hex digits.
_MASK = re.compile(r"^(?:0[xX])?[0-9a-fA-F]{1,256}$")
# The driver's provenance lines (scripts/drivers/xnvmeperf.sh).
GPU_LINE, GPU_USED_LINE = "iolab-gpu: ", "iolab-gpu-used: "
# What the driver prints before xnvmeperf's own output.
PROVENANCE = ("xnvmeperf: ", GPU_LINE, GPU_USED_LINE)
# The driver's stamps of xnvmeperf's stdout lines, in the run folder (see measurement_window).
LINE_TIMES = "xnvmeperf-times.txt"


def version_in(text: str) -> str | None:
    """xNVMe's version from xnvmeperf's usage footer (``ver: {major: 0, minor: 7, patch: 5}``
    -> "0.7.5"), or None when the text has none."""
    match = _VERSION.search(text)
    return ".".join(match.groups()) if match else None


def _power_of_two(key: str, value: int, limit: int | None = None) -> None:
    if value & (value - 1) or (limit is not None and value > limit):
        upto = f" up to {limit}" if limit else ""
        raise InputError(None, key, f"cuda-run takes only a power of two{upto}, got {value}",
                         allowed=f"1, 2, 4, 8, …{upto}")


def check(options: Mapping[str, Any]) -> dict[str, Any]:
    """Every option (absent ones as None) after checking it, the CPU ids sorted.

    ``cpumask`` must already be a list of CPU ids here (:meth:`Xnvmeperf.launch` resolves a
    :class:`CpuRequest`). ``read_argv(build_argv(o)) == check(o)``.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(None, unknown[0], "not an xnvmeperf option", allowed=", ".join(OPTIONS))
    o = {key: options.get(key) for key in OPTIONS}
    if o["subcommand"] not in SUBCOMMANDS:
        raise InputError(None, "subcommand", f"unknown xnvmeperf subcommand {o['subcommand']!r}",
                         allowed=", ".join(SUBCOMMANDS))
    devices = o["devices"]
    if not isinstance(devices, list) or not devices:
        raise InputError(None, "devices", f"need a non-empty list of device URIs, got "
                         f"{devices!r}", allowed="e.g. ['0000:4a:00.0'] or ['/dev/nvme0n1']")
    for i, uri in enumerate(devices):
        # xnvmeperf would read a word starting with '-' as an option
        if not isinstance(uri, str) or not uri.strip() or uri.startswith("-"):
            raise InputError(None, f"devices[{i}]", f"{uri!r} is not a device URI",
                             allowed="a PCIe address, device path or file, not starting "
                                     "with '-'")
        if uri in devices[:i]:
            raise InputError(None, f"devices[{i}]", f"'{uri}' is listed twice")
    if o["iopattern"] not in IOPATTERNS:
        raise InputError(None, "iopattern", f"unknown I/O pattern {o['iopattern']!r}",
                         allowed=", ".join(IOPATTERNS))
    for key in ("qdepth", "iosize", "runtime"):
        positive_int(o[key], key)
    if o["nqueues"] is not None:
        positive_int(o["nqueues"], "nqueues")
    gpu = o["gpu_id"]
    if gpu is not None and (isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0):
        raise InputError(None, "gpu_id", f"must be a GPU ordinal (a whole number >= 0), got "
                         f"{gpu!r}")
    if o["direct"] is not None and not isinstance(o["direct"], bool):
        raise InputError(None, "direct", f"{o['direct']!r} is not true or false",
                         allowed="true, false, or absent")
    if o["be"] is not None and not (isinstance(o["be"], str)
                                    and re.fullmatch(r"[\w-]+", o["be"])):
        raise InputError(None, "be", f"{o['be']!r} is not an xNVMe back end name",
                         allowed="e.g. upcie, spdk, upcie-cuda, io_uring")
    if o["subcommand"] == "cuda-run":
        if o["be"] not in (None, CUDA_BACKEND):
            raise InputError(None, "be", f"cuda-run takes only the {CUDA_BACKEND} back end, got "
                             f"{o['be']!r}", allowed=f"{CUDA_BACKEND} or None")
        if o["cpumask"] is not None:
            raise InputError(None, "cpumask", "cuda-run submits from the GPU and takes no CPU "
                             "mask", allowed="None")
        _power_of_two("qdepth", o["qdepth"], CUDA_MAX_QDEPTH)
        _power_of_two("iosize", o["iosize"])
    else:
        o["cpumask"] = _cpu_ids(o["cpumask"])
    return o


def _cpu_ids(value: Any) -> list[int]:
    if not isinstance(value, list) or not value or len(set(value)) != len(value) or not all(
            isinstance(cpu, int) and not isinstance(cpu, bool) and cpu >= 0 for cpu in value):
        raise InputError(None, "cpumask", f"xnvmeperf run needs the CPUs of its threads as "
                         f"distinct CPU ids, got {value!r}",
                         allowed="a CpuRequest (resolved by launch) or a list such as [0, 1]")
    # sorted, because a mask cannot say in which order the CPUs were listed
    return sorted(value)


def uses_gpu(options: Mapping[str, Any]) -> bool:
    """Whether a run's I/O lands in GPU memory, so the driver records the GPUs (checked options)."""
    return options["subcommand"] == "cuda-run" or options["be"] == CUDA_BACKEND


def build_argv(options: Mapping[str, Any], executable: str = EXECUTABLE) -> list[str]:
    """xnvmeperf's argv for checked options (see :func:`check`), the executable first."""
    o = check(options)
    argv = [executable, o["subcommand"], *o["devices"]]
    for flag, key in _FLAGS.items():
        value = o[key]
        if value is not None:
            argv += [flag, cpu_mask(value) if key == "cpumask" else str(value)]
    argv += [flag for flag, key in _SWITCHES.items() if o[key]]
    return argv


def read_argv(argv: list[str]) -> dict[str, Any]:
    """The options of a recorded xnvmeperf command line (``argv[0]`` is xnvmeperf itself).

    Accepts ``--opt value`` and ``--opt=value``; words that are not options or their values
    are devices; ``--cpumask`` in hex with or without ``0x`` becomes CPU ids. Absent options
    are None. Raises InputError naming the option for an option this adapter does not read
    or a value it cannot read; whether the values make a valid run is :func:`check`'s job.
    """
    if len(argv) < 2 or PurePosixPath(argv[0]).name != EXECUTABLE:
        raise InputError(None, "argv", f"not an xnvmeperf command line: {argv[:2]!r}",
                         allowed=f"{EXECUTABLE} <subcommand> …")
    if argv[1] not in SUBCOMMANDS:
        raise InputError(None, "subcommand", f"unknown xnvmeperf subcommand {argv[1]!r}",
                         allowed=", ".join(SUBCOMMANDS))
    options: dict[str, Any] = {key: None for key in OPTIONS}
    options.update(subcommand=argv[1], devices=[])
    words = argv[2:]
    at = 0
    while at < len(words):
        word = words[at]
        if not word.startswith("-"):
            options["devices"].append(word)
            at += 1
            continue
        if word in _SWITCHES:
            options[_SWITCHES[word]] = True
            at += 1
            continue
        flag, eq, value = word.partition("=")
        if flag not in _FLAGS:
            raise InputError(None, flag, "not an xnvmeperf option this adapter reads",
                             allowed=", ".join([*_FLAGS, *_SWITCHES]))
        if not eq:
            if at + 1 >= len(words):
                raise InputError(None, flag, "has no value at the end of the command line")
            at += 1
            value = words[at]
        options[_FLAGS[flag]] = _value(flag, value)
        at += 1
    return options


def _value(flag: str, value: str) -> Any:
    key = _FLAGS[flag]
    if key in _INTEGER:
        if not re.fullmatch(r"[0-9]+", value):
            raise InputError(None, flag, f"{value!r} is not a whole number")
        return int(value)
    if key == "cpumask":
        if not _MASK.match(value) or int(value, 16) == 0:
            raise InputError(None, flag, f"{value!r} is not a non-zero hex CPU mask",
                             allowed="hex digits with or without 0x, e.g. 0x3 or 0003")
        bits = int(value, 16)
        return [cpu for cpu in range(bits.bit_length()) if bits >> cpu & 1]
    return value


def read_gpus(text: str, source: str) -> dict[str, Any]:
    """The driver's GPU lines in a run's stdout: ``gpus`` (one {``index``, ``pci`` (see
    :func:`~iolab.tools.base.pci_address`), ``name``, ``link_gen``, ``link_width``} per
    ``iolab-gpu:`` line; the link fields None where nvidia-smi printed no number) and
    ``gpu_used`` (the ``iolab-gpu-used:`` index; 0, xnvmeperf's default, when a listing has no
    such line; None when it is not a number, or without a listing). ParseError names a GPU
    line it cannot read. Archived outputs have neither line: ``gpus`` [], ``gpu_used`` None."""
    gpus = []
    used: int | None = 0  # xnvmeperf's default, for a listing without the line
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(GPU_USED_LINE):
            value = line[len(GPU_USED_LINE):].strip()
            # "unknown (…)" where the driver could not tell which GPU a CUDA ordinal meant
            used = _whole(value)
        elif line.startswith(GPU_LINE) and not line[len(GPU_LINE):].startswith("unavailable"):
            gpus.append(_gpu_line(line[len(GPU_LINE):], number, source))
    return {"gpus": gpus, "gpu_used": used if gpus else None}


def _gpu_line(text: str, number: int, source: str) -> dict[str, Any]:
    # index, pci.bus_id, name, link gen, link width; a name could hold ", " itself
    parts = [part.strip() for part in text.split(", ")]
    if len(parts) < 5 or _whole(parts[0]) is None:
        raise ParseError(source, f"line {number}: expected 'iolab-gpu: <index>, <pci bus id>, "
                         f"<name>, <link gen>, <link width>', got {text!r}")
    try:
        pci = pci_address(parts[1])
    except InputError:
        raise ParseError(source, f"line {number}: {parts[1]!r} is not a PCI address") from None
    gen, width = parts[-2:]
    # nvidia-smi prints "[N/A]" or "[Not Supported]" where it cannot tell
    return {"index": int(parts[0]), "pci": pci, "name": ", ".join(parts[2:-2]),
            "link_gen": _whole(gen), "link_width": _whole(width)}


def _whole(text: str) -> int | None:
    return int(text) if re.fullmatch(r"[0-9]+", text) else None


def measurement_window(stdout: str, times: str, source: str) -> tuple[int, int]:
    """(start, end) in CLOCK_REALTIME ns of xnvmeperf's measurement: the stamp of its result
    title line (printed once the measurement ended) and that minus the elapsed time the title
    reports. ``times`` holds one stamp per line of xnvmeperf's own stdout (the driver's
    ``--line-times``), which follows the driver's provenance lines in ``stdout``. Anything
    xnvmeperf does between the end of its timer and printing the title (if any) shifts the
    window later by that long. ParseError when the stamps do not match the lines."""
    lines = stdout.splitlines()
    at = 0
    while at < len(lines) and lines[at].startswith(PROVENANCE):
        at += 1
    own = lines[at:]
    stamps = times.split()
    if len(stamps) != len(own) or not all(is_digits(s) and len(s) <= 19 and is_clock_ns(int(s))
                                          for s in stamps):
        raise ParseError(source, f"{len(stamps)} stamps for the {len(own)} lines xnvmeperf "
                         f"printed (or a stamp that is not {CLOCK_NS_ALLOWED}, in digits 0-9)")
    for index, line in enumerate(own):
        title = TITLE.match(line)
        if title:
            end = int(stamps[index])
            return end - round(float(title["elapsed"]) * 1e9), end
    raise ParseError(source, "no result title line to take the measurement's end from")


def read_report(run_dir: Path) -> dict[str, Any]:
    """The parsed report of a stored run (``stdout``; see :func:`parse_xnvmeperf`) plus
    ``errors``: xnvmeperf's "Failed: …"/"Error: …" lines from stdout and, when the run kept it
    apart, ``stderr``; ``version``; and the driver's GPU listing (:func:`read_gpus`), whose
    lines the parser passes over. A run without a result table raises ParseError quoting the
    first error line."""
    stdout = Path(run_dir) / "stdout"
    text = read_file(stdout, "xnvmeperf")
    stderr = Path(run_dir) / "stderr"
    err_text = read_file(stderr, "xnvmeperf", "xnvmeperf's log") if stderr.exists() else ""
    on_stderr = [line.strip() for line in err_text.splitlines() if _ERROR_LINE.match(line)]
    try:
        report = parse_xnvmeperf(text, str(stdout))
    except ParseError as exc:
        # the parser quotes error lines it sees in stdout; the ones on stderr it cannot see
        if on_stderr:
            raise ParseError(stdout, f"{exc.problem}; stderr says: {on_stderr[0]!r}") from None
        raise
    errors = [line.strip() for line in text.splitlines() if _ERROR_LINE.match(line)] + on_stderr
    return {**report, "errors": errors, "version": version_in(text + err_text),
            **read_gpus(text, str(stdout))}


def metrics(report: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics of a report from :func:`read_report` (what :meth:`Xnvmeperf.parse` gives)."""
    problems = []
    if report["totals"]["failed"]:
        # for cuda-run, failed commands are inside the IOPS figure; for run they are not
        problems.append(f"{report['totals']['failed']} failed commands")
    problems += report["errors"]
    gpu = _gpu_used(report)
    return {"subcommand": report["kind"], "iops": report["totals"]["iops"],
            "mibs": report["totals"]["mibs"], "failed": report["totals"]["failed"],
            "elapsed_s": report["elapsed_s"], "ndevs": len(report["devices"]),
            "version": report["version"],
            "gpu_pci": gpu["pci"] if gpu else None,
            "link_gbs": link_gbs(gpu["link_gen"], gpu["link_width"]) if gpu else None,
            "problem": "; ".join(problems) or None, "note": None}


def _gpu_used(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """The listed GPU whose index is the run's gpu_id, or None (no listing, or no such GPU)."""
    used = report.get("gpu_used")
    return next((g for g in report.get("gpus") or [] if g["index"] == used), None)


class Xnvmeperf(ToolAdapter):
    name = "xnvmeperf"
    driver = "xnvmeperf.sh"
    # device attach and queue set-up before, teardown after; an estimate for the plan
    startup_s = 3.0
    rates = {"iops": "op/s", "mibs": "MiB/s"}

    def program(self, options: Mapping[str, Any] | None = None) -> Program:
        """xnvmeperf; where its I/O lands in GPU memory the driver also needs nvidia-smi (to
        record the GPU), so the plan counts it missing without one."""
        gpu = bool(options) and (options.get("subcommand") == "cuda-run"
                                 or options.get("be") == CUDA_BACKEND)
        install = ("build it with 'make tools', or build and install xNVMe (https://xnvme.io), "
                   "which installs xnvmeperf on PATH" + (
                       "; runs into GPU memory also need the NVIDIA driver's nvidia-smi on PATH"
                       if gpu else ""))
        # the package's build reads files and block devices only: runs on the user-space
        # and GPU back ends take the xnvmeperf on PATH, the user's own full build
        built = builds.built_xnvmeperf() if options and \
            options.get("be") in builds.KERNEL_BACKENDS else None
        return Program("xnvmeperf", str(built) if built else EXECUTABLE, ("--help",),
                       version_pattern=VERSION_PATTERN, install=install,
                       needs=("nvidia-smi",) if gpu else (),
                       build=builds.build_key(built.parents[1]) if built else None)

    def identity(self, invocation: Invocation) -> dict[str, Any]:
        """The base identity, once the options pass :func:`check`: a bad option (a cuda-run
        queue depth that is not a power of two) fails when the plan is made, not mid-campaign."""
        options = dict(invocation.options)
        if isinstance(options.get("cpumask"), CpuRequest):
            # which CPUs is decided on the host that runs; any valid list stands in here
            options["cpumask"] = [0]
        check(options)
        return super().identity(invocation)

    def launch(self, invocation: Invocation, topology: list[dict[str, Any]]) -> Launch:
        options = dict(invocation.options)
        request = options.get("cpumask")
        if isinstance(request, CpuRequest):
            options["cpumask"] = request.resolve(topology)
        checked = check(options)
        if checked["cpumask"] is not None:
            check_cpus("cpumask", checked["cpumask"], topology)
        # a block device read by a kernel back end must be free (not mounted, not the root)
        check_free([uri for uri in checked["devices"] if uri.startswith("/dev/")])
        gpu_info = ["--gpu-info"] if uses_gpu(checked) else []
        exe = self.program(checked).find() or EXECUTABLE
        argv = [str(self.driver_path), "--xnvmeperf", exe, *gpu_info,
                "--line-times", LINE_TIMES, "--", *build_argv(checked)[1:]]
        inputs = {}
        built = builds.built_xnvmeperf()
        if built is not None and Path(exe) == built:
            record = builds.record(built.parents[1])
            if record is not None:
                inputs[BUILD_RECORD] = json.dumps(record, indent=2) + "\n"
        return Launch(argv, inputs=inputs, cpus=checked["cpumask"])

    def foreign_report(self, run_dir: Path, argv: list[str]) -> str:
        """A report whose subcommand, or argument echo (devices, io pattern, queue depth, io
        size, runtime, queues, CPUs), differs from the options the run gave xnvmeperf (those
        after the driver's ``--``) was not written by this run: another run's, or something
        else's."""
        try:
            given = read_argv([EXECUTABLE, *argv[argv.index("--") + 1:]])
        except (ValueError, InputError):
            return ""  # no xnvmeperf command line the adapter wrote: nothing to compare
        report = read_report(run_dir)
        if report["kind"] != given["subcommand"]:
            return (f"stdout is not this run's report: it is of xnvmeperf {report['kind']}, the "
                    f"run gave xnvmeperf {given['subcommand']}")
        for key, option in _ECHOED.items():
            if given[option] is None:
                continue
            if key not in report["echo"]:  # xnvmeperf echoes every argument it was given
                return (f"stdout is not this run's report: its argument echo has no {key}, "
                        f"the run gave xnvmeperf {option} {excerpt(given[option])}")
            if report["echo"][key] != given[option]:
                return (f"stdout is not this run's report: its argument echo has {key} "
                        f"{excerpt(report['echo'][key])}, the run gave xnvmeperf {option} "
                        f"{excerpt(given[option])}")
        return ""

    def parse(self, run_dir: Path) -> dict[str, Any]:
        """Metrics of a stored run (see :func:`metrics`). xnvmeperf prints its version only
        with its usage text, so ``version`` is mostly None; the manifest records it."""
        return metrics(read_report(run_dir))

    def window(self, run_dir: Path) -> tuple[int, int] | None:
        """When xnvmeperf measured (see :func:`measurement_window`); None for runs without
        line stamps (AiSIO's archives), whose counters then see the whole driver."""
        run_dir = Path(run_dir)
        if not (run_dir / LINE_TIMES).exists():
            return None
        return measurement_window(read_file(run_dir / "stdout", "xnvmeperf"),
                                  read_file(run_dir / LINE_TIMES, "xnvmeperf",
                                              "the times of xnvmeperf's lines", "strict"),
                                  str(run_dir / LINE_TIMES))
